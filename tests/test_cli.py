"""The command line: every command is a thin adapter; these check what users see."""

import asyncio
import io
import json
import re
import subprocess
import sys

import pytest

from contextmem.cli.demo import run, telling_lines, ticking, wait_for_runtime
from contextmem.cli.demo_script import ANSWER_SYSTEM
from contextmem.cli.main import main
from contextmem.messages import SystemMessage, UserMessage
from contextmem.settings import Settings
from contextmem.testing import ScriptedLLM


def tool_call(i, name, args):
    return {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def write_transcript(path, turns=30, huge_at=6):
    lines = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(turns):
        lines.append(
            {
                "role": "user",
                "content": f"Turn {i}: check service {i} 请检查服务 {i}, config /etc/svc{i}.yaml",
            }
        )
        if i % 3 == 0:
            lines.append(
                {"role": "assistant", "content": None, "tool_calls": [tool_call(i, "read_log", {"n": i})]}
            )
            size = 4000 if i == huge_at else 40
            body = "\n".join(f"{k} ERROR timeout on shard {k % 7} 超时" for k in range(size))
            lines.append({"role": "tool", "tool_call_id": f"c{i}", "content": body})
        lines.append(
            {"role": "assistant", "content": f"Fixed service {i}: timeout=30s in /etc/svc{i}.yaml. 已修复。"}
        )
    path.write_text("\n".join(json.dumps(m, ensure_ascii=False) for m in lines), encoding="utf-8")
    return len(lines) - 1


def test_demo_fast_replays_the_bundled_conversation_and_loses_nothing(tmp_path):
    lines: list[str] = []
    stats = run(Settings(), fast=True, keep=str(tmp_path), echo=lines.append)
    text = "\n".join(lines)
    assert stats["lost"] == 0 and lines[-1] == "lost: 0"
    assert stats["offloads"] > 0 and stats["compactions"] > 0 and stats["archived"] > 0
    assert stats["sent"] < stats["full"]
    assert "offloaded a" in text and "compaction (turn trim)" in text and "folded" in text
    assert text.count("▕") >= 24  # a gauge per turn
    assert "5433" in text and "Priya" in text  # questions about earlier days answered from memory
    assert (tmp_path / "MEMORY.md").exists() and list((tmp_path / "memory").glob("*.md"))
    # the printed summaries show what was decided, not a "(none)" section
    assert "│ ## Key decisions" in text and "│ ## 关键决策" in text
    assert "(none)" not in text and "（无）" not in text


def test_demo_asks_the_server_base_url_names(tmp_path, no_provider_env):
    """``--base-url`` reaches the demo's model: it went to the provider's public endpoint before."""
    from .servers import FakeOpenAIServer, ServerReply

    with FakeOpenAIServer([ServerReply("ok")] * 40) as server:
        settings = Settings(model="openai:qwen", base_url=server.base_url)
        stats = run(settings, keep=str(tmp_path), echo=lambda line: None)
        requests = list(server.requests)
    assert requests, "the demo never asked the server --base-url names"
    assert stats["lost"] == 0 and not stats["model_failed"]


def scripted_local_model(monkeypatch, reply="the model's answer"):
    """The demo's model, as ``load_llm`` builds it (with the settings' options), played by a script named
    like the local model."""
    model = ScriptedLLM(default=reply, name="local:scripted")
    monkeypatch.setattr("contextmem.llm.registry.load_llm", lambda spec, **options: model)
    return model


def status_file(path, **data):
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_the_demo_runs_its_sessions_while_the_runtime_installs_then_the_model_answers(tmp_path, monkeypatch):
    model = scripted_local_model(monkeypatch)
    status = status_file(tmp_path / "status.json", state="installing", log="the.log", started=0)
    lines: list[str] = []

    def echo(line):
        lines.append(line)
        if "still installing" in line:  # the model-free part is done: the install finishes now
            status_file(status, state="done", exit=0, log="the.log", started=0)

    stats = run(Settings(), keep=str(tmp_path / "ws"), echo=echo, runtime_status=status)
    text = "\n".join(lines)
    first_turn = next(i for i, x in enumerate(lines) if x.startswith("turn  1"))
    questions = next(i for i, x in enumerate(lines) if "a new session asks about earlier days" in x)
    waiting = next(i for i, x in enumerate(lines) if "still installing" in x)
    assert first_turn < questions < waiting  # every session ran before the demo needed the model
    assert "the local model's runtime is installed" in text and "loaded local:scripted" in text
    assert text.count("A: the model's answer") == text.count("Q: ") > 0
    assert "summaries: extractive (set summary_local_model" in text
    assert stats["llm_summaries"] == 0 and stats["lost"] == 0 and not stats["model_failed"]
    # the model loaded ("Say ok.") and answered; it was never asked for a summary
    assert model.requests[0] == [UserMessage("Say ok.")]
    assert all(r[0] == SystemMessage(ANSWER_SYSTEM) for r in model.requests[1:])


def test_with_summary_local_model_on_the_demo_lends_the_model_to_the_summariser(tmp_path, monkeypatch):
    scripted_local_model(monkeypatch)
    lines: list[str] = []
    settings = Settings(summary_local_model=True)
    stats = run(settings, keep=str(tmp_path / "ws"), echo=lines.append, llm_summaries=1)
    assert "summaries: local:scripted, at most 1 calls, then extractive" in lines
    assert stats["llm_summaries"] == 1 and stats["lost"] == 0


def test_a_failed_runtime_install_is_said_and_the_demo_answers_extractively(tmp_path, monkeypatch):
    model = scripted_local_model(monkeypatch)
    status = status_file(tmp_path / "status.json", state="done", exit=1, log="the.log", started=0)
    lines: list[str] = []
    stats = run(Settings(), keep=str(tmp_path / "ws"), echo=lines.append, runtime_status=status)
    text = "\n".join(lines)
    assert "failed to install (exit 1); see the.log. Answering extractively." in text
    assert "From memory (" in text and not model.requests
    assert stats["model_failed"] == 1 and stats["lost"] == 0


async def test_waiting_and_model_calls_print_a_line_at_least_every_tick(tmp_path):
    lines: list[str] = []
    async with ticking(lines.append, "answering", every=0.05):
        await asyncio.sleep(0.32)
    assert len(lines) >= 5 and lines[0].startswith("   … answering (")
    async with ticking(lines.append, "quick", every=10):
        pass
    assert not any("quick" in line for line in lines)

    status = status_file(tmp_path / "status.json", state="installing", log="x.log", started=0)
    waited: list[str] = []

    async def finish_later():
        await asyncio.sleep(0.3)
        status_file(status, state="done", exit=0)

    done, _ = await asyncio.gather(
        wait_for_runtime(status, waited.append, every=0.1, poll=0.02), finish_later()
    )
    assert done is True
    assert sum("still installing" in line for line in waited) >= 3 and "x.log" in waited[0]
    assert all(re.search(r"\(\d+m[0-5]\d", line) for line in waited if "still installing" in line)


def test_the_demo_prints_the_sections_of_a_summary_that_say_something():
    summary = (
        "## Goal\n- Ship 2.14\n\n## Constraints\n- (none)\n\n## 关键决策\n- 内存上限 1536Mi\n- 分页 500 条\n"
    )
    assert telling_lines(summary) == [
        "## Goal",
        "- Ship 2.14",
        "## 关键决策",
        "- 内存上限 1536Mi",
        "- 分页 500 条",
    ]


def test_replay_reports_turns_and_proves_nothing_was_lost(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    write_transcript(path)
    assert main(["replay", str(path), "--context-window", "5000"]) == 0
    out = capsys.readouterr().out
    assert out.strip().endswith("lost: 0")
    assert out.count("turn ") >= 30 and "compactions" in out and "offloads" in out


def test_replay_json_shape(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    n = write_transcript(path)
    assert main(["replay", str(path), "--context-window", "5000", "--max-tokens", "500", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["lost"] == 0 and report["messages"] == n
    assert report["context_window"] == 5000 and report["max_tokens"] == 500
    totals = report["totals"]
    assert totals["turns"] == 30 == len(report["turns"])
    assert totals["offloads"] >= 1 and totals["compactions"] >= 1 and totals["archived"] > 0
    assert totals["archived"] + totals["live"] >= n
    assert totals["tokens_sent"] < totals["tokens_full_history"]
    turn = report["turns"][0]
    assert set(turn) >= {"turn", "system", "summary", "history", "tool_defs", "max_tokens", "prompt"}
    assert set(turn) >= {"compactions", "offloads", "archived", "sent", "full", "within_budget"}
    assert all(t["within_budget"] for t in report["turns"])
    assert sum(t["archived"] for t in report["turns"]) >= totals["archived"] - totals["offloads"]


def test_replay_into_a_workspace_keeps_the_archive(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    write_transcript(path, turns=12)
    ws = tmp_path / "ws"
    assert main(["--workspace", str(ws), "replay", str(path), "--context-window", "8000", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["lost"] == 0
    assert list((ws / "dialog").glob("*.jsonl"))
    # The same session again is refused rather than mixed up.
    assert main(["--workspace", str(ws), "replay", str(path), "--context-window", "8000"]) == 2
    assert "not empty" in capsys.readouterr().err


def test_count_command_reads_an_openai_transcript(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    msgs = [
        {"role": "user", "content": "读取 config.yaml"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [tool_call(1, "read_file", {"path": "config.yaml"})],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "port: 8080"},
        {"role": "assistant", "content": "端口是 8080。"},
    ]
    path.write_text("\n".join(json.dumps(m, ensure_ascii=False) for m in msgs))
    assert main(["--context-window", "9000", "count", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["messages"] == 4 and report["turns"] == 1 and report["context_window"] == 9000
    assert report["by_role"]["tool"] > 0 and report["tokens"] == sum(report["by_role"].values())


def test_memory_index_and_search(tmp_path, capsys):
    (tmp_path / "memory").mkdir()
    (tmp_path / "MEMORY.md").write_text("- The billing database moved to port 5433.\n")
    (tmp_path / "memory" / "2026-01-05.md").write_text("# notes\n- 订单服务内存上限调到 1536Mi。\n")
    common = ["--workspace", str(tmp_path), "--embedder", "hash"]
    assert main([*common, "memory", "index"]) == 0
    assert "2 added" in capsys.readouterr().out
    assert main([*common, "memory", "search", "billing database port", "--k", "1", "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert len(hits) == 1 and hits[0]["path"] == "MEMORY.md" and "5433" in hits[0]["snippet"]
    assert set(hits[0]) == {"path", "start_line", "end_line", "score", "snippet"}
    assert main([*common, "memory", "search", "内存上限"]) == 0
    out = capsys.readouterr().out
    assert "memory/2026-01-05.md:" in out and "score" in out and "1536Mi" in out


def test_sessions_commands_on_an_explicit_store(tmp_path, capsys):
    import asyncio

    from contextmem.engine import ContextEngine
    from contextmem.messages import AssistantMessage, UserMessage
    from contextmem.store.open import open_store

    url = f"sqlite:///{tmp_path / 'elsewhere.sqlite'}"

    async def seed():
        store = open_store(url)
        engine = await ContextEngine.open(
            "alpha", store=store, settings=Settings(workspace=tmp_path), workspace_dir=tmp_path
        )
        await engine.add(UserMessage("hello 你好"), AssistantMessage("hi there"))
        await store.close()

    asyncio.run(seed())
    common = ["--workspace", str(tmp_path), "--store", url]
    assert main([*common, "sessions", "list"]) == 0
    out = capsys.readouterr().out
    assert "alpha" in out and "live" in out
    assert main([*common, "sessions", "show", "alpha"]) == 0
    assert "hello 你好" in capsys.readouterr().out
    assert main([*common, "sessions", "list", "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["session_id"] == "alpha" and listed["live_count"] == 2 and listed["archived_count"] == 0
    assert main([*common, "sessions", "show", "alpha", "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["session_id"] == "alpha" and shown["summary"] is None and shown["live_count"] == 2
    assert [(m["role"], m["content"]) for m in shown["messages"]] == [
        ("user", "hello 你好"),
        ("assistant", "hi there"),
    ]
    out_file = tmp_path / "alpha.jsonl"
    assert main([*common, "sessions", "export", "alpha", "-o", str(out_file)]) == 0
    rows = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert [r["role"] for r in rows] == ["user", "assistant"]
    assert main([*common, "sessions", "show", "nope"]) == 2
    assert "no session 'nope'" in capsys.readouterr().err
    assert main([*common, "sessions", "cleanup", "--days", "1"]) == 0
    assert "removed 0 sessions" in capsys.readouterr().out
    # The default store (SQLite in the workspace) is a different one: nothing there.
    assert main(["--workspace", str(tmp_path), "sessions", "list"]) == 0
    assert "no sessions" in capsys.readouterr().out


def test_config_set_validates_and_persists(tmp_path, capsys):
    ws = ["--workspace", str(tmp_path)]
    assert main([*ws, "config", "set", "agent_max_steps", "7"]) == 0
    assert json.loads((tmp_path / "config.json").read_text()) == {"agent_max_steps": 7}
    assert capsys.readouterr().out == f"agent_max_steps = 7 (saved to {tmp_path / 'config.json'})\n"
    assert main([*ws, "config", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["agent_max_steps"] == {"value": 7, "source": f"file:{tmp_path / 'config.json'}"}
    assert listed["namespace"] == {"value": "default", "source": "default"}
    assert main([*ws, "config", "get", "agent_max_steps"]) == 0
    assert capsys.readouterr().out.strip() == "7"
    assert main([*ws, "config"]) == 0
    out = capsys.readouterr().out
    assert "agent_max_steps" in out and f"file:{tmp_path / 'config.json'}" in out
    assert main([*ws, "config", "set", "agent_max_steps", "-1"]) == 2
    assert "agent_max_steps" in capsys.readouterr().err
    assert main([*ws, "config", "set", "no_such_key", "1"]) == 2
    assert "unknown setting" in capsys.readouterr().err
    assert main([*ws, "config", "set", "agent_max_steps"]) == 2
    assert "Fix" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["count", "/no/such/file.jsonl"], "no such file '/no/such/file.jsonl'. Fix: check the path"),
        (["--model", "nosuch:thing", "chat"], "Fix"),
        (["--store", "mysql://x", "sessions", "list"], "Fix"),
    ],
)
def test_errors_are_one_line_with_the_fix(tmp_path, argv, needle):
    proc = subprocess.run(
        [sys.executable, "-m", "contextmem.cli.main", "--workspace", str(tmp_path), *argv],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and needle in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_bad_input_is_one_line_with_the_fix(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"role": "function", "content": "x"}))
    proc = subprocess.run(
        [sys.executable, "-m", "contextmem.cli.main", "count", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "tool" in proc.stderr and "Fix" in proc.stderr


def test_version(capsys):
    from contextmem import __version__

    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"contextmem {__version__}"


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_completion_script_completes_from_the_parser(shell: str, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    assert main(["completion", shell]) == 0
    script = capsys.readouterr().out
    assert "complete -F _contextmem_complete contextmem" in script
    if shell == "zsh" or shutil.which("bash") is None:
        assert script.startswith("autoload -U +X bashcompinit") == (shell == "zsh")
        return
    probe = script + (
        "COMP_WORDS=(contextmem --model x memory search --); COMP_CWORD=5; _contextmem_complete; "
        'echo "${COMPREPLY[*]}"; COMP_WORDS=(contextmem sess); COMP_CWORD=1; _contextmem_complete; '
        'echo "${COMPREPLY[*]}"'
    )
    out = subprocess.run(
        ["bash", "-c", probe], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out == ["--batch --help --json --k --mode", "sessions"]


def test_config_unset_takes_a_setting_back_and_none_never_becomes_a_url(tmp_path, capsys):
    ws = ["--workspace", str(tmp_path)]
    config = tmp_path / "config.json"
    assert main([*ws, "config", "set", "base_url", "http://127.0.0.1:8080/v1"]) == 0
    assert main([*ws, "config", "set", "agent_max_steps", "7"]) == 0
    assert main([*ws, "config", "unset", "base_url"]) == 0
    assert json.loads(config.read_text()) == {"agent_max_steps": 7}
    assert capsys.readouterr().out.endswith(f"base_url unset in {config}: default null\n")
    for word in ("", "none", "null"):
        assert main([*ws, "config", "set", "base_url", word]) == 0
        assert json.loads(config.read_text()) == {"agent_max_steps": 7}
    assert main([*ws, "config", "set", "base_url", "localhost:8080"]) == 2
    err = capsys.readouterr().err
    assert "is not an http(s) URL" in err and "Fix:" in err and len(err.splitlines()) == 1
    assert json.loads(config.read_text()) == {"agent_max_steps": 7}


def test_a_mistyped_key_or_variable_names_the_closest(tmp_path, capsys, monkeypatch):
    ws = ["--workspace", str(tmp_path)]
    assert main([*ws, "config", "set", "summary_max_token", "3"]) == 2
    err = capsys.readouterr().err
    assert "did you mean 'summary_max_tokens'?" in err and "agent_max_steps" not in err
    monkeypatch.setenv("CONTEXTMEM_SUMARY_MAX_TOKENS", "100")
    monkeypatch.setenv("CONTEXTMEM_REQUIRE_PG", "1")
    assert main([*ws, "config", "path"]) == 0
    assert capsys.readouterr().err == (
        "contextmem: warning: ignoring CONTEXTMEM_SUMARY_MAX_TOKENS: not a contextmem setting. "
        "Fix: did you mean CONTEXTMEM_SUMMARY_MAX_TOKENS?\n"
    )


def test_out_of_range_numbers_are_refused_with_a_fix(tmp_path, capsys):
    for argv in (["--context-window", "0", "config", "path"], ["sessions", "cleanup", "--days", "-1"]):
        assert main(["--workspace", str(tmp_path), *argv]) == 2
        err = capsys.readouterr().err
        assert len(err.splitlines()) == 1 and "Fix:" in err and "usage:" not in err


def test_eval_compaction_counts_the_transcript_as_count_does(tmp_path, capsys):
    """``eval compaction`` said 5,750 tokens where ``count`` said 6,199 for the same file: it counted the
    texts alone, without the system prompt, the messages' framing and the tool calls."""
    path = tmp_path / "t.jsonl"
    messages = write_transcript(path, turns=12, huge_at=3)
    qa = tmp_path / "qa.jsonl"
    qa.write_text(json.dumps({"question": "which timeout?", "answer": "timeout=30s"}) + "\n")
    assert main(["--workspace", str(tmp_path / "ws"), "count", str(path), "--json"]) == 0
    counted = json.loads(capsys.readouterr().out)
    assert main(["--workspace", str(tmp_path / "ws"), "eval", "compaction", str(path), "--questions", str(qa),
                 "--json"]) == 0  # fmt: skip
    evaluated = json.loads(capsys.readouterr().out)
    assert evaluated["transcript_tokens"] == counted["tokens"] > 0
    assert evaluated["messages"] == messages == counted["messages"] - 1  # the system prompt apart
    assert (
        main(["--workspace", str(tmp_path / "ws"), "eval", "compaction", str(path), "--questions", str(qa)])
        == 0
    )
    first = capsys.readouterr().out.splitlines()[0]
    assert (
        f"{messages} messages and a system prompt, {counted['tokens']:,} tokens (as `contextmem count`"
        in first
    )


def test_count_prints_a_table_not_a_dict(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    write_transcript(path, turns=3)
    assert main(["--context-window", "9000", "count", str(path)]) == 0
    out = capsys.readouterr().out
    assert "{" not in out and "'" not in out
    assert re.search(r"messages / turns\s+\d+ / 3", out) and re.search(
        r"window / output reserve\s+9,000", out
    )
    assert re.search(r"\n  tool\s+[\d,]+", out)


def _seed_sessions(tmp_path, names=("alpha", "beta")):
    from contextmem.engine import ContextEngine
    from contextmem.messages import UserMessage
    from contextmem.store.open import open_store

    async def seed():
        settings = Settings(workspace=tmp_path)
        store = open_store(settings.store_url)
        for name in names:
            engine = await ContextEngine.open(name, store=store, settings=settings, workspace_dir=tmp_path)
            await engine.add(UserMessage("hello"))
        await store.close()

    asyncio.run(seed())


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_cleanup_of_every_session_asks_first(tmp_path, capsys, monkeypatch):
    _seed_sessions(tmp_path)
    ws = ["--workspace", str(tmp_path)]
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))  # a script: nobody to ask, so refused
    assert main([*ws, "sessions", "cleanup", "--days", "0"]) == 2
    err = capsys.readouterr().err
    assert "no terminal to ask. Fix: add --yes" in err and len(err.splitlines()) == 1
    monkeypatch.setattr(sys, "stdin", _Terminal("n\n"))
    assert main([*ws, "sessions", "cleanup", "--days", "0"]) == 1
    assert "Go on? [y/N]" in capsys.readouterr().out
    assert main([*ws, "sessions", "list"]) == 0
    assert "alpha" in capsys.readouterr().out
    monkeypatch.setattr(sys, "stdin", _Terminal("y\n"))
    assert main([*ws, "sessions", "cleanup", "--days", "0"]) == 0
    assert "removed 2 sessions" in capsys.readouterr().out
    _seed_sessions(tmp_path, ("gamma",))
    monkeypatch.setattr(sys, "stdin", io.StringIO(""))
    assert main([*ws, "sessions", "cleanup", "--days", "0", "--yes"]) == 0
    assert "removed 1 sessions" in capsys.readouterr().out


def test_bash_completion_offers_setting_keys_after_config_set(capsys):
    import shutil

    if shutil.which("bash") is None:
        pytest.fail("bash is needed to run the completion script")
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    probe = script + "".join(
        f"COMP_WORDS=(contextmem config {verb} summary_ma); COMP_CWORD=3; _contextmem_complete; "
        'echo "${COMPREPLY[*]}";'
        for verb in ("set", "unset", "get")
    )
    out = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["summary_max_tokens"] * 3


def test_memory_search_shows_indexing_progress_on_a_terminal_then_nothing_when_unchanged(
    tmp_path, capsys, monkeypatch
):
    (tmp_path / "memory").mkdir()
    for day in range(1, 6):
        (tmp_path / "memory" / f"2026-01-0{day}.md").write_text(f"- deploy note {day}: port 54{day}\n")
    common = ["--workspace", str(tmp_path), "--embedder", "hash"]
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    assert main([*common, "memory", "search", "deploy port"]) == 0
    assert re.fullmatch(r"(\rindexing new or changed memory \[#*\.*\] \d+/\d+ .*)+\n", terminal.getvalue())
    assert re.match(
        r"indexing new or changed memory \[#{30}\] (\d+)/\1 ", terminal.getvalue().rsplit("\r")[-1]
    )
    monkeypatch.undo()
    assert main([*common, "memory", "search", "deploy port"]) == 0
    assert capsys.readouterr().err == ""


def test_progress_bars_stay_off_a_stderr_that_is_no_terminal(tmp_path, capsys):
    """A script or a log reads errors only on stderr: no bar, not even a final line."""
    (tmp_path / "memory").mkdir()
    for day in range(1, 6):
        (tmp_path / "memory" / f"2026-01-0{day}.md").write_text(f"- release note {day}: build 7{day}\n")
    common = ["--workspace", str(tmp_path), "--embedder", "hash"]
    assert main([*common, "memory", "index"]) == 0
    (tmp_path / "memory" / "2026-01-09.md").write_text("- release note 9: build 79\n")
    assert main([*common, "memory", "search", "release build"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and "5 added" in captured.out and "build 79" in captured.out


def test_replay_states_the_output_reserve_it_takes(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    write_transcript(path, turns=3)
    assert main(["replay", str(path), "--context-window", "8000"]) == 0
    err = capsys.readouterr().err
    assert err == (
        "window 8,000 tokens: reserving 4,000 for output (max_tokens), 4,000 for input "
        "(--max-tokens N changes the split)\n"
    )


def test_mcp_stdio_on_a_terminal_says_it_waits_and_stops_on_the_first_ctrl_c(tmp_path):
    import os
    import pty
    import queue
    import signal
    import threading

    pytest.importorskip("mcp")
    master, slave = pty.openpty()
    argv = [sys.executable, "-m", "contextmem.cli.main", "--workspace", str(tmp_path), "mcp"]
    # A shell's background job starts with SIGINT ignored, and a child inherits that; a handled signal is
    # the default again in the child, so Ctrl-C reaches it as from a user's terminal.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        proc = subprocess.Popen(
            [*argv, "--transport", "stdio", "--no-llm", "--embedder", "hash"],
            stdin=slave,
            stdout=slave,
            stderr=subprocess.PIPE,
            text=True,
        )
    finally:
        signal.signal(signal.SIGINT, previous)
    os.close(slave)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True).start()  # type: ignore[union-attr]
    try:
        first = lines.get(timeout=60)  # hang guards only, not timings
        assert "waiting for an MCP client on stdio" in first and "Ctrl-C" in first
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)  # on main the first Ctrl-C did not end it
    finally:
        proc.kill()
        os.close(master)
    rest = []
    while not lines.empty():
        rest.append(lines.get_nowait())
    assert code == 130 and "Traceback" not in "".join(rest)


_OPEN: list[object] = []


async def _interrupted_with_a_generator_that_raises_on_close() -> None:
    """What Ctrl-C leaves behind in the MCP SDK: an async generator suspended mid-read, whose cleanup
    raises when the loop closes it."""

    async def stream():  # type: ignore[no-untyped-def]
        try:
            yield "line"
            await asyncio.sleep(3600)
        finally:
            raise RuntimeError("cancelled mid-read")  # as an anyio task group does

    reader = stream()
    _OPEN.append(reader)  # held, as the SDK holds its streams: the loop closes it as it shuts down
    await reader.__anext__()
    raise KeyboardInterrupt


def test_closing_after_ctrl_c_prints_no_traceback(caplog):
    import logging

    from contextmem.mcp.cli import run_until_interrupted

    caplog.set_level(logging.DEBUG, logger="contextmem.mcp.cli")  # earlier CLI tests may set its level
    assert run_until_interrupted(_interrupted_with_a_generator_that_raises_on_close()) is True
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("closing after Ctrl-C" in r.getMessage() for r in caplog.records)
    # the oracle: asyncio's own run reports it as an error, with the exception
    caplog.clear()
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(_interrupted_with_a_generator_that_raises_on_close())
    assert any(
        r.levelno >= logging.ERROR and "closing of asynchronous generator" in r.getMessage()
        for r in caplog.records
    )
