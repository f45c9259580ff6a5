"""A skip in CI is a failure unless it is on the allow-list with its reason.

A test that skips passes in silence: a missing extra (``pytest.importorskip("mcp")``), a server that did
not start or a switch nobody set would hide a whole module from CI and nothing would turn red. With
``CONTEXTMEM_STRICT_SKIPS=1`` (``.ci/run`` sets it) every skipped test or module must match a line of
``tests/skips_allowed.txt`` (a node-id glob, then ``#`` and why CI may skip it), or the run fails and lists
each unlisted skip with its reason. Under pytest-xdist the workers' reports reach the controller, which
judges once. ``CONTEXTMEM_ALLOWED_SKIPS`` names another allow-list (the gate's own test uses it).
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

import pytest

STRICT = "CONTEXTMEM_STRICT_SKIPS"
ALLOWED = "CONTEXTMEM_ALLOWED_SKIPS"
DEFAULT_LIST = Path(__file__).with_name("skips_allowed.txt")

_skipped: dict[str, str] = {}


def allowed_patterns(path: Path) -> list[str]:
    """The node-id globs of an allow-list: one a line, each with ``# reason`` (a line without one is an
    error: an allowed skip says why)."""
    patterns = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pattern, _, reason = line.partition("#")
        if not reason.strip():
            raise pytest.UsageError(f"{path}:{number}: {pattern.strip()!r} gives no reason after '#'")
        patterns.append(pattern.strip())
    return patterns


def _reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    why = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return why.removeprefix("Skipped: ")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and not hasattr(report, "wasxfail"):
        _skipped[report.nodeid] = _reason(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    if report.skipped:
        _skipped[report.nodeid] = _reason(report)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if os.environ.get(STRICT) != "1" or hasattr(session.config, "workerinput"):
        return
    patterns = allowed_patterns(Path(os.environ.get(ALLOWED) or DEFAULT_LIST))
    unlisted = {
        node: why for node, why in _skipped.items() if not any(fnmatch.fnmatchcase(node, p) for p in patterns)
    }
    if not unlisted:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    lines = [f"{len(unlisted)} skip(s) not on {os.environ.get(ALLOWED) or DEFAULT_LIST.name} ({STRICT}=1):"]
    lines += [f"  {node}: {why}" for node, why in sorted(unlisted.items())]
    lines.append("Fix: make the test run in CI (install what it needs), or list it there with its reason.")
    if reporter is not None:
        reporter.write("\n")
        reporter.write_line("\n".join(lines), red=True)
    session.exitstatus = pytest.ExitCode.TESTS_FAILED
