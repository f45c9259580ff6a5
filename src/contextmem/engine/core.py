"""The context engine (C4–C13): one session, and the only assembler of what a model sees.

:class:`ContextEngine` is the shell around the pure core. It decides *when*; the pure functions decide
*what*: :mod:`contextmem.budget` sizes the window (:func:`~contextmem.budget.fit_to_model`) and its
regions, :mod:`contextmem.compaction` plans. Its collaborators, one job each:

* :mod:`.session` — the live state (history with counts, seqs, cut originals, summary), mirroring the store;
* :mod:`.apply` — applying a plan, the one path by which messages leave: archive, summarise, remove;
* :mod:`.apply_offload` and :mod:`.files` — old tool results to ``tool_results/``, and their expiry;
* :mod:`.rounds` and :mod:`.background` — the LLM summary, caught up off the request path, one round at
  a time, applied at once or held;
* :mod:`.inspect` — ``/context`` stats and :meth:`ContextEngine.verify`;
* :mod:`.writer` — appending when other processes (or hosts) write the same session: conditional on the
  tail, never after another writer's open tool call until its results or its lease's end.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Sequence
from typing import Any, Unpack

from ..archive import DialogArchive
from ..budget import CountedHistory, RequestEstimate, Window, WindowFit, fit_to_model, fit_window
from ..compaction.plans import plan_restore
from ..errors import BudgetExceededError, CompactionError, InternalError
from ..formats.inputs import MessageInput
from ..llm.base import LearnsWindow, Usage
from ..logs import get_logger
from ..messages import Message, ToolInput, ToolSpec
from ..redaction import redact_data
from ..settings import Settings
from ..store.base import SessionState, SessionStore
from ..summarize import Summarizer, Summary
from ..tokens import Calibration, MessageCounter, get_counter
from ..tokens.counter import REPLY_PRIMING
from .apply import PlanApplier, blocked_by_archive
from .apply_offload import offload_results
from .background import NoLLM, summarize_plan
from .door import check_call_ids, read_input
from .files import cleanup_offloads, resolve_files
from .inspect import context_stats, verify_session
from .overflow_proof import raised_calibration, stated_window
from .removal import pop_newest
from .request import Fixed, Regions, assemble, history_budget, shared_prefix
from .rounds import SummaryRounds
from .session import LiveSession
from .types import CompactResult, ContextStats, EngineEvent, EngineParts, EventKind, Request, VerifyReport
from .writer import BUSY_TIMEOUT, Lease, append_after_tail

__all__ = ["BUILD_ATTEMPTS", "MAX_EMERGENCY_STAGE", "ContextEngine", "Listener"]

logger = get_logger("contextmem.engine")
Listener = Callable[[EngineEvent], None]
MAX_EMERGENCY_STAGE = 3
BUILD_ATTEMPTS = 8  # a build whose compaction lost a race to another writer plans again, this many times


class ContextEngine:
    """Owns one session: history, summary, per-message counts, calibration. Use :meth:`open`.

    The window is fitted to ``llm`` (:func:`~contextmem.budget.fit_to_model`: a local model's 8192
    tokens, not the 50,000-token cap) unless ``window`` is given. Files (the dialog archive, offloaded
    tool results) go to one confined tree, the namespace's own (:func:`~.files.resolve_files`): ``files``
    if given, else ``workspace_dir`` (the namespace's directory), else the namespace's directory under
    ``settings.workspace_path``. ``summary_llm`` writes the summaries (``llm`` unless given; ``None``: the
    extractive summary alone). ``busy_timeout`` bounds how long :meth:`add` waits for another
    writer's open tool calls.
    """

    busy_timeout: float = BUSY_TIMEOUT

    def __init__(
        self, *, store: SessionStore, session_id: str, settings: Settings, **parts: Unpack[EngineParts]
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.namespace = settings.namespace
        self.settings = settings
        self.files = resolve_files(settings, parts.get("workspace_dir"), parts.get("files"))
        self.workspace_dir = self.files.dir
        self.counter = parts.get("counter") or MessageCounter(
            get_counter(settings.tokenizer), image_tokens=settings.image_tokens
        )
        self.llm = llm = parts.get("llm")
        clock = parts.get("clock", time.time)
        writer, timeout = parts.get("summary_llm", llm), settings.summary_timeout_seconds
        summarizer = Summarizer(writer, self.counter, timeout=timeout) if writer is not None else None
        self._extractor = Summarizer(NoLLM(), self.counter)
        self.archive = DialogArchive(self.files, namespace=self.namespace, clock=clock)
        self._clock = clock
        self._live = LiveSession(store, self.namespace, session_id, self.counter)
        self._listeners: list[Listener] = []
        self._lock = asyncio.Lock()
        self._applier = PlanApplier(
            self._live,
            None if store.shared else self.archive,  # a shared store's rows are the archive every host reads
            self._extractor,
            emit=self._emit,
            has_listeners=lambda: bool(self._listeners),
            on_pending=lambda: self._rounds.schedule(),  # noqa: PLW0108 - the rounds are made below
            reload=self._load,
        )
        self._rounds = SummaryRounds(
            self._live,
            self._lock,
            self._applier,
            summarizer,
            plan=lambda force: summarize_plan(self._live.history, self.settings, self.window, force=force),
            chunk_tokens=lambda: self._chunk_tokens,
            emit=self._emit,
        )
        self._emergency_stage = 0
        self._applied_at_build = 0  # PlanApplier.changes when the last request was built
        self._last_request: Request | None = None  # the last request built, to compare the next one with
        self._sent_next_seq = 0  # messages from this seq on were not in the last request built
        self._last_cleanup = 0.0
        self._regions = Regions(self.counter)
        self.window: Window
        self._chunk_tokens: int
        self._fit(parts.get("window"))

    # --- the session's state (owned by LiveSession) --------------------------------------------

    @property
    def history(self) -> CountedHistory:
        return self._live.history

    @property
    def seqs(self) -> list[int]:
        return self._live.seqs

    @property
    def originals(self) -> dict[int, Message]:
        """seq -> original, for live messages whose form was cut (offloaded tool results)."""
        return self._live.originals

    @property
    def summarizer(self) -> Summarizer | None:
        """What writes the LLM summaries (``None``: the extractive summary alone)."""
        return self._rounds.summarizer

    @summarizer.setter
    def summarizer(self, summarizer: Summarizer | None) -> None:
        self._rounds.summarizer = summarizer

    @property
    def summary(self) -> Summary | None:
        return self._live.summary

    @property
    def calibration(self) -> Calibration:
        return self._live.calibration

    # --- lifecycle -----------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        session_id: str,
        *,
        store: SessionStore,
        settings: Settings,
        restore: bool = False,
        **parts: Unpack[EngineParts],
    ) -> ContextEngine:
        """Load (or create) the session. ``restore=True`` applies the restart policy of S1."""
        if "counter" not in parts:  # a process's first count loads the tokenizer (0.3-1.4 s): not on the loop
            await asyncio.to_thread(lambda: get_counter(settings.tokenizer).count_text("warm"))
        engine = cls(store=store, session_id=session_id, settings=settings, **parts)
        await engine._load()
        engine.cleanup_offloads()
        if restore:
            plan = plan_restore(engine.history.messages, engine.settings.agent_max_context_turns)
            await engine._applier.apply(plan, "restore")
            engine._emit("restored", kept=len(engine.history))
        return engine

    async def _load(self, state: SessionState | None = None) -> None:
        """Take the store's state; a stored history that breaks the tool-pair rule is repaired through the
        archive (:func:`~contextmem.compaction.plans.plan_repair`), so no add or build is stuck on it."""
        await self._live.load(state)
        await self._applier.repair()

    def _fit(self, window: Window | None) -> None:
        """Window and summary sizes for these settings and this model; an explicit ``window`` wins."""
        self._use(fit_to_model(self.settings, self.llm), window)

    def _use(self, fit: WindowFit, window: Window | None = None) -> None:
        self.window = window or fit.window
        self._chunk_tokens = fit.summary_chunk_tokens
        for summarizer in (self.summarizer, self._extractor):
            if summarizer is not None:
                summarizer.max_tokens = fit.summary_max_tokens

    def reconfigure(self, settings: Settings, *, window: Window | None = None) -> None:
        """Use ``settings`` from the next ``build`` on (``/config``): window and summary sizes too."""
        self.settings = settings
        self._fit(window)

    async def close(self) -> None:
        await self.wait_idle()

    def subscribe(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def _emit(self, kind: EventKind, **data: Any) -> None:
        """Log and publish an event; its data is redacted first, so no secret reaches logs or listeners."""
        data = redact_data(data)
        event = EngineEvent(kind, self.namespace, self.session_id, data)
        logger.info("%s %s/%s %s", kind, self.namespace, self.session_id, data)
        for listener in list(self._listeners):
            try:
                listener(event)
            except Exception:  # a listener must never break the engine
                logger.exception("event listener failed on %s", kind)

    # --- appending -----------------------------------------------------------------------------

    async def add(self, *messages: MessageInput) -> None:
        """Append messages as the caller has them (values, OpenAI or Anthropic dicts, an SDK's reply as it
        came: :mod:`contextmem.formats.inputs`), validated, then stored. A malformed message, or text UTF-8
        cannot encode, is a :class:`MessageFormatError` naming it, before anything is stored; one over
        ``max_message_bytes`` a :class:`MessageTooLargeError`; a tool call reusing the id of a live call a
        :class:`HistoryError` (:func:`~.door.check_call_ids`). Other processes
        may write the same session: see :mod:`contextmem.engine.writer` (:class:`HistoryError`,
        :class:`SessionBusyError`; the engine stays reloaded and usable)."""
        msgs = await read_input(messages, self.settings.max_message_bytes, self.counter)
        if not msgs:
            return
        async with self._lock:
            live = self._live
            check_call_ids(live.history.messages, msgs)
            seqs = await append_after_tail(
                self.store,
                self.namespace,
                self.session_id,
                msgs,
                view=live.tail_view,
                reload=self._load,
                own=live.own,
                busy_timeout=self.busy_timeout,
                lease=Lease(self.settings.tool_call_lease_seconds, live.created_at, self._clock),
                on_closed=lambda ids: self._emit("lease_expired", calls=ids),
                closed=live.closed_calls,
            )
            live.appended(msgs, seqs)

    # --- estimating and building the request (C4, C5, C6, C7, C10) ------------------------------

    def _estimate(self, fixed: Fixed) -> RequestEstimate:
        live = self._live
        return self._regions.estimate(fixed, live.summary, live.history, self.window, live.calibration.ratio)

    def _budget(self, fixed: Fixed) -> int:
        return history_budget(self._estimate(fixed), self.window, self._live.calibration.ratio)

    def _fixed(self, system_prompt: str, tools: Sequence[ToolInput]) -> Fixed:  # each tool: ToolSpec.of
        return self._regions.fixed(
            system_prompt, [ToolSpec.of(t, f"tools[{i}]") for i, t in enumerate(tools)]
        )

    def estimate(self, system_prompt: str = "", tools: Sequence[ToolInput] = ()) -> RequestEstimate:
        return self._estimate(self._fixed(system_prompt, tools))

    async def build(self, system_prompt: str = "", tools: Sequence[ToolInput] = ()) -> Request:
        """What to send now: offload old tool results, then (if over budget) compact, then assemble.

        ``tools``: specs, OpenAI or Anthropic tool dicts, SDK tool objects (:meth:`ToolSpec.of`). They and
        the system prompt are counted once per call; after each step only what it changed is re-counted
        (the summary, if it grew; the history keeps its own total).
        Raises :class:`BudgetExceededError` only when the system prompt, tools, reserve and the newest
        user message alone cannot fit, and :class:`ArchiveError` (path, cause, fix) when the live messages
        do not fit because the archive failed, so nothing could leave: a request never leaves a live turn
        out without a summary. An archive failure that costs nothing (everything still fits) is reported
        by :meth:`stats` (``archive_error``) and the ``archive_failed`` event.
        """
        async with self._lock:
            fixed = self._fixed(system_prompt, tools)
            for attempt in range(BUILD_ATTEMPTS):
                conflicts = self._applier.conflicts
                self._applier.reset_failure()
                await self._prepare(fixed)
                try:
                    request = self._assemble(fixed, all_live=True)
                    self._last_request = shared_prefix(self._last_request, request, self._live.history)
                    return self._last_request
                except BudgetExceededError as exc:
                    failure = self._applier.reset_failure()
                    if failure is not None:  # it would have fit had the archive taken what must leave
                        raise blocked_by_archive(failure, exc) from exc
                    if self._applier.conflicts == conflicts or attempt == BUILD_ATTEMPTS - 1:
                        raise
                    # Another writer moved the session while this one compacted: plan again on its state,
                    # after a jittered pause (10 ms doubling), so busy writers stop colliding in step.
                    await asyncio.sleep(0.01 * 2**attempt * random.uniform(0.5, 1.0))
            raise InternalError("a build attempt neither returned nor raised")

    async def _prepare(self, fixed: Fixed) -> None:
        """Offload, then compact when due (the caller holds ``_lock``)."""

        async def offload(after_seq: int = 0) -> None:
            budget = self._budget(fixed)
            await offload_results(
                self._applier,
                self.settings,
                self.files,
                budget,
                after_seq=after_seq,
                sent_seq=self._sent_next_seq,
            )

        async def ride_along() -> None:
            """What waits for a break of the cached prefix: a held rewording of the summary, and the
            tighter cut of older tool results."""
            await self._rounds.ride_along()
            await offload()

        # What the model has seen changes only where the cached prefix breaks anyway: something was
        # applied since the last request (a background summary), or the check below compacts now.
        if self._applier.changes == self._applied_at_build:
            await offload(self._sent_next_seq)
        else:
            await ride_along()
        await self._applier.proactive_check(self.settings, lambda: self._budget(fixed), ride_along)
        self._applied_at_build, self._sent_next_seq = self._applier.changes, self._live.next_seq

    def assemble(
        self, system_prompt: str = "", tools: Sequence[ToolInput] = (), *, fit: bool = True
    ) -> Request:
        """The request as it stands (:func:`~.request.assemble`, the one assembler); changes nothing.
        ``fit=False``: the whole live history, even where it is over the budget (a session's contents
        between two builds, not a request to send)."""
        return self._assemble(self._fixed(system_prompt, tools), fit=fit)

    def _assemble(self, fixed: Fixed, *, fit: bool = True, all_live: bool = False) -> Request:
        est = self._estimate(fixed)
        return assemble(
            self._live.history,
            fixed,
            est,
            budget=history_budget(est, self.window, self._live.calibration.ratio) if fit else None,
            summary=self._regions.summary(self._live.summary)[0],
            first_user=self.settings.summary_injection == "first_user",
            counter=self.counter,
            all_live=all_live,
        )

    def record_usage(self, request: Request, usage: Usage | object | None) -> None:
        """Calibrate the estimate against the prompt tokens the provider reported for ``request`` (C2), and
        add the call to the session's usage totals (``stats().usage``; event ``usage``). ``usage`` is the
        reply's usage as it came (:meth:`Usage.of`): OpenAI's ``completion.usage`` or Responses
        ``response.usage``, Anthropic's ``message.usage``, a dict of one, or a :class:`Usage`; ``None``
        records nothing; another shape is a :class:`MessageFormatError`. Prompt tokens include cached ones
        (for Anthropic, its cache reads and writes are added to ``input_tokens``)."""
        live, got = self._live, Usage.of(usage)
        if got is not None and got.prompt_tokens > 0:
            live.calibration = live.calibration.observe(
                request.estimate.counted + REPLY_PRIMING, got.prompt_tokens
            )
            live.usage = totals = live.usage.add(got, request)
            self._emit(
                "usage",
                prompt=got.prompt_tokens,
                cached=got.cached_tokens,
                ratio=round(totals.cache_ratio, 4),
                expected_ratio=round(totals.expected_cache_ratio, 4),
                calls=totals.calls,
            )
        self._emergency_stage = 0

    # --- removals: every one is a plan applied by PlanApplier --------------------------------------

    async def pop_newest(self) -> Message | None:
        """Remove the newest live message (an undo, e.g. a framework session's ``pop_item``): archived
        first, never summarised; returns its original form, ``None`` for an empty history. Never waits
        for a background summary (a round that folded the message is discarded). See
        :func:`contextmem.engine.removal.pop_newest`."""
        return await pop_newest(self._applier, self._lock)

    async def fold_turn(self) -> int:
        """C14: once the newest turn ended in a reply, its tool steps leave the context (archived first,
        not summarised: the reply carries the outcome). Returns how many messages left."""
        async with self._lock:
            return await self._applier.fold_task()

    async def handle_overflow(
        self, error: BaseException, system_prompt: str = "", tools: Sequence[ToolInput] = ()
    ) -> Request:
        """The provider said the request overflowed: shrink by the next emergency stage and rebuild.

        Stage 1 first folds everything into the summary (and emits ``overflow`` with it for long-term
        memory), then caps and trims; stage 2 keeps only the newest user message; stage 3 clears.
        Raises :class:`CompactionError` when no stage is left — never loops.
        """
        self._learn_window(error)
        fixed = self._fixed(system_prompt, tools)
        before = self._estimate(fixed).counted
        self._raise_calibration(before)
        while self._emergency_stage < MAX_EMERGENCY_STAGE:
            self._emergency_stage += 1
            stage = self._emergency_stage
            async with self._lock:
                await self._applier.emergency(self.settings, stage, self._budget(fixed), error)
            try:
                request = self._assemble(fixed)
            except BudgetExceededError:
                continue
            if request.estimate.counted < before:
                return request
        raise CompactionError(
            f"the provider still reports an overflow ({str(error)[:200]}) after every emergency stage. "
            "Fix: shorten the system prompt or tool definitions, or raise context_window."
        ) from error

    def _raise_calibration(self, counted: int) -> None:
        """An overflow proves a calibration floor (:func:`~.overflow_proof.raised_calibration`); hold it."""
        if (raised := raised_calibration(self._live.calibration, self.window, counted)) is not None:
            self._live.calibration = raised
            self._emit("calibration_raised", ratio=round(raised.ratio, 4), counted=counted)

    def _learn_window(self, error: BaseException) -> None:
        """A window the overflow states (:func:`~.overflow_proof.stated_window`) is planned against from
        now on, by this session (refitted, ``proven``) and by a :class:`~contextmem.llm.base.LearnsWindow`
        LLM."""
        if (limit := stated_window(error, self.window)) is None:
            return
        if isinstance(self.llm, LearnsWindow):
            self.llm.learn_window(limit)
        self._use(fit_window(self.settings, limit, self.window.max_tokens, proven=True))
        self._emit("window_learned", context_window=limit, max_tokens=self.window.max_tokens)

    async def clear(self) -> int:
        """``/context clear``: everything leaves (archived first); the summary goes to memory and is reset.

        Never waits for a background summary: a held one is dropped, a running one is discarded when it
        finishes (it folded what was cleared)."""
        self._rounds.drop_held()
        async with self._lock:
            seqs = list(self._live.seqs)
            n = await self._applier.clear()
            self._live.undone.update(seqs)
            return n

    # --- background summarisation (C8, C9) -------------------------------------------------------

    async def end_turn(self) -> None:
        """Call after each turn: starts (or coalesces into) the background summarisation when due."""
        self._emergency_stage = 0
        self.cleanup_offloads(throttle=3600)
        self._rounds.schedule_due()

    def hold_summaries(self, hold: bool = True) -> None:
        """Hold finished background summaries for :meth:`apply_summary` instead of applying them at once.

        For a caller whose view of the session must not change between its calls (a framework
        session): the live history and the summary then change only by its own adds and pops, by its
        ``build`` (which may compact) and when it calls :meth:`apply_summary`. One round is held at a
        time; the next one starts after it was applied (:class:`~.rounds.SummaryRounds`).
        """
        self._rounds.hold(hold)

    async def apply_summary(self) -> bool:
        """Apply the held background summary, if one finished (:meth:`hold_summaries`); True if one was.
        Starts the next round if one is due."""
        return await self._rounds.apply_held()

    async def wait_idle(self) -> None:
        """Wait for background summarisation to finish (tests, shutdown, ``/compact``)."""
        await self._rounds.wait_idle()

    async def compact(self, instruction: str | None = None) -> CompactResult:
        """``/compact [instruction]``: summarise the older part now, with the extra instruction (a held
        background summary is superseded: this round folds all it did). Raises :class:`ArchiveError`
        (nothing compacted) when what would leave could not be archived."""
        n = await self._rounds.compact(instruction)
        return CompactResult(n, self.summary.render() if self.summary else "")

    # --- inspection and upkeep ---------------------------------------------------------------------

    def stats(self, system_prompt: str = "", tools: Sequence[ToolInput] = ()) -> ContextStats:
        """What ``/context`` shows; ``archive_error`` is the last archive failure until a write succeeds."""
        failure = None if self._applier.archive_error is None else str(self._applier.archive_error)
        return context_stats(self._live, self.estimate(system_prompt, tools), failure, self.summarizer)

    async def verify(self) -> VerifyReport:
        """Prove nothing was lost: every appended message is live, or archived *and* in the archive: the
        dialog files, or for a store every host shares, the store's own rows (read here, from any host)."""
        return await verify_session(self._live, None if self.store.shared else self.archive)

    def cleanup_offloads(self, *, throttle: float = 0.0) -> int:
        """Delete offloaded tool results older than ``offload_retention_days`` (their originals stay in
        the dialog archive). Returns how many files were removed."""
        now = self._clock()
        if throttle and now - self._last_cleanup < throttle:
            return 0
        self._last_cleanup = now
        return cleanup_offloads(self.files, now - self.settings.offload_retention_days * 86400)
