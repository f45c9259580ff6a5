"""Applying a compaction plan: the one path by which messages leave the context (C4, C8, C11).

The order is fixed: **archive** (fsynced JSONL + store), **summarise**, **remove**. A failure at any step
leaves the messages where they were. Plans come from the pure :mod:`contextmem.compaction.plans`; every
removal — the proactive check, turn and budget trims, task folding, summarisation, emergencies,
``clear`` — is a plan given to :meth:`PlanApplier.apply`, which runs under the caller's session lock.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Protocol

from ..archive import DialogArchive
from ..budget import CountedHistory
from ..compaction.plans import (
    Plan,
    keep_open_group,
    plan_budget_trim,
    plan_emergency,
    plan_fold_task,
    plan_repair,
    plan_turn_trim,
)
from ..errors import ArchiveError, BudgetExceededError, MessageStateError, SessionConflictError
from ..messages import Message
from ..offloop import off_loop, texts_bytes
from ..settings import Settings
from ..store.base import SessionState
from ..summarize import Summarizer, Summary
from ..summarize.digest import fact_digest
from .session import LiveSession
from .types import EventKind, summary_to_json

__all__ = ["PlanApplier", "blocked_by_archive", "emergency_plan"]


class Emit(Protocol):
    """Publishes an engine event: ``emit(kind, **data)``."""

    def __call__(self, kind: EventKind, **data: Any) -> None: ...


@dataclass(eq=False)
class PlanApplier:
    """Applies plans to one :class:`LiveSession`, archiving before anything leaves.

    ``failure`` is the last archive failure since :meth:`reset_failure`: a request that cannot fit because
    nothing could leave says why. ``archive_error`` is the last one until an archive write succeeds again
    (``/context`` shows it). ``has_listeners`` says whether anyone would see an event's extractive
    summary (it is only computed then); ``on_pending`` is called when messages left with only an
    extractive summary, so the LLM summary can catch up in the background.
    """

    session: LiveSession
    archive: DialogArchive | None  # None: the store is the archive (a store every host shares)
    extractor: Summarizer
    _: KW_ONLY
    emit: Emit
    has_listeners: Callable[[], bool]
    on_pending: Callable[[], None]
    reload: Callable[[SessionState | None], Awaitable[None]]
    failure: ArchiveError | None = field(default=None, init=False)
    archive_error: ArchiveError | None = field(default=None, init=False)
    changes: int = field(default=0, init=False)  # plans applied and summaries replaced: prefix rewrites
    conflicts: int = field(default=0, init=False)  # plans given up because another writer moved the session
    _repairing: bool = field(default=False, init=False)

    def reset_failure(self) -> ArchiveError | None:
        failure, self.failure = self.failure, None
        return failure

    def archive_failed(self, exc: ArchiveError, event: EventKind, **data: Any) -> None:
        """Record a failed archive write (``failure`` and ``archive_error``) and emit ``event`` with it."""
        self.failure = self.archive_error = exc
        self.emit(event, error=str(exc), **data)

    async def apply(
        self,
        plan: Plan,
        reason: str,
        *,
        summary: Summary | None = None,
        summarize: bool = True,
        keep_open: bool = True,
    ) -> bool:
        """Apply ``plan`` (the caller holds the session lock). False, with everything kept, if archiving
        failed or another writer changed the session since the plan was made (then it is reloaded).

        The open group at the end (a tool still running, maybe another writer's) never leaves and is never
        cut (:func:`~contextmem.compaction.plans.keep_open_group`) unless ``keep_open`` is false (an undo of
        this writer's own newest message). The store archives only if the session is still where the plan
        saw it (``expected_next_seq``): an append that landed meanwhile makes this a no-op and a reload.
        """
        live = self.session
        if keep_open:
            plan = keep_open_group(plan, live.history.messages)
        if plan.empty:
            return True
        store, ns, sid = live.store, live.namespace, live.session_id
        before = live.history.total
        prior = live.summary
        self.emit("compaction_started", reason=reason, leaving=len(plan.drop), steps=list(plan.steps))
        async with store.lock(ns, sid):
            done = await self._apply_locked(plan, reason, summary, summarize)
        if isinstance(done, SessionState | SessionConflictError):  # another writer moved the session
            self.conflicts += 1
            await self.reload(
                done if isinstance(done, SessionState) else None
            )  # outside the lock: it may repair
            return False
        if done is None:
            return False
        dropped, refs = done
        # A digest of what left, for long-term memory (M2); listeners write it off the event loop.
        digest = ""
        if dropped and summarize and self.has_listeners():
            left = await self.extract(None, dropped)
            digest = fact_digest(left.text, left.lang, previous=prior.text if prior else None)
        self.emit(
            "compaction_finished",
            reason=reason,
            archived=len(plan.drop),
            tokens_before=before,
            tokens_after=live.history.total,
            archive=refs,
            digest=digest,
        )
        if live.pending:
            self.on_pending()
        return True

    async def _apply_locked(
        self, plan: Plan, reason: str, summary: Summary | None, summarize: bool
    ) -> tuple[list[Message], list[str]] | SessionState | SessionConflictError | None:
        """:meth:`apply` under the session's compaction lock: what left and the archive refs; the store's
        state or the conflict when another writer moved the session; ``None`` when archiving failed."""
        live = self.session
        store, ns, sid = live.store, live.namespace, live.session_id
        state = await store.open_session(ns, sid)
        if state.next_seq != live.next_seq or [m.seq for m in state.live] != live.seqs:
            return state
        msgs = live.history.messages
        leaving = [(live.seqs[i], live.original(i)) for i in plan.drop]
        refs: list[str] = []
        if self.archive is not None:  # else the store is the archive: its rows keep every original
            # A message whose form was cut had its original archived then; archive the rest now.
            unarchived = [(s, m) for s, m in leaving if s not in live.originals]
            unarchived += [
                (live.seqs[i], msgs[i]) for i in plan.rewrite if live.seqs[i] not in live.originals
            ]
            try:
                if unarchived:  # large originals are encoded and written off the event loop
                    size = texts_bytes(m for _, m in unarchived)
                    refs.append(str(await off_loop(size, self.archive.append, sid, unarchived, reason)))
                    self.archive_error = None
            except ArchiveError as exc:
                self.archive_failed(exc, "archive_failed", reason=reason)
                return None
        # Summaries read what the model saw (a cut result keeps its head, tail and path); the
        # originals went to the archive above.
        dropped: list[Message] = [msgs[i] for i in plan.drop]
        new_summary = summary
        if new_summary is None and dropped and summarize:
            new_summary = await self.extract(live.summary, dropped, archive_refs=refs)
        originals = dict(live.originals)
        for i in plan.rewrite:
            originals.setdefault(live.seqs[i], msgs[i])
        for seq, _ in leaving:
            originals.pop(seq, None)
        try:
            await store.archive(
                ns,
                sid,
                [s for s, _ in leaving],
                summary=summary_to_json(live.summary if new_summary is None else new_summary),
                meta=live.meta(cut=originals),
                expected_next_seq=live.next_seq,
            )
        except SessionConflictError as exc:  # an append landed since the check above: plan again
            return exc
        for i, new in plan.rewrite.items():  # a cut form; its original is in the archive already
            with contextlib.suppress(MessageStateError):  # a writer that broke in archived it: it left
                await store.replace(ns, sid, live.seqs[i], new)
        if new_summary is not None:
            live.summary = new_summary
        if summary is None and dropped and summarize:
            live.pending.extend(dropped)
        live.originals = originals
        live.seqs = [live.seqs[i] for i in plan.keep]
        live.history = CountedHistory(live.counter, [plan.rewrite.get(i, msgs[i]) for i in plan.keep])
        self.changes += 1
        return dropped, refs

    async def extract(
        self, previous: Summary | None, messages: Sequence[Message], *, archive_refs: Sequence[str] = ()
    ) -> Summary:
        """The extractive summary of ``messages`` after ``previous``: every text is read and redacted, so
        off the event loop when they are large (:func:`~contextmem.offloop.off_loop`)."""
        return await off_loop(
            texts_bytes(messages), self.extractor.extract, previous, messages, archive_refs=archive_refs
        )

    async def repair(self) -> None:
        """A loaded history that breaks the tool-pair rule (:func:`~contextmem.compaction.plans.plan_repair`):
        its broken groups and stray results leave, archived first and not summarised."""
        plan = plan_repair(self.session.history.messages)
        if not plan.empty and not self._repairing:
            self._repairing = True  # a conflict while repairing reloads, which must not repair again
            try:
                if await self.apply(plan, "repair", summarize=False):
                    self.emit("repaired", archived=len(plan.drop))
            finally:
                self._repairing = False

    async def replace_summary(self, summary: Summary) -> None:
        """The summary the model sees becomes ``summary`` (nothing leaves); stored, and counted as a change
        of what was sent (the caller holds the session lock)."""
        live = self.session
        live.summary = summary
        await live.store.set_meta(live.namespace, live.session_id, summary=summary_to_json(summary))
        self.changes += 1

    async def fold_task(self) -> int:
        """C14: the newest turn's tool steps leave once it ended in a reply (archived, not summarised:
        the reply carries the outcome). Returns how many messages left."""
        plan = plan_fold_task(self.session.history.messages)
        if plan.empty:
            return 0
        return len(plan.drop) if await self.apply(plan, "fold_task", summarize=False) else 0

    async def undo(self, plan: Plan, reason: str) -> bool:
        """Apply ``plan`` as an undo (the caller holds the session lock): what leaves is archived, never
        summarised (an undo is not history worth remembering), may be this writer's own open group, and
        is marked undone so no background summary folds it in. False as :meth:`apply`."""
        live = self.session
        leaving = [live.seqs[i] for i in plan.drop]
        if not await self.apply(plan, reason, summarize=False, keep_open=False):
            return False
        live.undone.update(leaving)
        return True

    async def clear(self) -> int:
        """Everything leaves (archived first, not summarised) and the summary is reset; the summary of it
        all goes out with the ``cleared`` event, and its facts (``digest``) to long-term memory. Raises
        :class:`ArchiveError` (nothing cleared) if the archive refused."""
        live = self.session
        n = len(live.history)
        if live.summary is not None or n:
            everything = await self.extract(live.summary, live.history.messages)
            digest = fact_digest(everything.text, everything.lang)
            self.emit("cleared", messages=n, summary=everything.render(), digest=digest)
        if not await self.apply(Plan((), tuple(range(n)), steps=("clear",)), "clear", summarize=False):
            raise ArchiveError("could not archive the session before clearing it; nothing was cleared")
        live.summary = live.base = None
        live.pending = []
        await live.store.set_meta(live.namespace, live.session_id, summary="")
        return n - len(live.history)  # a tool still running stays (its results are on their way)

    async def emergency(self, settings: Settings, stage: int, budget: int, error: BaseException) -> None:
        """C11, after the provider reported an overflow: stage 1 first emits ``overflow`` with a summary
        of everything and its facts (``digest``, for long-term memory), then every stage applies its plan."""
        live = self.session
        if stage == 1:
            snapshot = await self.extract(live.summary, live.history.messages)
            digest = fact_digest(snapshot.text, snapshot.lang)
            self.emit("overflow", error=str(error)[:300], summary=snapshot.render(), digest=digest)
        await self.apply(emergency_plan(settings, live.history.messages, stage, budget), f"emergency_{stage}")

    async def proactive_check(
        self, settings: Settings, budget: Callable[[], int], age: Callable[[], Awaitable[None]]
    ) -> None:
        """Before a call (C6, C7, C10): over ``agent_max_context_turns`` the oldest turns leave; over the
        history ``budget()`` (re-read after each step, as the summary grows) the oldest turns that must;
        and if the newest turn alone is over it, a certain overflow, it is shrunk by emergency stages.

        Each of these rewrites a prefix the provider has cached, so a step is taken large and rarely: once
        one is due, older tool results get their tighter cut too (``age``), and over budget the oldest
        turns leave until history is within ``compact_target_ratio`` of its budget. Within budget and
        under the turn limit nothing changes, and the request extends the previous one.
        """
        history = self.session.history
        turns = settings.agent_max_context_turns
        over_turns = len(history.starts) > turns
        if not over_turns and history.total <= budget():
            return  # nothing is due: the request extends the previous one
        if over_turns:
            await self.apply(plan_turn_trim(history.messages, turns), "turn_trim")
        await age()
        for _ in range(4):  # the summary may grow as messages leave; re-check a few times
            history, limit = self.session.history, budget()
            target = int(limit * settings.compact_target_ratio)
            if history.total <= target:
                break
            plan = plan_budget_trim(history.messages, history.counts, limit, target)
            if plan.empty or not await self.apply(plan, "budget_trim"):
                break
        for stage in (1, 2):
            history, limit = self.session.history, budget()
            if history.total <= limit:
                break
            await self.apply(emergency_plan(settings, history.messages, stage, limit), "proactive_emergency")


def emergency_plan(settings: Settings, messages: Sequence[Message], stage: int, budget: int) -> Plan:
    """C11's caps (10,000 chars, 5 turns), but never more than half the history budget per message,
    so a capped message leaves room for the rest (a character is at most about one token)."""
    max_chars = max(400, min(settings.emergency_max_chars, budget // 2))
    return plan_emergency(messages, stage, max_chars=max_chars, max_turns=settings.emergency_max_turns)


def blocked_by_archive(failure: ArchiveError, exc: BudgetExceededError) -> ArchiveError:
    """The error of a request that did not fit because what had to leave could not be archived: the
    archive's cause first, then the budget it broke, then the archive's Fix (never a request that leaves
    live turns out without a summary: see :func:`~.request.assemble`)."""
    cause, _, fix = str(failure).rpartition(" Fix: ")
    if not cause:
        cause, fix = str(failure), "make the workspace's dialog/ directory writable and free disk space."
    return ArchiveError(
        f"{cause} The request would need {exc.needed} tokens with every live message but the context "
        f"window is {exc.budget}, and no turn is left out of it without a summary, so none was built. "
        f"Fix: {fix}"
    )
