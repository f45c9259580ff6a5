"""Who said it: the speakers a chunk attributes its text to, and the ones a query names. Pure.

Memory text says who spoke in two markdown shapes, and both are read here:

- a heading that is a name, with the turn under it (``### Ingrid``; a transcript kept as a note);
- a line that opens with a name and a colon, after an optional bullet and ``[date]``
  (``- [2022-01-18] Bart: I got a gold-plated pocket watch.``; what a compaction writes to daily memory).

A name is one to three words of letters (no digits, so ``### Session 1, 14 March 2024`` and ``### 2022-01-18``
are not speakers). A query names a speaker when it holds one of the names the candidates carry, as a whole
word (Latin) or as a substring (Chinese, which has no spaces): "What did Ingrid research?" names
Ingrid. No word list: the names come from the memory itself. So a note's short heading (``### Goals``)
or label line (``Note: …``) reads as a speaker too; a query that names it lifts the chunks under it, which
is what the heading is for there as well.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping

from ..lang.scripts import CJK_LETTERS

__all__ = [
    "MAX_NAME_CHARS",
    "join_speakers",
    "named_speakers",
    "speakers",
    "speaking_chunks",
    "split_speakers",
    "without_names",
]

MAX_NAME_CHARS = 40  # a longer "name" is a sentence with a colon in it
_WORD = r"(?>[^\W\d_]++(?:['’.-][^\W\d_]++)*+)"  # letters, and O'Neil, Jean-Luc; atomic: no backtracking
_NAME = rf"{_WORD}(?:\.?[ ]{_WORD}){{0,2}}"  # one to three words: Ingrid, Mary Ann, J. K. Rowling
_HEADING_NAME = re.compile(rf"#{{1,6}}[ \t]+({_NAME})[ \t]*$")
_LINE_NAME = re.compile(
    rf"[ \t]*(?:[-*+][ \t]+)?(?:\[[^\]\n]{{1,40}}\][ \t]*)?(?:\*\*)?({_NAME})(?:\*\*)?[ \t]*[:：]"
)
_HEAD_CHARS = 2 * MAX_NAME_CHARS + 16  # a name, its bullet, [date] and markup: all within a line's head
_CJK = re.compile(f"[{CJK_LETTERS}]")


def speakers(text: str) -> frozenset[str]:
    """The names ``text`` attributes what is said to (case-folded): name headings and ``Name:`` lines.

    Only the head of each line is read (:data:`_HEAD_CHARS`), so the cost is the number of lines, not the
    text's length: a search reads every candidate's speakers. Invariant: every name is at most
    :data:`MAX_NAME_CHARS` long and holds no digit.
    """
    found = set()
    for line in text.split("\n"):
        head = line[:_HEAD_CHARS]
        if head.startswith("#"):
            named = _HEADING_NAME.match(head)
        elif ":" in head or "：" in head:
            named = _LINE_NAME.match(head)
        else:
            continue
        # ``\d`` is a decimal digit only: "²" and "①" pass the pattern as letters, and are digits here too.
        if named and len(named[1]) <= MAX_NAME_CHARS and not any(c.isdigit() for c in named[1]):
            found.add(named[1].casefold())
    return frozenset(found)


def join_speakers(names: frozenset[str]) -> str:
    """``names`` as an index stores them: one a line, sorted (a name holds no line break)."""
    return "\n".join(sorted(names))


def split_speakers(stored: str) -> frozenset[str]:
    """The names :func:`join_speakers` stored."""
    return frozenset(stored.split("\n")) if stored else frozenset()


def _said(name: str) -> re.Pattern[str]:
    """Where a text says ``name``: as a whole word (Latin), anywhere (Chinese, which has no spaces)."""
    word = re.escape(name)
    return re.compile(word if _CJK.search(name) else rf"(?<!\w){word}(?!\w)", re.IGNORECASE)


def named_speakers(query: str, known: Iterable[str]) -> frozenset[str]:
    """The names of ``known`` (case-folded, as :func:`speakers` returns them) that ``query`` names. A
    search asks this of every name its namespace knows, so a name not in the query at all costs only a
    substring test."""
    folded = query.casefold()
    return frozenset(name for name in known if name in folded and _said(name).search(folded))


def without_names(query: str, names: Iterable[str]) -> str:
    """``query`` without each of ``names`` (case-folded, as :func:`named_speakers` gives them) where it
    names them: a whole word in Latin script, any occurrence in Chinese; then each run of spaces and tabs
    is one space. The query a speaker's name does not steer (:mod:`.query_encoding`). Pure.

    Invariant: no name of ``names`` is named by the result. (Where case-insensitive matching and case
    folding differ, "Strauß" for ``strauss``, the names are cut from the case-folded query.)"""
    names = sorted(set(names), key=len, reverse=True)  # "Mary Ann" before "Ann"
    out = _cut(query, names)
    return out if not named_speakers(out, names) else _cut(query.casefold(), names)


def _cut(query: str, names: Iterable[str]) -> str:
    for name in names:
        query = _said(name).sub(" ", query)
    return re.sub(r"[ \t]{2,}", " ", query).strip()


def speaking_chunks(labels: Mapping[int, Collection[str]], query: str) -> frozenset[int]:
    """The chunks (id -> :func:`speakers`) said by a speaker ``query`` names; none when that is every
    chunk (a query that names both sides of a talk singles nobody out).

    Invariant: the result is a proper subset of ``labels``' keys, or empty."""
    named = named_speakers(query, {name for names in labels.values() for name in names})
    picked = frozenset(cid for cid, names in labels.items() if named & set(names))
    return picked if len(picked) < len(labels) else frozenset()
