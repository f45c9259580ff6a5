"""Agent turns per second on PostgreSQL against SQLite, in one run: N worker processes, whole turns.

Each worker is the drill worker (``tests/drill_worker.py``, a fresh interpreter) without its
faults: ``ContextMem.open(model="none")`` at a 4,000-token window, turns of user → build → assistant with
1–2 tool calls → results up to ~20 KB → build → reply → ``end_turn``, so every turn offloads and compacts
as an agent's would. Two layouts, each on both stores:

* **single-writer**: each worker has a session of its own (the usual deployment);
* **shared**: every worker drives the same two sessions (conditional appends conflict
  and reload, a writer waits on another's open tool call).

PostgreSQL runs each worker as a host of its own (its own workspace); SQLite is one host, one workspace,
the database file in it. PostgreSQL is ``--pg-dsn`` / ``TEST_PG_DSN``, else the throwaway server of
``tests/pg.py``. Reported per store and layout: turns/s (every worker's completed turns over its run),
p50/p99 of ``add`` and ``build`` (every successful call of every worker), failed calls by class; then
PostgreSQL / SQLite. Writes ``bench/results/hosts.json``.

    python bench/bench_hosts.py [--workers 4] [--seconds 20] [--pg-dsn DSN] [--label TEXT]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.drill_worker import Spec, collect, percentiles, start  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "hosts.json"
LAYOUTS = ("single-writer", "shared")


def run(store: str, kind: str, layout: str, workers: int, seconds: float, root: Path) -> dict[str, Any]:
    """One store and layout: ``workers`` processes for ``seconds``; their reports, pooled."""
    specs = {}
    for i in range(workers):
        name = f"w{i}"
        host = f"h{i}" if kind == "postgres" else "h0"
        sessions = [f"solo-{name}"] if layout == "single-writer" else ["shared-0", "shared-1"]
        specs[name] = Spec(name, host, i, store, root / host, root / f"{name}.json", sessions)
    reports = collect(start(specs, seconds), specs, timeout=seconds + 120)
    samples: dict[str, list[float]] = {"add": [], "build": []}
    errors: Counter[str] = Counter()
    for r in reports.values():
        for op, xs in r["samples_ms"].items():
            samples[op] += xs
        errors.update(r["errors"])
    row: dict[str, Any] = {
        "store": kind,
        "layout": layout,
        "workers": workers,
        "turns": sum(r["turns_done"] for r in reports.values()),
        "turns_per_s": round(sum(r["turns_done"] / r["seconds"] for r in reports.values()), 1),
    }
    for op, xs in samples.items():
        p = percentiles(xs)
        row[f"{op}_p50_ms"], row[f"{op}_p99_ms"], row[f"{op}_calls"] = p["p50"], p["p99"], p["n"]
    row["failed"] = dict(errors)
    return row


def ratios(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """PostgreSQL / SQLite per layout, for turns/s and each latency."""
    out = []
    for layout in LAYOUTS:
        pg, lite = (
            next(r for r in rows if r["store"] == s and r["layout"] == layout) for s in ("postgres", "sqlite")
        )
        keys = ["turns_per_s", "add_p50_ms", "add_p99_ms", "build_p50_ms", "build_p99_ms"]
        out.append({"layout": layout, **{k: round(pg[k] / lite[k], 2) if lite[k] else None for k in keys}})
    return out


def markdown(rows: list[dict[str, Any]], by: list[dict[str, Any]]) -> str:
    head = "| store | layout | workers | turns/s | add p50 / p99 ms | build p50 / p99 ms | failed calls |"
    lines = [head, "|---|---|--:|--:|--:|--:|---|"]
    for r in rows:
        failed = ", ".join(f"{k} {v}" for k, v in sorted(r["failed"].items())) or "0"
        lines.append(
            f"| {r['store']} | {r['layout']} | {r['workers']} | {r['turns_per_s']} | "
            f"{r['add_p50_ms']} / {r['add_p99_ms']} | {r['build_p50_ms']} / {r['build_p99_ms']} | {failed} |"
        )
    for b in by:
        add, build = (
            f"{b['add_p50_ms']}× / {b['add_p99_ms']}×",
            f"{b['build_p50_ms']}× / {b['build_p99_ms']}×",
        )
        lines.append(f"| **PG / SQLite** | {b['layout']} | | {b['turns_per_s']}× | {add} | {build} | |")
    return "\n".join(lines)


def revision() -> str:
    """The checkout's commit, ``-dirty`` when the tree has changes (``unknown`` outside a git checkout)."""
    git = ["git", "-C", str(ROOT), "describe", "--always", "--dirty"]
    done = subprocess.run(git, capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--seconds", type=float, default=20.0, help="of turns per store and layout")
    parser.add_argument("--pg-dsn", default=os.environ.get("TEST_PG_DSN", ""))
    parser.add_argument("--out", default=str(RESULTS), help="the JSON file to write ('' = none)")
    parser.add_argument("--label", help="what engine was measured (default: the git commit)")
    args = parser.parse_args(argv)
    pg_dsn = args.pg_dsn
    if not pg_dsn:
        from tests.pg import create_schema, server_dsn

        pg_dsn = create_schema(server_dsn())[1]
    started = time.perf_counter()
    load_before = os.getloadavg()
    rows = []
    for layout in LAYOUTS:
        for kind in ("postgres", "sqlite"):
            with tempfile.TemporaryDirectory(prefix="bench-hosts-") as tmp:
                root = Path(tmp)
                # A store of its own per run: PostgreSQL sessions are per layout, SQLite a new file.
                store = pg_dsn if kind == "postgres" else f"sqlite:///{root / 'h0' / 'sessions.sqlite'}"
                rows.append(run(store, kind, layout, args.workers, args.seconds, root))
            print(f"{kind} {layout}: {rows[-1]['turns_per_s']} turns/s", file=sys.stderr)
    by = ratios(rows)
    table = markdown(rows, by)
    result = {
        "date": f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC",
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, CPython {platform.python_version()}",
        "load_average_before": [round(x, 2) for x in load_before],
        "seconds": round(time.perf_counter() - started),
        "engine": args.label or revision(),
        "command": f"python bench/bench_hosts.py --workers {args.workers} --seconds {args.seconds:g}",
        "rows": rows,
        "pg_over_sqlite": by,
        "table": table,
    }
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
