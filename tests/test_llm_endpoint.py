"""Where calls go and what goes with them: the SDK environment variables, one key rule, own clients.

Every test drives the official ``openai`` / ``anthropic`` SDK through our adapters against a local HTTP
server that records what it received (headers included), so "nothing goes elsewhere" is what the
server saw, not what an adapter says about itself.
"""

from __future__ import annotations

import httpx
import pytest

from contextmem.errors import ConfigError
from contextmem.llm.anthropic_api import AnthropicLLM
from contextmem.llm.openai_compat import OpenAICompatLLM
from contextmem.llm.registry import llm_from_settings, load_llm, resolve_endpoint
from contextmem.messages import text_of, user
from contextmem.settings import Settings

from .servers import FakeAnthropicServer, FakeOpenAIServer

pytestmark = pytest.mark.usefixtures("no_provider_env")


async def test_openai_variables_point_everything_at_a_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAIServer(["经网关回答"], api_key="sk-gw") as gateway:
        monkeypatch.setenv("OPENAI_BASE_URL", gateway.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-gw")
        monkeypatch.setenv("OPENAI_ORG_ID", "org-team")
        monkeypatch.setenv("OPENAI_PROJECT_ID", "proj-7")
        llm = load_llm("openai:gpt-4o-mini")
        reply = await llm.complete([user("hi")])
    assert text_of(reply.message.content) == "经网关回答"
    (request,) = gateway.requests
    assert request.headers["authorization"] == "Bearer sk-gw"
    assert request.headers["openai-organization"] == "org-team"
    assert request.headers["openai-project"] == "proj-7"


async def test_anthropic_variables_and_auth_token(monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeAnthropicServer(["ok"], api_key="tok-gw") as gateway:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", gateway.base_url)
        monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "tok-gw")
        llm = load_llm("anthropic:claude-test")
        reply = await llm.complete([user("hi")])
    assert text_of(reply.message.content) == "ok"
    (request,) = gateway.requests
    assert request.headers["authorization"] == "Bearer tok-gw"
    assert "x-api-key" not in request.headers


async def test_a_vendor_key_never_goes_to_another_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """One rule: the environment's key, token and organisation go to the environment's endpoint only."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-vendor-secret")
    monkeypatch.setenv("OPENAI_ORG_ID", "org-vendor")
    with FakeOpenAIServer(["ok", "ok"]) as third_party:
        for llm in (
            OpenAICompatLLM("m", base_url=third_party.base_url),
            load_llm("openai:m", base_url=third_party.base_url),
        ):
            await llm.complete([user("hi")])
    assert len(third_party.requests) == 2
    for request in third_party.requests:
        assert "sk-vendor-secret" not in str(request.headers)
        assert "openai-organization" not in request.headers
        assert request.headers["authorization"] == "Bearer no-key"


async def test_api_key_env_sends_a_named_key_to_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_KEY", "sk-team")
    with FakeOpenAIServer(["ok"], api_key="sk-team") as server:
        settings = Settings(model="openai:m", base_url=server.base_url, api_key_env="GATEWAY_KEY")
        reply = await llm_from_settings(settings).complete([user("hi")])
    assert text_of(reply.message.content) == "ok"
    with pytest.raises(ConfigError, match="'UNSET_VAR', which is not set"):
        OpenAICompatLLM("m", base_url="http://127.0.0.1:9/v1", api_key_env="UNSET_VAR")


def test_missing_key_for_the_vendor_says_how_to_send_one() -> None:
    with pytest.raises(ConfigError, match=r"no API key for OpenAI model 'gpt-4o'.*set OPENAI_API_KEY"):
        OpenAICompatLLM("gpt-4o")
    with pytest.raises(ConfigError, match="add --api-key-env ANTHROPIC_API_KEY"):
        AnthropicLLM("claude-test", base_url="http://127.0.0.1:9")


async def test_own_client_and_client_options_are_used(monkeypatch: pytest.MonkeyPatch) -> None:
    import openai

    with FakeOpenAIServer(["a", "b"], api_key="sk-own") as server:
        own = openai.AsyncOpenAI(
            api_key="sk-own", base_url=server.base_url, default_headers={"X-Team": "search"}, max_retries=5
        )
        llm = OpenAICompatLLM("m", client=own)
        await llm.complete([user("hi")])
        assert llm._client.max_retries == 0  # our retry policy, not the SDK's
        async with httpx.AsyncClient(headers={"X-Proxy-Auth": "p1"}) as http:
            built = OpenAICompatLLM(
                "m",
                base_url=server.base_url,
                api_key="sk-own",
                client_options={"http_client": http, "default_headers": {"X-Trace": "t-9"}},
            )
            await built.complete([user("hi")])
    first, second = server.requests
    assert first.headers["x-team"] == "search"
    assert (second.headers["x-trace"], second.headers["x-proxy-auth"]) == ("t-9", "p1")
    with pytest.raises(ConfigError, match=r"client_options may not set \['api_key'\]"):
        OpenAICompatLLM("m", base_url="http://127.0.0.1:9/v1", client_options={"api_key": "x"})


def test_resolve_endpoint_is_one_pure_rule() -> None:
    env = {"OPENAI_API_KEY": "k", "OPENAI_BASE_URL": "https://gw.example/v1/", "OPENAI_ORG_ID": "o"}
    at_gateway = resolve_endpoint("openai", environ=env)
    assert (at_gateway.base_url, at_gateway.api_key, dict(at_gateway.options)) == (
        "https://gw.example/v1/",
        "k",
        {"organization": "o"},
    )
    assert (at_gateway.own, at_gateway.vendor) == (True, False)
    same = resolve_endpoint("openai", base_url="https://GW.example/v1", environ=env)
    assert same.api_key == "k"  # the same endpoint, spelled differently
    elsewhere = resolve_endpoint("openai", base_url="http://localhost:8080/v1", environ=env)
    assert (elsewhere.api_key, dict(elsewhere.options), elsewhere.own) == (None, {}, False)
    preset = resolve_endpoint("deepseek", environ={"DEEPSEEK_API_KEY": "d", "OPENAI_API_KEY": "k"})
    assert (preset.base_url, preset.api_key, preset.vendor) == ("https://api.deepseek.com", "d", True)


def test_settings_for_a_remote_model_are_refused_for_the_local_one() -> None:
    with pytest.raises(ConfigError, match="base_url apply to a remote model"):
        llm_from_settings(Settings(model="local", base_url="http://127.0.0.1:9/v1"))
