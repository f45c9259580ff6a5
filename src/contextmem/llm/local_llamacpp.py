"""The local model's second runtime: llama-cpp-python, llama.cpp through ctypes, in-process.

It has no wheels on PyPI and compiles from source (minutes on 2 cores), so ``contextmem[local]`` installs
:mod:`.local_xllamacpp`'s prebuilt runtime instead; this one is used when xllamacpp is not installed
(``contextmem[local-llamacpp]``), or when asked for by name (``LocalLLM(runtime="llama_cpp")``). The tests
run the OpenAI adapter against its Python server (``tests/llama_server_main.py``).

One ``Llama`` is loaded per process and per (file, ``n_ctx``, ``n_threads``, ``extra_buffers``) and
shared; :class:`~.local.LocalLLM` serialises calls on it with :attr:`LlamaCppEngine.lock`.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import ContextOverflowError, LLMError, one_line
from .local_files import PROVIDER
from .local_runtime import Loaded, import_runtime, importable
from .local_tools import template_takes_tools

__all__ = ["NAME", "LlamaCppEngine", "installed", "load", "model_params"]

NAME = "llama_cpp"
MODULE = "llama_cpp"


def installed() -> bool:
    """Whether llama-cpp-python imports (a missing or broken install is ``False``)."""
    return importable(_import)


def _import() -> Any:
    return import_runtime(MODULE, "local-llamacpp")


@contextmanager
def model_params(extra_buffers: bool) -> Iterator[None]:
    """Set ``use_extra_bufts`` for the ``Llama`` constructed inside (its constructor does not expose it).

    Extra buffer types are llama.cpp's repacked weight layouts, AMX among them. Built with native CPU
    flags on an AMX machine (Sapphire Rapids under Firecracker, measured), llama-cpp-python 0.3.36
    segfaults in ``ggml_backend_amx_mul_mat`` on any batch of more than one token; without extra buffers it
    runs. Loads run one at a time under the runtime's :class:`~.local_runtime.Loaded` lock, so the patch is
    never seen by two loads at once.
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


def _translate(exc: Exception, n_ctx: int) -> LLMError:
    """llama-cpp-python's exceptions as contextmem errors: the one place they are mapped."""
    text = one_line(str(exc))
    if "exceed context window" in text:
        return ContextOverflowError(
            f"local model: {text}. Fix: compact the conversation or raise n_ctx (now {n_ctx}).",
            provider=PROVIDER,
            limit=n_ctx,
        )
    return LLMError(
        f"local model failed: {type(exc).__name__}: {text}. Fix: check the messages and tools sent, "
        "or load the model again in a new process.",
        provider=PROVIDER,
    )


class LlamaCppEngine:
    """One loaded ``llama_cpp.Llama``, answering OpenAI-shaped chat calls (see :class:`~.local.Engine`)."""

    def __init__(self, llama: Any, n_ctx: int) -> None:
        self.llama = llama
        self.n_ctx = n_ctx
        self.lock = threading.Lock()
        self.takes_tools = template_takes_tools(llama.metadata.get("tokenizer.chat_template", ""))

    def chat(self, call: dict[str, Any]) -> dict[str, Any]:
        try:
            result: dict[str, Any] = self.llama.create_chat_completion(**call)
        except (ValueError, RuntimeError) as exc:
            raise _translate(exc, self.n_ctx) from exc
        return result

    def stream(
        self, call: dict[str, Any], emit: Callable[[dict[str, Any]], None], stop: threading.Event
    ) -> None:
        """Hand each chunk to ``emit``, then one with ``usage`` (its stream reports none: counted here)."""
        parts: list[str] = []
        try:
            chunks = self.llama.create_chat_completion(**call, stream=True)
            for chunk in chunks:
                if stop.is_set():
                    chunks.close()
                    return
                parts.append(chunk["choices"][0].get("delta", {}).get("content") or "")
                emit(chunk)
        except (ValueError, RuntimeError) as exc:
            raise _translate(exc, self.n_ctx) from exc
        emit({"choices": [], "usage": self._usage(call["messages"], call.get("tools"), "".join(parts))})

    def _usage(self, messages: list[dict[str, str]], tools: Any, reply: str) -> dict[str, int]:
        """The rendered prompt (the tools the template renders included) and the reply, counted with the
        model's tokenizer."""
        llama = self.llama
        chat_format = importlib.import_module("llama_cpp.llama_chat_format")
        template = llama.metadata.get("tokenizer.chat_template", "")
        eos, bos = llama.token_eos(), llama.token_bos()
        formatter = chat_format.Jinja2ChatFormatter(
            template=template,
            eos_token=llama.detokenize([eos], special=True).decode() if eos != -1 else "",
            bos_token=llama.detokenize([bos], special=True).decode() if bos != -1 else "",
        )
        prompt = (
            formatter(messages=messages, tools=tools).prompt
            if template
            else "\n".join(m["content"] for m in messages)
        )
        prompt_tokens = llama.tokenize(prompt.encode(), add_bos=True, special=True)
        reply_tokens = llama.tokenize(reply.encode(), add_bos=False, special=False) if reply else []
        return {"prompt_tokens": len(prompt_tokens), "completion_tokens": len(reply_tokens)}

    def close(self) -> None:
        self.llama.close()


_LOADED: Loaded[LlamaCppEngine] = Loaded()


def check() -> None:
    """Raise :class:`MissingExtraError` unless llama-cpp-python imports."""
    _import()


def load(path: Path, n_ctx: int, n_threads: int, extra_buffers: bool) -> LlamaCppEngine:
    """The engine for this file and these settings, loaded once per process."""

    def make() -> LlamaCppEngine:
        llama_cpp = _import()
        try:
            with model_params(extra_buffers):
                llama = llama_cpp.Llama(
                    model_path=str(path),
                    n_ctx=n_ctx,
                    n_threads=n_threads,
                    n_threads_batch=n_threads,
                    verbose=False,
                )
        except (ValueError, RuntimeError) as exc:
            raise LLMError(
                f"llama.cpp could not load {str(path)!r}: {one_line(str(exc))}. Fix: check that it is "
                "a complete GGUF model supported by llama-cpp-python, or use 'local' for the packaged "
                "default.",
                provider=PROVIDER,
            ) from exc
        return LlamaCppEngine(llama, n_ctx)

    return _LOADED.get((path.resolve(), n_ctx, n_threads, extra_buffers), make)
