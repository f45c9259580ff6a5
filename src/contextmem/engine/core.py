"""The context engine (SPEC C4–C13): one session's state, and the only assembler of what a model sees.

The order of every removal is fixed: **archive** (fsynced JSONL + store), **summarise**, **remove**.
A failure at any step leaves the messages where they were. Compaction *plans* come from the pure
:mod:`contextmem.compaction` functions; this module only applies them.

Summaries: when messages leave on the synchronous path (the proactive check before a call), the
summary is updated at once by the deterministic extractive summariser, and the dropped messages are
queued; a background task then folds everything queued into the summary with the LLM (incrementally:
previous summary + new messages), replacing the extractive stand-in when done. The asynchronous path
after a turn (C9) keeps its messages live until their LLM summary is ready, then swaps. One background
task at a time; a second trigger while it runs is coalesced into its next round.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..archive import ArchiveProblem, DialogArchive
from ..budget import CountedHistory, RequestEstimate, Window, turn_starts
from ..compaction.offload import head_tail, offload_path, plan_offload
from ..compaction.plans import (
    Plan,
    plan_budget_trim,
    plan_emergency,
    plan_fold_task,
    plan_restore,
    plan_summarize,
    plan_turn_trim,
)
from ..errors import ArchiveError, BudgetExceededError, CompactionError, MessageStateError
from ..formats.openai import from_openai
from ..llm.base import LLM, ToolSpec, Usage
from ..messages import Message, SystemMessage, TextPart, ToolMessage, UserMessage, check_message_text, text_of
from ..redaction import redact_data
from ..safefs import Confined
from ..settings import Settings
from ..store.base import SessionState, SessionStore
from ..summarize import Summarizer, Summary
from ..tokens import Calibration, MessageCounter, get_counter
from ..tokens.counter import MESSAGE_OVERHEAD, REPLY_PRIMING
from .files import cleanup_offloads, resolve_files, write_offload
from .sizing import NoLLM, fold_in_chunks, summary_sizes, window_for
from .types import (
    CompactResult,
    ContextStats,
    EngineEvent,
    EventKind,
    Request,
    VerifyReport,
    summary_from_json,
    summary_to_json,
)
from .writer import BUSY_TIMEOUT, append_after_tail

logger = logging.getLogger("contextmem.engine")
Listener = Callable[[EngineEvent], None]
MAX_EMERGENCY_STAGE = 3


class ContextEngine:
    """Owns one session: history, summary, per-message counts, calibration. Use :meth:`open`.

    Files (the dialog archive, offloaded tool results) go to one confined tree, the namespace's own
    (:func:`~contextmem.engine.files.resolve_files`): ``files`` if given, else ``workspace_dir`` (the
    namespace's directory), else the namespace's directory under ``settings.workspace_path``.
    ``busy_timeout`` bounds how long :meth:`add` waits for another writer's open tool calls.
    """

    busy_timeout: float = BUSY_TIMEOUT

    def __init__(
        self,
        *,
        store: SessionStore,
        session_id: str,
        settings: Settings,
        workspace_dir: str | os.PathLike[str] | None = None,
        files: Confined | None = None,
        llm: LLM | None = None,
        counter: MessageCounter | None = None,
        window: Window | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.namespace = settings.namespace
        self.settings = settings
        self.files = resolve_files(settings, workspace_dir, files)
        self.workspace_dir = self.files.dir
        self.counter = counter or MessageCounter(
            get_counter(settings.tokenizer), image_tokens=settings.image_tokens
        )
        self.window = window or window_for(settings)
        self.llm = llm
        self.summarizer = (
            Summarizer(llm, self.counter, timeout=settings.summary_timeout_seconds)
            if llm is not None
            else None
        )
        self._extractor = Summarizer(NoLLM(), self.counter)
        self._chunk_tokens = settings.summary_chunk_tokens
        self._size_summaries()
        self.archive = DialogArchive(self.files, namespace=self.namespace, clock=clock)
        self._clock = clock
        self.history = CountedHistory(self.counter)
        self.seqs: list[int] = []
        self.originals: dict[int, Message] = {}  # seq -> original, for live messages whose form was cut
        self.summary: Summary | None = None
        self.calibration = Calibration()
        self._next_seq = 1
        self._base: Summary | None = None  # the last LLM-folded summary; pending messages come after it
        self._pending: list[Message] = []  # left the context, summarised only extractively so far
        self._emergency_stage = 0
        self._listeners: list[Listener] = []
        self._lock = asyncio.Lock()
        self._bg: asyncio.Task[None] | None = None
        self._bg_again = False
        self._last_cleanup = 0.0
        self._own: set[int] = set()  # seqs this engine appended (its own open tool calls are not waited for)
        self._archive_failure: ArchiveError | None = None  # the last one during the current build

    # --- lifecycle -----------------------------------------------------------------------------

    @classmethod
    async def open(cls, session_id: str, *, restore: bool = False, **kw: Any) -> ContextEngine:
        """Load (or create) the session. ``restore=True`` applies the restart policy of S1."""
        engine = cls(session_id=session_id, **kw)
        await engine._load()
        engine.cleanup_offloads()
        if restore:
            await engine._apply(
                plan_restore(engine.history.messages, engine.settings.agent_max_context_turns), "restore"
            )
            engine._emit("restored", kept=len(engine.history))
        return engine

    async def _load(self, state: SessionState | None = None) -> None:
        state = state or await self.store.open_session(self.namespace, self.session_id)
        self.history = CountedHistory(self.counter, (s.message for s in state.live))
        self.seqs = [s.seq for s in state.live]
        self._next_seq = state.next_seq
        self._own.intersection_update(self.seqs)
        self.summary = self._base = summary_from_json(state.summary)
        meta = json.loads(state.meta) if state.meta else {}
        self.calibration = Calibration(meta.get("ratio", 1.0), meta.get("samples", 0))
        cut = set(meta.get("cut", ()))
        if cut:
            originals = await self.store.messages(self.namespace, self.session_id, state="live")
            self.originals = {s.seq: s.message for s in originals if s.seq in cut}

    def _meta(self) -> str:
        return json.dumps(
            {
                "ratio": self.calibration.ratio,
                "samples": self.calibration.samples,
                "cut": sorted(self.originals),
            }
        )

    def _size_summaries(self) -> None:
        """Summary budget and chunk size from the settings, shrunk to fit a model with a small window
        (the local one): the previous summary, a chunk of history and the reply share one call."""
        llm_window: int | None = getattr(self.llm, "context_window", None)
        summary_max, self._chunk_tokens = summary_sizes(self.settings, llm_window)
        for summarizer in (self.summarizer, self._extractor):
            if summarizer is not None:
                summarizer.max_tokens = summary_max

    def reconfigure(self, settings: Settings, *, window: Window | None = None) -> None:
        """Use ``settings`` from the next ``build`` on (``/config``): window and summary sizes too."""
        self.settings = settings
        self.window = window or window_for(settings)
        self._size_summaries()

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

    async def add(self, *messages: Message | Mapping[str, Any]) -> None:
        """Append user/assistant/tool messages (values or OpenAI dicts); validated, then stored.

        Text UTF-8 cannot encode is a :class:`MessageFormatError` naming the message, before anything is
        stored. Other processes may write the same session: see :mod:`contextmem.engine.writer`
        (:class:`HistoryError`, :class:`SessionBusyError`; the engine stays reloaded and usable).
        """
        msgs: list[Message] = []
        for i, m in enumerate(messages):
            if isinstance(m, Mapping):
                msgs.append(from_openai(m, index=i))
            else:
                check_message_text(m, f"messages[{i}]")
                msgs.append(m)
        if not msgs:
            return
        async with self._lock:
            seqs = await append_after_tail(
                self.store,
                self.namespace,
                self.session_id,
                msgs,
                view=self._tail_view,
                reload=self._load,
                own=self._own,
                busy_timeout=self.busy_timeout,
            )
            self.history.extend(msgs)
            self.seqs.extend(seqs)
            self._own.update(seqs)
            self._next_seq = seqs[-1] + 1

    def _tail_view(self) -> tuple[Sequence[Message], Sequence[int], int]:
        starts = self.history.starts
        first = starts[-1] if starts else 0
        return self.history.messages[first:], self.seqs[first:], self._next_seq

    # --- building the request (C4, C5, C6, C7, C10) ---------------------------------------------

    def _history_budget(self, system_prompt: str, tools: Sequence[ToolSpec]) -> int:
        """Tokens (as we count them) left for history once the fixed regions are paid for."""
        est = self.estimate(system_prompt, tools)
        budget = self.window.history_budget(system=est.system, summary=est.summary, tool_defs=est.tool_defs)
        # The calibration ratio says how far our counts are from what the provider bills.
        return int((budget - REPLY_PRIMING) / self.calibration.ratio)

    def estimate(self, system_prompt: str = "", tools: Sequence[ToolSpec] = ()) -> RequestEstimate:
        rendered = self.summary.render() if self.summary else ""
        return RequestEstimate(
            system=(MESSAGE_OVERHEAD if system_prompt or rendered else 0)
            + self.counter.count_text(system_prompt),
            summary=self.counter.count_text(rendered),
            history=self.history.total,
            tool_defs=self.counter.count_tools(tools),
            max_tokens=self.window.max_tokens,
            context_window=self.window.context_window,
        )

    async def build(self, system_prompt: str = "", tools: Sequence[ToolSpec] = ()) -> Request:
        """What to send now: offload old tool results, then (if over budget) compact, then assemble.

        Raises :class:`BudgetExceededError` only when the system prompt, tools, reserve and the newest
        user message alone cannot fit, and :class:`ArchiveError` (path, cause, fix) when they could have
        fit but the archive failed, so nothing could leave.
        """
        async with self._lock:
            self._archive_failure = None
            await self._offload(self._history_budget(system_prompt, tools))
            if len(self.history.starts) > self.settings.agent_max_context_turns:
                await self._apply(
                    plan_turn_trim(self.history.messages, self.settings.agent_max_context_turns), "turn_trim"
                )
            for _ in range(4):  # the summary may grow as messages leave; re-check a few times
                budget = self._history_budget(system_prompt, tools)
                if self.history.total <= budget:
                    break
                plan = plan_budget_trim(self.history.messages, self.history.counts, budget)
                if plan.empty or not await self._apply(plan, "budget_trim"):
                    break
            # C10: the newest turn alone is over budget, a certain overflow: shrink it before calling.
            for stage in (1, 2):
                if self.history.total <= self._history_budget(system_prompt, tools):
                    break
                budget = self._history_budget(system_prompt, tools)
                await self._apply(self._emergency_plan(stage, budget), "proactive_emergency")
            try:
                return self.assemble(system_prompt, tools)
            except BudgetExceededError as exc:
                failure, self._archive_failure = self._archive_failure, None
                if failure is None:
                    raise
                # Lead with the cause: the request would have fit had the archive taken what must leave.
                raise ArchiveError(f"{failure} Nothing could leave the context, so: {exc}") from exc

    def assemble(self, system_prompt: str = "", tools: Sequence[ToolSpec] = ()) -> Request:
        """The one assembler: system prompt + summary + history + tools, in the request's order.

        It never changes the session. If the history is still over budget here (archiving failed, so
        nothing could leave), it sends the newest turns that fit: a request never overflows knowingly.
        """
        est = self.estimate(system_prompt, tools)
        budget = self._history_budget(system_prompt, tools)
        history: list[Message] = list(self.history.messages)
        if self.history.total > budget:
            try:
                cut = self.history.fit_cut(budget)
            except BudgetExceededError as exc:
                fixed = est.system + est.summary + est.tool_defs + est.max_tokens + REPLY_PRIMING
                raise BudgetExceededError(
                    exc.needed + fixed, self.window.context_window, "this request"
                ) from exc
            history = history[cut:]
        rendered = self.summary.render() if self.summary else ""
        out: list[Message] = []
        if self.settings.summary_injection == "first_user" and rendered:
            idx = next((i for i, m in enumerate(history) if isinstance(m, UserMessage)), None)
            if idx is not None:
                first = history[idx]
                assert isinstance(first, UserMessage)
                content = (
                    f"{rendered}\n\n{first.content}"
                    if isinstance(first.content, str)
                    else (TextPart(rendered), *first.content)
                )
                history[idx] = UserMessage(content, name=first.name, extra=first.extra)
                rendered = ""
        system_text = "\n\n".join(p for p in (system_prompt, rendered) if p)
        if system_text:
            out.append(SystemMessage(system_text))
        out.extend(history)
        estimate = RequestEstimate(
            est.system,
            est.summary,
            sum(self.counter.count_messages(history)),
            est.tool_defs,
            est.max_tokens,
            est.context_window,
        )
        return Request(tuple(out), tuple(tools), self.window.max_tokens, estimate)

    def record_usage(self, request: Request, usage: Usage) -> None:
        """Calibrate the estimate against the prompt tokens the provider reported (C2)."""
        if usage.prompt_tokens > 0:
            self.calibration = self.calibration.observe(
                request.estimate.prompt + REPLY_PRIMING, usage.prompt_tokens
            )
        self._emergency_stage = 0

    async def _offload(self, budget: int) -> None:
        """C5: cut old tool results to head + tail; full text to tool_results/ (and the original archived)."""
        msgs = self.history.messages
        starts = self.history.starts
        current = starts[-1] if starts else 0

        def path_of(i: int) -> str:
            call_id = getattr(msgs[i], "tool_call_id", "")
            return offload_path(self.namespace, self.session_id, self.seqs[i], call_id)

        # No single result may keep more than half the history budget (~3 bytes a token, conservatively).
        cap = max(1_000, budget * 3 // 2)
        for action in plan_offload(msgs, current, self.settings, path_of, cap_bytes=cap):
            seq = self.seqs[action.index]
            original = self.originals.get(seq, msgs[action.index])
            assert isinstance(original, ToolMessage)
            full = text_of(original.content)
            try:
                if seq not in self.originals:
                    write_offload(self.files, action.path, full)
                    self.archive.append(self.session_id, [(seq, original)], "offload")
            except ArchiveError as exc:
                self._archive_failure = exc
                self._emit("offload_failed", seq=seq, path=action.path, error=str(exc))
                continue
            cut = ToolMessage(
                original.tool_call_id, head_tail(full, action.limit, action.path), name=original.name
            )
            try:
                await self.store.replace(self.namespace, self.session_id, seq, cut)
            except MessageStateError:  # another process archived it meanwhile: take its state
                await self._load()
                return
            self.originals[seq] = original
            self._replace_at(action.index, cut)
            await self.store.set_meta(self.namespace, self.session_id, meta=self._meta())
            self._emit("offload", seq=seq, path=action.path, chars=len(full), kept=len(text_of(cut.content)))

    def _replace_at(self, index: int, message: Message) -> None:
        msgs = list(self.history.messages)
        msgs[index] = message
        self.history = CountedHistory(self.counter, msgs)

    # --- applying plans: archive, summarise, remove ----------------------------------------------

    async def _apply(
        self, plan: Plan, reason: str, *, summary: Summary | None = None, summarize: bool = True
    ) -> bool:
        """Apply a plan under the session lock. Returns False (and keeps everything) if archiving failed."""
        if plan.empty:
            return True
        before = self.history.total
        self._emit("compaction_started", reason=reason, leaving=len(plan.drop), steps=list(plan.steps))
        async with self.store.lock(self.namespace, self.session_id):
            state = await self.store.open_session(self.namespace, self.session_id)
            if state.next_seq != self._next_seq or [m.seq for m in state.live] != self.seqs:
                # Another process changed this session since we planned: take its state, plan again.
                await self._load(state)
                return False
            msgs = self.history.messages
            leaving = [(self.seqs[i], self.originals.get(self.seqs[i], msgs[i])) for i in plan.drop]
            # A message whose form was cut had its original archived then; archive the rest now.
            unarchived = [(s, m) for s, m in leaving if s not in self.originals]
            unarchived += [
                (self.seqs[i], msgs[i]) for i in plan.rewrite if self.seqs[i] not in self.originals
            ]
            try:
                ref = self.archive.append(self.session_id, unarchived, reason) if unarchived else None
            except ArchiveError as exc:
                self._archive_failure = exc
                self._emit("archive_failed", reason=reason, error=str(exc))
                return False
            # Summaries read what the model saw (a cut result keeps its head, tail and path); the
            # originals went to the archive above.
            dropped = [msgs[i] for i in plan.drop]
            refs = [str(ref)] if ref else []
            if summary is None and dropped and summarize:
                summary = self._extractor.extract(self.summary, dropped, archive_refs=refs)
                self._pending.extend(dropped)
            for i, new in plan.rewrite.items():
                seq = self.seqs[i]
                self.originals.setdefault(seq, msgs[i])
                await self.store.replace(self.namespace, self.session_id, seq, new)
            for seq, _ in leaving:
                self.originals.pop(seq, None)
            if summary is not None:
                self.summary = summary
            await self.store.archive(
                self.namespace,
                self.session_id,
                [s for s, _ in leaving],
                summary=summary_to_json(self.summary),
                meta=self._meta(),
            )
            kept = [plan.rewrite.get(i, msgs[i]) for i in plan.keep]
            self.seqs = [self.seqs[i] for i in plan.keep]
            self.history = CountedHistory(self.counter, kept)
        # A digest of what left, for long-term memory (M2); listeners write it off the event loop.
        digest = (
            self._extractor.extract(None, dropped).render()
            if dropped and summarize and self._listeners
            else ""
        )
        self._emit(
            "compaction_finished",
            reason=reason,
            archived=len(leaving),
            tokens_before=before,
            tokens_after=self.history.total,
            archive=refs,
            digest=digest,
        )
        if self._pending and self.summarizer is not None:
            self._schedule()
        return True

    async def fold_turn(self) -> int:
        """C14: once the newest turn ended in a reply, its tool steps leave the context (archived first,
        not summarised: the reply carries the outcome). Returns how many messages left."""
        async with self._lock:
            plan = plan_fold_task(self.history.messages)
            if plan.empty:
                return 0
            return len(plan.drop) if await self._apply(plan, "fold_task", summarize=False) else 0

    def _emergency_plan(self, stage: int, budget: int) -> Plan:
        """C11's caps (10,000 chars, 5 turns), but never more than half the history budget per message,
        so a capped message leaves room for the rest (a character is at most about one token)."""
        s = self.settings
        max_chars = max(400, min(s.emergency_max_chars, budget // 2))
        return plan_emergency(
            self.history.messages, stage, max_chars=max_chars, max_turns=s.emergency_max_turns
        )

    # --- background summarisation (C8, C9) -------------------------------------------------------

    async def end_turn(self) -> None:
        """Call after each turn: starts (or coalesces into) the background summarisation when due."""
        self._emergency_stage = 0
        self.cleanup_offloads(throttle=3600)
        if self.summarizer is not None and (self._pending or not self._summarize_plan().empty):
            self._schedule()

    def _summarize_plan(self, *, force: bool = False) -> Plan:
        s = self.settings
        return plan_summarize(
            self.history.messages,
            self.history.counts,
            window=self.window.context_window,
            compact_ratio=0.0 if force else s.compact_threshold_ratio,
            reserve_ratio=s.reserve_threshold_ratio,
            message_threshold=0 if force else s.compact_message_threshold,
        )

    def _schedule(self) -> None:
        if self._bg is not None and not self._bg.done():
            self._bg_again = True
            return
        self._bg = asyncio.create_task(self._background())

    async def _background(self) -> None:
        while True:
            self._bg_again = False
            try:
                await self._summarize_round(instruction=None, force=False)
            except Exception:
                logger.exception("background summarisation failed; the extractive summary stays")
            if not self._bg_again:
                return

    async def _summarize_round(self, *, instruction: str | None, force: bool) -> int:
        """Fold queued messages (and, if due, the older live part) into the summary with the LLM."""
        assert self.summarizer is not None
        async with self._lock:
            pending = list(self._pending)
            plan = self._summarize_plan(force=force)
            candidates = [(self.seqs[i], self.history.messages[i]) for i in plan.drop]
            base = self._base
        if not pending and not candidates and instruction is None:
            return 0
        leaving = pending + [m for _, m in candidates]
        folded = await fold_in_chunks(
            self.summarizer, self.counter, self._chunk_tokens, base, leaving, instruction=instruction
        )
        if folded.source != "llm":
            self._emit("summary_fallback", reason=folded.fallback_reason or "model unusable")
        async with self._lock:
            still = {seq for seq, _ in candidates} & set(self.seqs)
            live_plan = Plan(
                tuple(i for i, s in enumerate(self.seqs) if s not in still),
                tuple(i for i, s in enumerate(self.seqs) if s in still),
                steps=("summarize",),
            )
            rest = self._pending[len(pending) :]  # left the context while the model was working
            new_summary = self._extractor.extract(folded, rest) if rest else folded
            if live_plan.empty:
                self.summary = new_summary
                await self.store.set_meta(
                    self.namespace, self.session_id, summary=summary_to_json(new_summary)
                )
            elif not await self._apply(live_plan, "summarize", summary=new_summary):
                return 0
            self._base = folded
            self._pending = rest
        return len(pending) + len(still)

    async def wait_idle(self) -> None:
        """Wait for background summarisation to finish (tests, shutdown, ``/compact``)."""
        while self._bg is not None and not self._bg.done():
            await asyncio.shield(self._bg)

    async def compact(self, instruction: str | None = None) -> CompactResult:
        """``/compact [instruction]``: summarise the older part now, with the extra instruction."""
        await self.wait_idle()
        if self.summarizer is None:
            plan = self._summarize_plan(force=True)
            async with self._lock:
                await self._apply(plan, "manual_compact")
            return CompactResult(len(plan.drop), self.summary.render() if self.summary else "")
        n = await self._summarize_round(instruction=instruction, force=True)
        return CompactResult(n, self.summary.render() if self.summary else "")

    # --- emergencies (C11) and clearing ----------------------------------------------------------

    async def handle_overflow(
        self, error: BaseException, system_prompt: str = "", tools: Sequence[ToolSpec] = ()
    ) -> Request:
        """The provider said the request overflowed: shrink by the next emergency stage and rebuild.

        Stage 1 first folds everything into the summary (and emits ``overflow`` with it for long-term
        memory), then caps and trims; stage 2 keeps only the newest user message; stage 3 clears.
        Raises :class:`CompactionError` when no stage is left — never loops.
        """
        before = self.estimate(system_prompt, tools).prompt
        while self._emergency_stage < MAX_EMERGENCY_STAGE:
            self._emergency_stage += 1
            stage = self._emergency_stage
            async with self._lock:
                if stage == 1:
                    snapshot = self._extractor.extract(self.summary, self.history.messages)
                    self._emit("overflow", error=str(error)[:300], summary=snapshot.render())
                budget = self._history_budget(system_prompt, tools)
                await self._apply(self._emergency_plan(stage, budget), f"emergency_{stage}")
            try:
                request = self.assemble(system_prompt, tools)
            except BudgetExceededError:
                continue
            if request.estimate.prompt < before:
                return request
        raise CompactionError(
            f"the provider still reports an overflow ({str(error)[:200]}) after every emergency stage. "
            "Fix: shorten the system prompt or tool definitions, or raise context_window."
        ) from error

    async def clear(self) -> int:
        """``/context clear``: everything leaves (archived first); the summary goes to memory and is reset."""
        await self.wait_idle()
        async with self._lock:
            n = len(self.history)
            if self.summary is not None or n:
                everything = self._extractor.extract(self.summary, self.history.messages)
                self._emit("cleared", messages=n, summary=everything.render())
            if not await self._apply(Plan((), tuple(range(n)), steps=("clear",)), "clear", summarize=False):
                raise ArchiveError("could not archive the session before clearing it; nothing was cleared")
            self.summary = self._base = None
            self._pending = []
            await self.store.set_meta(self.namespace, self.session_id, summary="")
        return n

    # --- inspection -------------------------------------------------------------------------------

    def stats(self, system_prompt: str = "", tools: Sequence[ToolSpec] = ()) -> ContextStats:
        msgs = self.history.messages
        roles: dict[str, int] = {}
        for m in msgs:
            roles[m.kind] = roles.get(m.kind, 0) + 1
        return ContextStats(
            messages=len(msgs),
            turns=len(turn_starts(msgs)),
            by_role=roles,
            characters=sum(len(text_of(m.content)) for m in msgs),
            estimate=self.estimate(system_prompt, tools),
            archived=self._next_seq - 1 - len(msgs),
            summary_source=self.summary.source if self.summary else None,
        )

    async def verify(self) -> VerifyReport:
        """Prove nothing was lost: every appended message is live, or archived *and* in the dialog files."""
        every = await self.store.messages(self.namespace, self.session_id)
        corrupt: list[ArchiveProblem] = []
        in_files = {a.seq for a in self.archive.read(self.session_id, report=corrupt)}
        archived = [s for s in every if s.state == "archived"]
        missing = tuple(s.seq for s in archived if s.seq not in in_files)
        return VerifyReport(
            len(every),
            len(every) - len(archived),
            len(archived),
            missing,
            corrupt=tuple(corrupt),
            quarantined=tuple(self.archive.quarantined()),
        )

    def cleanup_offloads(self, *, throttle: float = 0.0) -> int:
        """Delete offloaded tool results older than ``offload_retention_days`` (their originals stay in
        the dialog archive). Returns how many files were removed."""
        now = self._clock()
        if throttle and now - self._last_cleanup < throttle:
            return 0
        self._last_cleanup = now
        return cleanup_offloads(self.files, now - self.settings.offload_retention_days * 86400)
