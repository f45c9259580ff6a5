"""Issue 29: the README's two agent loops, run as written with the real ``openai`` and ``anthropic`` clients
against local servers that speak their APIs (:mod:`tests.servers`).

Each loop below is the README's, line for line, but for three things a test must own: the workspace is
``tmp_path``, the embedder is the deterministic ``hash:64`` (the default one is a model to load), and the
replies are collected instead of printed. The servers check what the real APIs check (a tool result must
answer a tool call of the message before it) and record every request, so the assertions are on what the
SDKs really sent.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from contextmem import ContextMem, Settings
from contextmem.engine.types import UsageTotals
from contextmem.llm.base import Usage
from contextmem.messages import ToolCall

from .servers import FakeAnthropicServer, FakeOpenAIServer, RecordedRequest, ServerReply, served_window

pytest.importorskip("openai")
pytest.importorskip("anthropic")

TURNS = ["My name is Ada and I deploy on Fridays.", "When do I deploy?"]
NOTE = {"text": "Ada deploys on Fridays.", "target": "core"}
USAGE = Usage(prompt_tokens=300, completion_tokens=9, cached_tokens=100)


def _script() -> list[ServerReply]:
    """Turn 1: the model writes a memory, then answers; turn 2: it searches memory, then answers."""
    return [
        ServerReply(
            tool_calls=(ToolCall("call_w", "memory_write", json.dumps(NOTE)),),
            usage=USAGE,
            cache_write_tokens=50,
        ),
        ServerReply("Nice to meet you, Ada.", usage=USAGE, cache_write_tokens=50),
        ServerReply(tool_calls=(ToolCall("call_s", "memory_search", '{"query": "Fridays"}'),), usage=USAGE),
        ServerReply("You deploy on Fridays.", usage=USAGE),
    ]


def _loop_requests(server: FakeOpenAIServer | FakeAnthropicServer) -> list[RecordedRequest]:
    """The agent loop's calls (a background summary, if one ran, sends no tools)."""
    return [r for r in server.requests if r.body.get("tools")]


async def openai_loop(workspace: Path) -> tuple[list[str | None], Any, Any]:
    from openai import AsyncOpenAI

    MODEL = "gpt-4o-mini"
    replies: list[str | None] = []

    client = AsyncOpenAI()
    mem = await ContextMem.open(Settings(model=f"openai:{MODEL}", workspace=workspace), embedder="hash:64")
    engine = await mem.session("chat-1", restore=True)
    tools = mem.tools.openai_tools()
    for text in TURNS:
        await engine.add({"role": "user", "content": text})
        while True:
            request = await engine.build("You are a helpful assistant.", tools)
            completion = await client.chat.completions.create(
                model=MODEL, messages=request.to_openai(), tools=tools, max_tokens=request.max_tokens
            )
            reply = completion.choices[0].message
            await engine.add(reply)
            engine.record_usage(request, completion.usage)
            if not reply.tool_calls:
                break
            for call in reply.tool_calls:
                result = mem.tools.call(call.function.name, call.function.arguments)
                await engine.add({"role": "tool", "tool_call_id": call.id, "content": result})
        replies.append(reply.content)
        await engine.end_turn()
    stats, report = engine.stats(), await engine.verify()
    await mem.close()
    return replies, stats, report


async def anthropic_loop(workspace: Path) -> tuple[list[str], Any, Any]:
    from anthropic import AsyncAnthropic

    MODEL = "claude-sonnet-4-6"
    replies: list[str] = []

    client = AsyncAnthropic()
    mem = await ContextMem.open(Settings(model=f"anthropic:{MODEL}", workspace=workspace), embedder="hash:64")
    engine = await mem.session("chat-2", restore=True)
    tools = mem.tools.anthropic_tools()
    for text in TURNS:
        await engine.add({"role": "user", "content": text})
        while True:
            request = await engine.build("You are a helpful assistant.", tools)
            message = await client.messages.create(
                model=MODEL, max_tokens=request.max_tokens, **request.to_anthropic()
            )
            await engine.add(message)
            engine.record_usage(request, message.usage)
            calls = [block for block in message.content if block.type == "tool_use"]
            if not calls:
                break
            await engine.add({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": c.id, "content": mem.tools.call(c.name, c.input)}
                for c in calls
            ]})  # fmt: skip
        replies.append("".join(block.text for block in message.content if block.type == "text"))
        await engine.end_turn()
    stats, report = engine.stats(), await engine.verify()
    await mem.close()
    return replies, stats, report


@pytest.mark.usefixtures("no_provider_env")
async def test_the_readme_openai_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeOpenAIServer(
        _script(), default="(summary)", api_key="sk-test", static=served_window("gpt-4o-mini", 128_000)
    ) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
        replies, stats, report = await openai_loop(tmp_path)

    assert replies == ["Nice to meet you, Ada.", "You deploy on Fridays."]
    sent = _loop_requests(server)
    assert len(sent) == 4
    tool_names = ["memory_search", "memory_get", "memory_write", "read_file"]
    assert all([t["function"]["name"] for t in r.body["tools"]] == tool_names for r in sent)
    # the tool round trip, whole: the call as the model made it, its result right after it
    *_, call, result = sent[1].body["messages"]
    assert call == {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "call_w",
                "type": "function",
                "function": {"name": "memory_write", "arguments": json.dumps(NOTE)},
            }
        ],
    }  # no refusal, annotations, audio or function_call sent back
    assert result == {"role": "tool", "tool_call_id": "call_w", "content": "saved to MEMORY.md"}
    searched = sent[3].body["messages"][-1]
    assert searched["tool_call_id"] == "call_s"
    assert (
        json.loads(searched["content"])[0]["snippet"] == f"- {NOTE['text']}"
    )  # written in turn 1, found in 2
    assert _billed(stats.usage) == (4, 1200, 400)
    assert report.lost == 0 and report.appended == 8


@pytest.mark.usefixtures("no_provider_env")
async def test_the_readme_anthropic_loop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeAnthropicServer(_script(), default="(summary)", api_key="sk-ant-test") as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        replies, stats, report = await anthropic_loop(tmp_path)

    assert replies == ["Nice to meet you, Ada.", "You deploy on Fridays."]
    sent = _loop_requests(server)
    assert len(sent) == 4
    from contextmem.memory import TOOL_SCHEMAS

    anthropic_tools = [
        {"name": name, "description": s["description"], "input_schema": s["parameters"]}
        for name, s in TOOL_SCHEMAS.items()
    ]
    assert all(r.body["tools"] == anthropic_tools for r in sent)  # the system prompt carries the marker
    assert all(r.body["system"] in ("You are a helpful assistant.", [
        {"type": "text", "text": "You are a helpful assistant.", "cache_control": {"type": "ephemeral"}}
    ]) for r in sent)  # fmt: skip
    *_, call, result = sent[1].body["messages"]
    assert call["role"] == "assistant"
    assert [b for b in call["content"] if b["type"] == "tool_use"] == [
        {"type": "tool_use", "id": "call_w", "name": "memory_write", "input": NOTE}
    ]
    assert result["role"] == "user"
    assert [{k: v for k, v in b.items() if k != "cache_control"} for b in result["content"]] == [
        {"type": "tool_result", "tool_use_id": "call_w", "content": "saved to MEMORY.md"}
    ]
    searched = sent[3].body["messages"][-1]["content"][0]
    assert searched["tool_use_id"] == "call_s"
    assert json.loads(searched["content"])[0]["snippet"] == f"- {NOTE['text']}"
    # Anthropic counts cache reads and writes apart from input_tokens: all three are the prompt
    assert _billed(stats.usage) == (4, 1200, 400)
    assert report.lost == 0 and report.appended == 8


def _billed(usage: UsageTotals) -> tuple[int, int, int]:
    """The provider's side of the usage totals: calls, prompt tokens, cached tokens."""
    return usage.calls, usage.prompt_tokens, usage.cached_tokens
