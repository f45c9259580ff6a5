"""The one cutter: a long text keeps its beginning, its end and the lines that tell a failure.

Tool results that are offloaded (:mod:`contextmem.compaction.offload`), texts capped after a provider's
overflow (:mod:`contextmem.compaction.plans`) and long messages in a summary transcript
(:mod:`contextmem.summarize.prompts`) are all cut here; each call site only says its limits, its notice and
its head : tail ratio. Pure: no I/O, no clock; linear in the text (each line is searched once, and no
cue of the language tables starts with a repeat).

:func:`cut_keeping` is what tool output and messages are cut with: a head + tail cut of a 200 KB log
drops the one ``ERROR … OOMKilled`` line of its middle, and with it the summary's and memory's only
chance to read it. Its contract, beside the first three below (property-tested in
``tests/test_textcut_lines.py``): every kept piece is a verbatim slice of the text, in order; a cue line
of the middle that fits its share is kept; every gap is marked, exactly (the notice counts all omitted
characters, each later marker its lines or characters).

Contract of :func:`cut_middle` (property-tested in ``tests/test_textcut.py``):

* **unchanged when it fits**: a text within the limits is returned as it is, so cutting twice changes
  nothing;
* **fits the limit**: the result is within ``max_chars`` characters and ``max_bytes`` UTF-8 bytes, always.
  A limit too small for even the notice gets the longest head that fits, and no notice;
* **never splits a code point**: it cuts a ``str``, by characters, never its encoding;
* **head and tail in a fixed ratio, notice in the middle**: of the ``keep`` characters kept, the head has
  ``keep * head // (head + tail)`` and the tail the rest, both verbatim; between them stands
  ``notice(omitted)``, ``omitted`` being exactly how many characters left;
* **shorter**: a cut text always omits at least one character.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import pairwise

from .lang import TablePattern, alternatives

__all__ = ["CUE_SHARE", "MARGIN", "cut_keeping", "cut_middle", "fits"]

# Characters left unused below the first estimate: room for a head or tail denser in bytes than the
# text's average, so the first cut usually fits.
MARGIN = 8

CUE_SHARE = 2
""":func:`cut_keeping`: the cue lines of a text's middle take at most 1/``CUE_SHARE`` of what is kept;
head and tail, which say what ran and how it ended, keep the rest."""

_LOG_CUES = TablePattern(alternatives(lambda lang: lang.log_cues))
_DIGITS = re.compile(r"\d+")  # a line's shape: its numbers masked, so a retry's repeats count once


def fits(text: str, *, max_chars: int | None = None, max_bytes: int | None = None) -> bool:
    """Whether ``text`` is within ``max_chars`` characters and ``max_bytes`` UTF-8 bytes (``None``: no
    limit). Encodes only when the character count alone cannot decide."""
    n = len(text)
    if max_chars is not None and n > max_chars:
        return False
    if max_bytes is None or n * 4 <= max_bytes:
        return True
    return n <= max_bytes and len(text.encode("utf-8", "surrogatepass")) <= max_bytes


def cut_middle(
    text: str,
    notice: Callable[[int], str],
    *,
    max_chars: int | None = None,
    max_bytes: int | None = None,
    ratio: tuple[int, int] = (2, 1),
) -> str:
    """``text`` within the limits: its head and tail (``ratio`` = head : tail) around ``notice(omitted)``.

    See the module docstring for the contract. The first estimate of what to keep is the character
    budget (for ``max_bytes``, scaled by this text's bytes per character) less the notice and
    :data:`MARGIN`; while the cut is still over a limit, it keeps 10% less.
    """
    return _shrink_to_fit(
        text, notice, max_chars, max_bytes, lambda keep: _head_tail(text, notice, keep, ratio)
    )


def cut_keeping(
    text: str,
    notice: Callable[[int], str],
    *,
    max_chars: int | None = None,
    max_bytes: int | None = None,
    ratio: tuple[int, int] = (2, 1),
) -> str:
    """``text`` within the limits, as :func:`cut_middle` cuts it, but a line the registered languages
    mark as telling a failure (:attr:`~contextmem.lang.Language.log_cues`) stays wherever it stands.

    See the module docstring for the contract. The cue lines of the middle take at most
    1/:data:`CUE_SHARE` of what is kept, first come first (a line of the same shape as one already kept,
    numbers aside, is not kept twice); a cue line longer than half that share keeps a window around its
    cue. Head and tail share the rest in ``ratio``, ending and starting at a line break when one is
    near. The first gap holds ``notice(omitted)``, ``omitted`` counting every gap's characters; each
    later gap is marked ``[… N lines omitted …]`` (``characters`` when it does not hold whole lines).
    A text with no cue line in its middle is cut exactly as :func:`cut_middle` cuts it.
    """
    return _shrink_to_fit(
        text, notice, max_chars, max_bytes, lambda keep: _keeping(text, notice, keep, ratio)
    )


def _shrink_to_fit(
    text: str,
    notice: Callable[[int], str],
    max_chars: int | None,
    max_bytes: int | None,
    assemble: Callable[[int], str],
) -> str:
    """``text`` when it fits; else ``assemble(keep)`` from the first estimate of ``keep``
    (:func:`_first_keep`) down by 10% a step until it fits; else the longest head that fits."""
    if fits(text, max_chars=max_chars, max_bytes=max_bytes):
        return text
    keep = _first_keep(text, notice, max_chars, max_bytes)
    while True:
        out = assemble(keep)
        if fits(out, max_chars=max_chars, max_bytes=max_bytes):
            return out
        if keep == 0:  # not even the notice fits
            return _longest_head(text, max_chars, max_bytes)
        keep = keep * 9 // 10


def _first_keep(text: str, notice: Callable[[int], str], max_chars: int | None, max_bytes: int | None) -> int:
    """How many of ``text``'s characters a cut first tries to keep: the character budget (for
    ``max_bytes``, scaled by this text's bytes per character) less the notice and :data:`MARGIN`."""
    n = len(text)
    budget = n
    if max_bytes is not None:
        per_char = len(text.encode("utf-8", "surrogatepass")) / max(n, 1)
        budget = int(max_bytes / per_char)
    if max_chars is not None:
        budget = min(budget, max_chars)
    return max(min(budget - len(notice(n)) - MARGIN, n - 1), 0)


def _head_tail(text: str, notice: Callable[[int], str], keep: int, ratio: tuple[int, int]) -> str:
    n = len(text)
    head = keep * ratio[0] // (ratio[0] + ratio[1])
    return text[:head] + notice(n - keep) + text[n - (keep - head) :]


def _keeping(text: str, notice: Callable[[int], str], keep: int, ratio: tuple[int, int]) -> str:
    """``keep`` characters of ``text``: its cue lines of the middle, then head and tail in ``ratio``."""
    n = len(text)
    reserve = keep // CUE_SHARE
    least_head = (keep - reserve) * ratio[0] // (ratio[0] + ratio[1])
    least_tail_start = n - (keep - reserve - least_head)
    pieces = _cue_pieces(text, least_head, least_tail_start, reserve, _marker_room(n))
    if not pieces:
        return _head_tail(text, notice, keep, ratio)
    rest = keep - sum(end - start + _marker_room(n) for start, end in pieces)
    head = _line_end_before(text, rest * ratio[0] // (ratio[0] + ratio[1]), least_head)
    tail_start = _line_start_after(
        text, n - (rest - rest * ratio[0] // (ratio[0] + ratio[1])), least_tail_start
    )
    spans: list[tuple[int, int]] = []
    for start, end in [(0, head), *pieces, (tail_start, n)]:
        if spans and start <= spans[-1][1]:  # touches what is kept already: one piece
            spans[-1] = (spans[-1][0], max(spans[-1][1], end))
        else:
            spans.append((start, end))
    if len(spans) == 1:  # the head and tail grew over every piece
        return _head_tail(text, notice, keep, ratio)
    kept = sum(end - start for start, end in spans)
    out = [text[spans[0][0] : spans[0][1]], notice(n - kept)]
    for (_, before), (start, end) in pairwise(spans):
        if len(out) > 2:
            out.append(_gap_marker(text, before, start))
        out.append(text[start:end])
    return "".join(out)


def _cue_pieces(text: str, lo: int, hi: int, room: int, marker_room: int) -> list[tuple[int, int]]:
    """Spans of the cue lines in ``text[lo:hi]``, first come first, while their characters and a marker
    each fit ``room``. Linear: each line is searched once, from where the previous cue line ended."""
    pieces: list[tuple[int, int]] = []
    shapes: set[str] = set()
    longest = room // 2 - marker_room
    pos = lo
    while longest > 0 and room > marker_room:
        match = _LOG_CUES.compiled.search(text, pos, hi)
        if match is None:
            break
        start = max(text.rfind("\n", pos, match.start()) + 1, pos)
        end = text.find("\n", match.end(), hi)
        end = hi if end < 0 else end + 1
        pos = end
        if end - start > longest:  # a long line: a window around its cue
            start = max(start, match.start() - longest // 4)
            end = min(end, start + longest)
        shape = _DIGITS.sub("#", text[start:end])
        if shape in shapes or end - start + marker_room > room:
            continue
        shapes.add(shape)
        pieces.append((start, end))
        room -= end - start + marker_room
    return pieces


def _line_end_before(text: str, end: int, least: int) -> int:
    """``end`` moved back to just after a line break, if one is within the last half of the head and
    not before ``least``."""
    cut = text.rfind("\n", max(least, end // 2), end)
    return end if cut < 0 else cut + 1


def _line_start_after(text: str, start: int, most: int) -> int:
    """``start`` moved on to just after a line break, if one is within the first half of the tail and
    not after ``most``."""
    cut = text.find("\n", start, min(most, start + (len(text) - start) // 2))
    return start if cut < 0 else cut + 1


def _gap_marker(text: str, start: int, end: int) -> str:
    """The marker of the gap ``text[start:end]``, on a line of its own: how many lines it held, or how
    many characters when it begins or ends inside a line. Always framed by one line break on each
    side, so a reader takes the pieces apart exactly."""
    whole = (start == 0 or text[start - 1] == "\n") and (end == len(text) or text[end - 1] == "\n")
    if whole:
        count, unit = text.count("\n", start, end) + (text[end - 1] != "\n"), "line"
    else:
        count, unit = end - start, "character"
    plural = "" if count == 1 else "s"
    return f"\n[… {count:,} {unit}{plural} omitted …]\n"


def _marker_room(n: int) -> int:
    """The most characters a gap marker takes in a text of ``n`` characters (:func:`_gap_marker`)."""
    return len(f"\n[… {n:,} characters omitted …]\n")


def _longest_head(text: str, max_chars: int | None, max_bytes: int | None) -> str:
    end = len(text) if max_chars is None else max(min(len(text), max_chars), 0)
    if max_bytes is not None:
        used = 0
        for i, char in enumerate(text[:end]):
            used += len(char.encode("utf-8", "surrogatepass"))
            if used > max_bytes:
                return text[:i]
    return text[:end]
