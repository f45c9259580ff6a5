"""Compaction in large, rare steps (issue 15): between compactions a request is the previous request plus
new messages, so the provider's prompt cache keeps serving the prefix.

The pure parts are property-tested (``plan_budget_trim`` with a ``target``, ``plan_offload`` on arrival);
the engine is driven turn by turn and every request compared with the one before it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextmem.budget import turn_starts
from contextmem.compaction.offload import plan_offload
from contextmem.compaction.plans import plan_budget_trim
from contextmem.engine import Request
from contextmem.eval.prompt_cache import WireRequest, compare, wire_request
from contextmem.formats.openai import to_openai
from contextmem.llm.base import Usage
from contextmem.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
    orphan_tool_messages,
)
from contextmem.settings import Settings
from contextmem.testing import ScriptedLLM
from contextmem.tokens import MessageCounter

from .engine_helpers import correcting, make_engine
from .strategies import histories

COUNTER = MessageCounter()


@given(histories(max_turns=14), st.integers(50, 3000), st.floats(0.1, 1.0))
def test_trim_to_target_keeps_whole_turns_and_the_newest(
    history: list[Message], budget: int, ratio: float
) -> None:
    counts = COUNTER.count_messages(history)
    target = int(budget * ratio)
    plain = plan_budget_trim(history, counts, budget)
    plan = plan_budget_trim(history, counts, budget, target)
    kept = [history[i] for i in plan.keep]
    total = sum(counts[i] for i in plan.keep)
    starts = turn_starts(history)
    if starts:  # the newest turn always stays, whole
        assert set(range(starts[-1], len(history))) <= set(plan.keep)
    assert orphan_tool_messages(kept) == []
    assert plan.fits == plain.fits
    assert total <= sum(counts[i] for i in plain.keep)  # never keeps more than the plain trim
    if plan.fits and len(turn_starts(kept)) > 1:
        assert total <= target  # more than one turn left: the target was reached


def _result(call: str, size: int) -> list[Message]:
    return [
        AssistantMessage(None, tool_calls=(ToolCall(call, "read_file", "{}"),)),
        ToolMessage(call, "x" * size),
    ]


def test_results_the_model_has_seen_are_planned_only_when_asked() -> None:
    settings = Settings(pruning_recent_msg_max_bytes=5000, pruning_old_msg_max_bytes=500, pruning_recent_n=1)
    history: list[Message] = [
        UserMessage("go"),
        *_result("a", 4000),
        *_result("b", 4000),
        *_result("c", 9000),
    ]
    current = len(history) - 2

    def path(i: int) -> str:
        return f"tool_results/{i}.txt"

    everything = {o.index for o in plan_offload(history, current, settings, path)}
    unseen = {o.index for o in plan_offload(history, current, settings, path, first_new=current)}
    assert everything == {2, 4, 6}  # "a" and "b" aged past the threshold, "c" is too big on arrival
    assert unseen == {6}


def _wire(messages: tuple[Message, ...]) -> list[str]:
    return [json.dumps(to_openai(m), sort_keys=True, ensure_ascii=False) for m in messages]


@pytest.mark.parametrize("with_llm", [False, True], ids=["extractive", "llm-summaries"])
async def test_requests_only_append_between_compactions(tmp_path: Path, with_llm: bool) -> None:
    """With an LLM, its background rewording of a trim's summary waits for the next break too."""
    engine = await make_engine(
        tmp_path,
        llm=ScriptedLLM(default=correcting()) if with_llm else None,
        window=6000,
        reserve=300,
        agent_max_context_turns=8 if with_llm else 50,  # with a model: trims, then its rewordings
        compact_message_threshold=500,
        compact_target_ratio=0.5,
    )
    compactions: list[str] = []
    engine.subscribe(
        lambda e: compactions.append(e.data["reason"]) if e.kind == "compaction_finished" else None
    )
    previous: list[str] = []
    breaks = appends = 0

    async def call() -> None:
        nonlocal previous, breaks, appends
        wire = _wire((await engine.build("You are a build assistant.")).messages)
        if previous:
            appended = wire[: len(previous)] == previous
            appends, breaks = appends + appended, breaks + (not appended)
        previous = wire

    for turn in range(40):
        await engine.add(UserMessage(f"turn {turn}: check the build log 第{turn}次"))
        await call()
        await engine.add(*_result(f"call{turn}", 1500 if turn % 3 else 3500))
        await call()
        await engine.add(AssistantMessage(f"done {turn}"))
        await engine.end_turn()
        await engine.wait_idle()  # the background summary, if any, is ready before the next call
    assert (await engine.verify()).lost == 0
    assert breaks >= 1  # compaction happened
    assert appends >= 4 * breaks  # and in large, rare steps
    assert breaks <= len(compactions)  # the prefix breaks only where something left the context
    if with_llm:
        assert "Keep the service running." in previous[0]  # the model's summary arrived


async def _expected_and_counted(tmp_path: Path, shared: Any = None) -> list[tuple[int, int, str]]:
    """A session with appends, trims and cut results; for each request built, the engine's
    ``expected_cached`` (or ``shared(previous, request, history)``'s, a stand-in under test), the replay
    oracle's shared prefix (:func:`contextmem.eval.prompt_cache.compare`) and the oracle's call kind."""
    engine = await make_engine(
        tmp_path, window=6000, reserve=300, compact_message_threshold=500, compact_target_ratio=0.5
    )
    tools = [ToolSpec("read_file", "Read a file", {"type": "object", "properties": {}})]
    rows: list[tuple[int, int, str]] = []
    previous_wire: WireRequest | None = None
    previous: Request | None = None

    async def call() -> None:
        nonlocal previous_wire, previous
        request = await engine.build("You are a build assistant.", tools)
        expected = request.expected_cached
        if shared is not None:
            expected = shared(previous, request, engine.history).expected_cached
        wire = wire_request(request.messages, request.tools, engine.counter)
        got = compare(previous_wire, wire)
        rows.append((expected, got.shared, got.kind))
        previous_wire, previous = wire, request
        engine.record_usage(request, Usage(prompt_tokens=request.estimate.counted, cached_tokens=expected))

    for turn in range(30):
        await engine.add(UserMessage(f"turn {turn}: check the build log 第{turn}次"))
        await call()
        for step in range(4 if turn == 0 else 1 + turn % 3):  # the first turn reads more than fits
            lines = 400 if turn == 0 else (40, 400, 250)[(turn + step) % 3]
            log = "".join(f"step {k}: compiled module_{k}.c in {k % 7} ms\n" for k in range(lines))
            call_id = f"call{turn}_{step}"
            await engine.add(
                AssistantMessage(None, tool_calls=(ToolCall(call_id, "read_file", "{}"),)),
                ToolMessage(call_id, log),
            )
            await call()
        await engine.add(AssistantMessage(f"done {turn}"))
        await engine.end_turn()
    usage = engine.stats().usage
    if shared is None:  # what stats() shows is what the requests expected
        assert usage.expected_cached_tokens == sum(r[0] for r in rows)
        assert usage.expected_cache_ratio == pytest.approx(sum(r[0] for r in rows) / usage.sent_tokens)
    return rows


def _disagreements(rows: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Requests whose expected prefix is not the oracle's: a few tokens apart at most (the system prompt
    and the summary are counted apart by the engine, joined by the oracle)."""
    return [r for r in rows if abs(r[0] - r[1]) > 4]


async def test_the_engine_expects_the_prefix_the_replay_oracle_counts(tmp_path: Path) -> None:
    rows = await _expected_and_counted(tmp_path)
    kinds = {kind for _, _, kind in rows}
    assert {"append", "system", "tool_result_rewritten"} <= kinds  # appends, trims and cut results
    assert _disagreements(rows) == []


async def test_the_oracle_catches_an_expectation_that_ignores_a_rewritten_result(tmp_path: Path) -> None:
    def by_position(previous: Request | None, request: Request, history: Any) -> Request:
        """A planted defect: a message counts as shared when the previous request had one there."""
        if previous is None:
            return request
        n = min(len(previous.messages), len(request.messages))
        tokens = request.estimate.tool_defs + request.estimate.system + request.estimate.summary
        tokens += sum(history.counts[: n - 1])
        return dataclasses.replace(request, expected_cached=tokens)

    assert _disagreements(await _expected_and_counted(tmp_path, by_position))
