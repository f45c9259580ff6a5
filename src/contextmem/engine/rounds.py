"""When the LLM summary runs, and where a finished round goes: applied at once, or held (C8, C9).

:class:`SummaryRounds` owns one session's background rounds (:mod:`.background` does the work of one):
it starts a round when one is due, runs one at a time (a trigger while it runs is coalesced), and decides
what becomes of a finished round:

* a round that folds live messages is applied at once, unless the caller holds summaries
  (:meth:`SummaryRounds.hold`: a framework session whose view must not move between its calls), which
  then applies it at its own point (:meth:`SummaryRounds.apply_held`);
* a rewording of what already left the context (no live message leaves with it) is held until the
  cached prefix breaks anyway (:meth:`SummaryRounds.ride_along`, from ``build``).

One held round at a time; the next starts once it is applied. ``/compact`` supersedes a held round.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ..compaction.plans import Plan
from ..llm.scheduler import foreground_calls
from ..summarize import Summarizer
from .apply import Emit, PlanApplier
from .background import Folded, Scheduler, apply_folded, fold_round
from .session import LiveSession

__all__ = ["SummaryRounds"]


class SummaryRounds:
    """Background summary rounds of one session. ``plan(force)`` says what is due (the engine's window
    and settings, read when asked); ``chunk_tokens()`` how much one model call takes. With no
    ``summarizer`` (extractive summaries only) nothing runs in the background."""

    def __init__(
        self,
        live: LiveSession,
        lock: asyncio.Lock,
        applier: PlanApplier,
        summarizer: Summarizer | None,
        *,
        plan: Callable[[bool], Plan],
        chunk_tokens: Callable[[], int],
        emit: Emit,
    ) -> None:
        self._live = live
        self._lock = lock
        self._applier = applier
        self.summarizer = summarizer
        self._plan = plan
        self._chunk_tokens = chunk_tokens
        self._emit = emit
        self._scheduler = Scheduler(self._round)
        self._holding = False
        self._held: Folded | None = None

    def schedule(self) -> None:
        """Start (or coalesce into) a round, if there is a model to write it."""
        if self.summarizer is not None:
            self._scheduler.schedule()

    def schedule_due(self) -> None:
        """Start a round when messages wait to be folded or the summarise plan has something to fold."""
        held = self._held
        covered = len(held.pending) if held is not None and not self._holding else 0
        if len(self._live.pending) > covered or not self._plan(False).empty:
            self.schedule()

    def hold(self, hold: bool = True) -> None:
        self._holding = hold

    def drop_held(self) -> None:
        """Forget a held round (``clear`` and ``/compact`` fold all it did)."""
        self._held = None

    async def apply_held(self) -> bool:
        """Apply the held round, if one finished; True if one was. Starts the next round if one is due."""
        folded, self._held = self._held, None
        if folded is None:
            return False
        await self._apply(folded)
        self.schedule_due()
        return True

    async def ride_along(self) -> None:
        """Apply a held rewording now (the caller holds the session lock: the cached prefix breaks anyway)."""
        if self._held is not None and not self._holding:
            folded, self._held = self._held, None
            await apply_folded(self._live, self._applier, folded)

    async def wait_idle(self) -> None:
        await self._scheduler.wait_idle()

    async def compact(self, instruction: str | None) -> int:
        """``/compact``: fold the older part now, the user waiting; returns how many messages it folded.
        Raises the :class:`ArchiveError` (nothing folded) when they could not be archived."""
        await self.wait_idle()
        self._held = None
        if self.summarizer is None:
            plan = self._plan(True)
            async with self._lock:
                self._applier.reset_failure()
                done = await self._applier.apply(plan, "manual_compact")
                self._raise_failure()
            return len(plan.drop) if done else 0
        with foreground_calls():  # the user waits for this one: it goes before background rounds
            folded = await self._fold(instruction, force=True)
        if folded is None:
            return 0
        async with self._lock:
            self._applier.reset_failure()
            n = await apply_folded(self._live, self._applier, folded)
            self._raise_failure()
        return n

    def _raise_failure(self) -> None:
        failure = self._applier.reset_failure()
        if failure is not None:
            raise failure

    async def _round(self) -> None:
        held = self._held
        if held is not None and (self._holding or held.candidates):
            return  # one held round at a time: the next starts once it is applied
        folded = await self._fold(None, force=False)
        if folded is None:
            return
        if self._holding or not folded.candidates:
            self._held = folded
        else:
            self._held = None  # a round that folds live messages covers a held rewording
            await self._apply(folded)

    async def _apply(self, folded: Folded) -> int:
        async with self._lock:
            return await apply_folded(self._live, self._applier, folded)

    async def _fold(self, instruction: str | None, *, force: bool) -> Folded | None:
        assert self.summarizer is not None
        return await fold_round(
            self._live,
            self._lock,
            self.summarizer,
            plan=lambda: self._plan(force),
            chunk_tokens=self._chunk_tokens(),
            instruction=instruction,
            emit=self._emit,
        )
