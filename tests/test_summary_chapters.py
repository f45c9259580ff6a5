"""A summary grows by chapters (issue 51): what a compaction takes out of the context is appended, so the
parts the model saw before stay as they were and the provider's cached prefix with them; the summary is
written whole again only when a chapter no longer fits its budget."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

from contextmem.engine.types import summary_from_json, summary_to_json
from contextmem.messages import AssistantMessage, Message, SystemMessage, ToolCall, ToolMessage, UserMessage
from contextmem.summarize import Summarizer
from contextmem.summarize.summarizer import CHAPTER_SHARE, REWRITE_SHARE
from contextmem.testing import ScriptedLLM
from contextmem.tokens import MessageCounter, get_counter

from .engine_helpers import make_engine

COUNTER = MessageCounter(get_counter("auto"))


def _turn(n: int) -> list[Message]:
    """One invented turn that carries its own fact and identifier."""
    return [
        UserMessage(f"Ticket OPS-{1000 + n}: the invoice job on host batch-{n}.internal fails at step {n}."),
        AssistantMessage(f"I will keep retries at {n + 2} for OPS-{1000 + n}; the owner is Ines Varga."),
    ]


def test_a_compaction_appends_a_chapter_and_leaves_the_earlier_parts_as_they_were() -> None:
    summarizer = Summarizer(ScriptedLLM(), COUNTER, max_tokens=3000)
    first = summarizer.extend(None, _turn(1), archive_refs=["dialog/2026-03-14.jsonl lines 1-2"])
    second = summarizer.extend(first, _turn(2), archive_refs=["dialog/2026-03-14.jsonl lines 3-4"])

    assert first.chapters == () and len(second.chapters) == 1
    assert second.parts()[0] == first.parts()[0]  # what the model saw before is unchanged
    assert "OPS-1002" in second.parts()[1] and "OPS-1002" not in second.parts()[0]
    assert "retries at 4" in second.parts()[1]  # its facts, not only its identifiers
    assert "lines 3-4" in second.parts()[1]  # a chapter names its own archive lines
    assert second.render() == "\n\n".join(second.parts())
    assert second.messages_covered == 4
    assert COUNTER.count_text(second.render()) <= summarizer.max_tokens


def test_a_chapter_that_does_not_fit_makes_one_summary_of_everything_again() -> None:
    summarizer = Summarizer(ScriptedLLM(), COUNTER, max_tokens=700)
    summary = summarizer.extend(None, _turn(0))
    rewrites = 0
    for n in range(1, 30):
        before = summary
        summary = summarizer.extend(
            summary, _turn(n), archive_refs=[f"dialog/d.jsonl lines {2 * n}-{2 * n + 1}"]
        )
        assert COUNTER.count_text(summary.render()) <= summarizer.max_tokens
        if summary.chapters:  # appended: the parts before are a prefix of the new ones
            assert summary.parts()[: len(before.parts())] == before.parts()
        else:  # written whole, within the rewrite share, so the next chapters fit beside it
            rewrites += 1
            assert COUNTER.count_text(summary.render()) <= summarizer.max_tokens * REWRITE_SHARE + 1
            assert f"OPS-{1000 + n}" in summary.render()  # the newest turn is in it
    assert rewrites >= 1  # the budget was reached at least once
    assert 0 < CHAPTER_SHARE < 1 - REWRITE_SHARE


def test_a_rewrite_folds_the_chapters_facts_identifiers_and_archive_refs() -> None:
    summarizer = Summarizer(ScriptedLLM(), COUNTER, max_tokens=3000)
    grown = summarizer.extend(summarizer.extend(None, _turn(1), archive_refs=["a.jsonl lines 1-2"]), _turn(2))
    folded = grown.folded()
    assert folded.chapters == ()
    assert "OPS-1001" in folded.render() and "OPS-1002" in folded.render()
    assert set(grown.ledger.values) | set(grown.chapters[0].ledger.values) == set(folded.ledger.values)
    again = summarizer.extract(grown, [])  # a whole summary starts from the folded one
    assert again.chapters == () and "OPS-1002" in again.render()


def test_chapters_are_stored_and_read_back() -> None:
    summarizer = Summarizer(ScriptedLLM(), COUNTER, max_tokens=1500)
    grown = summarizer.extend(summarizer.extend(None, _turn(1)), _turn(2), archive_refs=["b.jsonl lines 3-4"])
    assert summary_from_json(summary_to_json(grown)) == grown
    old = summary_to_json(summarizer.extend(None, _turn(1)))  # one written before chapters had no key
    assert old is not None
    assert summary_from_json(old.replace(', "chapters": []', "")) == summarizer.extend(None, _turn(1))


def _result(call: str, lines: int) -> list[Message]:
    log = "".join(f"step {k}: compiled module_{k}.c in {k % 7} ms\n" for k in range(lines))
    return [AssistantMessage(None, tool_calls=(ToolCall(call, "read_file", "{}"),)), ToolMessage(call, log)]


async def test_a_trim_after_a_trim_keeps_the_summary_the_model_saw_as_a_prefix(tmp_path: Path) -> None:
    engine = await make_engine(
        tmp_path, window=6000, reserve=300, compact_message_threshold=500, compact_target_ratio=0.5
    )
    summaries: list[tuple[SystemMessage, ...]] = []
    for turn in range(24):
        await engine.add(UserMessage(f"turn {turn}: check the build of OPS-{2000 + turn}"))
        await engine.add(*_result(f"call{turn}", 120 + 40 * (turn % 3)))
        request = await engine.build("You are a build assistant.")
        leading = tuple(m for m in request.messages if isinstance(m, SystemMessage))
        if not summaries or leading != summaries[-1]:
            summaries.append(leading)
        await engine.add(AssistantMessage(f"done {turn}"))
        await engine.end_turn()
    appended = [(a, b) for a, b in pairwise(summaries) if len(b) > len(a) and b[: len(a)] == a]
    assert len(summaries) >= 4  # the summary changed several times
    assert len(appended) >= len(summaries) // 2  # most changes appended a chapter after what was sent
    assert (await engine.verify()).lost == 0
