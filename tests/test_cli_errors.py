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
