"""What a line of a memory file is: the one definition its writers and its readers share.

People, markdown tools and our own index read the memory files, and they disagree on where a line ends:
CommonMark ends one at ``\\n``, ``\\r`` and ``\\r\\n`` only (:data:`MARKDOWN_LINE_ENDS`); Python's
:meth:`str.splitlines`, and every reader built on it, also at ``\\v``, ``\\f``, ``\\x1c``, ``\\x1d``,
``\\x1e``, ``\\x85``, U+2028 and U+2029. We take the broadest view, :data:`LINE_ENDS`: every boundary
:meth:`str.splitlines` splits on ends a line. Readers split with :func:`lines`; a writer that keeps text
inside one block (a note's list item, an entry's paragraph) puts its indentation after *every* such end
(:func:`indent_after`), so no reader, however eager, sees the text start a line at column 0. The line ends
themselves are kept as given: a writer adds characters, never changes one.
"""

from __future__ import annotations

import re
from collections.abc import Collection

__all__ = ["LINE_ENDS", "MARKDOWN_LINE_ENDS", "indent_after", "lines", "lines_with_ends", "newline_only"]

LINE_ENDS = ("\r\n", "\n", "\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
"""Every line end of a memory file (exactly those :meth:`str.splitlines` splits on; ``\\r\\n`` is one)."""
MARKDOWN_LINE_ENDS = ("\r\n", "\n", "\r")
"""The line ends CommonMark knows; a markdown renderer reads the others as characters within a line."""


def lines(text: str) -> list[str]:
    """The lines of ``text``, without their ends; a final line end starts no empty line."""
    return text.splitlines()


def lines_with_ends(text: str) -> list[tuple[str, str]]:
    """The lines of ``text`` as :func:`lines` cuts them, each with its end (``""`` for a last line that
    has none): ``"".join(line + end ...) == text``."""
    out = []
    for piece in text.splitlines(keepends=True):
        end = next((e for e in LINE_ENDS if piece.endswith(e)), "")  # "\r\n" is tried before "\r"
        out.append((piece[: len(piece) - len(end)], end))
    return out


def indent_after(text: str, indent: str, ends: Collection[str] = LINE_ENDS) -> str:
    """``text`` with ``indent`` put before every line that follows one of ``ends`` and is not empty (an
    empty line stays empty; one of spaces is indented too, so it reads back). Every character of
    ``text`` is kept, in order; the first line is never indented."""
    out: list[str] = []
    after = False  # the line follows one of ``ends``
    for line, end in lines_with_ends(text):
        out.append((indent if after and line else "") + line + end)
        after = end in ends
    return "".join(out)


_OTHER_ENDS = re.compile("\r\n|[" + "".join(e for e in LINE_ENDS if e not in ("\r\n", "\n")) + "]")


def newline_only(text: str) -> str:
    """``text`` whose lines end with ``\n`` alone: ``\r\n`` becomes ``\n`` and every other line end a
    space, for text we write line by line (a summary) from pieces that may carry any (a message)."""
    return _OTHER_ENDS.sub(lambda found: "\n" if found.group() == "\r\n" else " ", text)
