"""``load_llm("provider:model")``: one lookup table from a spec string to an :class:`~.base.LLM`.

Specs::

    openai:gpt-4o-mini                      OpenAI, key from OPENAI_API_KEY
    openai:qwen2.5 + base_url=...           any OpenAI-compatible server (vLLM, llama.cpp, ...)
    anthropic:claude-sonnet-4-6             Anthropic, key from ANTHROPIC_API_KEY
    deepseek:deepseek-chat                  preset base URL + DEEPSEEK_API_KEY (also dashscope, moonshot,
                                            zhipu, ollama)
    local  |  local:NAME  |  /m/qwen.gguf   a local GGUF model (the ``local`` extra)
    scripted                                :class:`contextmem.testing.ScriptedLLM`, for tests
    none                                    no model: the engine alone (extractive summaries); your own
                                            client makes the calls

This module is the one place that reads a provider's environment (:func:`resolve_endpoint`): its key,
base URL and client options (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``, ``OPENAI_ORG_ID``,
``OPENAI_PROJECT_ID``, ``ANTHROPIC_API_KEY``, ``ANTHROPIC_AUTH_TOKEN``, ``ANTHROPIC_BASE_URL``, ...).
Adapters constructed directly ask it too, so no SDK reads its own environment behind our back.

**One rule for which key goes where.** The environment describes one endpoint: the provider's
``*_BASE_URL`` when set, else its default (or preset) URL. Its key, token and organisation go to that
endpoint and nowhere else. A call aimed elsewhere (``base_url=``, ``--base-url``) gets a key only when the
caller names one: ``api_key=...``, or ``api_key_env="VAR"`` (CLI ``--api-key-env VAR``, setting
``api_key_env``) to read it from that variable. So pointing ``--base-url`` at a third-party server never
leaks the vendor's key, and pointing the SDK variables at a gateway sends everything there.

Providers are imported lazily by dotted path, so an uninstalled SDK costs nothing until it is used.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, TypedDict, cast

from ..errors import ConfigError, brief
from ..settings import Settings
from .base import LLM

__all__ = [
    "NO_MODEL",
    "PROVIDERS",
    "Endpoint",
    "EndpointOptions",
    "Provider",
    "check_spec",
    "llm_from_settings",
    "load_llm",
    "resolve_endpoint",
    "summary_llm",
    "writes_summaries",
]


@dataclass(frozen=True, slots=True)
class Provider:
    """How to build one kind of LLM: the class (``"module:Class"``) and what it needs."""

    target: str
    model: bool = True  # the spec must carry a model: "prefix:MODEL", passed as the first argument
    whole_spec: bool = False  # the class reads the spec itself ("local", "local:NAME", "/path/x.gguf")
    key_env: str | None = None  # environment variable holding the API key
    base_url: str | None = None  # preset endpoint of an OpenAI-compatible provider
    base_url_env: str | None = None  # environment variable that moves the endpoint (a gateway, a proxy)
    option_env: tuple[tuple[str, str], ...] = ()  # (SDK client option, environment variable) pairs
    remote: bool = False  # an SDK adapter: takes provider=, base_url=, api_key=, api_key_env=
    on_cpu: bool = False  # runs in this process on this machine's CPU: summaries only if summary_local_model
    # (constructor keyword, setting name) pairs that llm_from_settings passes from the settings
    settings: tuple[tuple[str, str], ...] = ()


_OPENAI = "contextmem.llm.openai_compat:OpenAICompatLLM"


def _compatible(key_env: str | None, base_url: str) -> Provider:
    """An OpenAI-compatible provider at a preset URL."""
    return Provider(_OPENAI, key_env=key_env, base_url=base_url, remote=True)


PROVIDERS: dict[str, Provider] = {
    "openai": Provider(
        _OPENAI,
        key_env="OPENAI_API_KEY",
        base_url="https://api.openai.com/v1",
        base_url_env="OPENAI_BASE_URL",
        option_env=(("organization", "OPENAI_ORG_ID"), ("project", "OPENAI_PROJECT_ID")),
        remote=True,
    ),
    "anthropic": Provider(
        "contextmem.llm.anthropic_api:AnthropicLLM",
        key_env="ANTHROPIC_API_KEY",
        base_url="https://api.anthropic.com",
        base_url_env="ANTHROPIC_BASE_URL",
        option_env=(("auth_token", "ANTHROPIC_AUTH_TOKEN"),),
        remote=True,
    ),
    "deepseek": _compatible("DEEPSEEK_API_KEY", "https://api.deepseek.com"),
    "dashscope": _compatible("DASHSCOPE_API_KEY", "https://dashscope.aliyuncs.com/compatible-mode/v1"),
    "moonshot": _compatible("MOONSHOT_API_KEY", "https://api.moonshot.cn/v1"),
    "zhipu": _compatible("ZHIPUAI_API_KEY", "https://open.bigmodel.cn/api/paas/v4"),
    "ollama": _compatible(None, "http://localhost:11434/v1"),
    "local": Provider(
        "contextmem.llm.local:LocalLLM",
        model=False,
        whole_spec=True,
        on_cpu=True,
        settings=(("n_threads", "local_threads"),),
    ),
    "scripted": Provider("contextmem.testing:ScriptedLLM", model=False),
}
"""Spec prefix -> provider. Add an entry to support a new prefix; nothing else branches on names."""


class EndpointOptions(TypedDict, total=False):
    """How a caller names an endpoint and its key: the keywords of :func:`resolve_endpoint`, which every
    client of a provider (the LLM adapters, the OpenAI embedder) takes as they are."""

    base_url: str | None
    api_key: str | None
    api_key_env: str | None


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where one adapter sends its calls, and what it sends along.

    ``own`` is true when ``base_url`` is the endpoint the environment describes (so its key and options
    apply); ``vendor`` when it is the provider's default or preset URL (not a gateway or local server);
    ``api_key`` is ``None`` when nobody gave one for this endpoint.
    """

    base_url: str
    api_key: str | None
    options: Mapping[str, str]
    own: bool
    vendor: bool


def _same_url(a: str, b: str) -> bool:
    return a.rstrip("/").lower() == b.rstrip("/").lower()


def resolve_endpoint(
    provider: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    api_key_env: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Endpoint:
    """The endpoint, key and client options of one adapter, by the module's one rule (see above).

    Raises :class:`ConfigError` when ``api_key_env`` names a variable that is not set.
    """
    entry = PROVIDERS[provider]
    env = os.environ if environ is None else environ
    env_url = (env.get(entry.base_url_env) if entry.base_url_env else None) or entry.base_url
    url = base_url or env_url
    if url is None:
        raise ConfigError(f"{provider} needs a base_url. Fix: pass base_url=... (--base-url).")
    own = env_url is not None and _same_url(url, env_url)
    if api_key is None and api_key_env:
        api_key = env.get(api_key_env) or None
        if api_key is None:
            raise ConfigError(
                f"api_key_env names {api_key_env!r}, which is not set (or empty). "
                f"Fix: export {api_key_env}=..., or name the variable that holds the key."
            )
    if api_key is None and own and entry.key_env:
        api_key = env.get(entry.key_env) or None
    options = {opt: env[var] for opt, var in entry.option_env if own and env.get(var)}
    vendor = entry.base_url is not None and _same_url(url, entry.base_url)
    return Endpoint(url, api_key, MappingProxyType(options), own, vendor)


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


def check_spec(spec: str, setting: str = "model") -> tuple[str, Provider, str | None]:
    """``(prefix, provider, model)`` of a spec that names a provider, with a model where the provider
    needs one and none where it takes none; else a :class:`ConfigError`. :func:`load_llm` and ``config
    set model`` both check with it, so a spec saved is a spec that loads (a missing file aside).
    :data:`NO_MODEL` is not a provider: :func:`llm_from_settings` answers it before asking here.
    ``setting`` names where the spec came from in the error (``model``, ``summary_model``)."""
    prefix, model = _parse(spec)
    provider = PROVIDERS.get(prefix)
    where = "" if setting == "model" else f" ({setting})"
    if provider is None:
        valid = ", ".join(f"'{p}:MODEL'" if e.model else f"'{p}'" for p, e in PROVIDERS.items())
        raise ConfigError(
            f"unknown LLM spec {brief(spec)}{where}: prefix {brief(prefix)} is not a provider. "
            f"Fix: use one of {valid}, 'none', or a path to a .gguf file."
        )
    if provider.model and model is None:
        raise ConfigError(f"LLM spec {brief(spec)}{where} names no model. Fix: write it as '{prefix}:MODEL'.")
    if not provider.model and not provider.whole_spec and model is not None:
        raise ConfigError(
            f"LLM spec {brief(spec)}{where}: {prefix!r} takes no model. Fix: write just '{prefix}'."
        )
    return prefix, provider, model


def load_llm(spec: str, **kw: Any) -> LLM:
    """Build the LLM a spec names. Keyword arguments go to its constructor.

    The key, the base URL and the client options of a remote provider follow :func:`resolve_endpoint`;
    ``base_url`` points ``openai:`` at any OpenAI-compatible server, ``api_key_env`` names the variable
    whose key goes there.
    """
    prefix, provider, model = check_spec(spec)
    args: list[Any] = []
    if provider.whole_spec:
        args = [spec.strip()]
    elif provider.model:
        args = [model]
    if provider.remote:
        kw.setdefault("provider", prefix)  # its key variable, preset URL and gateway variables
    if provider.model:
        kw.setdefault("name", f"{prefix}:{model}")  # the identity calibration and logs key on
    return cast(LLM, _import(provider.target)(*args, **kw))


NO_MODEL = "none"
"""The spec of no model at all: :func:`llm_from_settings` gives ``None``, and the engine summarises
extractively; an agent loop needs a model, so :class:`~contextmem.agent.Agent` refuses it."""


def llm_from_settings(settings: Settings, spec: str | None = None) -> LLM | None:
    """The LLM ``settings`` describe (``spec`` overrides ``settings.model``): the one place the CLI, the
    MCP server and :meth:`ContextMem.open` build it, so ``base_url``, ``api_key_env`` and
    ``strict_server`` mean the same everywhere. Those three apply to remote providers only; given for
    the local model they are a :class:`ConfigError` rather than silently ignored. ``none``
    (:data:`NO_MODEL`) is ``None``: no model."""
    spec = spec or settings.model
    if spec == NO_MODEL:
        return None
    chosen = {
        key: value
        for key, value in (
            ("base_url", settings.base_url),
            ("api_key_env", settings.api_key_env),
            ("strict_server", settings.strict_server or None),
        )
        if value is not None
    }
    entry = PROVIDERS.get(_parse(spec)[0])
    if chosen and entry is not None and not entry.remote:
        raise ConfigError(
            f"{', '.join(sorted(chosen))} apply to a remote model, not {spec!r}. "
            "Fix: choose --model openai:MODEL (or anthropic:MODEL), or unset them."
        )
    if entry is not None and entry.target != _OPENAI:
        chosen.pop("strict_server", None)  # a shim for OpenAI-compatible servers only
    for keyword, name in entry.settings if entry is not None else ():
        chosen[keyword] = getattr(settings, name)
    return load_llm(spec, **chosen)


def writes_summaries(settings: Settings, spec: str) -> bool:
    """Whether the model ``spec`` names writes summaries: every model, except one that runs on this
    machine's CPU (the local model) while ``summary_local_model`` is off; the engine then writes its
    extractive summary.

    Why off by default: on 2 cores the packaged 1.5B model takes about two minutes a summary and kept
    fewer answers than the extractive draft in the project's bench (69.7% against 70.2%); it still
    answers, which is where it helps. Hosted models (``openai:``, ``anthropic:``, ...) always summarise.
    """
    entry = PROVIDERS.get(_parse(spec)[0])
    return settings.summary_local_model or entry is None or not entry.on_cpu


def summary_llm(settings: Settings, llm: LLM | None) -> LLM | None:
    """The model that writes summaries for a runtime whose model is ``llm``: ``settings.summary_model`` when
    set (``none``: ``None``), else ``llm`` itself, or ``None``
    (the extractive summary) as :func:`writes_summaries` decides. A wrapper keeps the name of what it
    wraps (``local:...``), so the decision reads ``llm.name``."""
    named = settings.summary_model
    if named is not None:  # a model of its own, often a cheaper one: built like the agent's
        if named != NO_MODEL:
            check_spec(named, "summary_model")  # its error names the setting, not the agent's model
        return llm_from_settings(settings, named)
    return llm if llm is not None and writes_summaries(settings, llm.name) else None
