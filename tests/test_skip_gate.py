"""The skip gate (tests/skip_gate.py) fails a run on a skip that is not on the allow-list, at test and at
module level, under pytest-xdist too, and lets a listed one pass: a planted skip is caught."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.skip_gate import ALLOWED, STRICT

ROOT = Path(__file__).resolve().parents[1]

PLANTED = """
import pytest

def test_runs():
    pass

def test_planted():
    pytest.skip("planted: nothing installs what this needs")
"""
MODULE_LEVEL = """
import pytest
pytest.importorskip("a_module_nobody_installs")

def test_never_runs():
    pass
"""


def run(
    tmp_path: Path, source: str, allowed: str | None, *args: str, strict: bool = True
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_planted.py").write_text(source)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    env = {k: v for k, v in os.environ.items() if not (k in (STRICT, ALLOWED) or k.startswith("PYTEST_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    if strict:
        env[STRICT] = "1"
    listed = tmp_path / "allowed.txt"
    listed.write_text(allowed or "")
    env[ALLOWED] = str(listed)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "tests.skip_gate",
            "-p",
            "no:cacheprovider",
            "-q",
            *args,
            str(tmp_path),
        ],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_unlisted_skip_fails_the_run_and_is_named(tmp_path: Path) -> None:
    done = run(tmp_path, PLANTED, None)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "test_planted.py::test_planted: planted: nothing installs what this needs" in done.stdout
    assert "Fix:" in done.stdout


def test_a_listed_skip_passes(tmp_path: Path) -> None:
    done = run(tmp_path, PLANTED, "*::test_planted  # nothing here installs it\n")
    assert done.returncode == 0, done.stdout + done.stderr


def test_without_the_switch_a_skip_passes_as_usual(tmp_path: Path) -> None:
    done = run(tmp_path, PLANTED, None, strict=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_module_that_skips_at_import_is_caught(tmp_path: Path) -> None:
    done = run(tmp_path, MODULE_LEVEL, None)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "test_planted.py: could not import 'a_module_nobody_installs'" in done.stdout


def test_the_controller_catches_a_workers_skip_under_xdist(tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    done = run(tmp_path, PLANTED, None, "-n", "2")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "test_planted.py::test_planted" in done.stdout


def test_an_allowed_skip_without_a_reason_is_refused(tmp_path: Path) -> None:
    done = run(tmp_path, PLANTED, "*::test_planted\n")
    assert done.returncode != 0
    assert "gives no reason" in done.stdout + done.stderr
