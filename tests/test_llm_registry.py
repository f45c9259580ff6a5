"""load_llm: spec strings to LLMs, keys from the environment, clear errors for bad specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from contextmem.errors import ConfigError, LLMError
from contextmem.llm.anthropic_api import AnthropicLLM
from contextmem.llm.base import LLM
from contextmem.llm.openai_compat import OpenAICompatLLM
from contextmem.llm.registry import PROVIDERS, load_llm
from contextmem.messages import text_of, user
from contextmem.testing import ScriptedLLM

from .servers import FakeAnthropicServer, FakeOpenAIServer

pytestmark = pytest.mark.usefixtures("no_provider_env")


async def test_openai_spec_reads_the_key_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    with FakeOpenAIServer(["来自环境变量的密钥"], api_key="sk-from-env") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)  # the endpoint the key belongs to
        llm = load_llm("openai:gpt-4o-mini")
        response = await llm.complete([user("hi")])
    assert isinstance(llm, OpenAICompatLLM) and isinstance(llm, LLM)
    assert llm.name == "openai:gpt-4o-mini"
    assert text_of(response.message.content) == "来自环境变量的密钥"
    assert server.requests[0].body["model"] == "gpt-4o-mini"


async def test_explicit_key_beats_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    with FakeAnthropicServer(["ok"], api_key="sk-ant-explicit") as server:
        llm = load_llm("anthropic:claude-test", base_url=server.base_url, api_key="sk-ant-explicit")
        response = await llm.complete([user("hi")])
    assert isinstance(llm, AnthropicLLM)
    assert llm.name == "anthropic:claude-test"
    assert text_of(response.message.content) == "ok"


def test_model_names_may_contain_colons() -> None:
    llm = load_llm("openai:qwen2.5:7b-instruct", base_url="http://127.0.0.1:9/v1")
    assert isinstance(llm, OpenAICompatLLM)
    assert llm.model == "qwen2.5:7b-instruct"


def test_compatible_presets_set_base_url_key_and_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-ds")
    llm = load_llm("deepseek:deepseek-chat")
    assert isinstance(llm, OpenAICompatLLM)
    assert (llm.base_url, llm.name, llm.model) == (
        "https://api.deepseek.com",
        "deepseek:deepseek-chat",
        "deepseek-chat",
    )
    overridden = load_llm("deepseek:deepseek-chat", base_url="http://127.0.0.1:9/v1")
    assert isinstance(overridden, OpenAICompatLLM) and overridden.base_url == "http://127.0.0.1:9/v1"


def test_missing_key_for_a_hosted_provider_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="DASHSCOPE_API_KEY"):
        load_llm("dashscope:qwen-plus")
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        load_llm("anthropic:claude-test")


def test_self_hosted_ollama_needs_no_key() -> None:
    llm = load_llm("ollama:qwen2.5:0.5b")
    assert isinstance(llm, OpenAICompatLLM)
    assert llm.base_url == "http://localhost:11434/v1"


async def test_scripted_spec_builds_a_scripted_llm() -> None:
    llm = load_llm("scripted", script=["脚本回复"])
    assert isinstance(llm, ScriptedLLM)
    assert text_of((await llm.complete([user("hi")])).message.content) == "脚本回复"


def test_gguf_path_goes_to_the_local_provider(tmp_path: Path) -> None:
    missing = tmp_path / "nope.gguf"
    with pytest.raises(LLMError, match="does not exist"):
        load_llm(str(missing))
    not_gguf = tmp_path / "fake.GGUF"
    not_gguf.write_bytes(b"not a model")
    with pytest.raises(LLMError, match="not a GGUF file"):
        load_llm(str(not_gguf))


def test_unknown_prefix_names_the_valid_ones() -> None:
    with pytest.raises(ConfigError) as info:
        load_llm("gemini:gemini-pro")
    message = str(info.value)
    assert "'gemini'" in message
    for prefix in PROVIDERS:
        assert prefix in message
    assert ".gguf" in message


def test_spec_without_model_or_with_a_stray_model_is_rejected() -> None:
    with pytest.raises(ConfigError, match="'openai:MODEL'"):
        load_llm("openai")
    with pytest.raises(ConfigError, match="takes no model"):
        load_llm("scripted:whatever")
