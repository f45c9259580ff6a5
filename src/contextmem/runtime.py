"""``ContextMem``: everything wired together from settings — store, workspace, LLM, memory, sessions.

The CLI, the agent, the MCP server and the framework adapters all start here, so they share one way
of turning settings into parts. Automatic memory writing (M2) lives here too: the engine's events say
what left the context, and a listener appends it to today's daily memory file in a worker thread, so a
reply never waits on the disk.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import KW_ONLY, dataclass, field
from datetime import date, datetime, time, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, cast

from .engine import ContextEngine, EngineEvent
from .errors import UsageError
from .llm.base import LLM
from .llm.registry import summary_llm
from .logs import get_logger
from .memory_docs import SharedDocuments, documents_of
from .memory_files import DailySummaryJob, append_daily
from .messages import Message, UserMessage, text_of
from .settings import Settings
from .store.base import SessionStore
from .store.open import open_store
from .textlines import indent_after, lines
from .workspace import Workspace

if TYPE_CHECKING:
    from .memory import Embedder, MemoryIndex, MemoryTools

__all__ = ["ContextMem"]

logger = get_logger("contextmem.runtime")

# Events whose summary belongs in long-term memory, and the title each gets in the daily file.
_UNBUILT = object()  # the summary writer is built on first use

_MEMORY_EVENTS = {
    "compaction_finished": "left the context",
    "overflow": "context overflow",
    "cleared": "context cleared",
}


@dataclass(eq=False)
class ContextMem:
    """The wired-up engine. Create with :meth:`open`; get sessions with :meth:`session`."""

    settings: Settings
    _: KW_ONLY
    store: SessionStore
    workspace: Workspace
    llm: LLM | None
    memory: MemoryIndex | None
    owns_store: bool = True  # close() closes the store; False when an adapter shares one store
    clock: Callable[[], datetime] = datetime.now  # when a memory entry is written: its daily file and heading
    _writes: list[asyncio.Future[Any]] = field(default_factory=list, init=False, repr=False)
    _writer: ThreadPoolExecutor | None = field(default=None, init=False, repr=False)  # one thread: in order
    _loop: asyncio.AbstractEventLoop | None = field(default=None, init=False, repr=False)
    _jobs: list[asyncio.Task[None]] = field(default_factory=list, init=False, repr=False)
    _summary_writer: object = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self._summary_writer = _UNBUILT
        with contextlib.suppress(RuntimeError):  # built outside a loop: the first session() records it
            self._loop = asyncio.get_running_loop()

    @classmethod
    async def open(
        cls,
        settings: Settings | None = None,
        *,
        llm: LLM | str | None = None,
        store: SessionStore | str | None = None,
        embedder: Embedder | str | None = None,
        memory: bool = True,
        owns_store: bool = True,
        fitted: bool = False,
    ) -> ContextMem:
        """Build every part from ``settings`` (``Settings.load()`` when omitted); any part may be given.

        The window and summary sizes the user did not set are fitted to the LLM's own ``context_window``
        (:func:`~contextmem.budget.fit_settings`; an OpenAI-compatible server is asked for it first,
        :func:`~contextmem.llm.discovery.fit_to_llm`), so every session, adapter and integration plans
        against what the model can take.

        Adapters that serve many namespaces open one runtime each on shared parts: ``store`` and ``llm``
        already opened (``llm="none"``: no model), ``embedder`` as an object, ``owns_store=False`` so
        :meth:`close` leaves the shared store open, and ``fitted=True`` when ``settings`` were already
        fitted to ``llm`` (the server is not asked again). ``memory=False`` needs the core dependencies
        only: the memory index (the ``memory`` extra) is not imported.
        """
        from .llm.discovery import fit_to_llm
        from .llm.registry import llm_from_settings

        settings = settings or Settings.load()
        workspace = Workspace.of(settings)
        workspace.ensure()
        if store is None or isinstance(store, str):
            url = store or settings.store_url
            store = open_store(url, settings)
        if llm is None or isinstance(llm, str):
            llm = llm_from_settings(settings, llm)
        if not fitted:
            settings = await fit_to_llm(settings, llm)  # a local model's 8192 tokens, a server's own n_ctx
        index: MemoryIndex | None = None
        if memory:
            from .memory import embedder_from_spec, open_memory_index  # the memory extra

            emb = embedder_from_spec(embedder) if isinstance(embedder, str) else embedder
            # Opening migrates and checks the index (postgresql://: one database for both), in a worker
            # thread: an MCP server opens a namespace's index on its first call, while serving others.
            index = await asyncio.to_thread(open_memory_index, settings, emb, settings.store)
        return cls(settings, store=store, workspace=workspace, llm=llm, memory=index, owns_store=owns_store)

    @property
    def summary_writer(self) -> LLM | None:
        """What writes this runtime's summaries (:func:`~contextmem.llm.registry.summary_llm`), built once:
        ``summary_model`` when set, else the runtime's LLM or the extractive summary."""
        if self._summary_writer is _UNBUILT:
            self._summary_writer = summary_llm(self.settings, self.llm)
        return cast("LLM | None", self._summary_writer)

    @property
    def shared_documents(self) -> SharedDocuments | None:
        """The memory documents every host shares (a PostgreSQL store and index), where this runtime's
        memory writes go; ``None``: the workspace's files are the truth (SQLite, or memory off)."""
        return documents_of(self.memory)

    @property
    def tools(self) -> MemoryTools:
        """The agent's memory tools (memory_search, memory_get, memory_write, read_file)."""
        from .memory import MemoryTools

        if self.memory is None:
            raise UsageError("memory is disabled. Fix: ContextMem.open(..., memory=True)")
        return MemoryTools(self.memory, offloads=self._offloaded_text)

    def _offloaded_text(self, path: str) -> str | None:
        """The full text of an offloaded tool result as the store keeps it (``read_file`` of a path not on
        this host's disk), ``None`` when the store has no record of it.

        The store belongs to this runtime's event loop. From another thread (``MemoryTools.acall``'s
        worker) the read runs on that loop. A sync ``tools.call`` on the loop's own thread (an agent loop
        calling it inside ``async def``), or once the loop is gone, cannot wait for that loop: the read
        runs on a store reopened on the same data (:meth:`SessionStoreBase.reopen`), on a private loop in a
        helper thread, so every way of calling gives the same lines. A store that cannot be reopened is a
        :class:`UsageError` naming ``acall``, never a "does not exist" for a file the store holds."""
        loop = self._loop
        here: asyncio.AbstractEventLoop | None = None
        with contextlib.suppress(RuntimeError):
            here = asyncio.get_running_loop()
        wait = self.settings.store_statement_timeout + self.settings.store_connect_timeout
        if loop is not None and loop.is_running() and here is not loop:
            found = asyncio.run_coroutine_threadsafe(
                self.store.offloaded(self.settings.namespace, path), loop
            ).result(timeout=wait)
        else:
            found = self._offloaded_on_private_loop(path, wait)
        return None if found is None else text_of(found.content)

    def _offloaded_on_private_loop(self, path: str, wait: float) -> Message | None:
        """``store.offloaded`` on a reopened store, on a private loop in a helper thread (the caller
        waits)."""
        reopen: Callable[[], SessionStore] | None = getattr(self.store, "reopen", None)
        if reopen is None:
            raise UsageError(
                f"read_file of {path[:120]!r} needs the session store's copy, and a sync tools.call cannot "
                f"wait for {type(self.store).__name__} on its own event loop. "
                "Fix: await tools.acall(name, arguments) inside async code"
            )
        opened = reopen

        async def read() -> Message | None:
            store = opened()
            try:
                return await store.offloaded(self.settings.namespace, path)
            finally:
                await store.close()

        helper = ThreadPoolExecutor(1, thread_name_prefix="contextmem-offload")
        try:
            return helper.submit(lambda: asyncio.run(read())).result(timeout=wait)
        finally:
            helper.shutdown(wait=False)

    async def session(self, session_id: str, *, restore: bool = False) -> ContextEngine:
        """The engine of one session, writing what leaves its context to daily memory; its window is
        fitted to this runtime's LLM (:func:`~contextmem.budget.fit_to_model`). Its summaries are written
        by :func:`~contextmem.llm.registry.summary_llm`'s choice: the LLM, or the extractive summary."""
        if self._loop is None or self._loop.is_closed():  # opened under an asyncio.run that has ended
            self._loop = asyncio.get_running_loop()
        engine = await ContextEngine.open(
            session_id,
            restore=restore,
            store=self.store,
            settings=self.settings,
            files=self.workspace.files,
            llm=self.llm,
            summary_llm=self.summary_writer,
        )
        engine.subscribe(self._remember)
        return engine

    def _remember(self, event: EngineEvent) -> None:
        title = _MEMORY_EVENTS.get(event.kind)
        text = event.data.get("digest") or event.data.get("summary")
        if title is None or not text:
            return
        sid = event.session_id  # free text (namespace.check_session_id): one line, escaped, in a heading
        heading = f"{sid if sid.isprintable() else repr(sid)}: {title}"
        moment = self.clock()  # now, not when the worker thread gets to it
        shared = self.shared_documents
        if self._writer is None:  # one thread, so entries land in the order of their events
            self._writer = ThreadPoolExecutor(1, thread_name_prefix="contextmem-memory-write")
        entry = partial(append_daily, self.workspace, str(text), moment, title=heading, shared=shared)
        write = asyncio.get_running_loop().run_in_executor(self._writer, entry)
        self._writes.append(write)

    async def flush(self) -> None:
        """Wait for pending memory writes (they never block a reply; call before exiting)."""
        writes, self._writes = self._writes, []
        for result in await asyncio.gather(*writes, return_exceptions=True):
            if isinstance(result, BaseException):
                logger.error("a daily memory write failed: %s", result)

    async def summarize_text(self, material: str) -> str:
        """A structured summary of free text (used by the daily 23:55 job)."""
        from .engine.background import NoLLM
        from .summarize import Summarizer
        from .tokens import MessageCounter, get_counter

        counter = MessageCounter(get_counter(self.settings.tokenizer))
        text = [UserMessage(material[-60_000:])]
        writer = self.summary_writer
        if writer is None:  # no model, or the local one with summary_local_model off
            return Summarizer(NoLLM(), counter).extract(None, text).render()
        summary = await Summarizer(writer, counter).summarize(None, text)
        return summary.render()

    def daily_summary_job(self) -> DailySummaryJob:
        """The daily memory summary (M2) of this namespace: the day's dialog archive, or with a shared
        store the day's messages in it (:meth:`day_in_store`), summarised into today's daily memory."""
        return DailySummaryJob(
            self.workspace,
            self.summarize_text,
            at=self.settings.daily_summary_time,
            shared=self.shared_documents,
            **({"material": self.day_in_store} if self.store.shared else {}),
        )

    def start_jobs(self) -> None:
        """Start the long-running jobs: the daily memory summary (M2) and idle-session cleanup (S1)."""
        job = self.daily_summary_job()
        stop = asyncio.Event()
        self._stop = stop
        self._jobs.append(asyncio.create_task(job.run_forever(stop)))
        self._jobs.append(asyncio.create_task(self._cleanup_forever(stop)))

    async def day_in_store(self, _workspace: Workspace, day: date) -> str:
        """The daily job's material with a shared store, whose rows are the archive (no ``dialog/`` file):
        every message of the namespace's sessions created on ``day`` (local time), live or archived, a
        ``[session] role: text`` line each (continuation lines indented), sessions and seqs in order."""
        start = datetime.combine(day, time.min).timestamp()
        end = datetime.combine(day + timedelta(days=1), time.min).timestamp()
        namespace = self.settings.namespace
        out: list[str] = []
        for info in sorted(await self.store.list_sessions(namespace), key=lambda i: i.session_id):
            if info.updated_at < start or info.created_at >= end:
                continue
            for stored in await self.store.messages(namespace, info.session_id, state="all"):
                text = text_of(stored.message.content).strip()
                if start <= stored.created_at < end and text:
                    said = indent_after(text, "  ")
                    role = type(stored.message).__name__.removesuffix("Message").lower()
                    out.append(f"[{' '.join(lines(info.session_id))}] {role}: {said}")
        return "\n".join(out)

    async def cleanup_sessions(self) -> list[tuple[str, str]]:
        """Remove this namespace's sessions idle longer than ``session_retention_days`` (archives stay).

        Only this runtime's namespace: a store may be shared by many tenants, and one tenant's retention
        must never delete another's sessions (``contextmem sessions cleanup --all-namespaces`` is the
        operator's tool for that).
        """
        return await self.store.cleanup_idle(
            self.settings.session_retention_days * 86400, namespace=self.settings.namespace
        )

    async def _cleanup_forever(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                await self.cleanup_sessions()
            except Exception:
                logger.exception("session cleanup failed; retrying in an hour")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=3600)

    async def close(self) -> None:
        """Stop the jobs, wait for the memory writes, close the memory index and the store (unless
        ``owns_store`` is false: an adapter's shared store). Any event loop may call it: when the sessions
        run on another loop, still running in another thread (a framework's sync path runs them on a
        private loop), the work is done there, where its futures and connections belong."""
        loop = self._loop
        if loop is not None and loop.is_running() and loop is not asyncio.get_running_loop():
            await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(self._close(), loop))
        else:
            await self._close()

    async def _close(self) -> None:
        if self._jobs:
            self._stop.set()
            await asyncio.gather(*self._jobs, return_exceptions=True)
        await self.flush()
        if self._writer is not None:
            self._writer.shutdown(wait=False)
            self._writer = None
        if self.memory is not None:
            self.memory.close()
        if self.owns_store:
            await self.store.close()
