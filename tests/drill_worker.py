"""The drill of issue 30: worker processes driving the same sessions, run as ``python -m tests.drill_worker``.

A worker is a fresh interpreter (like :mod:`tests.store_workload`) standing for one agent process on one
host: its own workspace (the host's disk: ``dialog/`` and ``tool_results/``), the store every host
shares (a PostgreSQL DSN, or a SQLite URL on one host), ``ContextMem.open(model="none")`` at a
4,000-token window, so compaction runs all the time. For ``--seconds`` it does turns over ``--sessions``
(turn ``n`` on session ``n + index``, round robin)::

    add(user) → build() → add(assistant with 1–2 tool calls) → add(the results, up to ~20 KB, so they
    are offloaded) → build() → add(assistant reply) → end_turn() [→ memory_write, every other turn]

A failed step is retried with backoff (as an agent would) until ``--step-seconds`` pass; then the turn
is abandoned. Every exception is classified: a contextmem error by its class name, anything else as
``raw:module.Class`` (a driver's error reaching the caller, issue 30 point 4); an operation that outlives
``--hang-seconds`` is ``hung``. Every request ``build`` returns is checked for orphans
(:func:`request_orphans`); every message an ``add`` acknowledged carries a marker ``⟦w.t.part⟧`` the
parent looks for in the store. ``--kill-at-turn N`` writes the report and SIGKILLs the worker right after
its turn-N assistant message with tool calls was stored, before the results: the crashed writer.

The report (JSON, ``--out``) is written on exit, on SIGTERM and before that SIGKILL. A progress line is
printed every two seconds. The oracles the parent and the tests share are the pure functions below:
:func:`request_orphans`, :func:`stored_orphans`, :func:`wedged` and :func:`ack_problems`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from contextmem import ContextEngine, ContextMem, Settings
from contextmem.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    UserMessage,
    orphan_tool_messages,
    text_of,
)

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")

EMBEDDER = "hash:384"  # memory without a model to load: the drill is about who sees what, not ranking
WINDOW = 4_000
MAX_TOKENS = 400
LEASE_SECONDS = 3.0
BUSY_TIMEOUT = 6.0  # longer than the lease: a writer waiting on a dead call outlives its lease
WEDGE_FAILURES = 3
WEDGE_SECONDS = 10.0
SYSTEM = "You are an on-call assistant. Read logs with the tools and say what failed."
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "read_log",
            "description": "Read a service's recent log lines.",
            "parameters": {
                "type": "object",
                "properties": {"service": {"type": "string"}, "lines": {"type": "integer"}},
                "required": ["service"],
            },
        },
    }
]
RESULT_SIZES = (300, 1_500, 6_000, 20_000)  # characters; the larger ones are offloaded
LOG_EVENTS = ("GET /health 200", "retrying upstream", "heap 91%", "GC pause 340ms", "OOMKilled")
MARKER = re.compile(r"⟦([^⟧]+)⟧")
# Errors no retry can mend: the step ends at once (the lease closed our call: an agent moves on).
FINAL_ERRORS = frozenset({"ToolCallExpiredError"})

Outcome = tuple[float, float, str | None]
"""One attempted operation on a session: start and end (seconds into the run), error class or None."""


# --- the oracles (pure; tests/test_drill.py shows each one catching what it guards against) ----------


def request_orphans(messages: Sequence[Message]) -> list[int]:
    """Indices (in the request without its system message) of messages that break a tool-call pair: a
    result without its call, a call without all its results, the last one included (a request ending
    in an open call cannot be answered: the provider wants the results first)."""
    return orphan_tool_messages([m for m in messages if m.kind != "system"])


def stored_orphans(messages: Sequence[Message]) -> dict[str, list[str]]:
    """What breaks tool-call pairs among every message a session ever stored (live and archived, in seq
    order). ``calls``: ids of calls whose result was never stored anywhere; ``results``: ids of results
    whose call never was; ``out_of_place``: ids of calls whose results are stored but not right after
    the call (another message came between)."""
    called = {c.id for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls}
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    bad = orphan_tool_messages(messages)
    broken = {
        c.id
        for i in bad
        if isinstance(m := messages[i], AssistantMessage)
        for c in m.tool_calls
        if c.id in answered
    }
    return {
        "calls": sorted(called - answered),
        "results": sorted(answered - called),
        "out_of_place": sorted(broken),
    }


def wedged(
    outcomes: Sequence[Outcome], *, failures: int = WEDGE_FAILURES, seconds: float = WEDGE_SECONDS
) -> dict[str, Any] | None:
    """The failure streak a session's outcomes end with, if it is a wedge: at least ``failures``
    consecutive failed operations spanning at least ``seconds`` (first start to last end), with no
    success since. ``None`` otherwise: a session that failed for a while and then worked again (a
    database restart) is not wedged."""
    streak: list[Outcome] = []
    for outcome in outcomes:
        streak = [*streak, outcome] if outcome[2] is not None else []
    if len(streak) < failures or streak[-1][1] - streak[0][0] < seconds:
        return None
    return {
        "failures": len(streak),
        "from": round(streak[0][0], 2),
        "to": round(streak[-1][1], 2),
        "errors": dict(Counter(o[2] for o in streak)),
    }


def markers(message: Message) -> list[str]:
    """The drill markers in a message's text."""
    text = text_of(message.content) if message.content is not None else ""
    return MARKER.findall(text)


def ack_problems(acked: Iterable[str], stored: Sequence[Message]) -> dict[str, list[str]]:
    """``missing``: acknowledged markers no stored message carries; ``duplicated``: markers (acknowledged
    or not) that two stored messages carry: a message appended twice."""
    counts = Counter(mark for m in stored for mark in markers(m))
    return {
        "missing": sorted(set(acked) - set(counts)),
        "duplicated": sorted(mark for mark, n in counts.items() if n > 1),
    }


def percentiles(samples: Sequence[float]) -> dict[str, float]:
    """p50, p99 and max of ``samples`` (milliseconds), 0 when there are none."""
    if not samples:
        return {"n": 0, "p50": 0.0, "p99": 0.0, "max": 0.0}
    cuts = statistics.quantiles(samples, n=100, method="inclusive") if len(samples) > 1 else [samples[0]] * 99
    return {"n": len(samples), "p50": round(cuts[49], 2), "p99": round(cuts[98], 2), "max": max(samples)}


# --- the worker --------------------------------------------------------------------------------------


def drill_settings(workspace: Path, store: str, **extra: Any) -> Settings:
    """A worker's settings: no model, the 4,000-token window, the short tool-call lease, the shared store,
    this host's workspace; ``extra`` settings (e.g. the store's timeouts) on top. A setting this version
    of the engine does not have yet (``tool_call_lease_seconds`` before issue 30) is left out."""
    values: dict[str, Any] = {
        "model": "none",
        "workspace": workspace,
        "store": store,
        "context_window": WINDOW,
        "max_tokens": MAX_TOKENS,
        "tool_call_lease_seconds": LEASE_SECONDS,
        **extra,
    }
    return Settings(**{k: v for k, v in values.items() if k in Settings.model_fields})


class MemoryWriteFailed(Exception):
    """``memory_write`` answered an error (the tools never raise): its text, classified by the caller."""


def error_class(exc: BaseException) -> str:
    """A contextmem error by its class name; anything else ``raw:module.Class`` (a memory_write that
    answered an internal error is one too: a driver's error reached the tool)."""
    if isinstance(exc, MemoryWriteFailed):
        return "raw:memory_write" if "internal error" in str(exc) else "MemoryWriteFailed"
    cls = type(exc)
    if cls.__module__.split(".")[0] == "contextmem":
        return cls.__name__
    return f"raw:{cls.__module__}.{cls.__qualname__}"


@dataclass
class Worker:
    args: argparse.Namespace
    started: float = field(default_factory=time.monotonic)
    engines: dict[str, ContextEngine] = field(default_factory=dict)
    outcomes: dict[str, list[Outcome]] = field(default_factory=dict)
    latencies: dict[str, list[float]] = field(default_factory=lambda: {"add": [], "build": []})
    errors: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    orphans_sent: list[dict[str, Any]] = field(default_factory=list)
    over_window: int = 0
    acked: dict[str, list[str]] = field(default_factory=dict)
    acked_memory: list[str] = field(default_factory=list)  # markers of notes memory_write said it saved
    mem: ContextMem | None = None
    turns_done: int = 0
    abandoned: Counter[str] = field(default_factory=Counter)
    killed_self: dict[str, Any] | None = None
    in_flight: dict[str, Any] | None = None  # the operation a SIGTERM interrupted, if any
    terminated: bool = False

    def now(self) -> float:
        return time.monotonic() - self.started

    async def attempt(self, sid: str, op: str, make: Callable[[], Awaitable[T]]) -> tuple[bool, T | None]:
        """Run one operation on ``sid``, timed and classified; ``(ok, its value)``."""
        start = self.now()
        error: str | None = None
        value: T | None = None
        self.in_flight = {"session": sid, "op": op, "since": round(start, 2)}
        try:
            async with asyncio.timeout(self.args.hang_seconds) as limit:
                value = await make()
        except TimeoutError as exc:
            error = "hung" if limit.expired() else error_class(exc)
            self.examples.setdefault(error, f"{op} on {sid}: {exc!r}"[:500])
        except Exception as exc:
            error = error_class(exc)
            self.examples.setdefault(error, f"{op} on {sid}: {exc}"[:500])
        end = self.now()
        self.in_flight = None
        self.outcomes.setdefault(sid, []).append((round(start, 3), round(end, 3), error))
        if error is None:
            if op in self.latencies:
                self.latencies[op].append(round((end - start) * 1000, 3))
            return True, value
        self.errors[error] += 1
        return False, None

    async def step(self, sid: str, op: str, make: Callable[[], Awaitable[T]]) -> tuple[bool, T | None]:
        """:meth:`attempt`, retried with backoff until ``--step-seconds`` pass (or the run's grace ends),
        unless the error is one of :data:`FINAL_ERRORS`."""
        deadline = min(self.now() + self.args.step_seconds, self.args.seconds + self.args.grace)
        delay = 0.1
        while True:
            ok, value = await self.attempt(sid, op, make)
            if ok or self.now() + delay >= deadline or self.outcomes[sid][-1][2] in FINAL_ERRORS:
                return ok, value
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def add(self, sid: str, *messages: Message) -> bool:
        ok, _ = await self.step(sid, "add", lambda: self.engines[sid].add(*messages))
        if ok:
            self.acked.setdefault(sid, []).extend(mark for m in messages for mark in markers(m))
        return ok

    async def build(self, sid: str, turn: int) -> bool:
        engine = self.engines[sid]
        ok, request = await self.step(sid, "build", lambda: engine.build(SYSTEM, TOOLS))
        if request is not None:
            bad = request_orphans(request.messages)
            if bad:
                body = [m for m in request.messages if m.kind != "system"]
                kinds = [body[i].kind for i in bad]
                self.orphans_sent.append(
                    {"session": sid, "turn": turn, "at": round(self.now(), 2), "kinds": kinds}
                )
            estimate = request.estimate
            if estimate.prompt + estimate.max_tokens > engine.window.context_window:
                self.over_window += 1
        return ok

    async def turn(self, n: int, rng: random.Random) -> None:
        args = self.args
        sid = args.sessions[(n + args.index) % len(args.sessions)]
        tag = f"{args.name}.{n}"
        service = f"svc-{rng.randrange(100)}"
        if not await self.add(sid, UserMessage(f"⟦{tag}.u⟧ {service} is failing in eu-west-1; why?")):
            self.abandoned["user"] += 1
            return
        if not await self.build(sid, n):
            self.abandoned["build"] += 1
            return
        calls = tuple(
            ToolCall(f"{args.name}-{n}-c{k}", "read_log", json.dumps({"service": service, "lines": 200}))
            for k in range(rng.randint(1, 2))
        )
        if not await self.add(sid, AssistantMessage(f"⟦{tag}.a⟧ reading the logs", tool_calls=calls)):
            self.abandoned["call"] += 1
            return
        if args.kill_at_turn is not None and n >= args.kill_at_turn:
            self.killed_self = {"session": sid, "turn": n, "calls": [c.id for c in calls], "at": self.now()}
            self.write_report()
            os.kill(os.getpid(), signal.SIGKILL)
        results = [
            ToolMessage(c.id, f"⟦{tag}.r{k}⟧ " + log_text(service, rng.choice(RESULT_SIZES), rng))
            for k, c in enumerate(calls)
        ]
        if not await self.add(sid, *results):
            self.abandoned["results"] += 1  # our calls stay open: the lease must close them
            return
        if not await self.build(sid, n):
            self.abandoned["build"] += 1
            return
        if not await self.add(sid, AssistantMessage(f"⟦{tag}.f⟧ {service} ran out of memory at 02:14.")):
            self.abandoned["reply"] += 1
            return
        await self.step(sid, "end_turn", self.engines[sid].end_turn)
        if n % 2 == 0:
            await self.remember(f"{tag}.m", service)
        self.turns_done += 1

    async def remember(self, mark: str, service: str) -> None:
        """A note through ``memory_write`` (on a shared store: the shared daily document); its marker is
        acknowledged when the tool says it saved it. The parent looks for it from every host."""
        assert self.mem is not None
        tools = self.mem.tools

        async def write() -> None:
            note = f"⟦{mark}⟧ {service} ran out of memory at 02:14"
            answer = await tools.acall("memory_write", {"text": note})
            if not answer.startswith("saved to"):
                raise MemoryWriteFailed(answer[:300])

        ok, _ = await self.step("memory", "memory_write", write)
        if ok:
            self.acked_memory.append(mark)

    async def open(self) -> ContextMem:
        settings = drill_settings(Path(self.args.workspace), self.args.store, **dict(self.args.set))
        while True:  # the store may be restarting while we start
            try:
                mem = await ContextMem.open(settings, memory=True, embedder=EMBEDDER)
                for sid in self.args.sessions:
                    engine = await mem.session(sid)
                    engine.busy_timeout = self.args.busy_timeout
                    self.engines[sid] = engine
                return mem
            except Exception as exc:
                error = f"open:{error_class(exc)}"
                self.errors[error] += 1
                self.examples.setdefault(error, f"open: {exc}"[:500])
                if self.now() > self.args.step_seconds:
                    raise
                await asyncio.sleep(0.5)

    async def run(self) -> None:
        mem = self.mem = await self.open()
        self.started = time.monotonic()  # the run's clock: --seconds of turns, start-up not counted
        print(f"ready {self.args.name}", flush=True)
        progress = asyncio.create_task(self.progress())
        rng = random.Random(self.args.seed)
        try:
            n = 0
            while self.now() < self.args.seconds:
                await self.turn(n, rng)
                n += 1
        finally:
            progress.cancel()
            try:
                async with asyncio.timeout(10):
                    for engine in self.engines.values():
                        await engine.wait_idle()
                    await mem.close()
            except Exception as exc:  # reported, never raised past the report
                self.errors[f"close:{error_class(exc)}"] += 1

    async def progress(self) -> None:
        while True:
            await asyncio.sleep(2)
            done, failed = self.turns_done, sum(self.errors.values())
            print(f"progress {self.args.name} {self.now():.0f}s turns={done} failed={failed}", flush=True)

    def report(self) -> dict[str, Any]:
        args = self.args
        wedges = {sid: w for sid, outs in self.outcomes.items() if (w := wedged(outs)) is not None}
        return {
            "worker": args.name,
            "host": args.host,
            "workspace": args.workspace,
            "sessions": args.sessions,
            "seconds": round(self.now(), 2),
            "turns_done": self.turns_done,
            "abandoned": dict(self.abandoned),
            "latency_ms": {op: percentiles(xs) for op, xs in self.latencies.items()},
            "samples_ms": self.latencies,
            "errors": dict(self.errors),
            "raw_errors": {k: v for k, v in self.errors.items() if "raw:" in k},
            "examples": self.examples,
            "orphans_sent": self.orphans_sent,
            "over_window": self.over_window,
            "wedged": wedges,
            "acked": self.acked,
            "acked_memory": self.acked_memory,
            "outcomes": self.outcomes,
            "killed_self": self.killed_self,
            "terminated": self.terminated,
            "in_flight": self.in_flight,
        }

    def write_report(self) -> None:
        out = Path(self.args.out)
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.report(), ensure_ascii=False))
        tmp.replace(out)


def log_text(service: str, size: int, rng: random.Random) -> str:
    """``size`` characters of a service's log, varied so nothing compresses to one line."""
    lines = []
    total = 0
    while total < size:
        stamp = f"2026-11-26T02:{rng.randrange(60):02d}:{rng.randrange(60):02d}Z"
        line = f"{stamp} {service} worker-{rng.randrange(9)} {rng.choice(LOG_EVENTS)}"
        lines.append(line)
        total += len(line) + 1
    return "\n".join(lines)[:size]


async def main(args: argparse.Namespace) -> None:
    worker = Worker(args)
    task = asyncio.current_task()
    assert task is not None

    def terminate() -> None:
        worker.terminated = True
        task.cancel()

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, terminate)
    try:
        await worker.run()
    except asyncio.CancelledError:
        worker.terminated = True
    finally:
        worker.write_report()


def parse(argv: Sequence[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m tests.drill_worker", description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", required=True, help="postgresql://… or sqlite:////abs/path.db, shared")
    ap.add_argument("--workspace", required=True, help="this host's workspace (its own disk)")
    ap.add_argument("--out", required=True, help="the JSON report")
    ap.add_argument("--name", default="w0", help="unique across the drill: marks messages and call ids")
    ap.add_argument("--host", default="h0")
    ap.add_argument("--index", type=int, default=0, help="offsets the round robin over the sessions")
    ap.add_argument("--sessions", type=lambda s: s.split(","), default=["drill-0", "drill-1"])
    ap.add_argument("--seconds", type=float, default=30.0, help="no new turn starts after this")
    ap.add_argument("--grace", type=float, default=5.0, help="how long a started turn may still retry")
    ap.add_argument("--step-seconds", type=float, default=10.0, help="how long a failed step is retried")
    ap.add_argument("--hang-seconds", type=float, default=30.0, help="an operation longer than this hung")
    ap.add_argument("--busy-timeout", type=float, default=BUSY_TIMEOUT, help="ContextEngine.busy_timeout")
    ap.add_argument("--kill-at-turn", type=int, default=None, help="SIGKILL self after this turn's calls")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--set", type=setting, action="append", default=[], help="KEY=VALUE: another setting")
    return ap.parse_args(argv)


def setting(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE")
    return key, value


# --- the parent's side ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """One worker of a drill, as the parent starts it."""

    name: str
    host: str
    index: int
    store: str
    workspace: Path
    out: Path
    sessions: Sequence[str]
    kill_at_turn: int | None = None
    settings: Mapping[str, object] = field(default_factory=dict)


def spawn(spec: Spec, seconds: float, **options: float) -> subprocess.Popen[str]:
    """Start a worker (a fresh interpreter); ``options`` are the other flags, e.g. ``step_seconds=5``."""
    argv = [
        *("--store", spec.store, "--workspace", str(spec.workspace), "--out", str(spec.out)),
        *("--name", spec.name, "--host", spec.host, "--index", str(spec.index), "--seed", str(spec.index)),
        *("--sessions", ",".join(spec.sessions), "--seconds", str(seconds)),
    ]
    if spec.kill_at_turn is not None:
        argv += ["--kill-at-turn", str(spec.kill_at_turn)]
    for key, value in options.items():
        argv += [f"--{key.replace('_', '-')}", str(value)]
    for key, setting_value in spec.settings.items():
        argv += ["--set", f"{key}={setting_value}"]
    spec.workspace.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.drill_worker", *argv],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def start(specs: Mapping[str, Spec], seconds: float, **options: float) -> dict[str, subprocess.Popen[str]]:
    """Spawn every worker and return once each is past start-up (its first line, ``ready``): the run's
    ``seconds`` start about now."""
    procs = {name: spawn(spec, seconds, **options) for name, spec in specs.items()}
    for name, proc in procs.items():
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("ready"):
            for other in procs.values():
                other.kill()
            _, err = proc.communicate()
            raise AssertionError(f"worker {name} did not start: {line!r} {err[-3000:]}")
    return procs


def collect(
    procs: Mapping[str, subprocess.Popen[str]], specs: Mapping[str, Spec], timeout: float
) -> dict[str, dict[str, Any]]:
    """Wait for every worker (SIGTERM after ``timeout`` seconds: it still reports), then read the reports.
    A worker that exited other than cleanly, or by the SIGKILL it was told to send itself, fails."""
    deadline = time.monotonic() + timeout
    reports: dict[str, dict[str, Any]] = {}
    for name, proc in procs.items():
        try:
            _, err = proc.communicate(timeout=max(deadline - time.monotonic(), 1))
        except subprocess.TimeoutExpired:
            proc.terminate()
            try:
                _, err = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, err = proc.communicate()
        killed = specs[name].kill_at_turn is not None and proc.returncode == -signal.SIGKILL
        if not (proc.returncode == 0 or killed) or not specs[name].out.exists():
            raise AssertionError(f"worker {name} exited {proc.returncode}: {err[-3000:]}")
        reports[name] = json.loads(specs[name].out.read_text())
    return reports


if __name__ == "__main__":
    asyncio.run(main(parse(sys.argv[1:])))
