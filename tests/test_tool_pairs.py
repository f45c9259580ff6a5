"""Tool pairs (compaction/pairs.py) and the plans that must never split them: open calls stay, broken
pairs are never sent, and a broken stored history is repaired by a plan."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextmem.compaction.pairs import broken, open_group, sendable
from contextmem.compaction.plans import (
    Plan,
    keep_open_group,
    plan_budget_trim,
    plan_emergency,
    plan_fold_task,
    plan_repair,
    plan_restore,
    plan_turn_trim,
)
from contextmem.errors import HistoryError
from contextmem.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
    orphan_tool_messages,
    validate_history,
)
from tests.strategies import build_history, seeded_histories

CALLS = (ToolCall("open-1", "shell", "{}"), ToolCall("open-2", "search", "{}"))


def with_open_call(history: list[Message], answered: int) -> list[Message]:
    """``history`` plus another writer's call of two tools, ``answered`` of them answered so far."""
    tail: list[Message] = [AssistantMessage(None, tool_calls=CALLS)]
    tail += [ToolMessage(c.id, "partial " * 50) for c in CALLS[:answered]]
    return [*history, *tail]


def damaged(history: list[Message], rng: random.Random) -> list[Message]:
    """``history`` with a few messages removed at random: tool pairs may break anywhere."""
    return [m for m in history if rng.random() > 0.2]


def _call(*ids: str) -> AssistantMessage:
    return AssistantMessage(None, tool_calls=tuple(ToolCall(i, "f", "{}") for i in ids))


def _result(call_id: str) -> ToolMessage:
    return ToolMessage(call_id, "r")


Q, A = UserMessage("q"), AssistantMessage("text")
WHOLE = [Q, _call("a", "b"), _result("a"), _result("b"), A]  # a call, then each of its results once

ORPHANS: dict[str, tuple[list[Message], list[int]]] = {
    "a result with no call": ([Q, _result("a")], [1]),
    "a result first, its call cut away": (WHOLE[2:], [0, 1]),
    "a call never answered, the user speaks": ([Q, _call("a"), UserMessage("next")], [1]),
    "a call never answered, the assistant speaks": ([Q, _call("a"), A], [1]),
    "a call still open at the end": ([Q, _call("a")], [1]),
    "a call answered only in part": ([Q, _call("a", "b"), _result("a"), A], [1]),
    "the last call answered only in part": ([Q, _call("a", "b"), _result("b")], [1]),
    "a result after a later user turn": ([Q, _call("a"), UserMessage("next"), _result("a")], [1, 3]),
    "a result after the assistant's text": ([Q, _call("a"), A, _result("a")], [1, 3]),
    "a result of another call": ([Q, _call("a"), _result("b")], [1, 2]),
    "a result of the call before": ([Q, _call("a"), _result("a"), _call("b"), _result("a")], [3, 4]),
    "a call answered twice": ([Q, _call("a"), _result("a"), _result("a")], [3]),
    "a call repeating an id": ([Q, _call("a", "a"), _result("a"), _result("a")], [1, 3]),
    "a call repeating an id, answered once": ([Q, _call("a", "a"), _result("a")], [1]),
}


@pytest.mark.parametrize(("history", "orphans"), ORPHANS.values(), ids=ORPHANS.keys())
def test_the_orphan_oracle_catches_each_kind_of_orphan(history: list[Message], orphans: list[int]) -> None:
    assert orphan_tool_messages(history) == orphans


VALID: dict[str, list[Message]] = {
    "no tool at all": [Q, A, UserMessage("again"), A],
    "a call and its results, then text": WHOLE,
    "results in another order than the calls": [Q, _call("a", "b"), _result("b"), _result("a")],
    "one call after another": [Q, _call("a"), _result("a"), _call("b"), _result("b"), A],
    "an id used again by a later call": [
        Q,
        _call("a"),
        _result("a"),
        UserMessage("n"),
        _call("a"),
        _result("a"),
    ],
    "a call with text and its result": [
        Q,
        AssistantMessage("look", tool_calls=_call("a").tool_calls),
        _result("a"),
    ],
    "nothing": [],
}


@pytest.mark.parametrize("history", VALID.values(), ids=VALID.keys())
def test_the_orphan_oracle_accepts_every_whole_pairing(history: list[Message]) -> None:
    assert orphan_tool_messages(history) == []
    validate_history(history)  # the history rule agrees


def test_groups_name_the_open_call_and_the_broken_ones() -> None:
    h = [
        UserMessage("q"),
        ToolMessage("stray", "r"),  # 1: no call before it
        AssistantMessage(None, tool_calls=(ToolCall("x", "f", "{}"), ToolCall("y", "f", "{}"))),
        ToolMessage("x", "r"),  # 3: y never answered, and a user message follows
        UserMessage("q2"),
        AssistantMessage(None, tool_calls=(ToolCall("z", "f", "{}"), ToolCall("w", "f", "{}"))),
        ToolMessage("z", "r"),  # 6: w still running
    ]
    tail = open_group(h)
    assert tail is not None and tail.owner == 5 and tail.missing == ("w",)
    assert broken(h) == [1, 2, 3]
    assert [type(m).__name__ for m in sendable(h)] == ["UserMessage", "UserMessage"]
    assert open_group(h[:5]) is None  # the last group must be at the very end to be open


@given(seeded_histories(), st.integers(0, 2**32 - 1))
def test_sendable_never_holds_an_orphan(history: list[Message], seed: int) -> None:
    assert broken(history) == []
    assert sendable(history) == history  # a valid, finished history is sent whole
    hurt = damaged(history, random.Random(seed))
    out = sendable(hurt)
    assert orphan_tool_messages(out) == []
    rest = iter(hurt)
    assert all(any(m is x for x in rest) for m in out)  # a subsequence, in order


@given(seeded_histories(), st.integers(0, 2**32 - 1), st.integers(0, 1))
def test_repair_makes_any_history_valid_and_keeps_the_open_call(
    history: list[Message], seed: int, answered: int
) -> None:
    hurt = with_open_call(damaged(history, random.Random(seed)), answered)
    plan = plan_repair(hurt)
    kept = [hurt[i] for i in plan.keep]
    validate_history(kept)  # raises on a broken pair
    assert kept[-1 - answered] is hurt[-1 - answered]  # the open call is still there, with its results
    assert plan_repair(kept).empty  # idempotent
    assert plan_repair(history).empty


def test_repair_oracle_a_broken_history_fails_validation_before() -> None:
    hurt = [UserMessage("q"), ToolMessage("gone", "r"), UserMessage("q2")]
    with pytest.raises(HistoryError):
        validate_history(hurt)
    plan = plan_repair(hurt)
    assert plan.drop == (1,) and plan.steps == ("repair",)


def _plans(history: list[Message]) -> list[Plan]:
    counts = [len(str(m)) // 4 + 1 for m in history]
    return [
        plan_turn_trim(history, 2),
        plan_budget_trim(history, counts, 50, 10),
        plan_emergency(history, 1, max_chars=100, max_turns=1),
        plan_emergency(history, 2, max_chars=100, max_turns=1),
        plan_emergency(history, 3, max_chars=100, max_turns=1),
        plan_restore(history, 6),
        plan_fold_task(history),
        Plan((), tuple(range(len(history))), steps=("clear",)),
    ]


@given(st.integers(0, 2**32 - 1), st.integers(1, 8), st.integers(0, 1))
def test_no_plan_removes_or_cuts_an_open_call(seed: int, n_turns: int, answered: int) -> None:
    history = with_open_call(build_history(seed, n_turns), answered)
    tail = open_group(history)
    assert tail is not None
    for raw in _plans(history):
        plan = keep_open_group(raw, history)
        assert set(tail.indices) <= set(plan.keep)
        assert not set(tail.indices) & (set(plan.drop) | set(plan.rewrite))
        kept = [plan.rewrite.get(i, history[i]) for i in plan.keep]
        # The other writer's results still land right after its call.
        validate_history([*kept, *(ToolMessage(c.id, "done") for c in CALLS[answered:])])


def test_keep_open_group_oracle_raw_emergency_drops_the_open_call() -> None:
    """Without keep_open_group, stage 2 archives the other writer's call: its results would be orphans."""
    history = with_open_call(build_history(7, 3), 1)
    raw = plan_emergency(history, 2, max_chars=100, max_turns=1)
    kept = [history[i] for i in raw.keep]
    with pytest.raises(HistoryError):
        validate_history([*kept, ToolMessage("open-2", "done")])
    assert "keep_open_group" in keep_open_group(raw, history).steps
