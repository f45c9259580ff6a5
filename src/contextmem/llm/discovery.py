"""Ask an OpenAI-compatible server how large its context window is, before planning against it.

A server that is not the vendor's rarely has the window the model table would guess: llama.cpp serves
with the ``-c``/``n_ctx`` it was started with, Ollama with its ``num_ctx``, vLLM with ``max_model_len``.
Planning against a guess fails late and badly (llama.cpp answers an over-long *streamed* prompt with an
empty 200), so the window is asked for, in this order, and the first answer wins:

1. ``GET {base_url}/models`` — the model's entry (by id; the only one if there is one) may state it:
   ``max_model_len`` (vLLM), ``context_length`` (OpenRouter, Together, LM Studio), ``context_window``
   (Groq), ``max_context_length``, ``n_ctx``, or ``top_provider.context_length``. llama.cpp's
   ``meta.n_ctx_train`` is the training length, not the served one, and is not used.
2. ``GET {root}/props`` — llama.cpp's server: ``default_generation_settings.n_ctx`` (or ``n_ctx``).
3. ``POST {root}/api/show`` — Ollama: ``num_ctx`` in the model's ``parameters``; without it Ollama
   serves :data:`OLLAMA_DEFAULT_CTX` tokens (bounded by the model's ``*.context_length``).

``root`` is ``base_url`` without a trailing ``/v1``. Parsing is pure (the ``window_from_*`` functions);
:func:`discover_window` only fetches. A server that answers none of them gets ``None``, and
:func:`fit_to_llm` then asks the user with a :class:`~contextmem.errors.ConfigError` rather than guess.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..budget import fit_settings, is_explicit
from ..errors import ConfigError, TransientLLMError
from ..models import lookup_model
from ..settings import Settings

__all__ = [
    "OLLAMA_DEFAULT_CTX",
    "discover_window",
    "fit_to_llm",
    "server_root",
    "window_from_models",
    "window_from_ollama",
    "window_from_props",
]

OLLAMA_DEFAULT_CTX = 4096
"""What Ollama serves when the model sets no ``num_ctx`` (its default since 0.6)."""

_MODEL_KEYS = ("max_model_len", "context_length", "context_window", "max_context_length", "n_ctx")

Fetch = Callable[[str, str, Mapping[str, Any] | None], Awaitable[Any]]
"""``fetch(method, url, json_body)`` -> the parsed JSON answer; raises when there is none."""


def _positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def window_from_models(body: Any, model: str) -> int | None:
    """The window an OpenAI ``/models`` listing states for ``model`` (its entry, or the only entry)."""
    entries = body.get("data") if isinstance(body, Mapping) else None
    if not isinstance(entries, list):
        return None
    models = [e for e in entries if isinstance(e, Mapping)]
    entry = next((e for e in models if e.get("id") == model), models[0] if len(models) == 1 else None)
    if entry is None:
        return None
    for key in _MODEL_KEYS:
        if (window := _positive(entry.get(key))) is not None:
            return window
    top = entry.get("top_provider")
    return _positive(top.get("context_length")) if isinstance(top, Mapping) else None


def window_from_props(body: Any) -> int | None:
    """The window llama.cpp's ``/props`` states (the served ``n_ctx``)."""
    if not isinstance(body, Mapping):
        return None
    settings = body.get("default_generation_settings")
    nested = settings.get("n_ctx") if isinstance(settings, Mapping) else None
    return _positive(nested) or _positive(body.get("n_ctx"))


def window_from_ollama(body: Any) -> int | None:
    """The window Ollama's ``/api/show`` implies: the model's ``num_ctx``, else Ollama's default, never
    more than the model's trained ``*.context_length``."""
    if not isinstance(body, Mapping):
        return None
    trained = None
    info = body.get("model_info")
    if isinstance(info, Mapping):
        trained = next((_positive(v) for k, v in info.items() if str(k).endswith(".context_length")), None)
    parameters = body.get("parameters")
    found = re.search(r"(?m)^\s*num_ctx\s+(\d+)", parameters) if isinstance(parameters, str) else None
    if found is None and trained is None:
        return None
    window = int(found.group(1)) if found else OLLAMA_DEFAULT_CTX
    return min(window, trained) if trained else window


def server_root(base_url: str) -> str:
    """``http://host:8080/v1`` -> ``http://host:8080``: where ``/props`` and ``/api/show`` live."""
    url = base_url.rstrip("/")
    return url[: -len("/v1")] if url.endswith("/v1") else url


async def discover_window(fetch: Fetch, base_url: str, model: str) -> int | None:
    """The first window the server states (see the module's order), or ``None``. When ``fetch`` could
    not connect for any probe (it raised :class:`~contextmem.errors.TransientLLMError` each time), that
    error: a server that is not running is told as such."""
    root = server_root(base_url)
    probes: tuple[tuple[str, str, Mapping[str, Any] | None, Callable[[Any], int | None]], ...] = (
        ("GET", base_url.rstrip("/") + "/models", None, lambda body: window_from_models(body, model)),
        ("GET", root + "/props", None, window_from_props),
        ("POST", root + "/api/show", {"model": model}, window_from_ollama),
    )
    unreached: list[TransientLLMError] = []
    for method, url, body, parse in probes:
        try:
            answer = await fetch(method, url, body)
        except TransientLLMError as exc:  # no connection at all (fetch says so with this error)
            unreached.append(exc)
            continue
        except Exception:
            continue
        if (window := parse(answer)) is not None:
            return window
    if len(unreached) == len(probes):  # nothing listens at base_url: say that, not "states no window"
        raise unreached[0]
    return None


async def fit_to_llm(settings: Settings, llm: object | None) -> Settings:
    """``settings`` fitted to ``llm`` (:func:`~contextmem.budget.fit_settings`), after asking the server
    for its window when nobody set one.

    An LLM with a ``discover_window`` coroutine (the SDK adapters) is asked unless the user set
    ``context_window`` or the LLM already knows its window. A server that is not its provider's own
    endpoint (``vendor_endpoint`` false), does not say, and serves a model the table does not know is a
    :class:`ConfigError`: guessing there is what fails late.
    """
    explicit = is_explicit(settings, "context_window")
    discover = getattr(llm, "discover_window", None)
    if not explicit and discover is not None and getattr(llm, "context_window", None) is None:
        window = await discover()
        model = str(getattr(llm, "model", ""))
        if window is None and not getattr(llm, "vendor_endpoint", True) and lookup_model(model) is None:
            raise ConfigError(
                f"cannot tell the context window of {getattr(llm, 'name', model)} at "
                f"{getattr(llm, 'base_url', '?')}: the server states none (/v1/models, /props, /api/show). "
                "Fix: set it: --context-window N (or the context_window setting) to the server's context "
                "size (llama.cpp: its -c / n_ctx, 2048 by default in llama-cpp-python's server)."
            )
    return fit_settings(settings, llm)
