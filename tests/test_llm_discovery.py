"""An OpenAI-compatible server's window is asked for, not guessed; an empty stream is never a reply.

Servers here are local HTTP servers answering as vLLM, llama.cpp and Ollama do; the adapter is the real
``openai`` SDK behind :class:`OpenAICompatLLM`.
"""

from __future__ import annotations

from typing import Any

import pytest

from contextmem.errors import ConfigError, ContextOverflowError
from contextmem.llm.discovery import (
    OLLAMA_DEFAULT_CTX,
    fit_to_llm,
    server_root,
    window_from_models,
    window_from_ollama,
    window_from_props,
)
from contextmem.llm.openai_compat import OpenAICompatLLM
from contextmem.messages import ToolSpec, user
from contextmem.runtime import ContextMem
from contextmem.settings import Settings

from .servers import FakeOpenAIServer, ServerError, ServerReply, openai_error, served_window

VLLM = served_window("qwen-7b", 6144)
LLAMA_CPP = {
    "/v1/models": {"data": [{"id": "any", "meta": {"n_ctx_train": 32768}}]},  # training length: not used
    "/props": {"default_generation_settings": {"n_ctx": 4096}},
}
OLLAMA = {
    "/api/show": {
        "parameters": "stop <|im_end|>\nnum_ctx 8192",
        "model_info": {"qwen2.context_length": 32768},
    }
}


def test_parsers_read_each_server_dialect() -> None:
    assert window_from_models(VLLM["/v1/models"], "qwen-7b") == 6144
    assert (
        window_from_models({"data": [{"id": "a", "context_length": 9000}]}, "other") == 9000
    )  # the only one
    two = {"data": [{"id": "a", "context_length": 1}, {"id": "b", "top_provider": {"context_length": 7}}]}
    assert (window_from_models(two, "b"), window_from_models(two, "c")) == (7, None)
    assert window_from_models(LLAMA_CPP["/v1/models"], "any") is None
    assert window_from_props(LLAMA_CPP["/props"]) == 4096 and window_from_props({"n_ctx": 2048}) == 2048
    assert window_from_ollama(OLLAMA["/api/show"]) == 8192
    assert window_from_ollama({"model_info": {"llama.context_length": 131072}}) == OLLAMA_DEFAULT_CTX
    assert (
        window_from_ollama({"parameters": "num_ctx 65536", "model_info": {"x.context_length": 32768}})
        == 32768
    )
    for junk in (None, [], "text", {"data": "x"}, {"n_ctx": True}, {"n_ctx": -1}):
        assert window_from_models(junk, "m") is None and window_from_props(junk) is None
        assert window_from_ollama(junk) is None
    assert (
        server_root("http://h:8080/v1/") == "http://h:8080" and server_root("http://h/api") == "http://h/api"
    )


@pytest.mark.parametrize(
    ("static", "model", "window"),
    [(VLLM, "qwen-7b", 6144), (LLAMA_CPP, "any", 4096), (OLLAMA, "qwen2.5:0.5b", 8192)],
    ids=["vllm", "llama.cpp", "ollama"],
)
async def test_contextmem_open_plans_against_the_served_window(
    tmp_path: Any, static: dict[str, Any], model: str, window: int
) -> None:
    with FakeOpenAIServer(static=static) as server:
        settings = Settings(workspace=str(tmp_path), model=f"openai:{model}", base_url=server.base_url)
        cm = await ContextMem.open(settings, memory=False)
        try:
            assert cm.settings.context_window == window
            assert cm.settings.sources["context_window"].startswith("fitted to openai:")
            engine = await cm.session("s1")
            assert engine.window.context_window == window
        finally:
            await cm.close()
    assert server.probes and all(r.path != "/v1/chat/completions" for r in server.requests)  # only asked


async def test_a_server_that_states_no_window_is_asked_for_one(tmp_path: Any) -> None:
    with FakeOpenAIServer(static={"/v1/models": {"data": [{"id": "mystery"}]}}) as server:
        settings = Settings(workspace=str(tmp_path), model="openai:mystery", base_url=server.base_url)
        with pytest.raises(
            ConfigError, match=r"cannot tell the context window.*Fix: set it: --context-window"
        ):
            await ContextMem.open(settings, memory=False)
        probes = len(server.probes)
        chosen = settings.with_value("context_window", 3000)
        fitted = await fit_to_llm(chosen, OpenAICompatLLM("mystery", base_url=server.base_url))
    assert fitted.context_window == 3000 and len(server.probes) == probes  # set: never asked


async def test_an_empty_stream_is_asked_again_and_an_overflow_is_classified() -> None:
    """llama.cpp answers an over-long *streamed* prompt with HTTP 200 and an empty body."""
    overflow = openai_error(
        400, "Requested tokens (5414) exceed context window of 2048", code="context_length_exceeded"
    )
    with FakeOpenAIServer([ServerError(200, ""), overflow]) as server:
        llm = OpenAICompatLLM("m", base_url=server.base_url)
        with pytest.raises(ContextOverflowError) as caught:
            async for _ in llm.stream([user("很长的提示 " * 10)]):
                pass
    assert caught.value.limit == 2048
    assert [r.body.get("stream") for r in server.requests] == [True, None]


async def test_an_empty_stream_then_a_real_reply_is_that_reply() -> None:
    with FakeOpenAIServer([ServerError(200, ""), ServerReply("第二次成功")]) as server:
        llm = OpenAICompatLLM("m", base_url=server.base_url)
        events = [e async for e in llm.stream([user("hi")])]
    assert [e.kind for e in events] == ["text", "done"] and events[0].text == "第二次成功"


async def test_strict_server_setting_sends_tool_choice_and_no_null_content() -> None:
    from contextmem.llm.registry import llm_from_settings

    tool = ToolSpec("lookup", "look a word up", {"type": "object", "properties": {}})
    with FakeOpenAIServer(["ok", "ok"]) as server:
        for strict in (False, True):
            settings = Settings(model="openai:m", base_url=server.base_url, strict_server=strict)
            await llm_from_settings(settings).complete([user("hi")], tools=[tool])
    plain, strict_body = (r.body for r in server.requests)
    assert "tool_choice" not in plain and strict_body["tool_choice"] == "auto"


async def test_an_overflow_that_states_the_window_is_planned_against_from_then_on(tmp_path: Any) -> None:
    """The window set too large: the first overflow teaches the session (and the LLM) the real one."""
    from contextmem.budget import Window
    from contextmem.engine import ContextEngine
    from contextmem.testing import InMemorySessionStore

    llm = OpenAICompatLLM("m", base_url="http://127.0.0.1:9/v1")
    settings = Settings(workspace=str(tmp_path), context_window=8000)
    engine = await ContextEngine.open("s", store=InMemorySessionStore(), settings=settings, llm=llm)
    learned = []
    engine.subscribe(lambda e: learned.append(e.data) if e.kind == "window_learned" else None)
    await engine.add(user("word " * 3000))
    await engine.handle_overflow(ContextOverflowError("exceed context window of 2048", limit=2048))
    assert engine.window == Window(2048, 256) and llm.context_window == 2048
    assert learned == [{"context_window": 2048, "max_tokens": 256}]
    request = await engine.build()
    assert request.estimate.prompt + request.estimate.max_tokens <= 2048
