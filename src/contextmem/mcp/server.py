"""``contextmem mcp``: the memory tools and session controls over MCP (A4), with the official SDK.

Tools: ``memory_search``, ``memory_get``, ``memory_write``, ``read_file`` (the agent's memory tools, under
the same names — same schemas' limits, same :class:`~contextmem.memory.MemoryTools` dispatcher, same
workspace confinement), plus ``list_sessions`` (the namespace's stored sessions) and ``context_stats``
and ``compact`` on one of them. ``read_archive`` (the old MCP name of ``read_file``) is still accepted but
no longer listed. Each tool is a few lines that call one public method, inside :func:`tool_errors`: every
failure comes back as an MCP tool error (``isError``) with a one-line message — contextmem's own errors
with their text and Fix, anything else as ``internal error: <Type>: <message>`` (logged here with its
traceback) — never a traceback to the client.
Arguments the SDK's validation refuses come back the same way, as MemoryTools words them
(:func:`argument_error`), not as pydantic's multi-line report.

Every tool carries a title and annotations (read-only, destructive, idempotent hints); ``memory_search``,
``list_sessions``, ``context_stats`` and ``compact`` also return structured content under an output
schema, next to the same JSON as text.

The namespace of a call is the connection's (see :mod:`contextmem.mcp.namespaces`), never an argument.
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict
from typing import Annotated, Any, Literal

from pydantic import Field, ValidationError

from .. import __version__
from ..errors import ConfigError, ContextmemError, MissingExtraError, ToolArgumentError

try:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
    from mcp.server.transport_security import TransportSecuritySettings
    from mcp_types import CallToolResult, TextContent, ToolAnnotations
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("mcp", "mcp") from exc

from ..logs import get_logger
from ..memory.tools import MAX_READ_LINES, MAX_SEARCH_RESULTS, TOOL_SCHEMAS, check_arguments
from ..runtime import ContextMem
from .hosts import HostGuard, bind_sockets, is_loopback
from .namespaces import ANY_NAMESPACE, MAX_SESSIONS, NAMESPACE_SCOPE_KEY, NamespaceRouter, Namespaces
from .outputs import CompactResultOutput, ContextStatsOutput, SearchResults, SessionList, SessionSummary

__all__ = [
    "DEPRECATED_ALIASES",
    "argument_error",
    "build_server",
    "http_app",
    "serve_http",
    "serve_stdio",
    "startup_line",
    "tool_errors",
]

logger = get_logger("contextmem.mcp")
MAX_ERROR_CHARS = 1000

INSTRUCTIONS = (
    "Long-term memory and context control of contextmem. Search memory before answering questions about "
    "past work; read around a hit with memory_get; save lasting facts with memory_write. Archived "
    "conversations (dialog/*.jsonl) and offloaded tool results (tool_results/*.txt) are read with "
    "read_file. list_sessions lists the stored sessions of this namespace; context_stats and compact act "
    "on one of them."
)


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= MAX_ERROR_CHARS else flat[: MAX_ERROR_CHARS - 1] + "…"


@contextmanager
def tool_errors(tool: str) -> Iterator[None]:
    """The one wrapper around every tool body: any exception leaves as a one-line :class:`ToolError`."""
    try:
        yield
    except ToolError as exc:
        raise ToolError(_one_line(str(exc))) from exc
    except ContextmemError as exc:  # says what was wrong and the Fix: the client may read it
        raise ToolError(_one_line(str(exc))) from exc
    except Exception as exc:
        logger.exception("MCP tool %s failed unexpectedly", tool)
        raise ToolError(_one_line(f"internal error: {type(exc).__name__}: {exc}")) from exc


DEPRECATED_ALIASES = {"read_archive": "read_file"}
"""Old MCP tool names still accepted (not listed): alias -> the tool's one name."""

# What the tools may do, for clients deciding what to confirm (all hints; nothing here reaches outside the
# namespace's workspace and store, hence openWorldHint=False).
READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
APPEND = ToolAnnotations(  # memory_write appends a note: nothing is overwritten, a repeat adds it again
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
REWRITE = ToolAnnotations(  # compact replaces the older live messages by a summary (archived first)
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)

TITLES = {
    "memory_search": "Search memory",
    "memory_get": "Read a memory file",
    "memory_write": "Save to memory",
    "read_file": "Read an archived conversation or tool result",
    "read_archive": "Read an archived file (old name of read_file)",
    "list_sessions": "List stored sessions",
    "context_stats": "Session token use",
    "compact": "Compact a session now",
}
"""The human-readable title of each tool, shown by clients instead of its name."""

MAX_LISTED_SESSIONS = 500
REMOTE_NOTE = (
    "contextmem mcp: only requests naming this server by a loopback name or its bind address in Host "
    "(port {port}) are answered; others get 421. Fix: add --allowed-host NAME[:PORT] for each name in use"
)


def _meta(tool: str, hints: ToolAnnotations) -> dict[str, Any]:
    """``title`` and ``annotations`` of ``tool``, the title in both (MCP reads ``Tool.title`` first, then
    ``annotations.title``, as older clients do)."""
    title = TITLES[tool]
    return {"title": title, "annotations": hints.model_copy(update={"title": title})}


def _json_result(text: str, structured: dict[str, Any]) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], structured_content=structured)


def _usage(tool: str, schema: Mapping[str, Any]) -> str:
    """``tool(arg (type, required); ...)`` from a JSON schema the SDK derived."""
    required = set(schema.get("required", ()))
    parts = []
    for arg, spec in schema.get("properties", {}).items():
        kinds = [s.get("type") for s in spec.get("anyOf", [spec]) if s.get("type") not in (None, "null")]
        bits = [str(kinds[0]) if kinds else "any"]
        if "enum" in spec:
            bits = ["one of " + ", ".join(map(repr, spec["enum"]))]
        if "minimum" in spec and "maximum" in spec:
            bits.append(f"{spec['minimum']}-{spec['maximum']}")
        elif "minimum" in spec:
            bits.append(f">= {spec['minimum']}")
        if spec.get("minLength") == 1:
            bits.append("non-empty")
        if arg in required:
            bits.append("required")
        parts.append(f"{arg} ({', '.join(bits)})")
    return f"{tool}({'; '.join(parts)})"


def argument_error(tool: str, arguments: Any, error: ValidationError, schema: Mapping[str, Any]) -> str:
    """One line naming the argument the SDK refused and the Fix, worded as MemoryTools words it.

    The memory tools are checked again by :func:`~contextmem.memory.tools.check_arguments` (the agent's
    own message); the session tools get the same shape from the first of pydantic's errors.
    """
    library_name = DEPRECATED_ALIASES.get(tool, tool)
    if library_name in TOOL_SCHEMAS:
        try:
            check_arguments(library_name, arguments)
        except ToolArgumentError as exc:
            return _one_line(str(exc))
    fix = f"Fix: call {_usage(tool, schema)}"
    first = error.errors()[0]
    arg = ".".join(str(part) for part in first["loc"]) or "?"
    if first["type"] == "missing":
        return _one_line(f"{tool} needs the argument {arg!r}. {fix}")
    got = f", not {type(first.get('input')).__name__}" if str(first["type"]).endswith("_type") else ""
    return _one_line(f"argument {arg!r} of {tool}: {first['msg'].lower()}{got}. {fix}")


class _Server(MCPServer):
    """The SDK's server, with friendly argument errors and deprecated aliases callable but unlisted."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(cause, ValidationError):
                raise
            tool = self._tool_manager.get_tool(name)
            schema = tool.parameters if tool is not None else {}
            message = argument_error(name, arguments, cause, schema)
            raise ToolError(f"Error executing tool {name}: {message}") from cause

    async def list_tools(self) -> Any:
        return [t for t in await super().list_tools() if t.name not in DEPRECATED_ALIASES]


# The line range of a read, as memory_get and read_file take it.
# Integers are strict, as MemoryTools checks them: JSON integers only, not true/false or "5".
_FirstLine = Annotated[int, Field(ge=1, strict=True, description="First line to read (1-based).")]
_LineCount = Annotated[int, Field(ge=1, le=MAX_READ_LINES, strict=True, description="How many lines.")]


def _describe(tool: str) -> str:
    return str(TOOL_SCHEMAS[tool]["description"])


def build_server(namespaces: Namespaces) -> MCPServer:
    """An MCP server whose tools act on the calling connection's namespace."""
    server: MCPServer = _Server(
        "contextmem", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    _add_memory_tools(server, namespaces)
    _add_session_tools(server, namespaces)
    return server


def _namespace_of(namespaces: Namespaces, ctx: Context) -> str:
    """The namespace of the connection making the call (never an argument)."""
    request = ctx.request_context.request
    if request is None:  # stdio: one process, one namespace
        return namespaces.default
    namespace = getattr(request, "scope", {}).get(NAMESPACE_SCOPE_KEY)
    if namespace is None:  # served without NamespaceRouter: fail closed
        raise ToolError("this endpoint has no namespace. Fix: serve the app from contextmem.mcp.http_app")
    return str(namespace)


def _add_memory_tools(server: MCPServer, namespaces: Namespaces) -> None:
    """The agent's memory tools, each a call of :class:`~contextmem.memory.MemoryTools`."""

    async def memory_call(ctx: Context, name: str, **arguments: Any) -> str:
        """Memory tool ``name`` in the caller's namespace, inside :func:`tool_errors`."""
        with tool_errors(name):
            runtime = await namespaces.get(_namespace_of(namespaces, ctx))
            text = await namespaces.call_tool(runtime, name, arguments)
            if text.startswith("error: "):  # MemoryTools' contract for errors a caller can fix
                raise ToolError(text[len("error: ") :])
            return text

    @server.tool(**_meta("memory_search", READ_ONLY), description=_describe("memory_search"))
    async def memory_search(
        query: Annotated[str, Field(description="What to look for, in any language.")],
        ctx: Context,
        k: Annotated[
            int, Field(ge=1, le=MAX_SEARCH_RESULTS, strict=True, description="How many passages to return.")
        ] = 5,
    ) -> Annotated[CallToolResult, SearchResults]:
        text = await memory_call(ctx, "memory_search", query=query, k=k)
        return _json_result(text, {"hits": json.loads(text)})

    @server.tool(
        structured_output=False, **_meta("memory_get", READ_ONLY), description=_describe("memory_get")
    )
    async def memory_get(
        path: Annotated[str, Field(description="Relative path, e.g. 'MEMORY.md' or 'memory/2026-03-08.md'.")],
        ctx: Context,
        from_line: _FirstLine = 1,
        lines: _LineCount = 50,
    ) -> str:
        return await memory_call(ctx, "memory_get", path=path, from_line=from_line, lines=lines)

    @server.tool(
        structured_output=False, **_meta("memory_write", APPEND), description=_describe("memory_write")
    )
    async def memory_write(
        text: Annotated[str, Field(description="The fact or note, self-contained.")],
        ctx: Context,
        target: Literal["core", "daily"] = "daily",
    ) -> str:
        return await memory_call(ctx, "memory_write", text=text, target=target)

    async def read_file(
        path: Annotated[str, Field(description="Relative path under dialog/ or tool_results/.")],
        ctx: Context,
        offset: _FirstLine = 1,
        limit: _LineCount = 200,
    ) -> str:
        return await memory_call(ctx, "read_file", path=path, offset=offset, limit=limit)

    server.add_tool(
        read_file,
        structured_output=False,
        **_meta("read_file", READ_ONLY),
        description=_describe("read_file"),
    )
    for alias, name in DEPRECATED_ALIASES.items():  # callable, not listed (see _Server.list_tools)
        server.add_tool(
            read_file,
            name=alias,
            structured_output=False,
            **_meta(alias, READ_ONLY),
            description=f"Deprecated: the old name of {name}. " + _describe(name),
        )


def _add_session_tools(server: MCPServer, namespaces: Namespaces) -> None:
    """``list_sessions``, and ``context_stats`` and ``compact`` on one stored session of the namespace."""

    async def stored_session(ctx: Context, session_id: str) -> ContextMem:
        """The namespace's parts, once ``session_id`` is known to exist there (it is never created here)."""
        namespace = _namespace_of(namespaces, ctx)
        runtime = await namespaces.get(namespace)
        if session_id not in {i.session_id for i in await runtime.store.list_sessions(namespace)}:
            raise ToolError(
                f"no session {session_id[:200]!r} in this namespace. "
                "Fix: pass the id of a session listed by list_sessions"
            )
        return runtime

    @server.tool(
        **_meta("list_sessions", READ_ONLY),
        description=(
            "The sessions stored in this namespace, most recently active first: id, live and archived "
            "message counts, created and last activity (UTC). Pass an id to context_stats or compact."
        ),
    )
    async def list_sessions(
        ctx: Context,
        limit: Annotated[
            int, Field(ge=1, le=MAX_LISTED_SESSIONS, strict=True, description="How many sessions to list.")
        ] = 50,
    ) -> Annotated[CallToolResult, SessionList]:
        with tool_errors("list_sessions"):
            namespace = _namespace_of(namespaces, ctx)
            runtime = await namespaces.get(namespace)
            infos = await runtime.store.list_sessions(namespace)
            recent = sorted(infos, key=lambda i: (i.updated_at, i.session_id), reverse=True)[:limit]
            listed = SessionList(sessions=[SessionSummary.of(i) for i in recent], total=len(infos))
            return _json_result(listed.model_dump_json(), listed.model_dump())

    @server.tool(
        **_meta("context_stats", READ_ONLY),
        description="Token use of a stored session: messages, turns, roles, estimate, archived count.",
    )
    async def context_stats(
        session_id: Annotated[str, Field(min_length=1, description="The session to inspect.")], ctx: Context
    ) -> Annotated[CallToolResult, ContextStatsOutput]:
        with tool_errors("context_stats"):
            runtime = await stored_session(ctx, session_id)
            engine = await runtime.session(session_id)
            stats = asdict(engine.stats())
            return _json_result(json.dumps(stats, ensure_ascii=False), stats)

    @server.tool(
        **_meta("compact", REWRITE),
        description="Summarise the older part of a stored session now (archived first, never lost).",
    )
    async def compact(
        session_id: Annotated[str, Field(min_length=1, description="The session to compact.")],
        ctx: Context,
        instruction: Annotated[str | None, Field(description="What the summary must keep.")] = None,
    ) -> Annotated[CallToolResult, CompactResultOutput]:
        with tool_errors("compact"):
            runtime = await stored_session(ctx, session_id)
            engine = await runtime.session(session_id)
            try:
                result = await engine.compact(instruction)
            finally:
                await engine.close()
                await runtime.flush()
            compacted = asdict(result)
            return _json_result(json.dumps(compacted, ensure_ascii=False), compacted)


async def serve_stdio(namespaces: Namespaces) -> None:
    """Serve one namespace (``namespaces.default``) over stdin/stdout until the client disconnects."""
    try:
        await build_server(namespaces).run_stdio_async()
    finally:
        await namespaces.close()


def http_app(
    namespaces: Namespaces,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    allowed_hosts: Collection[str] = (),
    max_sessions: int = MAX_SESSIONS,
) -> Any:
    """The streamable-HTTP ASGI app: ``/mcp`` (default namespace) and ``/ns/<name>/mcp``.

    ``host`` and ``port`` are where it is served: :class:`~contextmem.mcp.hosts.HostGuard` answers only
    requests naming this server (the loopback names, the bind address, ``allowed_hosts``) in ``Host`` and
    ``Origin``, whatever the spelling of ``host``. The SDK's own check is off: ours replaces it.
    """
    app = build_server(namespaces).streamable_http_app(
        host=host,
        max_sessions=max_sessions,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    router = NamespaceRouter(app, namespaces, max_sessions=max_sessions)
    return HostGuard(router, host=host, port=port, allowed_hosts=allowed_hosts)


def check_host(host: str, *, allow_remote: bool) -> str:
    """Loopback only, unless ``allow_remote`` (then put an authenticating proxy in front)."""
    if not is_loopback(host) and not allow_remote:
        raise ConfigError(
            f"host {host!r} is not a loopback address. Fix: use 127.0.0.1, or pass --allow-remote and put "
            "an authenticating proxy in front (namespaces are chosen by URL)"
        )
    return host


def startup_line(namespaces: Namespaces, *, host: str, port: int) -> str:
    """``contextmem mcp <version>: serving http://HOST:PORT/mcp (default namespace 'a'), .../ns/b/mcp``."""
    base = f"http://{f'[{host}]' if ':' in host else host}:{port}"
    urls = [f"{base}/mcp (namespace {namespaces.default!r})"]
    for name in sorted(namespaces.allowed - {namespaces.default}):
        urls.append(
            f"{base}/ns/<name>/mcp (any namespace)" if name == ANY_NAMESPACE else f"{base}/ns/{name}/mcp"
        )
    return f"contextmem mcp {__version__}: serving " + ", ".join(urls)


async def serve_http(
    namespaces: Namespaces,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    allow_remote: bool = False,
    allowed_hosts: Collection[str] = (),
) -> None:
    """Serve streamable HTTP with uvicorn until stopped; once listening, say where on stderr (one line)."""
    import uvicorn

    check_host(host, allow_remote=allow_remote)
    sockets: list[socket.socket] = []
    try:
        sockets = bind_sockets(host, port)  # a port in use: a ConfigError with its Fix, not uvicorn's exit
        port = sockets[0].getsockname()[1]  # --port 0: the one the system chose
        app = http_app(namespaces, host=host, port=port, allowed_hosts=allowed_hosts)
        config = uvicorn.Config(app, host=host, port=port, log_level="warning")

        class _Announcing(uvicorn.Server):
            async def startup(self, sockets: Any = None) -> None:
                await super().startup(sockets)
                if self.started:  # listening
                    print(startup_line(namespaces, host=host, port=port), file=sys.stderr, flush=True)
                    if not is_loopback(host) and not allowed_hosts:
                        print(REMOTE_NOTE.format(port=port), file=sys.stderr, flush=True)

        await _Announcing(config).serve(sockets=sockets)
    finally:
        for sock in sockets:
            sock.close()
        await namespaces.close()
