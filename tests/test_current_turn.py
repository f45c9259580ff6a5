"""SPEC C5, the current turn (issue 31, item 9): a result the agent just asked for is cut only at
``pruning_recent_msg_max_bytes`` (50,000) or at what the window can hold, whichever is smaller; never at
the budget share that bounds the results of past turns. Measured in ``evals/current_turn.py``.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from contextmem.budget import turn_starts
from contextmem.compaction.offload import (
    FIT_MARGIN,
    MIN_CUT_BYTES,
    Offload,
    _water_level,
    current_turn_caps,
    head_tail,
    plan_offload,
    read_cap,
)
from contextmem.engine import ContextEngine, Request
from contextmem.messages import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage, text_of
from contextmem.messages import orphan_tool_messages as orphans
from contextmem.settings import Settings
from contextmem.testing import InMemorySessionStore
from contextmem.tokens import MessageCounter

from .strategies import histories

COUNTER = MessageCounter()
SYSTEM = "You are a careful coding agent. Use the tools; quote paths exactly."


def _log(n_bytes: int, tag: str = "") -> str:
    lines, size, k = [], 0, 0
    while size < n_bytes:
        line = f"2026-11-26T10:{k % 60:02d}Z INFO {tag}worker[{k % 64}] req={k:06d} ms={k * 37 % 9000}"
        lines.append(line)
        size += len(line) + 1
        k += 1
    return "\n".join(lines)


async def _engine(tmp: Path, **settings: object) -> ContextEngine:
    return await ContextEngine.open(
        "s", store=InMemorySessionStore(), settings=Settings(**settings), workspace_dir=tmp
    )


async def _ask(engine: ContextEngine, *results: str) -> Request:
    calls = tuple(ToolCall(f"call_{k}", "grep", "{}") for k in range(len(results)))
    await engine.add(UserMessage("why is the worker slow?"), AssistantMessage(None, tool_calls=calls))
    await engine.add(*(ToolMessage(c.id, r, name="grep") for c, r in zip(calls, results, strict=True)))
    return await engine.build(SYSTEM)


def _sent(request: Request) -> dict[str, str]:
    return {m.tool_call_id: text_of(m.content) for m in request.messages if isinstance(m, ToolMessage)}


async def test_a_33_kb_result_of_the_current_turn_stays_whole_at_a_50k_window(tmp_path: Path) -> None:
    """The issue's case: a 33.8 KB result at the default 50,000-token window was cut to 17,205 bytes
    (an eighth of the history budget at 3 bytes a token). It is under 50,000 bytes and fits: whole."""
    engine = await _engine(tmp_path)
    big = _log(33_800)
    request = await _ask(engine, big)
    assert engine.window.context_window == 50_000
    assert _sent(request)["call_0"] == big
    assert request.estimate.prompt + request.max_tokens <= 50_000


async def test_over_50000_bytes_the_setting_cuts_it_with_the_full_text_one_read_away(tmp_path: Path) -> None:
    engine = await _engine(tmp_path, context_window=128_000, agent_max_context_tokens=128_000)
    big = _log(80_000)
    kept = _sent(await _ask(engine, big))["call_0"]
    assert 40_000 < len(kept.encode()) <= 50_000
    path = kept.split("saved at ")[1].split(" ")[0]
    assert (tmp_path / path).read_text(encoding="utf-8") == big


async def test_at_the_local_models_8k_window_a_current_result_keeps_what_fits(tmp_path: Path) -> None:
    """At 8,192 tokens (reply 1,024) the share kept about 1.5 KB of it; now it keeps what the window
    holds once the system prompt and the turn's other messages are paid for, head and tail verbatim."""
    engine = await _engine(tmp_path, context_window=8192, max_tokens=1024)
    big = _log(33_800)
    request = await _ask(engine, big)
    kept = _sent(request)["call_0"]
    est = request.estimate
    assert est.prompt + est.max_tokens <= 8192
    assert len(kept.encode()) >= 12_000  # was 1,5xx bytes
    assert est.free < 0.2 * (8192 - 1024)  # the room went to the result
    head, tail = kept.split("\n\n[... ")[0], kept.split("...]\n\n")[-1]
    assert big.startswith(head) and big.endswith(tail)
    path = kept.split("saved at ")[1].split(" ")[0]
    assert (tmp_path / path).read_text(encoding="utf-8") == big


async def test_results_that_do_not_fit_at_all_share_the_room_and_stay_readable(tmp_path: Path) -> None:
    """Two 60 KB results in one step at 8k: within budget, both sent (no orphan call), each cut to about
    the same size around a notice naming its file, which holds the whole text."""
    engine = await _engine(tmp_path, context_window=8192, max_tokens=1024)
    one, two = _log(60_000, "a-"), _log(60_000, "b-")
    request = await _ask(engine, one, two)
    est = request.estimate
    assert est.prompt + est.max_tokens <= 8192
    body = [m for m in request.messages if m.kind != "system"]
    assert orphans(body) == [] and isinstance(body[0], UserMessage)
    sent = _sent(request)
    sizes = [len(sent[c].encode()) for c in ("call_0", "call_1")]
    assert min(sizes) >= 5_000 and max(sizes) - min(sizes) < 0.1 * max(sizes)
    for call, full in (("call_0", one), ("call_1", two)):
        path = sent[call].split("saved at ")[1].split(" ")[0]
        assert (tmp_path / path).read_text(encoding="utf-8") == full


async def test_past_results_keep_the_budget_share(tmp_path: Path) -> None:
    """Once its turn is over and the context compacts, a result is held to the share again (3/8 of the
    history budget in bytes at 8k), so the turns after it keep their room."""
    engine = await _engine(tmp_path, context_window=8192, max_tokens=1024)
    big = _log(33_800)
    await _ask(engine, big)
    await engine.add(AssistantMessage("The worker pool is exhausted."))
    for i in range(12):
        await engine.add(UserMessage(f"and step {i}? " + "more context " * 60), AssistantMessage("ok " * 60))
    request = await engine.build(SYSTEM)
    kept = _sent(request).get("call_0")
    assert kept is None or len(kept.encode()) <= 8192 * 3 // 8


# --- the pure rule ---------------------------------------------------------------------------------


@given(st.lists(st.integers(0, 5_000), max_size=8), st.integers(-100, 20_000))
def test_the_water_level_is_the_largest_that_fits(sizes: list[int], room: int) -> None:
    level = _water_level(sizes, room)
    if level is None:
        assert sum(sizes) <= max(room, 0)
        return
    assert sum(sizes) > max(room, 0) and level >= 0
    assert sum(min(s, level) for s in sizes) <= max(room, 0)
    assert sum(min(s, level + 1) for s in sizes) > max(room, 0)


@given(histories(max_turns=6), st.integers(-200, 20_000), st.integers(1, 60_000))
def test_current_turn_caps_keep_every_invariant(history: list[Message], budget: int, recent: int) -> None:
    """Only the current turn's results get a cap; never above the setting, never below the floor; results
    that fit the room are not cut for the window; cut ones, by their bytes per token, fit the margin."""
    settings = Settings(pruning_recent_msg_max_bytes=recent)
    counts = COUNTER.count_messages(history)
    starts = turn_starts(history)
    start = starts[-1] if starts else 0
    caps = current_turn_caps(history, counts, start, budget, settings)
    results = [i for i in range(start, len(history)) if isinstance(history[i], ToolMessage)]
    assert sorted(caps) == results
    assert all(MIN_CUT_BYTES <= c <= max(recent, MIN_CUT_BYTES) for c in caps.values())
    room = budget - sum(counts[start:]) + sum(counts[i] for i in results)
    if sum(counts[i] for i in results) <= room:
        assert all(c == max(recent, MIN_CUT_BYTES) for c in caps.values())
        return
    est = 0.0
    for i in results:
        size = len(text_of(history[i].content).encode("utf-8", "surrogatepass"))
        est += min(counts[i], caps[i] * counts[i] / max(size, 1)) if caps[i] > MIN_CUT_BYTES else 0
    assert est <= max(room * FIT_MARGIN, 0) + len(results)


@given(st.lists(st.integers(2_000, 120_000), min_size=1, max_size=3), st.integers(2_000, 60_000))
def test_a_cut_current_turn_is_planned_again_to_nothing(sizes: list[int], budget: int) -> None:
    """After its cuts are applied and counted again, the current turn fits its room: no further cut."""
    settings = Settings()
    calls = tuple(ToolCall(f"c{k}", "grep", "{}") for k in range(len(sizes)))
    history: list[Message] = [
        UserMessage("old question"),
        AssistantMessage("old answer"),
        UserMessage("why?"),
        AssistantMessage(None, tool_calls=calls),
        *(ToolMessage(c.id, _log(n, c.id)) for c, n in zip(calls, sizes, strict=True)),
    ]

    def path(i: int) -> str:
        return f"tool_results/{i}.txt"

    plan = plan_offload(history, 2, settings, path, budget=budget, counts=COUNTER.count_messages(history))
    for o in plan:
        m = history[o.index]
        assert isinstance(m, ToolMessage)
        history[o.index] = ToolMessage(m.tool_call_id, head_tail(text_of(m.content), o.limit, o.path))
    again = plan_offload(history, 2, settings, path, budget=budget, counts=COUNTER.count_messages(history))
    assert again == []


# --- issue 51: a result is rewritten at most once after the model read it -------------------------


def _apply(history: list[Message], plan: list[Offload]) -> None:
    for o in plan:
        m = history[o.index]
        assert isinstance(m, ToolMessage)
        history[o.index] = ToolMessage(m.tool_call_id, head_tail(text_of(m.content), o.limit, o.path))


def _step(history: list[Message], sent: int, budget: int, settings: Settings) -> None:
    """What ``build`` plans, pure: the unread results on arrival; over budget (the prefix breaks anyway)
    every result, read ones of the running turn included."""

    def path(i: int) -> str:
        return f"tool_results/{i}.txt"

    start = turn_starts(history)[-1]
    counts = COUNTER.count_messages(history)
    _apply(
        history,
        plan_offload(
            history, start, settings, path, budget=budget, counts=counts, first_new=sent, unseen=sent
        ),
    )
    counts = COUNTER.count_messages(history)
    if sum(counts) > budget:
        plan = plan_offload(
            history, start, settings, path, budget=budget, counts=counts, unseen=sent, cut_read=True
        )
        _apply(history, plan)


@given(st.lists(st.integers(200, 40_000), min_size=2, max_size=7), st.integers(3_000, 30_000))
def test_a_read_result_of_the_running_turn_is_rewritten_at_most_once(sizes: list[int], budget: int) -> None:
    """A running turn of steps, one result each, each planned as ``build`` plans it: once a request carried
    a result, its form changes at most once more (each change breaks the provider's cached prefix)."""
    settings = Settings()
    history: list[Message] = [UserMessage("why is the worker slow?")]
    shown: dict[str, list[str]] = {}  # call id -> the forms requests carried, in order
    sent = 0
    for k, size in enumerate(sizes):
        call = ToolCall(f"c{k}", "grep", "{}")
        history += [AssistantMessage(None, tool_calls=(call,)), ToolMessage(call.id, _log(size, call.id))]
        _step(history, sent, budget, settings)
        for m in history:
            if isinstance(m, ToolMessage):
                forms = shown.setdefault(m.tool_call_id, [])
                if not forms or forms[-1] != m.content:
                    forms.append(text_of(m.content))
        sent = len(history)
    assert all(len(forms) <= 2 for forms in shown.values()), {c: len(f) for c, f in shown.items()}


@given(st.integers(2_000, 40_000), st.integers(1, 4))
def test_a_past_result_is_cut_once_as_it_ages(size: int, later: int) -> None:
    """A past result over the recent threshold goes straight to the old one, not first to the recent one
    and again once it ages past ``pruning_recent_n``."""
    settings = Settings(
        pruning_recent_msg_max_bytes=1_500, pruning_old_msg_max_bytes=1_000, pruning_recent_n=2
    )
    history: list[Message] = [UserMessage("first"), *_one("a", size)]
    cuts: list[int] = []
    for k in range(later):
        history += [UserMessage(f"then {k}"), *_one(f"b{k}", 500)]
        plan = plan_offload(history, turn_starts(history)[-1], settings, lambda i: f"tool_results/{i}.txt")
        cuts += [o.index for o in plan]
        _apply(history, plan)
    whole = len(_log(size, "a").encode())
    assert cuts.count(2) == (1 if whole > 1_500 else min(cuts.count(2), 1))


def _one(call: str, size: int) -> list[Message]:
    return [
        AssistantMessage(None, tool_calls=(ToolCall(call, "grep", "{}"),)),
        ToolMessage(call, _log(size, call)),
    ]


async def test_once_the_running_turn_is_cut_the_next_steps_append(tmp_path: Path) -> None:
    """Hysteresis: when the running turn's results stop fitting, every read one is cut in that request;
    the room it frees holds the next steps' small results, so those requests only append."""
    engine = await _engine(tmp_path, context_window=8_000, max_tokens=1_000, agent_max_context_tokens=8_000)
    await engine.add(UserMessage("why is the worker slow?"))
    previous: list[str] = []
    kinds: list[str] = []
    for k, size in enumerate([8_000, 6_000, 800, 800, 800, 800, 800]):
        call = ToolCall(f"call_{k}", "grep", "{}")
        await engine.add(AssistantMessage(None, tool_calls=(call,)), ToolMessage(call.id, _log(size, str(k))))
        wire = [repr(m) for m in (await engine.build(SYSTEM)).messages]
        if previous:
            kinds.append("append" if wire[: len(previous)] == previous else "break")
        previous = wire
    assert kinds[0] == "break"  # the 6 KB result: the 8 KB one, read, is cut (a log: ~2 bytes a token)
    assert kinds[1:] == ["append"] * 5, kinds


@given(histories(max_turns=6), st.integers(-200, 20_000), st.data())
def test_read_results_go_first_and_all_at_once(
    history: list[Message], budget: int, data: st.DataObject
) -> None:
    """With some of the running turn read (``unseen``): caps stay within the setting and the floor; when
    the turn's results do not fit, every read one over :func:`read_cap` is cut to it, in the same plan."""
    settings = Settings()
    counts = COUNTER.count_messages(history)
    starts = turn_starts(history)
    start = starts[-1] if starts else 0
    unseen = data.draw(st.integers(start, len(history)))
    cut_read = data.draw(st.booleans())
    caps = current_turn_caps(history, counts, start, budget, settings, unseen=unseen, cut_read=cut_read)
    results = [i for i in range(start, len(history)) if isinstance(history[i], ToolMessage)]
    assert sorted(caps) == results
    recent = settings.pruning_recent_msg_max_bytes
    assert all(MIN_CUT_BYTES <= c <= recent for c in caps.values())
    room = budget - sum(counts[start:]) + sum(counts[i] for i in results)
    final = max(MIN_CUT_BYTES, read_cap(budget, settings))
    if sum(counts[i] for i in results) > room or cut_read:
        for i in results:
            if i < unseen and len(text_of(history[i].content).encode("utf-8", "surrogatepass")) > final:
                assert caps[i] == final
