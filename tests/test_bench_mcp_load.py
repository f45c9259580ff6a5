"""The MCP load bench (``bench/bench_mcp_load.py``) still runs: a short, small run of it, every call answered.

It starts the real HTTP server on the real PostgreSQL and drives it with the bench's lean client (and once
with the SDK's, ``--client official``), as the full run does; only the sizes are small (2 tenants × 2
clients for 5 s, a 1 MB heavy tenant for 2 s). Nothing here is timed: the bench's figures are its own
business (``bench/results/mcp_load.md``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.pg import pg_dsn  # noqa: F401  (a fixture)

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

ROOT = Path(__file__).resolve().parents[1]


def bench(*argv: str) -> str:
    """The bench's output, run with ``argv``; fails the test when it fails or a call failed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_mcp_load.py"), *argv],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert ", 0 errors**" in done.stdout, done.stdout[-3000:]
    assert "The load generator (this bench's process) used " in done.stdout, done.stdout[-3000:]
    return done.stdout


def test_a_short_run_of_the_mcp_load_bench_answers_every_call(pg_dsn: str) -> None:  # noqa: F811
    stdout = bench("--tenants", "2", "--clients", "2", "--seconds", "5", "--pause", "0.2",
                   "--heavy-seconds", "2", "--heavy-mb", "1", "--embedder", "hash:384", "--pg-dsn", pg_dsn,
                   "--out", "")  # fmt: skip
    assert "clients: `bench/mcp_wire.py` (2026-07-28)" in stdout
    for tool in ("memory_search", "memory_write", "context_stats", "memory_get", "list_sessions"):
        row = next(line for line in stdout.splitlines() if line.startswith(f"| {tool} |"))
        calls, errors = row.split("|")[2], row.split("|")[-2]
        assert int(calls) > 0 and int(errors) == 0, row
    assert "| heavy tenant busy |" in stdout


def test_the_official_client_still_drives_the_bench_once_per_pause(pg_dsn: str) -> None:  # noqa: F811
    stdout = bench("--tenants", "1", "--clients", "2", "--seconds", "2", "--pause", "0.2", "--pause", "0.4",
                   "--heavy-seconds", "0", "--heavy-mb", "1", "--embedder", "hash:384", "--out", "",
                   "--client", "official")  # fmt: skip
    assert "clients: the official `mcp.Client`" in stdout
    assert "## Embedder `hash:384`, a pause of 0.2 s" in stdout and ", a pause of 0.4 s\n" in stdout


def _crowded(starts: list[float], window: float) -> int:
    """The most starts within any ``window`` seconds."""
    starts = sorted(starts)
    return max(sum(1 for t in starts[i:] if t - s < window) for i, s in enumerate(starts))


def test_the_clients_call_out_of_step_at_the_pause_they_are_given() -> None:
    """Clients in step made the p99 the wait of a burst of 20 calls arriving at once, every 100 ms. The
    bench's clients start spread over the first pause and pause 0.5-1.5 times ``--pause`` (mean kept)."""
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_mcp_load import tenant_names, waits

    clients = [(t, i) for t in tenant_names(20) for i in range(5)]
    firsts, pauses = [], []
    for tenant, index in clients:
        drawn = waits(tenant, index, 1.0)
        firsts.append(next(drawn))
        pauses += [next(drawn) for _ in range(50)]
    lockstep = [1.0 * (index % 10) / 10 for _, index in clients]  # the bench's starts before
    assert _crowded(lockstep, 0.02) == 20  # the oracle sees the burst
    assert _crowded(firsts, 0.02) <= 8
    assert all(0 <= f < 1 for f in firsts) and all(0.5 <= p <= 1.5 for p in pauses)
    assert abs(sum(pauses) / len(pauses) - 1.0) < 0.02
