"""The chat REPL and its commands, driven in-process with a scripted model (the terminal test uses the
real local model)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contextmem.agent import Agent
from contextmem.cli.chat import Chat
from contextmem.cli.commands import ChatCommands
from contextmem.cli.main import main
from contextmem.cli.render import context_report, describe_event, gauge
from contextmem.engine import EngineEvent
from contextmem.memory import HashEmbedder
from contextmem.runtime import ContextMem
from contextmem.settings import Settings
from contextmem.testing import InMemorySessionStore, ScriptedLLM

from .engine_helpers import GOOD_SUMMARY


def feeder(lines: list[str], screen: io.StringIO) -> Any:
    """``input()`` as a terminal shows it: the prompt, then what the user typed."""
    it: Iterator[str] = iter(lines)

    def read(prompt: str) -> str:
        try:
            line = next(it)
        except StopIteration:
            raise EOFError from None
        screen.write(f"{prompt}{line}\n")
        return line

    return read


async def run_chat(
    tmp_path: Path, lines: list[str], model: ScriptedLLM, expect_code: int = 0, **settings: Any
) -> tuple[str, Agent]:
    base: dict[str, Any] = {"workspace": tmp_path, "context_window": 6000, "max_tokens": 500}
    runtime = await ContextMem.open(
        Settings(**{**base, **settings}),
        llm=ScriptedLLM(default=GOOD_SUMMARY),
        store=InMemorySessionStore(),
        embedder=HashEmbedder(),
    )
    agent = await Agent.open(runtime, "chat", llm=model)
    out = io.StringIO()
    commands = ChatCommands(runtime, agent, tmp_path / "config.json")
    code = await Chat(runtime, agent, commands, read=feeder(lines, out), out=out).run()
    assert (await agent.engine.verify()).lost == 0  # before close: a closed store answers nothing
    await runtime.close()
    assert code == expect_code
    return out.getvalue(), agent


async def test_first_launch_asks_and_saves_key_facts(tmp_path):
    screen, agent = await run_chat(
        tmp_path,
        ["Mei", "short answers, in English", "ship the v2 billing service", "hi"],
        ScriptedLLM.of("Hi Mei!"),
    )
    assert "First launch" in screen and "What should I call you?" in screen
    text = (tmp_path / "user.md").read_text()
    assert "Mei" in text and "short answers" in text and "v2 billing" in text
    assert "Hi Mei!" in screen and "Mei" in agent.system_prompt


async def test_the_commands_show_their_effects(tmp_path):
    (tmp_path / "user.md").write_text("- Name: Mei\n")
    (tmp_path / "MEMORY.md").write_text("- Deploys happen on Tuesdays.\n")
    filler = "We looked at the nginx logs and the 502 errors again. " * 30
    turns = [f"question {i}: {filler}" for i in range(6)]
    lines = [
        *turns[:4],
        "/context",
        "/compact keep decisions only",
        "/config agent_max_context_turns 2",
        "/config agent_max_context_turns zero",
        "/config",
        *turns[4:],
        "/memory deploy day",
        "/context clear",
        "/context",
        "/nope",
        "/help",
        '"""',
        "line one",
        "line two",
        '"""',
        "first half \\",
        "second half",
        "/exit",
    ]
    model = ScriptedLLM(default="Understood.")
    # The bad /config value is reported in place; the chat's exit code is about its turns, which all ran.
    screen, _agent = await run_chat(tmp_path, lines, model, expect_code=0)
    # /context: the gauge and the regions
    assert "context ▕" in screen and "output reserve" in screen and "free" in screen
    assert "messages: 8 (assistant 4, user 4)" in screen
    # /compact with an instruction: how many and the summary; the summariser saw the instruction
    assert "compacted " in screen and "## Goal" in screen
    # /config: validated, persisted, applied (turn trimming to 2 turns on the next build)
    assert "agent_max_context_turns = 2 (saved to" in screen
    assert json.loads((tmp_path / "config.json").read_text()) == {"agent_max_context_turns": 2}
    assert "error: invalid settings" in screen and "agent_max_context_turns: got 'zero'" in screen
    assert f"file:{tmp_path / 'config.json'}" in screen
    assert "compaction (turn trim)" in screen
    # /memory
    assert "MEMORY.md:1-1" in screen and "Tuesdays" in screen
    # /context clear, then an empty context
    assert "context cleared:" in screen and "messages: 0 (none)" in screen
    assert "unknown command /nope" in screen and "/compact [instruction]" in screen
    # multi-line input arrives as one message each
    users = [m for m in model.requests[-1] if m.kind == "user"]
    assert users[-1].content == "first half \nsecond half"
    assert any(m.content == "line one\nline two" for r in model.requests for m in r if m.kind == "user")


def test_gauge_and_notices_render():
    bar = gauge([100, 0, 300, 50, 500, 50], width=20)
    assert len(bar) == 22 and "▒" not in bar  # an empty region takes no cell
    assert describe_event(EngineEvent("offload", "d", "s", {"chars": 90000, "kept": 3000, "path": "x"}))
    notice = describe_event(
        EngineEvent(
            "compaction_finished", "d", "s", {"reason": "turn_trim", "archived": 4, "tokens_before": 9}
        )
    )
    assert notice is not None and "4 messages archived" in notice
    assert describe_event(EngineEvent("compaction_started", "d", "s", {"reason": "budget_trim"})) is None


async def test_context_report_numbers_add_up(tmp_path):
    runtime = await ContextMem.open(
        Settings(workspace=tmp_path, context_window=6000, max_tokens=500),
        llm=ScriptedLLM(),
        store=InMemorySessionStore(),
        embedder=HashEmbedder(),
    )
    agent = await Agent.open(runtime, "c", llm=ScriptedLLM())
    stats = agent.engine.stats(agent.system_prompt, agent.tool_specs)
    report = context_report(stats)
    est = stats.estimate
    assert f"{est.prompt + est.max_tokens:,} / 6,000 tokens" in report
    assert f"{est.tool_defs:>9,}" in report and est.tool_defs > 100
    await runtime.close()


SCRIPTED_CHAT = ["--model", "scripted", "--embedder", "hash", "chat"]


def test_chat_command_end_to_end_without_a_model_call(tmp_path):
    """``contextmem chat`` wiring: a command and exit through piped stdin (no model call made).

    Piped input is the conversation: the first-launch questions are asked only on a terminal."""
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "contextmem.cli.main", "--workspace", str(tmp_path), *SCRIPTED_CHAT],
        input="/context\n/exit\n",
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "First launch" not in proc.stdout and "context ▕" in proc.stdout
    assert not (tmp_path / "user.md").exists()
    assert main(["--workspace", str(tmp_path), "sessions", "list"]) == 0


def test_chat_with_an_openai_compatible_endpoint_calls_tools(tmp_path):
    """``--model openai:MODEL --base-url URL``: native tool calls through a real local HTTP server."""
    import os
    import subprocess
    import sys

    from contextmem.messages import ToolCall

    from .servers import FakeOpenAIServer, ServerReply, served_window

    (tmp_path / "user.md").write_text("- Name: Ana\n")
    (tmp_path / "MEMORY.md").write_text("- The staging cluster is called kestrel.\n")
    search = ToolCall("call_1", "memory_search", json.dumps({"query": "staging cluster name"}))
    script = [ServerReply(tool_calls=(search,)), ServerReply("It is called kestrel.")]
    argv = ["--workspace", str(tmp_path), "--embedder", "hash", "--model", "openai:gpt-test"]
    with FakeOpenAIServer(script, static=served_window("gpt-test", 32768)) as server:
        proc = subprocess.run(
            [sys.executable, "-m", "contextmem.cli.main", *argv, "--base-url", server.base_url, "chat"],
            input="What is the staging cluster called?\n/exit\n",
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            env={**os.environ, "OPENAI_API_KEY": "sk-test"},
        )
        requests = list(server.requests)
    assert proc.returncode == 0, proc.stderr
    assert "→ memory_search" in proc.stdout and "It is called kestrel." in proc.stdout
    assert len(requests) == 2
    tools = {t["function"]["name"] for t in requests[0].body["tools"]}
    assert {"memory_search", "memory_get", "memory_write", "read_file"} <= tools
    assert (
        requests[0].body["messages"][0]["role"] == "system"
        and "Ana" in requests[0].body["messages"][0]["content"]
    )
    sent = requests[1].body["messages"]
    assert any(m["role"] == "tool" and "kestrel" in m["content"] for m in sent)


def test_first_launch_questions_on_a_terminal(tmp_path):
    """On a terminal (stdin and stdout a TTY) ``chat`` asks the first-launch questions and saves them."""
    import sys

    pexpect = pytest.importorskip("pexpect")
    argv = ["-m", "contextmem.cli.main", "--workspace", str(tmp_path), *SCRIPTED_CHAT]
    child = pexpect.spawn(sys.executable, argv, encoding="utf-8", timeout=120)
    child.expect("What should I call you")
    child.sendline("Dana")
    child.sendline("")
    child.sendline("")
    child.expect("Saved to")
    child.sendline("/exit")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    assert "Dana" in (tmp_path / "user.md").read_text()


def _ask_argv(tmp_path: Path, base_url: str) -> list[str]:
    return [
        "--workspace",
        str(tmp_path),
        "--embedder",
        "hash",
        "--model",
        "openai:gpt-test",
        "--base-url",
        base_url,
        "--context-window",  # the fake server states none: set, as a user of such a server must
        "32768",
    ]


def _users(request: Any) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "user"]


def test_ask_prints_the_reply_only_in_a_session_of_its_own(tmp_path, capsys, monkeypatch):
    """``ask``: one turn on the chat agent; the question from the argument, ``-``/piped stdin, ``chat -p``.
    Without ``--session`` each call is a new session: unrelated questions never pile up in one history."""
    import io
    import sys

    from .servers import FakeOpenAIServer, ServerReply

    (tmp_path / "user.md").write_text("- Name: Ana\n")
    replies = [ServerReply(r) for r in ("Four.", "Eight.", "Nine.", "Ten.", "Eleven.")]
    with FakeOpenAIServer(replies) as server:
        argv = _ask_argv(tmp_path, server.base_url)
        assert main([*argv, "ask", "What is 2+2?"]) == 0
        assert capsys.readouterr().out == "Four.\n"
        monkeypatch.setattr(sys, "stdin", io.StringIO("And 4+4?\n"))
        assert main([*argv, "ask", "-"]) == 0  # stdin; a new session: the first question is not in it
        assert capsys.readouterr().out == "Eight.\n"
        monkeypatch.setattr(sys, "stdin", io.StringIO("And 4+5?"))
        assert main([*argv, "ask", "--session", "solo"]) == 0  # no argument, piped stdin
        assert capsys.readouterr().out == "Nine.\n"
        assert main([*argv, "ask", "--session", "solo", "And 5+5?"]) == 0  # --session: restored
        assert capsys.readouterr().out == "Ten.\n"
        assert main([*argv, "chat", "--session", "other", "-p", "And 5+6?"]) == 0
        assert capsys.readouterr().out == "Eleven.\n"
        requests = list(server.requests)
    assert _users(requests[0]) == ["What is 2+2?"]
    assert _users(requests[1]) == ["And 4+4?"]
    assert _users(requests[2]) == ["And 4+5?"]
    assert _users(requests[3]) == ["And 4+5?", "And 5+5?"]
    assert _users(requests[4]) == ["And 5+6?"]
    assert "Ana" in requests[0].body["messages"][0]["content"]
    assert main(["--workspace", str(tmp_path), "sessions", "list", "--json"]) == 0
    sessions = sorted(s["session_id"] for s in json.loads(capsys.readouterr().out))
    assert len(sessions) == 4 and sessions[2:] == ["other", "solo"]
    assert all(s.startswith("ask-") for s in sessions[:2]) and sessions[0] != sessions[1]


def _stored(tmp_path: Path, session: str, capsys: Any) -> list[tuple[str, str]]:
    assert main(["--workspace", str(tmp_path), "sessions", "show", session, "--json"]) == 0
    return [(m["role"], m["content"]) for m in json.loads(capsys.readouterr().out)["messages"]]


def test_ask_exits_1_when_the_model_fails_or_says_nothing(tmp_path, capsys, monkeypatch):
    import sys

    from .servers import FakeOpenAIServer, ServerReply, openai_error

    with FakeOpenAIServer([openai_error(400, "bad request"), ServerReply(""), ServerReply("")]) as server:
        argv = _ask_argv(tmp_path, server.base_url)
        assert main([*argv, "ask", "hi", "--session", "failed"]) == 1
        captured = capsys.readouterr()
        assert captured.out == "" and "model call failed" in captured.err and "bad request" in captured.err
        # the question is kept, and the turn is closed with a note saying what happened
        [(role, asked), (role2, note)] = _stored(tmp_path, "failed", capsys)
        assert (role, asked, role2) == ("user", "hi", "assistant")
        assert note.startswith("(no reply: ") and "bad request" in note
        assert main([*argv, "ask", "hi again"]) == 1
        assert "empty reply" in capsys.readouterr().err

    class Terminal:
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdin", Terminal())
    assert main([*argv, "ask"]) == 2  # no question and nothing piped: a usage error, no model call
    assert "Fix" in capsys.readouterr().err


def test_piped_chat_never_onboards_and_exits_1_after_an_error(tmp_path, capsys, monkeypatch):
    """The field report: piped lines became user.md answers, and a failed turn still exited 0."""
    import io
    import sys

    from .servers import FakeOpenAIServer, ServerReply, openai_error

    monkeypatch.setattr(sys, "stdin", io.StringIO("hi, my name is Dana\nand again\n/exit\n"))
    with FakeOpenAIServer([ServerReply("Hello Dana."), openai_error(400, "bad request")]) as server:
        code = main([*_ask_argv(tmp_path, server.base_url), "chat"])
        requests = list(server.requests)
    out = capsys.readouterr().out
    assert code == 1
    assert "First launch" not in out and "Hello Dana." in out and "error:" in out
    assert not (tmp_path / "user.md").exists()
    assert "you>" not in out  # piped: the output is the replies, not prompts nobody sees
    *_, asked, (role, note) = _stored(tmp_path, "chat", capsys)  # the failed turn is closed, not dangling
    assert asked == ("user", "and again") and role == "assistant" and note.startswith("(no reply: ")
    assert _users(requests[0]) == ["hi, my name is Dana"]


async def test_config_unset_in_chat_takes_a_setting_back(tmp_path):
    lines = [
        "/config agent_max_context_turns 2",
        "/config unset agent_max_context_turns",
        "/config unset agent_max_context_turn",
        "/exit",
    ]
    (tmp_path / "user.md").write_text("- Name: Mei\n")
    screen, agent = await run_chat(tmp_path, lines, ScriptedLLM.of("ok"))
    config = tmp_path / "config.json"
    assert f"agent_max_context_turns unset in {config}: default 20" in screen
    assert "did you mean 'agent_max_context_turns'?" in screen
    assert json.loads(config.read_text()) == {} and agent.engine.settings.agent_max_context_turns == 20


def test_chat_says_it_is_loading_the_model_on_a_terminal(tmp_path, capsys, monkeypatch):
    import io
    import sys

    from .servers import FakeOpenAIServer, ServerReply

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stderr = Terminal()
    monkeypatch.setattr(sys, "stderr", stderr)
    monkeypatch.setattr(sys, "stdin", io.StringIO("hi\n"))
    with FakeOpenAIServer([ServerReply("Hello.")]) as server:
        assert main([*_ask_argv(tmp_path, server.base_url), "chat"]) == 0
    assert stderr.getvalue().startswith("loading model openai:gpt-test …\n")
