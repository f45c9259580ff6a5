"""The one head + tail cutter: a long text keeps its beginning and its end around a notice.

Tool results that are offloaded (:mod:`contextmem.compaction.offload`), texts capped after a provider's
overflow (:mod:`contextmem.compaction.plans`) and long messages in a summary transcript
(:mod:`contextmem.summarize.prompts`) are all cut here; each call site only says its limits, its notice and
its head : tail ratio. Pure: no I/O.

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

from collections.abc import Callable

__all__ = ["MARGIN", "cut_middle", "fits"]

# Characters left unused below the first estimate: room for a head or tail denser in bytes than the
# text's average, so the first cut usually fits.
MARGIN = 8


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
    if fits(text, max_chars=max_chars, max_bytes=max_bytes):
        return text
    n = len(text)
    budget = n
    if max_bytes is not None:
        per_char = len(text.encode("utf-8", "surrogatepass")) / max(n, 1)
        budget = int(max_bytes / per_char)
    if max_chars is not None:
        budget = min(budget, max_chars)
    head_weight, tail_weight = ratio
    keep = max(min(budget - len(notice(n)) - MARGIN, n - 1), 0)
    while True:
        head = keep * head_weight // (head_weight + tail_weight)
        tail = keep - head
        out = text[:head] + notice(n - keep) + text[n - tail :]
        if fits(out, max_chars=max_chars, max_bytes=max_bytes):
            return out
        if keep == 0:  # not even the notice fits
            return _longest_head(text, max_chars, max_bytes)
        keep = keep * 9 // 10


def _longest_head(text: str, max_chars: int | None, max_bytes: int | None) -> str:
    end = len(text) if max_chars is None else max(min(len(text), max_chars), 0)
    if max_bytes is not None:
        used = 0
        for i, char in enumerate(text[:end]):
            used += len(char.encode("utf-8", "surrogatepass"))
            if used > max_bytes:
                return text[:i]
    return text[:end]
