"""``contextmem mcp``: the memory tools and session controls over MCP (SPEC A4), with the official SDK.

Tools: ``memory_search``, ``memory_get``, ``memory_write``, ``read_archive`` (the agent's memory tools —
same schemas' limits, same :class:`~contextmem.memory.MemoryTools` dispatcher, same workspace
confinement), plus ``context_stats`` and ``compact`` on a stored session. Each tool is a few lines that
call one public method, inside :func:`tool_errors`: every failure comes back as an MCP tool error
(``isError``) with a one-line message — contextmem's own errors with their text and Fix, anything else as
``internal error: <Type>: <message>`` (logged here with its traceback) — never a traceback to the client.

The namespace of a call is the connection's (see :mod:`contextmem.mcp.namespaces`), never an argument.
"""

from __future__ import annotations

import ipaddress
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from typing import Annotated, Any, Literal

from pydantic import Field

from ..errors import ConfigError, ContextmemError, MissingExtraError

try:
    from mcp.server.mcpserver import Context, MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("mcp", "mcp") from exc

from ..memory.tools import MAX_READ_LINES, TOOL_SCHEMAS
from ..runtime import ContextMem
from .namespaces import NAMESPACE_SCOPE_KEY, NamespaceRouter, Namespaces

__all__ = ["build_server", "http_app", "serve_http", "serve_stdio", "tool_errors"]

logger = logging.getLogger("contextmem.mcp")
MAX_ERROR_CHARS = 1000

INSTRUCTIONS = (
    "Long-term memory and context control of contextmem. Search memory before answering questions about "
    "past work; read around a hit with memory_get; save lasting facts with memory_write. Archived "
    "conversations (dialog/*.jsonl) and offloaded tool results (tool_results/*.txt) are read with "
    "read_archive. context_stats and compact act on a stored session of this namespace."
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


# The line range of a read, as memory_get and read_archive take it.
_FirstLine = Annotated[int, Field(ge=1, description="First line to read (1-based).")]
_LineCount = Annotated[int, Field(ge=1, le=MAX_READ_LINES, description="How many lines.")]


def _describe(tool: str) -> str:
    return str(TOOL_SCHEMAS[tool]["description"])


def build_server(namespaces: Namespaces) -> MCPServer:
    """An MCP server whose tools act on the calling connection's namespace."""
    server: MCPServer = MCPServer("contextmem", instructions=INSTRUCTIONS, log_level="WARNING")

    def namespace_of(ctx: Context) -> str:
        request = ctx.request_context.request
        if request is None:  # stdio: one process, one namespace
            return namespaces.default
        namespace = getattr(request, "scope", {}).get(NAMESPACE_SCOPE_KEY)
        if namespace is None:  # served without NamespaceRouter: fail closed
            raise ToolError("this endpoint has no namespace. Fix: serve the app from contextmem.mcp.http_app")
        return str(namespace)

    async def memory_call(ctx: Context, name: str, *, tool: str | None = None, **arguments: Any) -> str:
        """Memory tool ``name`` in the caller's namespace, inside :func:`tool_errors` (as MCP ``tool``)."""
        with tool_errors(tool or name):
            runtime = await namespaces.get(namespace_of(ctx))
            text = await runtime.tools.acall(name, arguments)
            if text.startswith("error: "):  # MemoryTools' contract for errors a caller can fix
                raise ToolError(text[len("error: ") :])
            return text

    async def stored_session(ctx: Context, session_id: str) -> ContextMem:
        """The namespace's parts, once ``session_id`` is known to exist there (it is never created here)."""
        namespace = namespace_of(ctx)
        runtime = await namespaces.get(namespace)
        if session_id not in {i.session_id for i in await runtime.store.list_sessions(namespace)}:
            raise ToolError(
                f"no session {session_id[:200]!r} in this namespace. "
                "Fix: pass the id of a session an agent stored in this namespace"
            )
        return runtime

    @server.tool(structured_output=False, description=_describe("memory_search"))
    async def memory_search(
        query: Annotated[str, Field(description="What to look for, in any language.")],
        ctx: Context,
        k: Annotated[int, Field(ge=1, le=50, description="How many passages to return.")] = 5,
    ) -> str:
        return await memory_call(ctx, "memory_search", query=query, k=k)

    @server.tool(structured_output=False, description=_describe("memory_get"))
    async def memory_get(
        path: Annotated[str, Field(description="Relative path, e.g. 'MEMORY.md' or 'memory/2026-03-08.md'.")],
        ctx: Context,
        from_line: _FirstLine = 1,
        lines: _LineCount = 50,
    ) -> str:
        return await memory_call(ctx, "memory_get", path=path, from_line=from_line, lines=lines)

    @server.tool(structured_output=False, description=_describe("memory_write"))
    async def memory_write(
        text: Annotated[str, Field(description="The fact or note, self-contained.")],
        ctx: Context,
        target: Literal["core", "daily"] = "daily",
    ) -> str:
        return await memory_call(ctx, "memory_write", text=text, target=target)

    @server.tool(structured_output=False, description=_describe("read_file"))
    async def read_archive(
        path: Annotated[str, Field(description="Relative path under dialog/ or tool_results/.")],
        ctx: Context,
        offset: _FirstLine = 1,
        limit: _LineCount = 200,
    ) -> str:
        return await memory_call(ctx, "read_file", path=path, offset=offset, limit=limit, tool="read_archive")

    @server.tool(
        structured_output=False,
        description="Token use of a stored session: messages, turns, roles, estimate, archived count.",
    )
    async def context_stats(
        session_id: Annotated[str, Field(min_length=1, description="The session to inspect.")], ctx: Context
    ) -> str:
        with tool_errors("context_stats"):
            runtime = await stored_session(ctx, session_id)
            engine = await runtime.session(session_id)
            return json.dumps(asdict(engine.stats()), ensure_ascii=False)

    @server.tool(
        structured_output=False,
        description="Summarise the older part of a stored session now (archived first, never lost).",
    )
    async def compact(
        session_id: Annotated[str, Field(min_length=1, description="The session to compact.")],
        ctx: Context,
        instruction: Annotated[str | None, Field(description="What the summary must keep.")] = None,
    ) -> str:
        with tool_errors("compact"):
            runtime = await stored_session(ctx, session_id)
            engine = await runtime.session(session_id)
            try:
                result = await engine.compact(instruction)
            finally:
                await engine.close()
                await runtime.flush()
            return json.dumps(asdict(result), ensure_ascii=False)

    return server


async def serve_stdio(namespaces: Namespaces) -> None:
    """Serve one namespace (``namespaces.default``) over stdin/stdout until the client disconnects."""
    try:
        await build_server(namespaces).run_stdio_async()
    finally:
        await namespaces.close()


def http_app(namespaces: Namespaces, *, host: str = "127.0.0.1") -> Any:
    """The streamable-HTTP ASGI app: ``/mcp`` (default namespace) and ``/ns/<name>/mcp``."""
    app = build_server(namespaces).streamable_http_app(host=host)
    return NamespaceRouter(app, namespaces)


def check_host(host: str, *, allow_remote: bool) -> str:
    """Loopback only, unless ``allow_remote`` (then put an authenticating proxy in front)."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and not allow_remote:
        raise ConfigError(
            f"host {host!r} is not a loopback address. Fix: use 127.0.0.1, or pass --allow-remote and put "
            "an authenticating proxy in front (namespaces are chosen by URL)"
        )
    return host


async def serve_http(
    namespaces: Namespaces, *, host: str = "127.0.0.1", port: int = 8765, allow_remote: bool = False
) -> None:
    """Serve streamable HTTP with uvicorn until stopped."""
    import uvicorn

    check_host(host, allow_remote=allow_remote)
    config = uvicorn.Config(http_app(namespaces, host=host), host=host, port=port, log_level="warning")
    try:
        await uvicorn.Server(config).serve()
    finally:
        await namespaces.close()
