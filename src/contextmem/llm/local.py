"""The offline local model: llama.cpp running a GGUF file in this process.

Which file, and whether its bytes are the pinned ones, is :mod:`.local_files`' job; how messages read
as plain chat dicts is :mod:`contextmem.formats.llama`'s; tool calls written as text, :mod:`.local_tools`'.
This module is the model seen as an :class:`~contextmem.llm.base.LLM`, over one of two runtimes (an
:class:`Engine` each, answering OpenAI-shaped chat calls):

* ``xllamacpp`` (:mod:`.local_xllamacpp`, the ``local`` extra): llama.cpp's own server, prebuilt wheels;
* ``llama_cpp`` (:mod:`.local_llamacpp`, the ``local-llamacpp`` extra): llama-cpp-python, compiled.

``runtime=None`` takes the first of these that is installed, in that order.

Concurrency: one engine is loaded per process and per (runtime, file, ``n_ctx``, ``n_threads``,
``extra_buffers``), and shared by every :class:`LocalLLM` using it; its lock serialises calls on it, and
generation runs in a worker thread so the event loop never blocks. Streaming holds the lock until the
stream ends or is closed.

The lock serialises, but does not order: every :class:`LocalLLM` sharing an engine also shares one
single-slot :class:`~.scheduler.EndpointGate` (see :meth:`LocalLLM._gate_key`), so a reply waiting for
the model goes before a queued summary. A summary already generating is not interrupted, and a call
cancelled mid-generation (a summary's timeout) leaves its worker thread running to the end of that
generation (a non-streamed completion has no stop hook in either runtime): the next call waits on the lock.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from collections.abc import AsyncGenerator, Callable, Hashable
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, TypeVar

from ..errors import ConfigError, brief
from ..formats.llama import render_tools, to_llama_messages, with_tools_listed
from ..messages import AssistantMessage, ToolCall, text_of
from . import local_llamacpp, local_xllamacpp
from .base import BaseLLM, ChatResponse, ModelCall, StreamEvent, Usage
from .local_files import DEFAULT_LOCAL_MODEL, PACKAGED_MODELS, PROVIDER, resolve_local_model
from .local_tools import CallHold, read_tool_calls

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "PACKAGED_MODELS",
    "RUNTIMES",
    "Engine",
    "LocalLLM",
    "cpu_has_amx",
    "render_tools",
    "resolve_local_model",
    "to_llama_messages",
]
# DEFAULT_LOCAL_MODEL, PACKAGED_MODELS, resolve_local_model, render_tools and to_llama_messages are
# re-exported from their homes (.local_files, ..formats.llama) for code that imported them from here.

T = TypeVar("T")

DEFAULT_N_CTX = 8192  # room for a summary prompt (previous summary + a chunk of history) and its reply
DEFAULT_N_THREADS = 2
DEFAULT_MAX_TOKENS = 512
MAX_TOOL_CALLS = 16  # a reply naming more is read as its first 16: a small model looping on calls
# The sampler, sent with every call so that both runtimes sample alike whatever their versions default
# to (llama.cpp's own defaults today, in both): the rest of the chain (penalty window 64 tokens, no
# typical-p, DRY or XTC) is the same default in both.
SAMPLING: dict[str, float | int] = {"top_k": 40, "top_p": 0.95, "min_p": 0.05}
NO_PENALTY = 1.0  # the repeat penalty of a call that offers tools (see LocalLLM)


class Engine(Protocol):
    """A loaded model answering OpenAI-shaped chat calls; it maps its own errors to contextmem's."""

    lock: threading.Lock  # held by the caller around each call
    takes_tools: bool  # whether ``tools`` reach the model through its template (else: listed as text)

    def chat(self, call: dict[str, Any]) -> dict[str, Any]:
        """A ``chat.completion`` for ``call`` (messages, tools, max_tokens, temperature, repeat_penalty,
        :data:`SAMPLING` and seed)."""
        ...

    def stream(
        self, call: dict[str, Any], emit: Callable[[dict[str, Any]], None], stop: threading.Event
    ) -> None:
        """``chat.completion.chunk`` dicts to ``emit``, the last with ``usage``; returns early on ``stop``."""
        ...


#: runtime name -> its module (``installed()``, ``check()``, ``load(path, n_ctx, n_threads, extra_buffers)``),
#: in the order ``runtime=None`` tries them.
RUNTIMES: dict[str, ModuleType] = {
    local_xllamacpp.NAME: local_xllamacpp,
    local_llamacpp.NAME: local_llamacpp,
}


def _runtime(name: str | None) -> ModuleType:
    """The runtime called ``name``, checked installed; ``None``: the first installed one."""
    if name is None:
        for module in RUNTIMES.values():
            if module.installed():
                return module
        local_xllamacpp.check()  # raises, naming the `local` extra
    found = RUNTIMES.get(name or "")
    if found is None:
        raise ConfigError(
            f"unknown local runtime {name!r}. Fix: use one of {sorted(RUNTIMES)!r}, or leave it unset.",
        )
    found.check()
    return found


def cpu_has_amx() -> bool:
    """Whether the CPU advertises Intel AMX (Linux only; ``False`` where unknown)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return any(line.startswith("flags") and " amx_int8" in line for line in f)
    except OSError:
        return False


def _tool_calls(message: dict[str, Any], names: set[str]) -> tuple[ToolCall, ...]:
    """The calls a runtime parsed itself (OpenAI ``tool_calls``), for the tools offered only."""
    calls: list[ToolCall] = []
    for raw in message.get("tool_calls") or ():
        function = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(function, dict) or function.get("name") not in names:
            continue
        arguments = function.get("arguments")
        text = arguments if isinstance(arguments, str) else "{}"
        calls.append(ToolCall(str(raw.get("id") or f"call_{len(calls)}"), function["name"], text))
    return tuple(calls)


class _Deltas:
    """A stream's tool-call deltas (``index``, ``id``, name and argument pieces) joined into messages."""

    def __init__(self) -> None:
        self.calls: dict[int, dict[str, Any]] = {}

    def feed(self, deltas: Any) -> None:
        for delta in deltas or ():
            if not isinstance(delta, dict) or len(self.calls) > MAX_TOOL_CALLS:
                continue
            index = delta.get("index", 0)
            call = self.calls.setdefault(index if isinstance(index, int) else 0, {"function": {}})
            call["id"] = call.get("id") or delta.get("id")
            function = delta.get("function") or {}
            if name := function.get("name"):
                call["function"]["name"] = name
            if isinstance(piece := function.get("arguments"), str):
                call["function"]["arguments"] = call["function"].get("arguments", "") + piece

    def message(self) -> dict[str, Any]:
        return {"tool_calls": [self.calls[i] for i in sorted(self.calls)]}


class LocalLLM(BaseLLM):
    """An :class:`~contextmem.llm.base.LLM` running a GGUF model in-process with llama.cpp.

    ``model`` is a spec of :func:`~.local_files.resolve_local_model` (``"local"``, ``"local:NAME"`` or a
    path). The file is resolved and verified at construction (cheap errors early); the weights load on the
    first call, once per process. ``runtime`` is a name of :data:`RUNTIMES`, or ``None`` for the first
    installed. ``max_tokens`` is the default reply budget; ``repeat_penalty`` keeps small models from looping,
    which they otherwise do on long summaries: it applies to calls that offer no tools. A call offering tools
    is not penalised: llama.cpp's server counts the prompt's last tokens (the user's message) in the penalty's
    window, where llama-cpp-python counts the reply's only, so with xllamacpp a ``memory_write`` that quoted
    the user was pushed off their words (Chinese facts saved in English: save requests 6.4 of 12 over 7 runs
    at 1.1; 9 and 7 without). ``extra_buffers`` turns llama.cpp's repacked weight layouts on or off; by
    default they are off on AMX CPUs, where llama-cpp-python crashes (see
    :func:`.local_llamacpp.model_params`). ``seed`` fixes the sampler's seed for every call; by default each
    call draws a new one, in both runtimes: llama-cpp-python, left to itself, derives its seeds from one fixed
    seed, so each process replayed the same draws (a sampled evaluation then showed one draw as a rate), where
    llama.cpp's server draws at random.
    """

    def __init__(
        self,
        model: str = PROVIDER,
        *,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int = DEFAULT_N_THREADS,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.2,
        repeat_penalty: float = 1.1,
        extra_buffers: bool | None = None,
        cache_dir: Path | None = None,
        runtime: str | None = None,
        seed: int | None = None,
    ) -> None:
        # the runtime first: without one, the error names the extra to install, not a missing model part
        self._runtime = _runtime(runtime)
        self.runtime: str = self._runtime.NAME
        self.path = resolve_local_model(model, cache_dir=cache_dir)
        self.name = f"{PROVIDER}:{self.path.stem}"
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.repeat_penalty = repeat_penalty
        if seed is not None and (type(seed) is not int or not 0 <= seed < 2**32):
            raise ConfigError(
                f"local model seed {brief(seed)} is not an integer from 0 to 2**32 - 1. "
                "Fix: pass such an integer, or None for a new seed each call."
            )
        self.seed = seed
        self.extra_buffers = not cpu_has_amx() if extra_buffers is None else extra_buffers

    @property
    def context_window(self) -> int:
        """How many tokens one call may hold, prompt and reply (see :class:`~contextmem.llm.base.LLM`)."""
        return self.n_ctx

    _gate_slots = 1  # one engine runs one call at a time

    def _gate_key(self) -> Hashable:
        """The loaded engine these calls run on (the key its runtime's ``load`` shares it by)."""
        return ("local", self.runtime, self.path.resolve(), self.n_ctx, self.n_threads, self.extra_buffers)

    def _engine(self) -> Engine:
        engine: Engine = self._runtime.load(self.path, self.n_ctx, self.n_threads, self.extra_buffers)
        return engine

    def _request(self, call: ModelCall) -> dict[str, Any]:
        return {
            "messages": to_llama_messages(call.messages),
            "tools": call.tools,
            "max_tokens": call.max_tokens if call.max_tokens is not None else self.max_tokens,
            "temperature": call.temperature if call.temperature is not None else self.temperature,
            "repeat_penalty": NO_PENALTY if call.tools else self.repeat_penalty,
            **SAMPLING,
            "seed": self.seed if self.seed is not None else secrets.randbits(31),
        }

    @staticmethod
    def _offered(engine: Engine, request: dict[str, Any]) -> dict[str, Any]:
        """The call for the engine: tools through the model's chat template when it takes them (the
        model then calls them, :mod:`.local_tools`), else listed as text in the system prompt."""
        tools = request["tools"]
        call = {k: v for k, v in request.items() if k != "tools"}
        if tools and engine.takes_tools:
            call["tools"] = [t.to_openai() for t in tools]
        else:
            call["messages"] = with_tools_listed(request["messages"], tools)
        return call

    def _response(
        self, message: dict[str, Any], usage: Usage, finish_reason: str | None, request: dict[str, Any]
    ) -> ChatResponse:
        """The reply, with its tool calls (for the tools offered): those the runtime parsed, and those its
        text holds."""
        names = {t.name for t in request["tools"]}
        content = message.get("content")
        text, from_text = read_tool_calls(content if isinstance(content, str) else "", names)
        calls = (*_tool_calls(message, names), *from_text)[:MAX_TOOL_CALLS]
        if calls:
            finish_reason = "tool_calls"
        return ChatResponse(AssistantMessage(text or None, tool_calls=calls), usage, finish_reason, self.name)

    def _complete_sync(self, request: dict[str, Any]) -> ChatResponse:
        engine = self._engine()
        with engine.lock:
            raw = engine.chat(self._offered(engine, request))
        choice = raw["choices"][0]
        return self._response(
            choice["message"], Usage.from_openai(raw.get("usage")), choice.get("finish_reason"), request
        )

    async def _complete(self, request: dict[str, Any]) -> ChatResponse:
        return await asyncio.to_thread(self._complete_sync, request)

    def _stream_sync(
        self, request: dict[str, Any], emit: Callable[[StreamEvent], None], stop: threading.Event
    ) -> None:
        """Emit text deltas, then ``done``; ``stop`` ends it early and releases the lock."""
        engine = self._engine()
        parts: list[str] = []
        finish: list[str] = []
        usage: list[Usage] = []
        deltas = _Deltas()
        hold = CallHold(holding=bool(request["tools"]))  # a reply that may be a tool call is not streamed

        def on_chunk(chunk: dict[str, Any]) -> None:
            if chunk.get("usage"):
                usage.append(Usage.from_openai(chunk["usage"]))
            for choice in chunk.get("choices") or ():
                finish.extend([choice["finish_reason"]] if choice.get("finish_reason") else [])
                delta = choice.get("delta") or {}
                deltas.feed(delta.get("tool_calls"))
                if isinstance(text := delta.get("content"), str) and text:
                    parts.append(text)
                    if out := hold.feed(text):
                        emit(StreamEvent("text", text=out))

        with engine.lock:
            engine.stream(self._offered(engine, request), on_chunk, stop)
        if stop.is_set():
            return
        message = {**deltas.message(), "content": "".join(parts)}
        response = self._response(
            message, usage[-1] if usage else Usage(), finish[-1] if finish else None, request
        )
        if hold.holding and (held := text_of(response.message.content)):
            emit(StreamEvent("text", text=held))
        for call in response.message.tool_calls:
            emit(StreamEvent("tool_call", call.name))
        emit(StreamEvent("done", response=response))

    def _stream(self, request: dict[str, Any]) -> AsyncGenerator[StreamEvent, None]:
        return _in_worker_thread(lambda emit, stop: self._stream_sync(request, emit, stop))


async def _in_worker_thread(
    produce: Callable[[Callable[[T], None], threading.Event], None],
) -> AsyncGenerator[T, None]:
    """The items a blocking producer emits, made in a worker thread and handed to the event loop as they
    come.

    Closing this generator sets the event ``produce`` was given, then waits for the thread to finish, so
    whatever the producer holds (the model's lock) is released when the consumer stops.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    stop = threading.Event()

    def emit(item: T) -> None:
        loop.call_soon_threadsafe(queue.put_nowait, ("item", item))

    def run() -> None:
        try:
            produce(emit, stop)
        except BaseException as exc:  # handed to the consumer, re-raised there
            loop.call_soon_threadsafe(queue.put_nowait, ("error", exc))
        else:
            loop.call_soon_threadsafe(queue.put_nowait, ("end", None))

    worker = asyncio.ensure_future(asyncio.to_thread(run))
    try:
        while True:
            kind, item = await queue.get()
            if kind == "error":
                raise item
            if kind == "end":
                return
            yield item
    finally:
        stop.set()
        await asyncio.shield(worker)
