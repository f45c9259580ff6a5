"""A lean MCP client for the load bench: streamable HTTP over raw asyncio streams, one connection each.

The official ``mcp.Client`` is built for agents (anyio task groups, httpx, pydantic models of every
message, output-schema validation); 100 of them on one event loop took 0.2 cores and let the loop wake
a 10 ms sleep 100+ ms late, on a 2-core machine where the server used 0.4, so the bench partly timed its
own client. :class:`WireClient` sends the same requests and does only what a load generator needs:
``json.dumps`` a request, write it on a keep-alive HTTP/1.1 connection, read the response
(``Content-Length`` or chunked), take the JSON-RPC answer out of an ``application/json`` body or a
``text/event-stream`` one, and turn a JSON-RPC error, an HTTP error or an ``isError`` result into what
the bench counts as an error.

Two protocol versions, the two ways ``mcp.Client`` talks to a server:

- ``2026-07-28`` (:data:`MODERN`, what the official client negotiates with our server): one
  ``server/discover`` probe, then stateless requests, each carrying the version and the client's identity
  in ``params._meta`` and the ``mcp-protocol-version``/``mcp-method``/``mcp-name`` headers. The official
  client also lists the tools once (for their output schemas): :meth:`WireClient.connect` does too.
- ``2025-06-18`` (:data:`SESSION`): ``initialize`` (the session id comes back in ``mcp-session-id``, the
  version in the result), the ``notifications/initialized`` notification, then requests with both
  headers; the server answers as SSE (``event: message`` / ``data: {json}``); ``DELETE`` ends the session.
  (The official client also holds a GET stream open for server pushes; our server pushes nothing.)
"""

from __future__ import annotations

import asyncio
import itertools
import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

MODERN = "2026-07-28"
SESSION = "2025-06-18"
CLIENT_INFO = {"name": "contextmem-bench", "version": "1"}
ACCEPT = "application/json, text/event-stream"


class WireError(Exception):
    """A call that got no result: HTTP error status, JSON-RPC error, unreadable answer, or timeout."""


@dataclass(frozen=True)
class TextBlock:
    text: str
    type: str = "text"


@dataclass(frozen=True)
class ToolResult:
    """A ``tools/call`` result, with the names the bench reads on the official client's result too."""

    content: tuple[TextBlock, ...]
    is_error: bool
    structured_content: Any = None


def sse_messages(body: bytes) -> list[Any]:
    """The JSON of every ``message`` event in an SSE body (events split by a blank line, ``data:`` lines
    joined by a newline, comments and priming events without data skipped)."""
    messages = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        event, data = "message", []
        for line in block.split(b"\n"):
            name, _, value = line.partition(b":")
            value = value[1:] if value.startswith(b" ") else value
            if name == b"event":
                event = value.decode()
            elif name == b"data":
                data.append(value)
        if event == "message" and data and any(data):
            messages.append(json.loads(b"\n".join(data)))
    return messages


class WireClient:
    """One MCP client on one keep-alive connection: ``async with WireClient(url) as c: c.call_tool(...)``.

    ``headers`` are sent with every request (and may replace ``Host``); ``timeout`` bounds each request,
    so a server that never answers is an error, not a hang. Requests are sequential (one in flight).
    """

    def __init__(
        self,
        url: str,
        *,
        protocol: str = MODERN,
        timeout: float = 60.0,
        headers: dict[str, str] | None = None,
    ) -> None:
        if protocol not in (MODERN, SESSION):
            raise ValueError(f"protocol {protocol!r} is not {MODERN!r} or {SESSION!r}")
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"url {url!r} is not http://HOST:PORT/PATH")
        self.host, self.port = parts.hostname, parts.port or 80
        self.path = parts.path or "/"
        self.protocol = protocol
        self.timeout = timeout
        self.headers = {
            "host": parts.netloc,
            "accept": ACCEPT,
            **{k.lower(): v for k, v in (headers or {}).items()},
        }
        self.session_id: str | None = None
        # The version sent in mcp-protocol-version: the modern one on every request (discover too); a
        # session's from its initialize result on.
        self.negotiated: str | None = MODERN if protocol == MODERN else None
        self._ids = itertools.count(1)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def __aenter__(self) -> WireClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- MCP ------------------------------------------------------------------------------------------

    async def connect(self) -> None:
        """The handshake the official client makes (see the module's docstring)."""
        if self.protocol == MODERN:
            found = await self.request("server/discover", {})
            if MODERN not in found.get("supportedVersions", ()):
                raise WireError(f"the server does not speak {MODERN}: {found.get('supportedVersions')!r}")
            await self.request("tools/list", {})
            return
        params = {"protocolVersion": SESSION, "capabilities": {}, "clientInfo": CLIENT_INFO}
        result = await self.request("initialize", params)
        if not self.session_id:
            raise WireError("initialize answered without an mcp-session-id header")
        self.negotiated = str(result.get("protocolVersion", SESSION))
        await self.notify("notifications/initialized")

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        result = await self.request("tools/call", {"name": name, "arguments": arguments})
        blocks = tuple(
            TextBlock(b.get("text", "")) for b in result.get("content", ()) if b.get("type") == "text"
        )
        return ToolResult(blocks, bool(result.get("isError")), result.get("structuredContent"))

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The ``result`` of one JSON-RPC request, or :class:`WireError`."""
        ident = next(self._ids)
        params, extra = self._modern(method, params)
        message = {"jsonrpc": "2.0", "id": ident, "method": method, "params": params}
        status, headers, body = await self._exchange("POST", message, extra)
        if status >= 400:
            raise WireError(f"HTTP {status}: {body[:200].decode(errors='replace')}")
        if method == "initialize":
            self.session_id = headers.get("mcp-session-id")
        kind = headers.get("content-type", "")
        try:
            if kind.startswith("application/json"):
                answers = [json.loads(body)]
            elif kind.startswith("text/event-stream"):
                answers = sse_messages(body)
            else:
                raise WireError(f"HTTP {status} with content-type {kind!r}")
        except ValueError as exc:
            raise WireError(f"unreadable answer to {method}: {exc}") from None
        answer = next((a for a in answers if isinstance(a, dict) and a.get("id") == ident), None)
        if answer is None:
            raise WireError(f"no answer to {method} (id {ident}) in {len(answers)} message(s)")
        if "error" in answer:
            error = answer["error"]
            raise WireError(f"JSON-RPC error {error.get('code')}: {str(error.get('message'))[:200]}")
        result = answer.get("result")
        if not isinstance(result, dict):
            raise WireError(f"the answer to {method} has no result object")
        return result

    async def notify(self, method: str) -> None:
        status, _, body = await self._exchange("POST", {"jsonrpc": "2.0", "method": method}, {})
        if status != 202:
            raise WireError(f"notification {method} answered HTTP {status}: {body[:200]!r}")

    async def close(self) -> None:
        """End the session (``DELETE``, as the official client does), then the connection."""
        try:
            if self.session_id:
                await self._exchange("DELETE", None, {})
        except (WireError, OSError):
            pass  # ending is best effort, as the official client's is
        finally:
            self.session_id = None
            if self._writer is not None:
                self._writer.close()
                self._reader = self._writer = None

    def _modern(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
        """``params`` and extra headers of a request, as 2026-07-28 wants them (unchanged in a session)."""
        if self.protocol != MODERN:
            return params, {}
        meta = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientInfo": CLIENT_INFO,
            "io.modelcontextprotocol/clientCapabilities": {},
        }
        headers = {"mcp-method": method, **({"mcp-name": params["name"]} if method == "tools/call" else {})}
        return {**params, "_meta": meta}, headers

    # --- HTTP/1.1 -------------------------------------------------------------------------------------

    async def _exchange(
        self, method: str, message: Any, extra: dict[str, str]
    ) -> tuple[int, dict[str, str], bytes]:
        """``(status, headers, body)`` of one request, within ``timeout``; a kept-alive connection the
        server closed meanwhile is reopened once (as httpx does)."""
        lines = [f"{method} {self.path} HTTP/1.1", *(f"{k}: {v}" for k, v in self.headers.items())]
        if self.session_id:
            lines.append(f"mcp-session-id: {self.session_id}")
        if self.negotiated and method != "initialize":
            lines.append(f"mcp-protocol-version: {self.negotiated}")
        lines += [f"{k}: {v}" for k, v in extra.items()]
        body = json.dumps(message, separators=(",", ":")).encode() if message is not None else b""
        if message is not None:
            lines.append("content-type: application/json")
        lines.append(f"content-length: {len(body)}")
        request = ("\r\n".join(lines) + "\r\n\r\n").encode() + body
        try:
            return await asyncio.wait_for(self._send(request), self.timeout)
        except TimeoutError:
            self._drop()
            raise WireError(f"no answer within {self.timeout:g} s") from None

    async def _send(self, request: bytes) -> tuple[int, dict[str, str], bytes]:
        for attempt in (0, 1):
            reused = self._writer is not None
            if self._writer is None:
                self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
            assert self._reader is not None and self._writer is not None
            try:
                self._writer.write(request)
                await self._writer.drain()
                head = await self._reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError) as exc:
                self._drop()
                if reused and attempt == 0 and not getattr(exc, "partial", b""):
                    continue  # the server closed an idle connection: reopen it
                raise WireError(f"connection lost: {type(exc).__name__}") from None
            return await self._response(head)
        raise AssertionError("unreachable")

    async def _response(self, head: bytes) -> tuple[int, dict[str, str], bytes]:
        assert self._reader is not None
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        try:
            status = int(status_line.split(" ", 2)[1])
        except (IndexError, ValueError):
            self._drop()
            raise WireError(f"not an HTTP status line: {status_line[:80]!r}") from None
        headers: dict[str, str] = {}
        for line in header_lines:
            if line:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
        try:
            if "chunked" in headers.get("transfer-encoding", "").lower():
                body = bytearray()
                while size := int((await self._reader.readuntil(b"\r\n")).split(b";")[0], 16):
                    body += (await self._reader.readexactly(size + 2))[:-2]
                while await self._reader.readuntil(b"\r\n") != b"\r\n":
                    pass  # trailers
                data = bytes(body)
            elif "content-length" in headers:
                data = await self._reader.readexactly(int(headers["content-length"]))
            else:
                data = await self._reader.read()
                headers["connection"] = "close"
        except (asyncio.IncompleteReadError, ConnectionError, ValueError) as exc:
            self._drop()
            raise WireError(f"broken HTTP body: {type(exc).__name__}") from None
        if headers.get("connection", "").lower() == "close":
            self._drop()
        return status, headers, data

    def _drop(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
