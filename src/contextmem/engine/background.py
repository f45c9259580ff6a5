"""Background summarisation (C8, C9): the LLM summary catches up off the request path.

When messages leave on the synchronous path (the proactive check before a call), the summary is
updated at once by the deterministic extractive summariser and the messages are queued
(:attr:`LiveSession.pending`); a background round then folds everything queued into the summary with
the LLM (incrementally: previous summary + new messages, in chunks a small model can take), replacing the
extractive stand-in. The asynchronous path after a turn keeps its messages live until their LLM summary
is ready, then swaps them out through the one plan application. One background task at a time; a
trigger while it runs is coalesced into its next round.

A round is two steps: :func:`fold_round` (the model call, outside the session lock) and
:func:`apply_folded` (under it). The engine applies a finished round at once, or, when it holds
summaries (:meth:`ContextEngine.hold_summaries`), keeps it until :meth:`ContextEngine.apply_summary`,
so a caller whose view must not move between its calls (a framework session) chooses when it does.
Popping or clearing never waits for a round: a round that folded an undone message is discarded.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..budget import CountedHistory, Window
from ..compaction.plans import Plan, plan_summarize
from ..errors import InternalError
from ..logs import get_logger
from ..messages import Message
from ..settings import Settings
from ..summarize import Summarizer, Summary
from ..tokens import MessageCounter
from .apply import PlanApplier
from .session import LiveSession

__all__ = [
    "Folded",
    "NoLLM",
    "Scheduler",
    "apply_folded",
    "fold_in_chunks",
    "fold_round",
    "summarize_plan",
]

logger = get_logger("contextmem.engine")


class Scheduler:
    """Runs ``work`` in one background task; a :meth:`schedule` while it runs buys one more round."""

    def __init__(self, work: Callable[[], Awaitable[object]]) -> None:
        self._work = work
        self._task: asyncio.Task[None] | None = None
        self._again = False

    def schedule(self) -> None:
        if self._task is not None and not self._task.done():
            self._again = True
            return
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            self._again = False
            try:
                await self._work()
            except Exception:
                logger.exception("background summarisation failed; the extractive summary stays")
            if not self._again:
                return

    async def wait_idle(self) -> None:
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)


def summarize_plan(
    history: CountedHistory, settings: Settings, window: Window, *, force: bool = False
) -> Plan:
    """What is due for the LLM summary (C8): the older part once the window or message count passes its
    threshold; ``force`` (``/compact``) all but the recent part."""
    return plan_summarize(
        history.messages,
        history.counts,
        window=window.context_window,
        compact_ratio=0.0 if force else settings.compact_threshold_ratio,
        reserve_ratio=settings.reserve_threshold_ratio,
        message_threshold=0 if force else settings.compact_message_threshold,
    )


@dataclass(frozen=True, slots=True)
class Folded:
    """A round's finished LLM summary, not applied yet (:func:`apply_folded` applies it).

    ``summary`` is ``base`` with ``pending`` (the queued messages when the round began, a prefix of
    :attr:`LiveSession.pending`) and the live messages ``candidates`` (their seqs) folded in.
    """

    summary: Summary
    pending: tuple[Message, ...]
    candidates: frozenset[int]


async def fold_round(
    live: LiveSession,
    lock: asyncio.Lock,
    summarizer: Summarizer,
    *,
    plan: Callable[[], Plan],
    chunk_tokens: int,
    instruction: str | None,
    emit: Callable[..., None],
) -> Folded | None:
    """Fold the queued messages (and ``plan()``'s older live part) into a new summary with the LLM.

    Only the snapshot is taken under ``lock``; the model works outside it, so adding, building and
    popping go on meanwhile. ``None`` when there is nothing to fold.
    """
    async with lock:
        pending = tuple(live.pending)
        candidates = [(live.seqs[i], live.history.messages[i]) for i in plan().drop]
        base = live.base
    if not pending and not candidates and instruction is None:
        return None
    leaving = [*pending, *(m for _, m in candidates)]
    folded = await fold_in_chunks(
        summarizer, live.counter, chunk_tokens, base, leaving, instruction=instruction
    )
    if folded.source != "llm":
        emit("summary_fallback", reason=folded.fallback_reason or "model unusable")
    return Folded(folded, pending, frozenset(s for s, _ in candidates))


async def apply_folded(live: LiveSession, applier: PlanApplier, folded: Folded) -> int:
    """Apply a finished round; the caller holds the session lock. Returns how many messages it
    summarised, 0 when it was discarded.

    Discarded (everything stays as it is) when the session moved under it: a message it folded was
    undone (:attr:`LiveSession.undone`: popped or cleared, never to be summarised) or its queued
    messages are no longer queued (a clear). Otherwise the candidates still live leave through
    ``applier`` — but never the newest turn: whatever happened meanwhile, the newest user message and
    what follows it stay live. Messages that left while the model worked are folded in extractively.
    """
    queued = live.pending[: len(folded.pending)]
    if (
        folded.candidates & live.undone
        or len(queued) != len(folded.pending)
        or any(a is not b for a, b in zip(queued, folded.pending, strict=True))
    ):
        logger.info("a background summary was discarded: the session changed while it was made")
        return 0
    starts = live.history.starts
    newest = starts[-1] if starts else 0
    leaving = {i for i, s in enumerate(live.seqs[:newest]) if s in folded.candidates}
    plan = Plan(
        tuple(i for i in range(len(live.seqs)) if i not in leaving),
        tuple(sorted(leaving)),
        steps=("summarize",),
    )
    rest = live.pending[len(folded.pending) :]  # left the context while the model was working
    summary = await applier.extract(folded.summary, rest) if rest else folded.summary
    if plan.empty:
        await applier.replace_summary(summary)
    elif not await applier.apply(plan, "summarize", summary=summary):
        return 0
    live.base = folded.summary
    live.pending = rest
    return len(folded.pending) + len(leaving)


async def fold_in_chunks(
    summarizer: Summarizer,
    counter: MessageCounter,
    chunk_tokens: int,
    base: Summary | None,
    messages: Sequence[Message],
    *,
    instruction: str | None,
) -> Summary:
    """Incremental summary over ``messages`` in chunks of at most ``chunk_tokens`` (one message may be
    alone over it); the ``instruction`` goes with the last chunk."""
    chunks: list[list[Message]] = []
    chunk: list[Message] = []
    size = 0
    for m in messages:
        n = counter.count_message(m)
        if chunk and size + n > chunk_tokens:
            chunks.append(chunk)
            chunk, size = [], 0
        chunk.append(m)
        size += n
    if chunk or not chunks:
        chunks.append(chunk)
    summary = base
    for k, part in enumerate(chunks):
        summary = await summarizer.summarize(
            summary, part, instruction=instruction if k == len(chunks) - 1 else None
        )
    assert summary is not None
    return summary


class NoLLM:
    """The extractive summariser needs no model; this satisfies the type and fails loudly if called."""

    name = "none"

    async def complete(self, *args: Any, **kwargs: Any) -> Any:
        raise InternalError("the extractive summariser called a model")

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        raise InternalError("the extractive summariser called a model")
