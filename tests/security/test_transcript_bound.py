"""A transcript file read by ``contextmem count`` is bounded as ``replay`` and ``ContextEngine.add`` are
(issue 49, item 5).

``count`` on one 12 MB one-word line took 7.6 s and 737 MB (24 MB: 25 s, 1.3 GB) while ``replay`` refused
the same file at once: a message over ``max_message_bytes`` (a tool result: ten times it) is now refused by
the one size rule, :func:`~contextmem.message_checks.check_size`, whichever command reads the file, with
one line naming the file, the line and the Fix; nothing of it reaches the tokenizer.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextmem.cli.main import main
from contextmem.engine.door import TOOL_RESULT_FACTOR, read_input
from contextmem.errors import JsonlLineError, MessageFormatError
from contextmem.jsonl import messages_from_jsonl
from contextmem.settings import Settings
from contextmem.tokens import HeuristicCounter, MessageCounter, TiktokenCounter
from tests.security.doors import assert_one_line_error, hostile_text, huge

DEFAULT_MAX = Settings().max_message_bytes


def one_word_file(path: Path, size: int, role: str = "user") -> Path:
    line = {"role": role, "content": "a" * size}
    if role == "tool":
        line["tool_call_id"] = "c1"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    return path


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The length of every text the real tokenizer is handed (the work ``count`` does)."""
    seen: list[int] = []
    real = TiktokenCounter.count_text

    def spy(self: TiktokenCounter, text: str) -> int:
        seen.append(len(text))
        return real(self, text)

    monkeypatch.setattr(TiktokenCounter, "count_text", spy)
    return seen


def test_count_refuses_a_12_mb_one_word_line_naming_the_file(tmp_path, capsys, counted):
    path = one_word_file(tmp_path / "huge.jsonl", 12_000_000)
    code = main(["--workspace", str(tmp_path / "ws"), "count", str(path)])
    err = capsys.readouterr().err
    assert code != 0
    assert err.count("\n") == 1 and str(path) in err and ":1: messages[0].content" in err, err
    assert "over the limit of 1,048,576" in err and "Fix: " in err, err
    assert not counted or max(counted) <= DEFAULT_MAX  # the tokenizer never saw the 12 MB word


def test_count_still_counts_a_message_within_the_bound(tmp_path, capsys, counted):
    path = one_word_file(tmp_path / "big.jsonl", DEFAULT_MAX - 100)  # one word, just under the bound
    code = main(["--workspace", str(tmp_path / "ws"), "count", "--json", str(path)])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["messages"] == 1 and report["tokens"] > DEFAULT_MAX // 10
    assert max(counted) == DEFAULT_MAX - 100


def test_a_tool_result_may_be_ten_times_larger_in_count_as_in_add(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CONTEXTMEM_MAX_MESSAGE_BYTES", "1000")
    bound = 1000 * TOOL_RESULT_FACTOR - len("c1")  # the call id counts too (message_checks.text_bytes)
    ok = one_word_file(tmp_path / "tool.jsonl", bound, role="tool")
    over = one_word_file(tmp_path / "over.jsonl", bound + 1, role="tool")
    assert main(["--workspace", str(tmp_path / "ws"), "count", str(ok)]) == 0
    assert main(["--workspace", str(tmp_path / "ws"), "count", str(over)]) != 0
    assert "over the limit of 10,000" in capsys.readouterr().err


# Pinned at 60 in every profile: each example writes a transcript and reads it through count and add.
@settings(max_examples=60, deadline=None)
@given(
    role=st.sampled_from(["user", "assistant", "tool", "system"]),
    text=hostile_text(surrogates=False),
    size=st.integers(0, 400),
)
def test_count_and_add_refuse_exactly_the_same_messages(tmp_path_factory, role, text, size):
    """One size rule: a line the transcript reader refuses is one ``add`` refuses, and only such lines."""
    max_bytes = 200
    value: dict[str, object] = {"role": role, "content": huge(text, size)[:size] if text else "x" * size}
    if role == "tool":
        value["tool_call_id"] = "c1"
    path = tmp_path_factory.mktemp("t") / "t.jsonl"
    path.write_text(json.dumps(value, ensure_ascii=False) + "\n", encoding="utf-8")
    try:
        messages_from_jsonl(path, max_bytes=max_bytes)
        read = None
    except JsonlLineError as exc:
        read = exc
        assert_one_line_error(exc)
        assert str(path) in str(exc)
    counter = MessageCounter(HeuristicCounter())
    try:
        asyncio.run(read_input([value], max_bytes, counter))
        added = None
    except MessageFormatError as exc:
        added = exc
    assert (read is None) == (added is None), (read, added)
    if read is not None and added is not None:
        assert str(read).endswith(str(added))  # the same line, after the file's name
