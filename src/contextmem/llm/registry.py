"""``load_llm("provider:model")``: one lookup table from a spec string to an :class:`~.base.LLM`.

Specs::

    openai:gpt-4o-mini                      OpenAI, key from OPENAI_API_KEY
    openai:qwen2.5 + base_url=...           any OpenAI-compatible server (vLLM, llama.cpp, ...)
    anthropic:claude-sonnet-4-5             Anthropic, key from ANTHROPIC_API_KEY
    deepseek:deepseek-chat                  preset base URL + DEEPSEEK_API_KEY (also dashscope, moonshot,
                                            zhipu, ollama)
    local  |  local:NAME  |  /m/qwen.gguf   a local GGUF model (the ``local`` extra)
    scripted                                :class:`contextmem.testing.ScriptedLLM`, for tests

This module is the one place that reads API keys from the environment (:func:`api_key_from_env`);
adapters constructed directly ask it too, so no SDK reads its own environment variables behind our back.
Providers are imported lazily by dotted path, so an uninstalled SDK costs nothing until it is used.
"""

from __future__ import annotations

import importlib
import os
from dataclasses import dataclass
from typing import Any, cast

from ..errors import ConfigError
from .base import LLM

__all__ = ["PROVIDERS", "Provider", "api_key_from_env", "load_llm"]


@dataclass(frozen=True, slots=True)
class Provider:
    """How to build one kind of LLM: the class (``"module:Class"``) and what it needs."""

    target: str
    model: bool = True  # the spec must carry a model: "prefix:MODEL", passed as the first argument
    whole_spec: bool = False  # the class reads the spec itself ("local", "local:NAME", "/path/x.gguf")
    key_env: str | None = None  # environment variable holding the API key
    base_url: str | None = None  # preset endpoint of an OpenAI-compatible provider


_OPENAI = "contextmem.llm.openai_compat:OpenAICompatLLM"

PROVIDERS: dict[str, Provider] = {
    "openai": Provider(_OPENAI, key_env="OPENAI_API_KEY"),
    "anthropic": Provider("contextmem.llm.anthropic:AnthropicLLM", key_env="ANTHROPIC_API_KEY"),
    "deepseek": Provider(_OPENAI, key_env="DEEPSEEK_API_KEY", base_url="https://api.deepseek.com"),
    "dashscope": Provider(
        _OPENAI, key_env="DASHSCOPE_API_KEY", base_url="https://dashscope.aliyuncs.com/compatible-mode/v1"
    ),
    "moonshot": Provider(_OPENAI, key_env="MOONSHOT_API_KEY", base_url="https://api.moonshot.cn/v1"),
    "zhipu": Provider(_OPENAI, key_env="ZHIPUAI_API_KEY", base_url="https://open.bigmodel.cn/api/paas/v4"),
    "ollama": Provider(_OPENAI, base_url="http://localhost:11434/v1"),
    "local": Provider("contextmem.llm.local:LocalLLM", model=False, whole_spec=True),
    "scripted": Provider("contextmem.testing:ScriptedLLM", model=False),
}
"""Spec prefix -> provider. Add an entry to support a new prefix; nothing else branches on names."""


def api_key_from_env(provider: str) -> str | None:
    """The API key for ``provider`` from its standard environment variable, or ``None``."""
    entry = PROVIDERS.get(provider)
    if entry is None or entry.key_env is None:
        return None
    return os.environ.get(entry.key_env) or None


def _parse(spec: str) -> tuple[str, str | None]:
    """Split a spec into (prefix, model or path). A path ending in ``.gguf`` means the local model."""
    spec = spec.strip()
    if spec.lower().endswith(".gguf"):
        return "local", spec
    prefix, sep, rest = spec.partition(":")
    return prefix.lower(), (rest.strip() or None) if sep else None


def _import(target: str) -> Any:
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise  # a dependency of the module is missing: its own error names the extra
        raise ConfigError(
            f"LLM provider module {module_name!r} is not part of this contextmem installation. "
            "Fix: upgrade contextmem, or choose another provider."
        ) from exc
    return getattr(module, attr)


def load_llm(spec: str, **kw: Any) -> LLM:
    """Build the LLM a spec names. Keyword arguments go to its constructor.

    ``api_key`` defaults to the provider's environment variable and ``base_url`` to its preset;
    both can be passed explicitly (``base_url`` points ``openai:`` at any OpenAI-compatible server).
    """
    prefix, model = _parse(spec)
    provider = PROVIDERS.get(prefix)
    if provider is None:
        valid = ", ".join(f"'{p}:MODEL'" if e.model else f"'{p}'" for p, e in PROVIDERS.items())
        raise ConfigError(
            f"unknown LLM spec {spec!r}: prefix {prefix!r} is not a provider. "
            f"Fix: use one of {valid}, or a path to a .gguf file."
        )
    args: list[Any] = []
    if provider.whole_spec:
        args = [spec.strip()]
    elif provider.model:
        if model is None:
            raise ConfigError(f"LLM spec {spec!r} names no model. Fix: write it as '{prefix}:MODEL'.")
        args = [model]
    elif model is not None:
        raise ConfigError(f"LLM spec {spec!r}: {prefix!r} takes no model. Fix: write just '{prefix}'.")
    if provider.key_env is not None and kw.get("api_key") is None:
        kw["api_key"] = api_key_from_env(prefix)
        if kw["api_key"] is None and kw.get("base_url") is None:  # a self-hosted base_url may need no key
            raise ConfigError(
                f"no API key for LLM spec {spec!r}. Fix: set {provider.key_env}, or pass api_key=..."
            )
    if provider.base_url is not None and kw.get("base_url") is None:
        kw["base_url"] = provider.base_url
    if provider.model:
        kw.setdefault("name", f"{prefix}:{model}")  # the identity calibration and logs key on
    return cast(LLM, _import(provider.target)(*args, **kw))
