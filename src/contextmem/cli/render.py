"""Terminal output: the context gauge, engine-event notices, tables and a progress bar. Plain ANSI, no deps.

Colour is used when the stream is a terminal and ``NO_COLOR`` is unset; every region also has its own
glyph, so the gauge reads the same without colour (and in tests).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, TextIO

from ..engine import ContextStats, EngineEvent

if TYPE_CHECKING:
    from ..memory import MemoryHit

__all__ = [
    "REGIONS",
    "ProgressBar",
    "context_report",
    "describe_event",
    "gauge",
    "hits_table",
    "json_line",
    "paint",
    "shown",
    "table",
    "use_color",
]

# region label, glyph, ANSI colour
REGIONS: tuple[tuple[str, str, str], ...] = (
    ("system", "▓", "34"),
    ("summary", "▒", "35"),
    ("history", "█", "32"),
    ("tool defs", "▤", "33"),
    ("output reserve", "░", "31"),
    ("free", "·", "90"),
)


# What a terminal acts on instead of printing: control characters (ESC and CSI among them) and DEL,
# the Unicode line and paragraph separators, bidi embeddings, overrides, isolates and marks, and lone
# surrogates (which cannot be encoded at all). Tab always passes; newline only in multi-line text.
_UNSAFE = "\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE_IN_LINE = re.compile(f"[\n{_UNSAFE}]")
_UNSAFE_IN_LINES = re.compile(f"[{_UNSAFE}]")


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: object, *, lines: bool = False) -> str:
    """Text that came from a user, a model, a file or the store, safe to print: every character a
    terminal would act on is written as its escape (ESC as ``\\x1b``), so nothing runs and nothing is
    hidden. ``lines``: the text's own newlines are kept (a reply, a summary); otherwise it is one line."""
    return (_UNSAFE_IN_LINES if lines else _UNSAFE_IN_LINE).sub(_escape, str(text))


def json_line(value: object) -> str:
    """``value`` as one JSON line (non-ASCII kept readable) that is safe to print: what :func:`shown`
    escapes becomes a JSON ``\\uXXXX`` escape, so the line still parses to the same value."""
    text = json.dumps(value, ensure_ascii=False)
    return _UNSAFE_IN_LINE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def use_color(stream: TextIO) -> bool:
    return stream.isatty() and "NO_COLOR" not in os.environ


def paint(text: str, code: str, color: bool) -> str:
    return f"\033[{code}m{text}\033[0m" if color else text


def _cells(values: Sequence[int], width: int) -> list[int]:
    """Split ``width`` cells proportionally; any non-zero value gets at least one cell."""
    total = max(sum(values), 1)
    cells = [max(1, round(width * v / total)) if v > 0 else 0 for v in values]
    while sum(cells) > width:  # give back from the largest region
        cells[cells.index(max(cells))] -= 1
    while sum(cells) < width:
        cells[cells.index(max(cells))] += 1
    return cells


def gauge(values: Sequence[int], width: int = 50, color: bool = False) -> str:
    """One bar, a region per ``REGIONS`` entry."""
    parts = [
        paint(glyph * n, code, color)
        for (_, glyph, code), n in zip(REGIONS, _cells(values, width), strict=True)
        if n
    ]
    return "▕" + "".join(parts) + "▏"


def context_report(stats: ContextStats, *, color: bool = False, width: int = 50) -> str:
    """What ``/context`` prints: the gauge, tokens by region, and the session's messages."""
    est = stats.estimate
    window = est.context_window
    regions = (est.system, est.summary, est.history, est.tool_defs)  # as billed: calibrated
    values = [*(est.calibrated(n) for n in regions), est.max_tokens, max(est.free, 0)]
    used = est.prompt + est.max_tokens
    lines = [
        f"context {gauge(values, width, color)} {used:,} / {window:,} tokens ({100 * used / window:.0f}%)"
    ]
    for (label, glyph, code), value in zip(REGIONS, values, strict=True):
        lines.append(f"  {paint(glyph, code, color)} {label:<15}{value:>9,}  {100 * value / window:5.1f}%")
    roles = ", ".join(f"{role} {n}" for role, n in sorted(stats.by_role.items())) or "none"
    lines.append(
        f"messages: {stats.messages} ({roles}) · turns: {stats.turns} · characters: {stats.characters:,}"
        f" · archived: {stats.archived} · summary: {stats.summary_source or 'none'}"
    )
    if (usage := stats.usage).calls:
        lines.append(
            f"cache: {100 * usage.cache_ratio:.0f}% of prompt tokens read from the provider's cache "
            f"({usage.cached_tokens:,} of {usage.prompt_tokens:,}, {usage.calls} calls); "
            f"{100 * usage.expected_cache_ratio:.0f}% of each request was the previous one unchanged"
        )
    if (calls := stats.summary_calls).calls:
        lines.append(
            f"summaries: {calls.calls} calls to {shown(stats.summary_model or '?')} "
            f"({calls.prompt_tokens:,} tokens in, {calls.completion_tokens:,} out), besides your own"
        )
    if est.ratio != 1.0:
        lines.append(
            f"calibrated: our count x {est.ratio:.2f}, as the provider billed ({est.counted:,} counted)"
        )
    if stats.archive_error:
        lines.append(f"archive failing: {shown(stats.archive_error)}")
    return "\n".join(lines)


def describe_event(event: EngineEvent) -> str | None:
    """A one-line notice for an engine event, or ``None`` for events users need not see."""
    d = event.data
    if event.kind == "offload":
        chars, kept = d.get("chars", 0), d.get("kept", 0)
        return f"offloaded a tool result ({chars:,} chars, kept {kept:,}) → {d.get('path')}"
    if event.kind == "compaction_finished" and d.get("reason") == "fold_task":
        return f"task finished: its {d.get('archived', 0)} tool-step messages folded into the archive"
    if event.kind == "compaction_finished" and d.get("archived"):
        reason = str(d.get("reason", "")).replace("_", " ")
        return (
            f"compaction ({reason}): {d['archived']} messages archived, "
            f"history {d.get('tokens_before', 0):,} → {d.get('tokens_after', 0):,} tokens"
        )
    if event.kind == "compaction_started" and d.get("reason") == "summarize":
        return f"summarising {d.get('leaving', 0)} older messages"
    if event.kind == "summary_fallback":
        return f"summary: used the extractive fallback ({d.get('reason')})"
    if event.kind == "overflow":
        return "the model reported a context overflow: emergency compaction"
    if event.kind in ("archive_failed", "offload_failed"):
        return f"warning: {event.kind.replace('_', ' ')}: {d.get('error')} (nothing was removed)"
    if event.kind == "restored":
        return f"restored the previous conversation ({d.get('kept', 0)} messages kept)"
    return None


def hits_table(hits: Sequence[MemoryHit], width: int = 100) -> str:
    """Memory search hits: path, line range, score and a one-line snippet."""
    if not hits:
        return "no matches"
    lines = []
    for hit in hits:
        snippet = " ".join(hit.snippet.split())
        if len(snippet) > width:
            snippet = snippet[: width - 1] + "…"
        lines.append(
            f"{shown(hit.path)}:{hit.start_line}-{hit.end_line}  score {hit.score:.3f}\n    {shown(snippet)}"
        )
    return "\n".join(lines)


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    out = [
        "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths, strict=True)))
        for r in cells
    ]
    out.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(out)


class ProgressBar:
    """``[#####.....] 12/40  11.2 chunks/s, ETA 6m50s`` redrawn in place on a terminal; nothing elsewhere
    (a script's or a log's stderr holds errors only)."""

    def __init__(self, label: str, stream: TextIO | None = None, width: int = 30) -> None:
        self.label = label
        self.stream = stream = stream or sys.stderr  # the stderr of now, not of import time
        self.width = width
        self.tty = stream.isatty()
        self._last = (-1, -1)
        from ..memory.base import RateMeter  # the bar shows memory indexing (the memory extra)

        self._rate = RateMeter()

    def __call__(self, done: int, total: int) -> None:
        if not self.tty or (done, total) == self._last:
            return
        self._last = (done, total)
        filled = self.width * done // max(total, 1)
        bar = f"{self.label} [{'#' * filled}{'.' * (self.width - filled)}] {done}/{total}"
        self.stream.write(f"\r{bar}  {self._rate(done, total)}")
        self.stream.flush()

    def close(self) -> None:
        if self.tty and self._last != (-1, -1):
            self.stream.write("\n")
            self.stream.flush()
