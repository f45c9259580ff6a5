"""Which namespaces an MCP server serves, and the wired-up parts of each, opened on first use.

Isolation (SPEC M6) is decided here and in :class:`NamespaceRouter`, never by a tool argument: a stdio
server serves exactly one namespace (from settings: ``--namespace`` or ``CONTEXTMEM_NAMESPACE``); an HTTP
server serves each connection the namespace of the URL it connected to (``/mcp`` for the default,
``/ns/<name>/mcp`` for another), only if that namespace is in the allow-list, and a streamable-HTTP
session started in one namespace is refused on any other namespace's URL.

URLs and headers are client-supplied: on loopback (the default) that is the trust boundary; a server
exposed to other hosts must sit behind an authenticating proxy that decides the URL a client may use.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from typing import TYPE_CHECKING, Any

from ..errors import PathEscapeError
from ..llm.base import LLM
from ..namespace import check_namespace
from ..runtime import ContextMem
from ..settings import Settings
from ..store.base import SessionStore

if TYPE_CHECKING:
    from ..memory import Embedder

__all__ = ["ANY_NAMESPACE", "NAMESPACE_SCOPE_KEY", "NamespaceRouter", "Namespaces"]

ANY_NAMESPACE = "*"
"""Allow-list entry that admits every valid namespace name."""

NAMESPACE_SCOPE_KEY = "contextmem.namespace"
"""ASGI scope key where :class:`NamespaceRouter` records the namespace of the request."""

SESSION_HEADER = b"mcp-session-id"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class Namespaces:
    """The allow-list, and one :class:`ContextMem` per namespace sharing a store, an LLM and an embedder."""

    def __init__(
        self,
        settings: Settings,
        *,
        store: SessionStore,
        llm: LLM | None,
        embedder: Embedder,
        allowed: Collection[str] = (),
    ) -> None:
        self.settings = settings
        self.default = check_namespace(settings.namespace)
        self.allowed = frozenset(allowed) or frozenset({self.default})
        for name in self.allowed - {ANY_NAMESPACE}:
            check_namespace(name)
        self._store = store
        self._llm = llm
        self._embedder = embedder
        self._open: dict[str, ContextMem] = {}
        self._lock = asyncio.Lock()

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
        from ..memory import Workspace, open_memory_index

        self.check(namespace)
        async with self._lock:
            runtime = self._open.get(namespace)
            if runtime is None:
                settings = self.settings.with_value("namespace", namespace)
                workspace = Workspace(settings.workspace_path, namespace)
                workspace.ensure()
                index = open_memory_index(settings, self._embedder, settings.store)  # as ContextMem.open
                runtime = ContextMem(
                    settings, store=self._store, workspace=workspace, llm=self._llm, memory=index
                )
                self._open[namespace] = runtime
        return runtime

    async def close(self) -> None:
        """Flush pending memory writes of every namespace, close the indexes, then the shared store."""
        for runtime in self._open.values():
            await runtime.flush()
            if runtime.memory is not None:
                runtime.memory.close()
        self._open.clear()
        await self._store.close()


class NamespaceRouter:
    """ASGI wrapper: maps ``/ns/<name>/mcp`` (and ``/mcp``) to the MCP endpoint, tagging the namespace.

    Refuses (HTTP 403) a namespace outside the allow-list, and a request whose ``mcp-session-id`` was
    issued under another namespace; answers 404 for any other path. The MCP app behind it sees every
    request at ``/mcp`` with ``scope["contextmem.namespace"]`` set.
    """

    def __init__(self, app: ASGIApp, namespaces: Namespaces, *, path: str = "/mcp") -> None:
        self.app = app
        self.namespaces = namespaces
        self.path = path
        self._sessions: dict[bytes, str] = {}  # mcp-session-id -> the namespace that created it

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

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan: the MCP app starts its session manager
            await self.app(scope, receive, send)
            return
        raw = scope.get("raw_path")
        path = raw.decode("latin-1") if isinstance(raw, bytes) else scope["path"]
        namespace = self._namespace_of(path.split("?", 1)[0])
        if namespace is None:
            await _refuse(send, 404, f"no MCP endpoint at {path[:200]!r}; use /mcp or /ns/<name>/mcp")
            return
        try:
            self.namespaces.check(namespace)
        except (PathEscapeError, ValueError) as exc:
            await _refuse(send, 403, str(exc))
            return
        session = dict(scope["headers"]).get(SESSION_HEADER)
        owner = self._sessions.get(session) if session else None
        if owner is not None and owner != namespace:
            await _refuse(send, 403, f"this MCP session belongs to another namespace, not {namespace!r}")
            return
        inner = dict(scope)
        inner["path"] = self.path
        inner["raw_path"] = self.path.encode()
        inner[NAMESPACE_SCOPE_KEY] = namespace

        async def bind_session(message: Message) -> None:
            if message["type"] == "http.response.start":
                issued = dict(message.get("headers", ())).get(SESSION_HEADER)
                if issued:
                    self._sessions.setdefault(issued, namespace)
            await send(message)

        await self.app(inner, receive, bind_session)


async def _refuse(send: Send, status: int, text: str) -> None:
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
