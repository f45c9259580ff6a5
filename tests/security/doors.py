"""The harness every door's property test uses: hostile text to draw, and the checkers of each sink.

A *door* is where data enters (a library call, a message field, a session id, a setting, a CLI argument,
an MCP argument, a memory file edited by hand, a store URL, a provider reply); a *sink* is where it can
end up (the store, the archive, memory files, the index, snippets, summaries, logs, events, the terminal,
exports). SECURITY.md's door table lists them. A door's test draws :func:`hostile_text` and asserts its
contract with the checkers below: the text is stored exactly, or refused with one typed line
(:func:`assert_one_line_error`), and no sink gains a forged line (:func:`forged_lines`,
:func:`hidden_line_starts`), a terminal
control sequence (:func:`terminal_unsafe`), a secret (:func:`leaked_secrets`) or a raw exception
(:func:`raw_exception`). A door shared by tenants (the MCP server) must also never stall the others on
one tenant's heavy input: :func:`loop_stalls` measures its event loop.

These checkers are oracles other tests rely on, so ``tests/security/test_doors_oracles.py`` shows each
one catching the defect it guards against.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

from hypothesis import strategies as st

from contextmem.errors import ContextmemError

# --- what an attacker draws -------------------------------------------------------------------------

LINE_BREAKS = ("\n", "\r", "\r\n", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
"""Every character (or pair) some reader takes for the end of a line: ``str.splitlines`` splits on all
of them, CommonMark and most tools on the first three only."""

CONTROLS = ("\x00", "\x07", "\x08", "\x1b", "\x7f", "\x9b", "\x9d", "\t")
BIDI = ("\u202a", "\u202b", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e", "\u200f")
FORMAT = ("\u200b", "\u200d", "\u2060", "\ufeff", "\u00ad")
TERMINAL_SEQUENCES = (
    "\x1b[31m",  # CSI: colour
    "\x1b[2J\x1b[H",  # CSI: clear the screen
    "\x1b]52;c;ZWNobyBwd25lZA==\x07",  # OSC 52: write the clipboard
    "\x1b]0;title\x1b\\",  # OSC: window title, ST-terminated
    "\x9b31m",  # C1 CSI
    "\x1bP+q\x1b\\",  # DCS
)
MARKER_LOOKALIKES = (
    "- ",
    "* ",
    "+ ",
    "1. ",
    "## 23:59 ",
    "## ",
    "# ",
    "> ",
    "```",
    "[REDACTED]",
    "－ ",  # fullwidth hyphen-minus
    "• ",
    "１. ",
    "＃＃ ",
)
SURROGATES = ("\ud800", "\udfff", "\udc80")

_pieces = st.sampled_from(
    LINE_BREAKS + CONTROLS + BIDI + FORMAT + TERMINAL_SEQUENCES + MARKER_LOOKALIKES + SURROGATES
)


def hostile_text(*, max_size: int = 60, surrogates: bool = True) -> st.SearchStrategy[str]:
    """Text that mixes every Unicode category (lone surrogates too, unless ``surrogates=False``) with
    the pieces above: line separators, controls, bidi and format marks, terminal escape sequences and
    look-alikes of the markers contextmem writes."""
    any_char = st.characters(blacklist_categories=() if surrogates else ("Cs",))
    pieces = _pieces if surrogates else _pieces.filter(lambda p: p not in SURROGATES)
    return st.lists(st.one_of(st.text(any_char, max_size=8), pieces), max_size=max_size).map("".join)


def huge(text: str, size: int) -> str:
    """``text`` repeated to at least ``size`` characters (a door's bound is tested with it)."""
    return text * (size // max(len(text), 1) + 1)


# --- the checkers -----------------------------------------------------------------------------------


def every_line_split(text: str) -> list[str]:
    """The lines of ``text`` as the most eager reader splits them (``str.splitlines``)."""
    return text.splitlines()


def forged_lines(
    sink: str,
    payload: str,
    starts: Iterable[str] = ("#", "- ", "* ", "+ "),
    allowed: re.Pattern[str] | None = None,
) -> list[str]:
    """Lines of ``sink`` that begin at column 0 with one of ``starts`` (a heading, a list item) and that
    come from ``payload`` (the line's text occurs in it), under any reader's idea of a line. A writer
    that put ``payload`` in ``sink`` as one indented item or one escaped line yields none.

    ``allowed`` matches (whole) the lines the writer writes itself, such as its own headings and ``- ``
    items: they are not forged even when ``payload`` holds their text. With ``starts=("",)`` every line
    at column 0 is looked at, so any line of ``payload`` left bare by the writer is caught."""
    forged = []
    for line in every_line_split(sink):
        at_column_0 = line and line[0] not in " \t"  # an indented line continues the item above it
        from_payload = at_column_0 and line.startswith(tuple(starts)) and line.strip() in payload
        if from_payload and line.strip() and (allowed is None or not allowed.fullmatch(line)):
            forged.append(line)
    return forged


def hidden_line_starts(sink: str) -> list[str]:
    """Lines of ``sink`` that begin at column 0 for ``str.splitlines`` but not for a markdown reader: they
    follow a line end CommonMark does not know (U+2028, NEL, VT...), so the two see different structure.
    A writer that indents what follows every such end, or keeps it within its line, yields none."""
    hidden, offset = [], 0
    for piece in sink.splitlines(keepends=True):
        text = piece.rstrip("".join(LINE_BREAKS))
        if offset and text and not text[0].isspace() and sink[offset - 1] not in "\r\n":
            hidden.append(text)
        offset += len(piece)
    return hidden


_TERMINAL_UNSAFE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def terminal_unsafe(output: str) -> list[str]:
    """The characters of ``output`` a terminal acts on instead of printing (C0 controls but newline and
    tab, DEL, C1 controls, the Unicode line and paragraph separators, bidi embeddings and isolates), as
    ``repr``\\ s. Empty for text that is safe to print."""
    return [repr(c) for c in _TERMINAL_UNSAFE.findall(output)]


def leaked_secrets(sink: str, secrets: Iterable[str]) -> list[str]:
    """The secret values that appear in ``sink``."""
    return [value for value in secrets if value and value in sink]


_RAW = re.compile(
    r"Traceback \(most recent call last\)|^\s*File \"[^\"]+\", line \d+|"
    r"\b(?:UnicodeEncodeError|UnicodeDecodeError|KeyError|TypeError|AttributeError|IndexError|"
    r"AssertionError|RecursionError|MemoryError|OverflowError)\b",
    re.M,
)


def raw_exception(output: str) -> list[str]:
    """What in ``output`` looks like an exception that escaped untranslated: a traceback, a stack frame,
    or the name of a built-in exception class."""
    return [m.group(0) for m in _RAW.finditer(output)]


def assert_one_line_error(exc: BaseException) -> None:
    """``exc`` is a :class:`ContextmemError` whose message is one printable line with a ``Fix:``."""
    assert isinstance(exc, ContextmemError), f"{type(exc).__name__} is not a ContextmemError: {exc!r}"
    message = str(exc)
    assert "\n" not in message and "\r" not in message, f"the error is not one line: {message!r}"
    assert "Fix:" in message, f"the error has no Fix: {message!r}"
    assert not terminal_unsafe(message), f"the error carries terminal controls: {message!r}"


@dataclass
class LoopStalls:
    """What :func:`loop_stalls` saw of the event loop between two of its ticks: the worst CPU time the
    loop's thread spent running other work (``worst_cpu``: a step that did not yield, however loaded
    the machine), and the worst late wake-up (``worst_wall``: that, plus the machine's own noise)."""

    worst_cpu: float = 0.0
    worst_wall: float = 0.0
    ticks: int = 0
    gaps: list[float] = field(default_factory=list)  # the CPU time of each gap, in order

    def __str__(self) -> str:
        cpu, wall = self.worst_cpu * 1000, self.worst_wall * 1000
        return f"worst CPU stall {cpu:.0f} ms, worst late tick {wall:.0f} ms over {self.ticks} ticks"


@asynccontextmanager
async def loop_stalls(tick: float = 0.005) -> AsyncIterator[LoopStalls]:
    """Measure the running event loop while the block runs: a task sleeps ``tick`` again and again and
    records, at each wake-up, how much CPU time the loop's thread used since the last one (the work the
    loop ran in between: on an idle loop, near nothing) and how late it woke. A call that does CPU work
    on the loop shows as a CPU gap as long as it; work in a worker thread does not, since it runs on
    another thread's clock. (A *blocking wait* on the loop, I/O or a lock, shows in ``worst_wall``
    only.)"""
    found = LoopStalls()
    stop = asyncio.Event()

    async def ticker() -> None:
        while not stop.is_set():
            wall, cpu = time.perf_counter(), time.thread_time()
            await asyncio.sleep(tick)
            gap = time.thread_time() - cpu
            found.gaps.append(gap)
            found.ticks += 1
            found.worst_cpu = max(found.worst_cpu, gap)
            found.worst_wall = max(found.worst_wall, time.perf_counter() - wall - tick)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)  # the ticker's first tick starts before the measured work
    try:
        yield found
    finally:
        stop.set()
        await task
