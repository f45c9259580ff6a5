"""Compaction plans (C6, C7, C9, C11, S1): pure functions of ``(history, counts, budget, settings)``.

A plan says which messages stay (``keep``, ascending indices into the history), which leave
(``drop``: the engine archives them, then summarises them, then removes them), and which stay with a
new, shorter form (``rewrite``). Plans never decide where a cut may fall: they ask
:func:`contextmem.budget.turn_starts`. The engine applies plans; it never re-implements them.

Invariants (property-tested): kept messages keep their order; no kept tool call lacks a result and no
kept result lacks its call, except the open group at the end (a tool still running, maybe another
writer's), which :func:`keep_open_group` puts back into any plan whole and unchanged; the newest user
message is kept; planning again after applying a plan yields an empty plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise

from ..budget import turn_starts
from ..messages import AssistantMessage, Message, ToolMessage, UserMessage, text_of
from ..textcut import cut_keeping
from .pairs import broken, open_group

__all__ = [
    "Plan",
    "keep_open_group",
    "no_change",
    "plan_budget_trim",
    "plan_emergency",
    "plan_fold_task",
    "plan_pop",
    "plan_repair",
    "plan_restore",
    "plan_summarize",
    "plan_turn_trim",
]


@dataclass(frozen=True, slots=True)
class Plan:
    keep: tuple[int, ...]
    drop: tuple[int, ...]
    rewrite: dict[int, Message] = field(default_factory=dict)
    steps: tuple[str, ...] = ()
    fits: bool = True

    @property
    def empty(self) -> bool:
        return not self.drop and not self.rewrite


def no_change(n: int) -> Plan:
    return Plan(tuple(range(n)), ())


def _turns(history: Sequence[Message], keep: Sequence[int]) -> list[list[int]]:
    """``keep`` grouped into turns (a leading group without a user message is its own turn)."""
    view = [history[i] for i in keep]
    starts = turn_starts(view)
    bounds = ([0] if not starts or starts[0] != 0 else []) + starts + [len(view)]
    return [list(keep[a:b]) for a, b in pairwise(bounds) if a < b]


def _compress_turn(history: Sequence[Message], turn: list[int]) -> list[int]:
    """CowAgent's text compression: the turn's first user message and its last plain reply."""
    first = next((i for i in turn if isinstance(history[i], UserMessage)), None)
    last = next(
        (
            i
            for i in reversed(turn)
            if isinstance(history[i], AssistantMessage)
            and not history[i].tool_calls  # type: ignore[union-attr]
            and text_of(history[i].content)
        ),
        None,
    )
    return [i for i in (first, last) if i is not None]


def plan_turn_trim(history: Sequence[Message], max_turns: int) -> Plan:
    """C6: over ``max_turns`` turns, the oldest half of the complete turns leaves."""
    turns = _turns(history, range(len(history)))
    if len(turns) <= max_turns:
        return no_change(len(history))
    complete = len(turns) - 1  # the newest turn may still be running
    leaving = max(1, complete // 2)
    cut = turns[leaving][0]
    return Plan(tuple(range(cut, len(history))), tuple(range(cut)), steps=("turn_trim",))


def plan_budget_trim(
    history: Sequence[Message], counts: Sequence[int], budget: int, target: int | None = None
) -> Plan:
    """C7: while over ``budget``: with < 5 turns compress each past turn to its first user text and
    last reply; with >= 5, the older half of the turns leaves. The newest turn is never touched here;
    if it alone is over budget the plan says ``fits=False`` and the caller escalates.

    ``target`` (below ``budget``) makes the step large and rare, since every step breaks the provider's
    prompt cache: once within ``budget``, the oldest whole turns keep leaving while over ``target``,
    so the turns that follow append to an unchanged prefix for a while. The newest turn always stays.
    """
    keep = list(range(len(history)))
    steps: list[str] = []
    compressed = False

    def total() -> int:
        return sum(counts[i] for i in keep)

    while total() > budget:
        turns = _turns(history, keep)
        if len(turns) >= 5:
            leaving = len(turns) // 2
            keep = [i for t in turns[leaving:] for i in t]
            steps.append("budget_trim_half")
        elif len(turns) > 1 and not compressed:
            keep = [i for t in turns[:-1] for i in _compress_turn(history, t)] + turns[-1]
            compressed = True
            steps.append("budget_compress_turns")
        elif len(turns) > 1:
            keep = turns[-1]  # only the newest turn is left to keep
            steps.append("budget_keep_newest_turn")
        else:
            break
    if target is not None and total() > target:
        turns = _turns(history, keep)
        while len(turns) > 1 and total() > target:
            turns.pop(0)
            keep = [i for t in turns for i in t]
        steps.append("budget_trim_to_target")
    kept = set(keep)
    drop = tuple(i for i in range(len(history)) if i not in kept)
    return Plan(tuple(keep), drop, steps=tuple(steps), fits=total() <= budget)


def plan_summarize(
    history: Sequence[Message],
    counts: Sequence[int],
    *,
    window: int,
    compact_ratio: float,
    reserve_ratio: float,
    message_threshold: int,
) -> Plan:
    """C9: after a turn, when there are more than ``message_threshold`` messages or history is over
    ``compact_ratio * window`` tokens, the older part leaves. The newest whole turns stay, as many as
    fit in ``reserve_ratio * window`` tokens and ``message_threshold // 2`` messages (so a trigger by
    count frees messages even when they are short) — and always at least the newest turn.
    """
    total = sum(counts)
    if len(history) <= message_threshold and total <= compact_ratio * window:
        return no_change(len(history))
    starts = turn_starts(history)
    if not starts:
        return no_change(len(history))
    reserve = reserve_ratio * window
    cut = starts[-1]
    kept = total - sum(counts[:cut])
    for s in reversed(starts[:-1]):  # extend the kept part one whole turn at a time while it fits
        more = sum(counts[s:cut])
        if kept + more > reserve or len(history) - s > message_threshold // 2:
            break
        kept += more
        cut = s
    if cut == 0:
        return no_change(len(history))
    return Plan(tuple(range(cut, len(history))), tuple(range(cut)), steps=("summarize",))


def _emergency_notice(omitted: int) -> str:
    return f"\n[... {omitted} characters cut in an emergency ...]\n"


def _capped(message: Message, max_chars: int) -> Message | None:
    """A copy of a tool result or user text cut to ``max_chars`` (head and tail alike), or None if it
    fits."""
    if not isinstance(message, ToolMessage | UserMessage):
        return None
    text = text_of(message.content)
    if len(text) <= max_chars or not isinstance(message.content, str):
        return None
    cut = cut_keeping(text, _emergency_notice, max_chars=max_chars, ratio=(1, 1))
    if isinstance(message, ToolMessage):
        return ToolMessage(message.tool_call_id, cut, name=message.name, extra=message.extra)
    return UserMessage(cut, name=message.name, extra=message.extra)


def plan_emergency(history: Sequence[Message], stage: int, *, max_chars: int, max_turns: int) -> Plan:
    """C11, after the provider reported an overflow. Stage 1: tool results and user texts capped at
    ``max_chars``, at most ``max_turns`` turns. Stage 2: only the newest user message (capped).
    Stage 3: nothing at all. Each stage keeps tool pairs whole (stage 2 keeps no tool message).
    """
    n = len(history)
    if stage >= 3:
        return Plan((), tuple(range(n)), steps=("emergency_clear",))
    starts = turn_starts(history)
    if stage == 2:
        if not starts:
            return Plan((), tuple(range(n)), steps=("emergency_clear",))
        newest = starts[-1]
        rewrite = {newest: m} if (m := _capped(history[newest], max_chars)) is not None else {}
        return Plan((newest,), tuple(i for i in range(n) if i != newest), rewrite, ("emergency_newest_user",))
    turns = _turns(history, range(n))
    keep = [i for t in turns[-max_turns:] for i in t]
    rewrite = {i: m for i in keep if (m := _capped(history[i], max_chars)) is not None}
    kept = set(keep)
    return Plan(tuple(keep), tuple(i for i in range(n) if i not in kept), rewrite, ("emergency_trim",))


def plan_fold_task(history: Sequence[Message]) -> Plan:
    """Pure: drop the newest turn's tool steps when that turn ended in a plain reply; keep the rest.

    Only whole steps leave (an assistant tool call together with all its results), so no tool pair is
    ever split; the user message and every plain assistant reply stay. An unfinished turn (its last
    message is not a plain reply) is left alone.
    """
    starts = turn_starts(history)
    if not starts or not history:
        return Plan(tuple(range(len(history))), ())
    last = history[-1]
    if not isinstance(last, AssistantMessage) or last.tool_calls:
        return Plan(tuple(range(len(history))), ())
    first = starts[-1]
    drop = tuple(
        i
        for i in range(first, len(history))
        if isinstance(history[i], ToolMessage)
        or (isinstance(history[i], AssistantMessage) and history[i].tool_calls)  # type: ignore[union-attr]
    )
    keep = tuple(i for i in range(len(history)) if i not in set(drop))
    return Plan(keep, drop, steps=("fold_task",))


def plan_pop(history: Sequence[Message]) -> Plan:
    """Pure: an undo. Everything but the newest message stays; the newest leaves (an empty plan for an
    empty history). Its tool pair is the caller's to keep whole: an undo pops one message at a time."""
    n = len(history)
    if n == 0:
        return Plan((), ())
    return Plan(tuple(range(n - 1)), (n - 1,), steps=("pop",))


def plan_restore(history: Sequence[Message], max_turns: int) -> Plan:
    """S1: after a restart keep the newest ``max(3, max_turns // 6)`` turns: user text and final reply."""
    turns = _turns(history, range(len(history)))
    n_keep = max(3, max_turns // 6)
    keep = [i for t in turns[-n_keep:] for i in _compress_turn(history, t)]
    kept = set(keep)
    drop = tuple(i for i in range(len(history)) if i not in kept)
    return Plan(tuple(keep), drop, steps=("restore",)) if drop else no_change(len(history))


def keep_open_group(plan: Plan, history: Sequence[Message]) -> Plan:
    """``plan`` with the open group at the end of ``history`` (:func:`~.pairs.open_group`: a call whose
    tool is still running, this writer's or another's) kept whole and unchanged. Its results will be
    appended right after it; had the call left, they would land with no call before them."""
    tail = open_group(history)
    if tail is None or plan.empty:
        return plan
    held = set(tail.indices)
    if not held & (set(plan.drop) | set(plan.rewrite)):
        return plan
    return Plan(
        tuple(sorted(held.union(plan.keep))),
        tuple(i for i in plan.drop if i not in held),
        {i: m for i, m in plan.rewrite.items() if i not in held},
        (*plan.steps, "keep_open_group"),
        plan.fits,
    )


def plan_repair(history: Sequence[Message]) -> Plan:
    """A stored history that breaks the tool-pair rule (an old crash, a writer that bypassed the checks):
    the broken groups and stray results (:func:`~.pairs.broken`) leave, everything else stays. Applying it
    makes the history valid again; a valid history gives an empty plan."""
    drop = broken(history)
    if not drop:
        return no_change(len(history))
    leaving = set(drop)
    return Plan(tuple(i for i in range(len(history)) if i not in leaving), tuple(drop), steps=("repair",))
