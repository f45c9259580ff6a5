"""Background summarisation (SPEC C8, C9): the LLM summary catches up off the request path.

When messages leave on the synchronous path (the proactive check before a call), the summary is
updated at once by the deterministic extractive summariser and the messages are queued
(:attr:`LiveSession.pending`); a background round then folds everything queued into the summary with
the LLM (incrementally: previous summary + new messages, in chunks a small model can take), replacing the
extractive stand-in. The asynchronous path after a turn keeps its messages live until their LLM summary
is ready, then swaps them out through the one plan application. One background task at a time; a
trigger while it runs is coalesced into its next round.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..budget import CountedHistory, Window
from ..compaction.plans import Plan, plan_summarize
from ..messages import Message
from ..settings import Settings
from ..summarize import Summarizer, Summary
from ..tokens import MessageCounter
from .apply import PlanApplier
from .session import LiveSession
from .types import summary_to_json

__all__ = ["NoLLM", "Scheduler", "fold_in_chunks", "summarize_plan", "summarize_round"]

logger = logging.getLogger("contextmem.engine")


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


async def summarize_round(
    live: LiveSession,
    applier: PlanApplier,
    lock: asyncio.Lock,
    summarizer: Summarizer,
    *,
    plan: Callable[[], Plan],
    chunk_tokens: int,
    instruction: str | None,
) -> int:
    """Fold the queued messages (and ``plan()``'s older live part) into the summary with the LLM.

    The model works outside ``lock``; messages that left meanwhile are folded in extractively, and live
    messages that are still there leave through ``applier`` once their summary exists. Returns how many
    messages the round summarised.
    """
    async with lock:
        pending = list(live.pending)
        candidates = [(live.seqs[i], live.history.messages[i]) for i in plan().drop]
        base = live.base
    if not pending and not candidates and instruction is None:
        return 0
    leaving = pending + [m for _, m in candidates]
    folded = await fold_in_chunks(
        summarizer, live.counter, chunk_tokens, base, leaving, instruction=instruction
    )
    if folded.source != "llm":
        applier.emit("summary_fallback", reason=folded.fallback_reason or "model unusable")
    async with lock:
        still = {seq for seq, _ in candidates} & set(live.seqs)
        live_plan = Plan(
            tuple(i for i, s in enumerate(live.seqs) if s not in still),
            tuple(i for i, s in enumerate(live.seqs) if s in still),
            steps=("summarize",),
        )
        rest = live.pending[len(pending) :]  # left the context while the model was working
        new_summary = applier.extractor.extract(folded, rest) if rest else folded
        if live_plan.empty:
            live.summary = new_summary
            await live.store.set_meta(live.namespace, live.session_id, summary=summary_to_json(new_summary))
        elif not await applier.apply(live_plan, "summarize", summary=new_summary):
            return 0
        live.base = folded
        live.pending = rest
    return len(pending) + len(still)


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
        raise RuntimeError("the extractive summariser called a model")

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the extractive summariser called a model")
