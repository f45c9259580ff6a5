"""Every error a user can cause through the CLI is one line on stderr that ends in a Fix, never a traceback.

The walk reads the commands from the argparse parser itself, so a new command (or a new numeric option,
or a new file argument) is walked without editing this file: each command with an unknown option, each
numeric option with ``-1``, each file argument with a path that does not exist, each command missing its
required arguments, plus the errors found only after parsing (a session that does not exist, a bad
setting, a refused cleanup). :func:`failure_problem` is the oracle, tested on its own first.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextmem.cli import args as types
from contextmem.cli.main import build_parser, main

NUMBERS = (types.positive_int, types.count)
FILES = (types.input_file, types.existing_file)
MISSING = "no-such-file.jsonl"


def failure_problem(code: int, stderr: str) -> str | None:
    """What is wrong with how a failure was reported, or None: nonzero exit, and stderr exactly one line
    holding ``Fix:`` and no traceback."""
    if code == 0:
        return "exit code 0 for a failure"
    if "Traceback" in stderr:
        return "a traceback"
    lines = stderr.splitlines()
    if len(lines) != 1:
        return f"{len(lines)} lines on stderr"
    if "Fix:" not in lines[0]:
        return "no Fix"
    return None


@pytest.mark.parametrize(
    ("code", "stderr", "problem"),
    [
        (2, "contextmem: no such file 'x'. Fix: check the path\n", None),
        (0, "contextmem: x. Fix: y\n", "exit code 0 for a failure"),
        (2, "contextmem: No such file or directory: nofile.jsonl\n", "no Fix"),
        (2, "usage: contextmem [-h]\ncontextmem: error: bad. Fix: y\n", "2 lines on stderr"),
        (1, 'Traceback (most recent call last):\n  File "x"\nValueError: Fix: y\n', "a traceback"),
        (2, "", "0 lines on stderr"),
    ],
)
def test_the_oracle_catches_each_way_a_report_goes_wrong(code, stderr, problem):
    assert failure_problem(code, stderr) == problem


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def leaves(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    """Every command that runs something: ``("sessions", "show")``, ``("count",)``, ..."""
    subs = _subcommands(parser)
    if not subs or path == ("config",):  # `config` alone lists: a command as well as a group
        yield path, parser
    for name, sub in subs.items():
        yield from leaves(sub, (*path, name))


def walked_cases() -> list[list[str]]:
    """Error invocations derived from the parser."""
    root = build_parser()
    cases = [[opt, "-1", "config", "path"] for opt in _options(root, NUMBERS)]
    for path, parser in leaves(root):
        positionals = [a for a in parser._actions if not a.option_strings and a.nargs is None]
        cases.append([*path, "--no-such-option"])
        if positionals:
            cases.append(list(path))  # required arguments missing
        fillers = [MISSING if a.type in FILES else "x" for a in positionals]
        if any(a.type in FILES for a in positionals):
            cases.append([*path, *fillers])
        for opt in _options(parser, NUMBERS):
            cases.append([*path, *fillers, opt, "-1"])
        for opt in _options(parser, FILES):
            cases.append([*path, *fillers, opt, MISSING])
    return cases


def _options(parser: argparse.ArgumentParser, kinds: tuple[object, ...]) -> list[str]:
    return [a.option_strings[-1] for a in parser._actions if a.option_strings and a.type in kinds]


def after_parsing_cases(tmp_path: Path) -> list[list[str]]:
    """Errors the parser cannot see: the files exist, the values parse."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "function", "content": "x"}\n')
    not_json = tmp_path / "tools.json"
    not_json.write_text("not json")
    good = tmp_path / "good.jsonl"
    good.write_text('{"role": "user", "content": "hi"}\n')
    return [
        ["sessions", "show", "nope"],
        ["sessions", "export", "nope"],
        ["sessions", "cleanup", "--days", "0"],  # no terminal to confirm on
        ["config", "set", "agent_max_steps", "-1"],
        ["config", "set", "summary_max_token", "3"],
        ["config", "set", "base_url", "localhost:8080"],
        ["config", "unset", "summary_max_token"],
        ["--store", "mysql://x", "sessions", "list"],
        ["--config", str(tmp_path / "nofile.toml"), "config", "list"],
        ["count", str(bad)],
        ["count", str(tmp_path)],
        ["replay", str(good), "--tools", str(not_json)],
        ["memory", "search"],
        ["ask"],  # nothing piped: an empty question
        ["--model", "nosuch:thing", "chat"],
        ["--namespace", "Bad Name!", "sessions", "list"],
    ]


def test_every_error_path_of_the_cli_is_one_line_with_a_fix(tmp_path, capsys, monkeypatch):
    for name in [n for n in os.environ if n.startswith("CONTEXTMEM_")]:
        monkeypatch.delenv(name)  # a developer's misspelled variable would add its own warning line
    monkeypatch.chdir(tmp_path)
    walked = walked_cases()
    commands = {tuple(a for a in case if not a.startswith("-") and a != "x") for case in walked}
    assert len(walked) >= 45 and {("count",), ("sessions", "cleanup"), ("config", "set")} <= commands
    problems = {}
    for case in [*walked, *after_parsing_cases(tmp_path)]:
        monkeypatch.setattr(sys, "stdin", io.StringIO(""))
        code = main(["--workspace", str(tmp_path / "ws"), *case])
        err = capsys.readouterr().err
        if problem := failure_problem(code, err):
            problems[" ".join(case)] = f"{problem}: {err[:300]!r}"
    assert not problems, json.dumps(problems, indent=1)


def test_output_into_a_closed_pipe_ends_quietly(tmp_path):
    """``contextmem … | head``: the reader left; no ``Broken pipe`` message, no traceback."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first byte is written
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "contextmem.cli.main", "--workspace", str(tmp_path), "completion", "bash"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            check=False,
        )
    finally:
        os.close(write_end)
    assert proc.stderr == "" and proc.returncode == 141


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["--workspace", str(tmp_path / "ws"), *argv])
    return code, capsys.readouterr().err


def test_a_port_in_use_is_one_line_with_a_fix_and_help_shows_the_default(tmp_path, capsys):
    """uvicorn printed its own ``ERROR: [Errno 98] ...`` line and exited 3, with no Fix."""
    pytest.importorskip("mcp")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        code, err = _run(
            tmp_path, capsys, "mcp", "--transport", "http", "--no-llm", "--embedder", "hash", "--port", port
        )
    assert failure_problem(code, err) is None and code == 2, err
    assert f"port {port} on '127.0.0.1' is in use" in err and "--port N" in err
    with pytest.raises(SystemExit) as done:
        main(["mcp", "--help"])
    assert done.value.code == 0 and "(default: 8765)" in " ".join(capsys.readouterr().out.split())


def test_a_reserve_larger_than_the_window_is_a_setting_error_not_a_model_failure(tmp_path, capsys):
    """It was sent to the model and reported as "the model call failed: ... needs 1068 tokens"."""
    code, err = _run(
        tmp_path, capsys, "--model", "openai:gpt-test", "--base-url", "http://127.0.0.1:9/v1",
        "--context-window", "1000", "--max-tokens", "5000", "--embedder", "hash", "ask", "hi",
    )  # fmt: skip
    assert failure_problem(code, err) is None and code == 2, err
    assert "model call failed" not in err and "max_tokens (5000) is not below context_window (1000)" in err
    code, err = _run(tmp_path, capsys, "config", "set", "context_window", "1000")
    assert code == 0
    code, err = _run(tmp_path, capsys, "config", "set", "max_tokens", "1000")
    assert failure_problem(code, err) is None and "is not below context_window" in err


def test_a_budget_the_request_cannot_fit_is_said_as_itself_not_as_a_failed_model_call(
    tmp_path, capsys, no_provider_env
):
    from .servers import FakeOpenAIServer, ServerReply

    with FakeOpenAIServer([ServerReply("ok")]) as server:
        code, err = _run(
            tmp_path, capsys, "--model", "openai:gpt-test", "--base-url", server.base_url,
            "--context-window", "1000", "--max-tokens", "400", "--embedder", "hash", "ask", "word " * 900,
        )  # fmt: skip
        asked = len(server.requests)
    assert failure_problem(code, err) is None and asked == 0, err
    assert "model call failed" not in err and "needs" in err and "but the budget is" in err


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("not json", ":1:1: is not JSON (Expecting value)"),
        ('[{"type": "function",\n', ":2:1: is not JSON"),
        ('{"name": "read"}', ": holds an object, not a list of tool definitions"),
        ("null", ": holds null, not a list"),
        ("\udcff[]", ": is not UTF-8 text (byte 0)"),
    ],
)
def test_a_bad_tools_file_is_named_with_what_is_wrong(tmp_path, capsys, content, said):
    """``replay --tools bad.json`` said "Expecting value: line 1 column 1 (char 0)" and no file."""
    good = tmp_path / "good.jsonl"
    good.write_text('{"role": "user", "content": "hi"}\n')
    tools = tmp_path / "my-tools.json"
    tools.write_bytes(content.encode("utf-8", "surrogateescape"))
    code, err = _run(tmp_path, capsys, "replay", str(good), "--tools", str(tools))
    assert failure_problem(code, err) is None, err
    assert f"{tools}{said}" in err and "Fix: give a JSON list of tool definitions" in err


def test_nothing_listening_at_the_base_url_says_so_with_a_fix(tmp_path, capsys, no_provider_env):
    """A connection refused read "Connection error. (...). Retried with backoff; ..." with no Fix, and,
    with no --context-window, "the server states none" (nobody was there to state anything)."""
    from .servers import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    for window in (["--context-window", "8000"], []):
        code, err = _run(
            tmp_path, capsys, "--model", "openai:gpt-test", "--base-url", url, *window,
            "--embedder", "hash", "ask", "hi",
        )  # fmt: skip
        assert failure_problem(code, err) is None, err
        assert f"cannot connect to {url}" in err and "is the server running there? Fix: start it" in err
        assert "--base-url" in err and "states none" not in err


def test_ask_with_no_model_gives_the_command_line_s_advice(tmp_path, capsys, monkeypatch):
    """It said "... or pass llm=...", the library's advice."""
    code, err = _run(tmp_path, capsys, "--model", "none", "ask", "hi")
    assert failure_problem(code, err) is None and "llm=" not in err, err
    assert "model is 'none' (set by --model)" in err and "--model" in err.split("Fix:")[1]
    assert _run(tmp_path, capsys, "config", "set", "model", "none")[0] == 0
    code, err = _run(tmp_path, capsys, "chat", "-p", "hi")
    assert failure_problem(code, err) is None and "contextmem config set model local" in err, err
    monkeypatch.setenv("CONTEXTMEM_MODEL", "none")
    code, err = _run(tmp_path, capsys, "ask", "hi")
    assert failure_problem(code, err) is None and "Fix: unset CONTEXTMEM_MODEL" in err, err


@pytest.mark.parametrize(
    ("argv", "meant", "prog"),
    [
        (["sesions", "list"], "'sessions'", "contextmem"),
        (["sessions", "lst"], "'list'", "contextmem sessions"),
        (["count", "t.jsonl", "--jsn"], "'--json'", "contextmem count"),
        (["memory", "search", "--mdoe=keyword", "x"], "'--mode'", "contextmem memory search"),
        (["config", "st", "model", "local"], "'set'", "contextmem config"),
        (["ask", "--modle", "none", "hi"], "'--model'", "contextmem ask"),
    ],
)
def test_a_mistyped_command_or_option_gets_the_closest(tmp_path, capsys, argv, meant, prog):
    (tmp_path / "t.jsonl").write_text('{"role": "user", "content": "hi"}\n')
    argv = [str(tmp_path / a) if a == "t.jsonl" else a for a in argv]
    code, err = _run(tmp_path, capsys, *argv)
    assert failure_problem(code, err) is None and code == 2, err
    assert err.startswith(f"{prog}: ") and f"Fix: did you mean {meant}? Or see `{prog} --help`" in err


def test_a_mistyped_option_before_the_command_is_named_not_the_word_after_it(tmp_path, capsys):
    code, err = _run(tmp_path, capsys, "--modle", "none", "ask", "hi")
    assert failure_problem(code, err) is None and code == 2, err
    assert "invalid choice: 'none'" in err
    assert "Fix: '--modle' is not an option: did you mean '--model'?" in err


def test_the_global_options_work_after_the_command_too(tmp_path, capsys):
    code, err = _run(tmp_path, capsys, "ask", "--model", "none", "hi")
    assert code == 2 and "model is 'none' (set by --model)" in err, err  # taken, not "unrecognized arguments"
    for argv, where in (
        (["config", "path", "--workspace", str(tmp_path / "b")], "b"),
        (["--workspace", str(tmp_path / "a"), "config", "path"], "a"),  # not undone by the command's copy
        (["--workspace", str(tmp_path / "a"), "config", "path", "--workspace", str(tmp_path / "b")], "b"),
    ):
        assert main(argv) == 0
        assert capsys.readouterr().out.strip() == str(tmp_path / where / "config.json")


def test_nothing_close_suggests_nothing(tmp_path, capsys):
    (tmp_path / "t.jsonl").write_text('{"role": "user", "content": "hi"}\n')
    code, err = _run(tmp_path, capsys, "count", str(tmp_path / "t.jsonl"), "--zzzzzz")
    assert failure_problem(code, err) is None and "did you mean" not in err, err
