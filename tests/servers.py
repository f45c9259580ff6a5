"""Real local HTTP servers that speak the OpenAI and Anthropic chat APIs, for tests without a network.

Fakes over mocks: the provider SDKs talk to these servers over a real socket on ``127.0.0.1`` (an ephemeral
port), through their real HTTP stack, SSE parser and error handling. Each server plays a script — a queue
of replies, errors and dropped connections — and records every request it received, so a test can assert
on what the SDK actually sent::

    with FakeOpenAIServer([ServerReply("你好")]) as server:
        llm = OpenAICompatLLM("gpt-test", base_url=server.base_url, api_key="sk-test")
        ...
        assert server.requests[0].body["messages"][0]["content"] == "hi"

The servers check what the real APIs check and tests depend on (a tool result must answer a tool call of
the message before it, Anthropic needs ``max_tokens`` and no ``system`` role in ``messages``, the API key
when one is set), and answer such mistakes with the provider's own 400/401 error shapes.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, ClassVar, TypeAlias

from contextmem.llm.base import Usage
from contextmem.messages import ToolCall


def _no_headers() -> Mapping[str, str]:
    return {}


_DEFAULT_USAGE = Usage(prompt_tokens=12, completion_tokens=7)


@dataclass(frozen=True, slots=True)
class ServerReply:
    """A successful model reply. ``usage.cached_tokens`` are cache reads, part of ``usage.prompt_tokens``.

    ``cache_write_tokens`` (Anthropic only) is the part of the prompt written to the cache; it too is part
    of ``usage.prompt_tokens``, so an adapter that sums Anthropic's three input counters gets it back.
    """

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str | None = None
    usage: Usage = _DEFAULT_USAGE
    cache_write_tokens: int = 0
    finish_reason: str | None = None  # default: the provider's "stop" or "tool calls" reason
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class ServerError:
    """An HTTP error: status, JSON body (or raw text) and headers such as ``Retry-After``."""

    status: int
    body: Mapping[str, Any] | str
    headers: Mapping[str, str] = field(default_factory=_no_headers)
    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class Disconnect:
    """Close the connection without answering (after ``delay`` seconds): a dropped connection."""

    delay: float = 0.0


@dataclass(frozen=True, slots=True)
class Empty:
    """A 200 with nothing in it, as a broken proxy or server sends: a stream request gets an SSE stream
    that closes before its first event, any other an empty body with ``content_type``."""

    content_type: str = "text/plain"
    delay: float = 0.0


Scripted: TypeAlias = ServerReply | ServerError | Disconnect | Empty | str


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request as received. Header names are lower-case; ``body`` is the decoded JSON."""

    method: str
    path: str
    headers: Mapping[str, str]
    body: Any


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago (for servers started in a subprocess)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def served_window(model: str, window: int) -> dict[str, Any]:
    """``static=`` for a server that states its window as vLLM does (``max_model_len`` in /v1/models)."""
    return {"/v1/models": {"object": "list", "data": [{"id": model, "max_model_len": window}]}}


def openai_error(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
) -> ServerError:
    """An error in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``."""
    body = {"error": {"message": message, "type": type, "param": None, "code": code}}
    return ServerError(status, body, dict(headers or {}))


def anthropic_error(
    status: int,
    message: str,
    *,
    type: str = "invalid_request_error",
    headers: Mapping[str, str] | None = None,
) -> ServerError:
    """An error in Anthropic's shape: ``{"type": "error", "error": {"type", "message"}}``."""
    body = {"type": "error", "error": {"type": type, "message": message}}
    return ServerError(status, body, dict(headers or {}))


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:
        self.server.owner._handle(self)

    def do_GET(self) -> None:
        self.server.owner._handle(self)

    def read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def send_json(self, status: int, body: Mapping[str, Any] | str, headers: Mapping[str, str] = {}) -> None:
        raw = (body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json" if not isinstance(body, str) else "text/plain")
        self.send_header("Content-Length", str(len(raw)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(raw)

    def send_empty(self, content_type: str, *, stream: bool) -> None:
        """A 200 with no content: an event stream closed before its first event, or an empty body."""
        if stream:
            self.send_sse(())
            return
        self.send_response(200)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def send_sse(self, events: Iterable[tuple[str | None, str]]) -> None:
        """Stream ``(event name, data)`` pairs as server-sent events, flushing each one."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for name, data in events:
            frame = (f"event: {name}\n" if name else "") + f"data: {data}\n\n"
            self.wfile.write(frame.encode())
            self.wfile.flush()
        self.close_connection = True


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    owner: _ScriptedServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that timed out and hung up is a scripted scenario, not a server bug.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _ScriptedServer:
    """The shared machinery: socket, thread, script queue, request log. Subclasses speak one API."""

    path: ClassVar[str]
    provider: ClassVar[str]

    def __init__(
        self,
        script: Iterable[Scripted] = (),
        *,
        default: Scripted | None = None,
        api_key: str | None = None,
        chunk_size: int = 3,
        static: Mapping[str, Any] | None = None,
        respond: Callable[[Any], Scripted] | None = None,
    ) -> None:
        self._script: list[Scripted] = list(script)
        self.respond = respond  # a provider that answers by what it was sent: called with each valid body
        self.default = default
        self.static = dict(static or {})  # path -> JSON answer: GET /v1/models, /props, POST /api/show
        self.api_key = api_key
        self.chunk_size = chunk_size
        self.requests: list[RecordedRequest] = []
        self.probes: list[RecordedRequest] = []  # requests to the static routes
        self._lock = threading.Lock()
        self._server: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        server = _HTTPServer(("127.0.0.1", 0), _Handler)
        server.owner = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, args=(0.02,), name=type(self).__name__, daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> _ScriptedServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not running. Fix: use it as a context manager.")
        return int(self._server.server_address[1])

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """What to pass as the SDK's ``base_url``."""
        raise NotImplementedError

    # --- script ------------------------------------------------------------------------------------

    def push(self, *entries: Scripted) -> None:
        with self._lock:
            self._script.extend(entries)

    @property
    def pending(self) -> int:
        """Scripted entries not yet played."""
        with self._lock:
            return len(self._script)

    def _next(self) -> Scripted | None:
        with self._lock:
            return self._script.pop(0) if self._script else self.default

    # --- one request -------------------------------------------------------------------------------

    def _handle(self, h: _Handler) -> None:
        raw = h.read_body()
        try:
            body = json.loads(raw) if raw else None
        except json.JSONDecodeError:
            body = raw.decode(errors="replace")
        headers = {k.lower(): v for k, v in h.headers.items()}
        path = h.path.split("?")[0]
        if path in self.static:  # a probe (GET /v1/models, /props, POST /api/show): logged apart
            with self._lock:
                self.probes.append(RecordedRequest(h.command, path, headers, body))
            h.send_json(200, self.static[path])
            return
        with self._lock:
            self.requests.append(RecordedRequest(h.command, path, headers, body))
        if path != self.path or h.command != "POST":
            h.send_json(404, self._error_body("not_found_error", f"no route {h.command} {h.path}"))
            return
        if self.api_key is not None and not self._authorized(headers):
            h.send_json(401, self._error_body("authentication_error", "invalid api key"))
            return
        problem = self._check(body)
        if problem:
            h.send_json(400, self._error_body("invalid_request_error", problem))
            return
        over = self._over_window(body)
        if over is not None:
            h.send_json(400, over)
            return
        entry = self.respond(body) if self.respond is not None else self._next()
        if entry is None:
            message = f"{type(self).__name__} ran out of scripted replies at request {len(self.requests)}"
            h.send_json(400, self._error_body("invalid_request_error", message))
            return
        if isinstance(entry, str):
            entry = ServerReply(entry)
        time.sleep(entry.delay)
        if isinstance(entry, Disconnect):
            h.close_connection = True
            return
        if isinstance(entry, ServerError):
            h.send_json(entry.status, entry.body, entry.headers)
            return
        assert isinstance(body, dict)  # _check guarantees it
        if isinstance(entry, Empty):
            h.send_empty(entry.content_type, stream=bool(body.get("stream")))
            return
        if body.get("stream"):
            h.send_sse(self._stream_events(entry, body))
        else:
            h.send_json(200, self._response(entry, body))

    def _chunks(self, text: str) -> Iterator[str]:
        size = max(1, self.chunk_size)
        return (text[i : i + size] for i in range(0, len(text), size))

    # --- per API -----------------------------------------------------------------------------------

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        raise NotImplementedError

    def _error_body(self, type: str, message: str) -> dict[str, Any]:
        raise NotImplementedError

    def _check(self, body: Any) -> str | None:
        raise NotImplementedError

    def _over_window(self, body: Any) -> dict[str, Any] | None:
        """The provider's context-length error body when the request is over ``context_window``."""
        return None

    def _response(self, reply: ServerReply, request: Mapping[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def _stream_events(
        self, reply: ServerReply, request: Mapping[str, Any]
    ) -> Iterator[tuple[str | None, str]]:
        raise NotImplementedError


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


class FakeOpenAIServer(_ScriptedServer):
    """OpenAI Chat Completions (``POST /v1/chat/completions``), plain and SSE-streamed.

    Replies carry ``reasoning_content`` (as DeepSeek, Qwen and vLLM send it), tool calls, and usage with
    ``prompt_tokens_details.cached_tokens``; a stream sends the usage chunk only when the request asked
    for it with ``stream_options.include_usage``, as OpenAI does.
    """

    path = "/v1/chat/completions"
    provider = "openai"
    context_window: int | None = None
    """When set, a request whose messages and tools are over it is refused as OpenAI refuses it (400,
    ``context_length_exceeded``). Counted with the o200k tokenizer over their JSON: an over-count, so a
    request it lets through fits."""

    def __enter__(self) -> FakeOpenAIServer:
        self.start()
        return self

    @property
    def base_url(self) -> str:
        return f"{self.origin}/v1"

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        return headers.get("authorization") == f"Bearer {self.api_key}"

    def _error_body(self, type: str, message: str) -> dict[str, Any]:
        return {"error": {"message": message, "type": type, "param": None, "code": None}}

    def _check(self, body: Any) -> str | None:
        if not isinstance(body, dict) or not body.get("model") or not body.get("messages"):
            return "you must provide a model parameter and a non-empty messages array"
        open_calls: set[str] = set()
        for i, msg in enumerate(body["messages"]):
            role = msg.get("role")
            if role == "tool":
                if msg.get("tool_call_id") not in open_calls:
                    return (
                        f"Invalid parameter: messages[{i}]: messages with role 'tool' must be a response "
                        "to a preceding message with 'tool_calls'."
                    )
                continue
            open_calls = {c["id"] for c in msg.get("tool_calls") or ()} if role == "assistant" else set()
        return None

    def _over_window(self, body: Any) -> dict[str, Any] | None:
        if self.context_window is None:
            return None
        from contextmem.tokens import get_counter

        sent = json.dumps([body.get("messages"), body.get("tools")], ensure_ascii=False)
        tokens = get_counter("o200k_base").count_text(sent)
        if tokens <= self.context_window:
            return None
        message = (
            f"This model's maximum context length is {self.context_window} tokens. However, your messages "
            f"resulted in {tokens} tokens. Please reduce the length of the messages."
        )
        error = self._error_body("invalid_request_error", message)
        error["error"].update(param="messages", code="context_length_exceeded")
        return error

    @staticmethod
    def _usage(reply: ServerReply) -> dict[str, Any]:
        u = reply.usage
        return {
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "total_tokens": u.prompt_tokens + u.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": u.cached_tokens},
        }

    @staticmethod
    def _finish(reply: ServerReply) -> str:
        return reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")

    def _response(self, reply: ServerReply, request: Mapping[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.reasoning is not None:
            message["reasoning_content"] = reply.reasoning
        if reply.tool_calls:
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in reply.tool_calls
            ]
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request["model"],
            "choices": [
                {"index": 0, "message": message, "finish_reason": self._finish(reply), "logprobs": None}
            ],
            "usage": self._usage(reply),
        }

    def _stream_events(
        self, reply: ServerReply, request: Mapping[str, Any]
    ) -> Iterator[tuple[str | None, str]]:
        head = {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": request["model"],
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, str]:
            choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
            return None, _dumps({**head, "choices": [choice]})

        yield chunk({"role": "assistant", "content": ""})
        for piece in self._chunks(reply.reasoning or ""):
            yield chunk({"reasoning_content": piece})
        for piece in self._chunks(reply.text or ""):
            yield chunk({"content": piece})
        for index, call in enumerate(reply.tool_calls):
            opening = {"index": index, "id": call.id, "type": "function"}
            yield chunk({"tool_calls": [{**opening, "function": {"name": call.name, "arguments": ""}}]})
            for piece in self._chunks(call.arguments):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        yield chunk({}, self._finish(reply))
        if (request.get("stream_options") or {}).get("include_usage"):
            yield None, _dumps({**head, "choices": [], "usage": self._usage(reply)})
        yield None, "[DONE]"


class FakeAnthropicServer(_ScriptedServer):
    """Anthropic Messages (``POST /v1/messages``), plain and SSE-streamed.

    Streams send the real event sequence: ``message_start``, per block ``content_block_start`` /
    ``content_block_delta`` (``thinking_delta`` + ``signature_delta``, ``text_delta``,
    ``input_json_delta``) / ``content_block_stop``, a ``ping``, ``message_delta`` and ``message_stop``.
    """

    path = "/v1/messages"
    provider = "anthropic"

    def __enter__(self) -> FakeAnthropicServer:
        self.start()
        return self

    @property
    def base_url(self) -> str:
        return self.origin

    def _authorized(self, headers: Mapping[str, str]) -> bool:
        # Anthropic's SDKs send the key as ``x-api-key`` or, in newer versions, as a Bearer token.
        return self.api_key in (
            headers.get("x-api-key"),
            headers.get("authorization", "").removeprefix("Bearer "),
        )

    def _error_body(self, type: str, message: str) -> dict[str, Any]:
        return {"type": "error", "error": {"type": type, "message": message}}

    def _check(self, body: Any) -> str | None:
        if not isinstance(body, dict) or not body.get("model") or not body.get("messages"):
            return "model: Field required; messages: Field required"
        if not isinstance(body.get("max_tokens"), int):
            return "max_tokens: Field required"
        open_calls: set[str] = set()
        for i, msg in enumerate(body["messages"]):
            if msg.get("role") not in ("user", "assistant"):
                return f"messages.{i}.role: Input should be 'user' or 'assistant'"
            blocks = msg["content"] if isinstance(msg.get("content"), list) else []
            for block in blocks:
                if block.get("type") == "tool_result" and block.get("tool_use_id") not in open_calls:
                    return (
                        f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{block.get('tool_use_id')}. Each `tool_result` block must have a corresponding "
                        "`tool_use` block in the previous message."
                    )
            open_calls = {b["id"] for b in blocks if b.get("type") == "tool_use"}
        return None

    @staticmethod
    def _usage(reply: ServerReply, *, output: bool = True) -> dict[str, Any]:
        u = reply.usage
        return {
            "input_tokens": u.prompt_tokens - u.cached_tokens - reply.cache_write_tokens,
            "cache_read_input_tokens": u.cached_tokens,
            "cache_creation_input_tokens": reply.cache_write_tokens,
            "output_tokens": u.completion_tokens if output else 1,
        }

    @staticmethod
    def _stop(reply: ServerReply) -> str:
        return reply.finish_reason or ("tool_use" if reply.tool_calls else "end_turn")

    @staticmethod
    def _blocks(reply: ServerReply) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if reply.reasoning is not None:
            blocks.append({"type": "thinking", "thinking": reply.reasoning, "signature": "sig-fake"})
        if reply.text is not None:
            blocks.append({"type": "text", "text": reply.text})
        for call in reply.tool_calls:
            blocks.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": json.loads(call.arguments)}
            )
        return blocks

    def _message(
        self, reply: ServerReply, request: Mapping[str, Any], content: list[dict[str, Any]]
    ) -> dict[str, Any]:
        return {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": request["model"],
            "content": content,
            "stop_reason": None,
            "stop_sequence": None,
        }

    def _response(self, reply: ServerReply, request: Mapping[str, Any]) -> dict[str, Any]:
        message = self._message(reply, request, self._blocks(reply))
        return {**message, "stop_reason": self._stop(reply), "usage": self._usage(reply)}

    def _stream_events(
        self, reply: ServerReply, request: Mapping[str, Any]
    ) -> Iterator[tuple[str | None, str]]:
        def event(name: str, **data: Any) -> tuple[str, str]:
            return name, _dumps({"type": name, **data})

        start = {**self._message(reply, request, []), "usage": self._usage(reply, output=False)}
        yield event("message_start", message=start)
        for index, block in enumerate(self._blocks(reply)):
            kind = block["type"]
            if kind == "thinking":
                yield event(
                    "content_block_start",
                    index=index,
                    content_block={**block, "thinking": "", "signature": ""},
                )
                for piece in self._chunks(block["thinking"]):
                    yield event(
                        "content_block_delta",
                        index=index,
                        delta={"type": "thinking_delta", "thinking": piece},
                    )
                yield event(
                    "content_block_delta",
                    index=index,
                    delta={"type": "signature_delta", "signature": block["signature"]},
                )
            elif kind == "text":
                yield event("content_block_start", index=index, content_block={"type": "text", "text": ""})
                for piece in self._chunks(block["text"]):
                    yield event(
                        "content_block_delta", index=index, delta={"type": "text_delta", "text": piece}
                    )
            else:
                yield event("content_block_start", index=index, content_block={**block, "input": {}})
                for piece in self._chunks(json.dumps(block["input"], ensure_ascii=False)):
                    yield event(
                        "content_block_delta",
                        index=index,
                        delta={"type": "input_json_delta", "partial_json": piece},
                    )
            yield event("content_block_stop", index=index)
            if index == 0:
                yield event("ping")
        usage = {"output_tokens": reply.usage.completion_tokens}
        yield event(
            "message_delta", delta={"stop_reason": self._stop(reply), "stop_sequence": None}, usage=usage
        )
        yield event("message_stop")


__all__ = [
    "Disconnect",
    "Empty",
    "FakeAnthropicServer",
    "FakeOpenAIServer",
    "RecordedRequest",
    "Scripted",
    "ServerError",
    "ServerReply",
    "anthropic_error",
    "openai_error",
]
