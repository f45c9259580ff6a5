"""The offline local model: llama.cpp running a GGUF file in-process.

Which file, and whether its bytes are the pinned ones, is :mod:`.local_files`' job; how messages read
as plain chat dicts is :mod:`contextmem.formats.llama`'s. This module is the runtime.

Concurrency: one llama.cpp instance is loaded per process and per (file, ``n_ctx``, ``n_threads``,
``extra_buffers``), and shared by every :class:`LocalLLM` using it; a lock serialises calls on it, and
generation runs in a worker thread so the event loop never blocks. Streaming holds the lock until the
stream ends or is closed.

The lock serialises, but does not order: every :class:`LocalLLM` sharing an instance also shares one
single-slot :class:`~.scheduler.EndpointGate` (see :meth:`LocalLLM._gate_key`), so a reply waiting for
the model goes before a queued summary. A summary already generating is not interrupted, and a call
cancelled mid-generation (a summary's timeout) leaves its worker thread running to the end of that
generation (llama-cpp-python's non-streamed completion has no stop hook): the next call waits on the lock.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import importlib
import threading
from collections.abc import AsyncGenerator, Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ..errors import ContextOverflowError, LLMError, MissingExtraError
from ..formats.llama import render_tools, to_llama_messages, with_tools_listed
from ..messages import AssistantMessage, text_of
from .base import BaseLLM, ChatResponse, ModelCall, StreamEvent, Usage
from .local_files import DEFAULT_LOCAL_MODEL, PACKAGED_MODELS, PROVIDER, resolve_local_model
from .local_tools import CallHold, read_tool_calls, template_takes_tools

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "PACKAGED_MODELS",
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


# --- the llama.cpp instance, loaded once per process ------------------------------------------------


@dataclass(slots=True)
class _Loaded:
    llama: Any  # llama_cpp.Llama
    lock: threading.Lock


_LOADED: dict[tuple[Path, int, int, bool], _Loaded] = {}
_LOADED_LOCK = threading.Lock()


def _import_llama_cpp() -> Any:
    try:
        return importlib.import_module("llama_cpp")
    except ImportError:
        raise MissingExtraError("llama_cpp", "local") from None


def cpu_has_amx() -> bool:
    """Whether the CPU advertises Intel AMX (Linux only; ``False`` where unknown)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return any(line.startswith("flags") and " amx_int8" in line for line in f)
    except OSError:
        return False


@contextmanager
def _model_params(extra_buffers: bool) -> Iterator[None]:
    """Set ``use_extra_bufts`` for the ``Llama`` constructed inside (its constructor does not expose it).

    Extra buffer types are llama.cpp's repacked weight layouts, AMX among them. Built with native CPU
    flags on an AMX machine (Sapphire Rapids under Firecracker, measured), llama-cpp-python 0.3.36
    segfaults in ``ggml_backend_amx_mul_mat`` on any batch of more than one token; without extra buffers it
    runs. Callers hold ``_LOADED_LOCK``, so the patch is never seen by two loads at once.
    """
    params: Any = importlib.import_module("llama_cpp.llama_cpp")
    original = params.llama_model_default_params

    def patched() -> Any:
        p = original()
        p.use_extra_bufts = extra_buffers
        return p

    params.llama_model_default_params = patched
    try:
        yield
    finally:
        params.llama_model_default_params = original


@atexit.register
def _close_models() -> None:
    """Free loaded models before interpreter teardown (llama.cpp's own __del__ fails at that point)."""
    with _LOADED_LOCK:
        for loaded in _LOADED.values():
            with contextlib.suppress(Exception):
                loaded.llama.close()
        _LOADED.clear()


def _load(path: Path, n_ctx: int, n_threads: int, extra_buffers: bool) -> _Loaded:
    key = (path.resolve(), n_ctx, n_threads, extra_buffers)
    with _LOADED_LOCK:
        loaded = _LOADED.get(key)
        if loaded is None:
            llama_cpp = _import_llama_cpp()
            try:
                with _model_params(extra_buffers):
                    llama = llama_cpp.Llama(
                        model_path=str(path),
                        n_ctx=n_ctx,
                        n_threads=n_threads,
                        n_threads_batch=n_threads,
                        verbose=False,
                    )
            except (ValueError, RuntimeError) as exc:
                raise LLMError(
                    f"llama.cpp could not load {str(path)!r}: {exc}. Fix: check that it is a complete GGUF "
                    "model supported by llama-cpp-python, or use 'local' for the packaged default.",
                    provider=PROVIDER,
                ) from exc
            loaded = _LOADED[key] = _Loaded(llama, threading.Lock())
        return loaded


def _translate(exc: Exception, n_ctx: int) -> LLMError:
    """llama.cpp's exceptions as contextmem errors: the one place they are mapped."""
    text = str(exc)
    if "exceed context window" in text:
        return ContextOverflowError(
            f"local model: {text}. Fix: compact the conversation or raise n_ctx (now {n_ctx}).",
            provider=PROVIDER,
            limit=n_ctx,
        )
    return LLMError(f"local model failed: {type(exc).__name__}: {text}", provider=PROVIDER)


def _stream_usage(llama: Any, messages: list[dict[str, str]], reply: str) -> Usage:
    """llama.cpp's stream reports no usage: count the rendered prompt and the reply with its tokenizer."""
    chat_format = importlib.import_module("llama_cpp.llama_chat_format")
    template = llama.metadata.get("tokenizer.chat_template", "")
    eos, bos = llama.token_eos(), llama.token_bos()
    formatter = chat_format.Jinja2ChatFormatter(
        template=template,
        eos_token=llama.detokenize([eos], special=True).decode() if eos != -1 else "",
        bos_token=llama.detokenize([bos], special=True).decode() if bos != -1 else "",
    )
    prompt = formatter(messages=messages).prompt if template else "\n".join(m["content"] for m in messages)
    prompt_tokens = llama.tokenize(prompt.encode(), add_bos=True, special=True)
    reply_tokens = llama.tokenize(reply.encode(), add_bos=False, special=False) if reply else []
    return Usage(prompt_tokens=len(prompt_tokens), completion_tokens=len(reply_tokens))


class LocalLLM(BaseLLM):
    """An :class:`~contextmem.llm.base.LLM` running a GGUF model in-process with llama.cpp.

    ``model`` is a spec of :func:`~.local_files.resolve_local_model` (``"local"``, ``"local:NAME"`` or
    a path). The file is resolved and verified at construction (cheap errors early); the weights load on the
    first call, once per process. ``max_tokens`` is the default reply budget; ``repeat_penalty`` keeps
    small models from looping, which they otherwise do on long summaries. ``extra_buffers`` turns
    llama.cpp's repacked weight layouts on or off; by default they are off on AMX CPUs, where they crash
    (see :func:`_model_params`).
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
    ) -> None:
        self.path = resolve_local_model(model, cache_dir=cache_dir)
        self.name = f"{PROVIDER}:{self.path.stem}"
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.repeat_penalty = repeat_penalty
        self.extra_buffers = not cpu_has_amx() if extra_buffers is None else extra_buffers
        _import_llama_cpp()  # fail now, with the extra to install, rather than on the first call

    @property
    def context_window(self) -> int:
        """How many tokens one call may hold, prompt and reply (see :class:`~contextmem.llm.base.LLM`)."""
        return self.n_ctx

    _gate_slots = 1  # one llama.cpp instance runs one call at a time

    def _gate_key(self) -> Hashable:
        """The loaded llama.cpp instance these calls run on (the key :func:`_load` shares it by)."""
        return ("local", self.path.resolve(), self.n_ctx, self.n_threads, self.extra_buffers)

    def _request(self, call: ModelCall) -> dict[str, Any]:
        return {
            "messages": to_llama_messages(call.messages),
            "tools": call.tools,
            "max_tokens": call.max_tokens if call.max_tokens is not None else self.max_tokens,
            "temperature": call.temperature if call.temperature is not None else self.temperature,
            "repeat_penalty": self.repeat_penalty,
        }

    @staticmethod
    def _offered(llama: Any, request: dict[str, Any]) -> dict[str, Any]:
        """The call for llama.cpp: tools through the model's chat template when it takes them (the
        model then calls them, :mod:`.local_tools`), else listed as text in the system prompt."""
        tools = request["tools"]
        call = {k: v for k, v in request.items() if k != "tools"}
        if tools and template_takes_tools(llama.metadata.get("tokenizer.chat_template", "")):
            call["tools"] = [t.to_openai() for t in tools]
        else:
            call["messages"] = with_tools_listed(request["messages"], tools)
        return call

    def _response(
        self, text: str, usage: Usage, finish_reason: str | None, request: dict[str, Any]
    ) -> ChatResponse:
        """The reply, with the tool calls its text holds (for the tools offered) as calls."""
        text, calls = read_tool_calls(text, {t.name for t in request["tools"]})
        if calls:
            finish_reason = "tool_calls"
        return ChatResponse(AssistantMessage(text or None, tool_calls=calls), usage, finish_reason, self.name)

    def _complete_sync(self, request: dict[str, Any]) -> ChatResponse:
        loaded = _load(self.path, self.n_ctx, self.n_threads, self.extra_buffers)
        with loaded.lock:
            try:
                raw = loaded.llama.create_chat_completion(**self._offered(loaded.llama, request))
            except (ValueError, RuntimeError) as exc:
                raise _translate(exc, self.n_ctx) from exc
        choice = raw["choices"][0]
        text = choice["message"].get("content") or ""
        usage = Usage.from_openai(raw.get("usage"))
        return self._response(text, usage, choice.get("finish_reason"), request)

    async def _complete(self, request: dict[str, Any]) -> ChatResponse:
        return await asyncio.to_thread(self._complete_sync, request)

    def _stream_sync(self, request: dict[str, Any], stop: threading.Event) -> Iterator[StreamEvent]:
        """Yield text deltas, then ``done``; ``stop`` ends it early and releases the lock."""
        loaded = _load(self.path, self.n_ctx, self.n_threads, self.extra_buffers)
        parts: list[str] = []
        finish: str | None = None
        hold = CallHold(holding=bool(request["tools"]))  # a reply that may be a tool call is not streamed
        with loaded.lock:
            offered = self._offered(loaded.llama, request)
            try:
                chunks = loaded.llama.create_chat_completion(**offered, stream=True)
                for chunk in chunks:
                    if stop.is_set():
                        chunks.close()
                        return
                    choice = chunk["choices"][0]
                    finish = choice.get("finish_reason") or finish
                    delta = choice.get("delta", {}).get("content")
                    if delta:
                        parts.append(delta)
                        if out := hold.feed(delta):
                            yield StreamEvent("text", text=out)
            except (ValueError, RuntimeError) as exc:
                raise _translate(exc, self.n_ctx) from exc
            text = "".join(parts)
            usage = _stream_usage(loaded.llama, offered["messages"], text)
        response = self._response(text, usage, finish, request)
        if hold.holding and (held := text_of(response.message.content)):
            yield StreamEvent("text", text=held)
        for call in response.message.tool_calls:
            yield StreamEvent("tool_call", call.name)
        yield StreamEvent("done", response=response)

    def _stream(self, request: dict[str, Any]) -> AsyncGenerator[StreamEvent, None]:
        return _in_worker_thread(lambda stop: self._stream_sync(request, stop))


async def _in_worker_thread(produce: Callable[[threading.Event], Iterator[T]]) -> AsyncGenerator[T, None]:
    """The items of a blocking generator, made in a worker thread and handed to the event loop as they come.

    Closing this generator sets the event ``produce`` was given, then waits for the thread to finish, so
    whatever the generator holds (the model's lock) is released when the consumer stops.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    stop = threading.Event()

    def run() -> None:
        try:
            for item in produce(stop):
                loop.call_soon_threadsafe(queue.put_nowait, ("item", item))
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
