"""Where a bench writes what it measured: ``bench/results/NAME.md``, headed by when, on what, under what load.

Every bench in this folder, and every evaluation in ``evals/``, ends by calling :func:`write` (or puts
:func:`stamp` in its JSON), so a figure quoted in ``docs/results.md`` or the README can be traced to the file
and the run that produced it; ``tests/test_results_fresh.py`` reads the revision back and fails when the
code a file measures changed after it.
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).parent / "results"


def revision() -> str:
    """The checkout's commit, and whether ``src/`` differs from it (``unknown`` outside a git checkout)."""
    root = Path(__file__).parents[1]
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "src"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + (" + uncommitted changes in src/" if dirty else "")


def run_line(seconds: float | None = None, label: str | None = None) -> str:
    """``date · machine · cores · load average · seconds · engine``: the line under each results title."""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    took = f" · {seconds:.0f} s" if seconds is not None else ""
    return (
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC · {platform.machine()} · {os.cpu_count()} cores · "
        f"load average {load}{took} · engine: {label or revision()}"
    )


def stamp(seconds: float | None = None, label: str | None = None) -> dict[str, object]:
    """The run line's facts and the command as fields, for a results file written as JSON (``engine`` is
    what ``tests/test_results_fresh.py`` reads)."""
    return {
        "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "machine": platform.machine(),
        "cores": os.cpu_count(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "seconds": None if seconds is None else round(seconds),
        "engine": label or revision(),
        "command": command(),
    }


def command() -> str:
    """The command line that ran this bench, as a reader would type it."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:  # run with -m
        return " ".join(["python", "-m", spec.name, *sys.argv[1:]])
    script = Path(sys.argv[0]).resolve()
    root = Path(__file__).resolve().parents[1]
    shown = script.relative_to(root).as_posix() if script.is_relative_to(root) else str(script)
    return " ".join(["python", shown, *sys.argv[1:]])


def write(name: str, title: str, body: str, *, seconds: float | None = None, out: Path | None = None) -> Path:
    """Write ``# title``, the run line, the command and ``body`` to ``out`` (default
    ``bench/results/NAME.md``); returns the path written."""
    path = out or RESULTS / f"{name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = f"# {title}\n\n{run_line(seconds)}\n\n`{command()}`\n\n{body.rstrip()}\n"
    path.write_text(text, encoding="utf-8")
    print(f"wrote {path}")
    return path
