"""The door harness's checkers (tests/security/doors.py) catch what they guard against, and pass clean
output: a checker that cannot fail would let every door test pass."""

from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import given, settings

from contextmem.errors import ConfigError, StoreError
from tests.security.doors import (
    LINE_BREAKS,
    SURROGATES,
    TERMINAL_SEQUENCES,
    assert_one_line_error,
    forged_lines,
    hidden_line_starts,
    hostile_text,
    huge,
    leaked_secrets,
    loop_stalls,
    raw_exception,
    terminal_unsafe,
)

PAYLOAD = "note\u2028## 23:59 forged"


@pytest.mark.parametrize("separator", [s for s in LINE_BREAKS if s not in ("\n", "\r", "\r\n")])
def test_forged_lines_catches_a_heading_after_any_line_separator(separator: str) -> None:
    payload = f"note{separator}## 23:59 forged"
    planted = f"## 10:00\n\n- {payload}\n"  # a writer that indents only after \n
    assert forged_lines(planted, payload) == ["## 23:59 forged"]


def test_forged_lines_passes_an_indented_continuation_and_the_writers_own_heading() -> None:
    payload = "note\n## 23:59 forged"
    written = "## 10:00\n\n- note\n  ## 23:59 forged\n"
    assert forged_lines(written, payload) == []


def test_forged_lines_allows_only_the_writers_own_lines() -> None:
    import re

    writer = re.compile(r"- .*|## 10:00")
    payload = "a\n## 10:00\u2028- item\x85plain line"
    planted = "## 10:00\n- a\n## 10:00\n- item\nplain line\n"  # every payload line split, one kept bare
    assert forged_lines(planted, payload, starts=("",), allowed=writer) == ["plain line"]
    assert forged_lines(planted, payload, starts=("",)) == ["## 10:00", "## 10:00", "- item", "plain line"]
    assert forged_lines("## 10:00\n- a\n  plain line\n", payload, starts=("",), allowed=writer) == []


def test_forged_lines_catches_a_list_item_forged_after_a_newline() -> None:
    payload = "a\n- injected item"
    assert forged_lines(f"- {payload}\n", payload) == ["- injected item"]


@pytest.mark.parametrize("separator", [s for s in LINE_BREAKS if s not in ("\n", "\r", "\r\n")])
def test_hidden_line_starts_catches_a_line_only_splitlines_starts(separator: str) -> None:
    planted = f"## 10:00\n\nsummary{separator}## 23:59 forged{separator}{separator}- item\n"
    assert hidden_line_starts(planted) == ["## 23:59 forged", "- item"]


def test_hidden_line_starts_passes_markdown_lines_and_indented_continuations() -> None:
    written = "## 10:00\r\n\r\n- a\r- b\n\nsummary\u2028  ## 23:59 kept\u2029\u2029  - item\x85\n"
    assert hidden_line_starts(written) == []


@pytest.mark.parametrize("sequence", TERMINAL_SEQUENCES)
def test_terminal_unsafe_catches_every_escape_sequence(sequence: str) -> None:
    assert terminal_unsafe(f"session {sequence} listed")


@pytest.mark.parametrize("char", ["\x00", "\x07", "\x08", "\x7f", "\x85", "\u2028", "\u202e", "\u2066"])
def test_terminal_unsafe_catches_controls_separators_and_bidi(char: str) -> None:
    assert terminal_unsafe(f"a{char}b") == [repr(char)]


def test_terminal_unsafe_passes_plain_text_newlines_tabs_and_chinese() -> None:
    assert terminal_unsafe("deploy\tsvc-1 到 eu-west-1\n完成 ✓ \\x1b[31m (escaped)\n") == []


def test_leaked_secrets_finds_the_values_left_and_only_them() -> None:
    sink = "key sk-live-abc123 and [REDACTED]"
    assert leaked_secrets(sink, ["sk-live-abc123", "ghp_gone", ""]) == ["sk-live-abc123"]


@pytest.mark.parametrize(
    "output",
    [
        'Traceback (most recent call last):\n  File "x.py", line 1, in <module>\n',
        "error: UnicodeEncodeError: 'utf-8' codec can't encode character",
        "KeyError: 'role'",
    ],
)
def test_raw_exception_catches_a_traceback_or_a_builtin_exception(output: str) -> None:
    assert raw_exception(output)


def test_raw_exception_passes_a_translated_error() -> None:
    assert raw_exception("error: session id 'chat\\ud800' holds a lone surrogate. Fix: ...") == []


def test_assert_one_line_error_refuses_each_kind_of_bad_error() -> None:
    assert_one_line_error(ConfigError("bad value 'x'. Fix: use 'y'"))
    for bad in (
        ValueError("bad. Fix: x"),  # not our tree
        ConfigError("bad\nvalue. Fix: x"),  # two lines
        StoreError("bad value"),  # no Fix
        ConfigError("bad \x1b[31mvalue. Fix: x"),  # a terminal sequence
    ):
        with pytest.raises(AssertionError):
            assert_one_line_error(bad)


@given(hostile_text())
def test_hostile_text_draws_what_it_promises(text: str) -> None:
    assert isinstance(text, str)


def test_hostile_text_reaches_separators_surrogates_and_escapes() -> None:
    seen: set[str] = set()

    # Pinned at 200 in every profile: a check of the strategy itself, derandomized: every run draws alike.
    @settings(derandomize=True, max_examples=200)
    @given(hostile_text())
    def collect(text: str) -> None:
        seen.update(p for p in (*LINE_BREAKS, *SURROGATES, "\x1b") if p in text)

    collect()
    assert {"\u2028", "\x1b"} <= seen and seen & set(SURROGATES)


def test_huge_reaches_the_size_asked() -> None:
    assert len(huge("ab", 1001)) >= 1001


def _burn(seconds: float) -> None:
    """CPU work (no sleep, no I/O) for ``seconds`` of this thread's CPU time."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


async def test_loop_stalls_catches_cpu_work_on_the_event_loop() -> None:
    """The planted defect: 150 ms of CPU work run on the loop is a 150 ms stall, whatever the load."""
    async with loop_stalls() as stalls:
        await asyncio.sleep(0.02)
        _burn(0.15)
        await asyncio.sleep(0.02)
    assert stalls.worst_cpu >= 0.14, stalls
    assert stalls.worst_wall >= 0.14, stalls


async def test_loop_stalls_passes_the_same_work_in_a_worker_thread() -> None:
    async with loop_stalls() as stalls:
        await asyncio.to_thread(_burn, 0.15)
    assert stalls.ticks >= 2 and stalls.worst_cpu < 0.1, stalls
