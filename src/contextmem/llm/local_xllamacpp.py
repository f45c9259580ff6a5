"""The local model's default runtime: xllamacpp, llama.cpp's own C++ server embedded in-process.

Why this one: it ships prebuilt wheels (abi3, manylinux2014), so ``pip install 'contextmem[local]'``
compiles nothing, where llama-cpp-python compiles for minutes (``bench/results/local_runtime.md``). It
answers OpenAI-shaped chat calls through the GGUF's own Jinja chat template, tools included, and parses
the tool calls it recognises; :mod:`.local_tools` reads the ones it leaves as text.

Calls go through Python (``Server.handle_chat_completions``), not HTTP. The embedded server also listens,
always: on 127.0.0.1 only, on a port the OS picks, behind a random API key made at load and never shown,
with its web UI, its ``/props`` and the model hub turned off. It runs in threads of this process, so it
stops with it (a SIGKILL included: no orphan, no port left open); on a normal exit ``atexit`` frees it.
"""

from __future__ import annotations

import os
import secrets
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ContextOverflowError, LLMError, one_line
from .local_files import PROVIDER
from .local_runtime import Loaded, import_runtime, importable

__all__ = ["NAME", "XllamacppEngine", "check", "installed", "load"]

NAME = "xllamacpp"
MODULE = "xllamacpp"
LOOPBACK = "127.0.0.1"
QUIET = -1  # llama.cpp's log threshold: below every level, so the server logs nothing to stderr


def installed() -> bool:
    """Whether xllamacpp imports (a missing or broken install is ``False``)."""
    return importable(_import)


def check() -> None:
    """Raise :class:`MissingExtraError` unless xllamacpp imports."""
    _import()


def _import() -> Any:
    """The module, imported with OpenMP told to wait passively: every import of it goes through here.

    Its wheels run llama.cpp's threads with OpenMP (libgomp), whose threads spin while they wait for each
    other: beside other work on 2 cores, generation fell to 1-5 tokens/s, against 11-20 with passive
    waiting (alternated runs, load 5-9; bench/results/local_runtime.md). libgomp reads the variable once,
    when the import loads it, so it is set first; a value the user set is kept. (``installed()``, which
    ``LocalLLM`` calls first when no runtime is named, imported the module without it: the default path
    never waited passively.)
    """
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    return import_runtime(MODULE, "local")


def _error(reply: dict[str, Any], n_ctx: int) -> LLMError:
    """The server's error object as a contextmem error: the one place its errors are mapped."""
    error = reply.get("error")
    error = error if isinstance(error, dict) else {"message": str(error)}
    text = one_line(str(error.get("message", "")))
    if error.get("type") == "exceed_context_size_error":
        return ContextOverflowError(
            f"local model: {text}. Fix: compact the conversation or raise n_ctx (now {n_ctx}).",
            provider=PROVIDER,
            limit=n_ctx,
        )
    return LLMError(
        f"local model refused the call ({one_line(str(error.get('type', 'error')), 60)}): {text}. "
        "Fix: check the messages and tools sent.",
        provider=PROVIDER,
    )


def _failed(exc: Exception) -> LLMError:
    return LLMError(
        f"local model failed: {type(exc).__name__}: {one_line(str(exc))}. Fix: check the messages and tools "
        "sent, or load the model again in a new process.",
        provider=PROVIDER,
    )


class XllamacppEngine:
    """One embedded llama.cpp server, answering OpenAI-shaped chat calls (see :class:`~.local.Engine`)."""

    takes_tools = True  # the server renders tools with the model's template (or llama.cpp's generic one)

    def __init__(self, server: Any, n_ctx: int) -> None:
        self.server = server
        self.n_ctx = n_ctx
        self.lock = threading.Lock()

    def chat(self, call: dict[str, Any]) -> dict[str, Any]:
        try:
            reply = self.server.handle_chat_completions(call)
        except Exception as exc:  # a C++ exception surfaces as RuntimeError or ValueError; any is a failure
            raise _failed(exc) from exc
        if not isinstance(reply, dict) or "error" in reply or not reply.get("choices"):
            raise _error(reply if isinstance(reply, dict) else {"error": reply}, self.n_ctx)
        return reply

    def stream(
        self, call: dict[str, Any], emit: Callable[[dict[str, Any]], None], stop: threading.Event
    ) -> None:
        """Hand each chunk to ``emit`` (the last one carries ``usage``); ``stop`` ends generation."""
        errors: list[dict[str, Any]] = []

        def on_chunk(chunk: Any) -> bool:
            if isinstance(chunk, dict) and "error" in chunk:
                errors.append(chunk)
                return True
            if isinstance(chunk, dict):
                emit(chunk)
            return stop.is_set()  # True stops the server's generation

        request = {**call, "stream": True, "stream_options": {"include_usage": True}}
        try:
            reply = self.server.handle_chat_completions(request, on_chunk)
        except Exception as exc:
            raise _failed(exc) from exc
        if isinstance(reply, dict) and "error" in reply:
            errors.append(reply)
        if errors:
            raise _error(errors[0], self.n_ctx)

    def close(self) -> None:
        self.server = None  # the server's destructor stops its threads and closes its port


_LOADED: Loaded[XllamacppEngine] = Loaded()


def _params(xllamacpp: Any, path: Path, n_ctx: int, n_threads: int, extra_buffers: bool) -> Any:
    params = xllamacpp.CommonParams()
    params.model.path = str(path)
    params.n_ctx = n_ctx
    params.n_parallel = 1  # one call at a time, as LocalLLM's gate has one slot: the whole n_ctx for it
    params.cpuparams.n_threads = n_threads
    params.cpuparams_batch.n_threads = n_threads
    params.n_threads_http = 1
    params.no_extra_bufts = not extra_buffers
    params.use_jinja = True  # the GGUF's own chat template
    params.warmup = False  # the first call warms it; loading returns sooner
    params.verbosity = QUIET
    # The listener nobody here uses: loopback, an OS-chosen port, a key nobody knows, nothing else exposed.
    params.hostnames = [LOOPBACK]
    params.port = 0
    params.api_keys = [secrets.token_urlsafe(32)]
    params.ui = False
    params.endpoint_props = False
    params.endpoint_slots = False
    params.endpoint_metrics = False
    params.offline = True  # never reach a model hub
    params.models_autoload = False
    return params


def load(path: Path, n_ctx: int, n_threads: int, extra_buffers: bool) -> XllamacppEngine:
    """The engine for this file and these settings, loaded once per process."""

    def make() -> XllamacppEngine:
        xllamacpp = _import()
        try:
            server = xllamacpp.Server(_params(xllamacpp, path, n_ctx, n_threads, extra_buffers))
        except (ValueError, RuntimeError) as exc:
            raise LLMError(
                f"llama.cpp could not load {str(path)!r}: {one_line(str(exc))}. Fix: check that it is a "
                "complete GGUF model supported by llama.cpp, or use 'local' for the packaged default.",
                provider=PROVIDER,
            ) from exc
        address = str(server.listening_address or "")
        if not address.startswith(f"http://{LOOPBACK}:"):
            server = None  # stops it before the error leaves (the traceback keeps this frame)
            raise LLMError(
                f"xllamacpp listens on {one_line(address, 80)!r}, not on {LOOPBACK}. "
                "Fix: install the xllamacpp version contextmem[local] pins.",
                provider=PROVIDER,
            )
        return XllamacppEngine(server, n_ctx)

    return _LOADED.get((path.resolve(), n_ctx, n_threads, extra_buffers), make)
