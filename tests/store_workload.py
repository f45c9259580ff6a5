"""Multi-process workloads for the store tests, run as ``python -m tests.store_workload KIND SPEC ...``.

Children are fresh interpreters (not forks of the test process), sharing nothing with it but the database.

* ``turns``: one worker of the concurrency test. Appends turns (user + reply, one append each) to sessions
  shared with the other workers, and every few turns compacts a session under its lock, recording the
  interval it held the lock (``time.monotonic`` is one clock for every process on the machine). Writes
  what it did to a JSON file.
* ``lane``: forks writers (:func:`crash`) one after another and SIGKILLs each at a random moment. A writer
  appends, replaces and archives (with a summary, under the lock) forever, and after each *committed*
  call writes an acknowledgement line, flushed, so the test knows exactly which writes the store
  acknowledged before the kill. The lane prints all acks when done.

A store SPEC is ``sqlite:<path>`` or ``postgresql://...`` (see :func:`make_store`).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from contextmem.messages import AssistantMessage, UserMessage, text_of
from contextmem.store.base import SessionStore

NS = "load"
ROOT = Path(__file__).resolve().parent.parent


def make_store(spec: str) -> SessionStore:
    if spec.startswith("sqlite:") and "://" not in spec:
        from contextmem.store.sqlite import SqliteSessionStore

        return SqliteSessionStore(spec.removeprefix("sqlite:"))
    from contextmem.store.open import open_store

    return open_store(spec)


async def turns(spec: str, worker: int, sessions: int, n_turns: int, compact_every: int, out: str) -> None:
    store = make_store(spec)
    appended: list[list[Any]] = []  # [session, turn, seqs]
    intervals: list[list[Any]] = []  # [session, start, end]
    errors: list[str] = []
    try:
        for turn in range(n_turns):
            for s in range(sessions):
                sid = f"s{s}"
                try:
                    seqs = await store.append(
                        NS,
                        sid,
                        [UserMessage(f"w{worker} t{turn} u"), AssistantMessage(f"w{worker} t{turn} a")],
                    )
                    appended.append([sid, turn, seqs])
                    if (turn + s + worker) % compact_every == 0:
                        async with store.lock(NS, sid):
                            start = time.monotonic()
                            state = await store.open_session(NS, sid)
                            old = [m.seq for m in state.live[:-4]]
                            if old:
                                await store.archive(NS, sid, old, summary=f"w{worker} t{turn}")
                            await asyncio.sleep(0.001)  # widen the window a broken lock would show
                            end = time.monotonic()
                        intervals.append([sid, start, end])
                except Exception:
                    errors.append(traceback.format_exc())
    finally:
        await store.close()
        with open(out, "w") as f:
            json.dump({"appended": appended, "intervals": intervals, "errors": errors}, f)


async def crash(spec: str, lane: str) -> None:
    store = make_store(spec)
    i = 0

    def ack(*fields: object) -> None:
        sys.stdout.write(" ".join(str(f) for f in fields) + "\n")
        sys.stdout.flush()

    while True:
        sid = f"{lane}-s{i % 3}"
        tag = f"{lane}-{time.time_ns()}-{i}"
        seqs = await store.append(NS, sid, [UserMessage(f"{tag} u"), AssistantMessage(f"{tag} a")])
        ack("A", sid, seqs[0], seqs[1], tag)
        if i % 5 == 4:
            await store.replace(NS, sid, seqs[1], AssistantMessage(f"{tag} a (cut)"))
            ack("R", sid, seqs[1], tag)
        if i % 7 == 6:
            async with store.lock(NS, sid):
                state = await store.open_session(NS, sid)
                old = [m.seq for m in state.live[:-2]]
                summary = f"{time.time_ns()} up to {old[-1] if old else 0}"
                await store.archive(NS, sid, old, summary=summary)
                ack("S", sid, summary)
        i += 1


# --- the test process's side ----------------------------------------------------------------------


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.store_workload", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def run_turns(
    spec: str, tmp: Path, *, workers: int, sessions: int, n_turns: int, compact_every: int
) -> dict[str, Any]:
    """Run ``workers`` processes of :func:`turns` at once, then check the store; returns the numbers."""
    outs = [tmp / f"turns-{w}.json" for w in range(workers)]
    started = time.monotonic()
    procs = [
        _spawn("turns", spec, str(w), str(sessions), str(n_turns), str(compact_every), str(outs[w]))
        for w in range(workers)
    ]
    for p in procs:
        _, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
    elapsed = time.monotonic() - started
    results = [json.loads(o.read_text()) for o in outs]
    errors = [e for r in results for e in r["errors"]]
    assert errors == [], errors[:3]  # nothing surfaced: no "database is locked", no lock timeouts

    store = make_store(spec)
    try:
        assert await store.integrity_check() == []
        intervals: dict[str, list[tuple[float, float]]] = {}
        for r in results:
            for sid, start, end in r["intervals"]:
                intervals.setdefault(sid, []).append((start, end))
        for sid, spans in intervals.items():
            spans.sort()
            for (_, prev_end), (start, _) in itertools.pairwise(spans):
                assert start >= prev_end, f"two holders of the lock of {sid} at once"
        for s in range(sessions):
            sid = f"s{s}"
            stored = {m.seq: m for m in await store.messages(NS, sid)}
            expected: dict[int, str] = {}
            for w, r in enumerate(results):
                for got_sid, turn, seqs in r["appended"]:
                    if got_sid == sid:
                        assert seqs[1] == seqs[0] + 1
                        for seq, kind in zip(seqs, "ua", strict=True):
                            assert seq not in expected, f"seq {seq} of {sid} given twice"
                            expected[seq] = f"w{w} t{turn} {kind}"
            assert len(expected) == workers * n_turns * 2
            assert sorted(stored) == sorted(expected)  # nothing lost, nothing extra
            assert all(text_of(stored[q].message.content) == t for q, t in expected.items())
    finally:
        await store.close()
    appends = workers * sessions * n_turns
    return {
        "seconds": round(elapsed, 1),
        "appends": appends,
        "appends_per_s": round(appends / elapsed),
        "compactions": sum(len(r["intervals"]) for r in results),
    }


def crash_lane(spec: str, lane: str, lives: int, seed: int) -> list[str]:
    """Fork a writer, let it write, SIGKILL it at a random moment; ``lives`` times. Returns the acks.

    Runs in a fresh lane process that has imported everything but opened nothing, so forking is cheap
    and safe (no threads, no connections, no event loop to inherit).
    """
    rng = random.Random(seed)
    acks: list[str] = []
    for life in range(lives):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # the writer
            os.close(read_fd)
            os.dup2(write_fd, 1)
            try:
                asyncio.run(crash(spec, lane))
            finally:
                os._exit(1)
        os.close(write_fd)
        with os.fdopen(read_fd) as pipe:
            first = pipe.readline()  # it has committed something: it is in its write loop now
            assert first, f"writer {lane}/{life} died before writing anything"
            time.sleep(rng.uniform(0.0, 0.15))
            os.kill(pid, signal.SIGKILL)
            _, status = os.waitpid(pid, 0)
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, status
            rest = pipe.read()
        if not rest.endswith("\n"):  # a line cut short by the kill was never fully acknowledged
            rest = rest.rpartition("\n")[0]
        acks += [first.strip(), *(line for line in rest.splitlines() if line)]
    return acks


async def run_crashes(spec: str, *, lanes: int, lives: int, seed: int = 6) -> dict[str, Any]:
    """``lanes`` x ``lives`` SIGKILLed writers; then integrity holds and every acknowledged write is there."""
    started = time.monotonic()
    procs = [_spawn("lane", spec, f"L{n}", str(lives), str(seed + n)) for n in range(lanes)]
    acks: list[str] = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        acks += out.splitlines()
    elapsed = time.monotonic() - started

    store = make_store(spec)
    try:
        problems = await store.integrity_check()
        assert problems == [], problems
        summaries: dict[str, str] = {}
        sessions = {line.split(" ")[1] for line in acks}
        stored = {sid: {m.seq: m for m in await store.messages(NS, sid)} for sid in sessions}
        states = {sid: await store.open_session(NS, sid) for sid in sessions}
        for sid, by_seq in stored.items():
            tags = [text_of(m.message.content) for m in by_seq.values()]
            assert len(tags) == len(set(tags)), f"a message of {sid} is stored twice"
        for line in acks:
            kind, sid, *rest = line.split(" ")
            if kind == "A":
                first, second, tag = int(rest[0]), int(rest[1]), rest[2]
                assert text_of(stored[sid][first].message.content) == f"{tag} u", line
                assert text_of(stored[sid][second].message.content) == f"{tag} a", line  # the original
            elif kind == "S":
                summaries[sid] = " ".join(rest)
        for sid, summary in summaries.items():  # the newest acknowledged summary, or a newer one
            current = states[sid].summary
            assert current is not None and int(current.split(" ")[0]) >= int(summary.split(" ")[0]), sid
    finally:
        await store.close()
    return {"kills": lanes * lives, "acknowledged": len(acks), "seconds": round(elapsed, 1)}


def main(argv: list[str]) -> None:
    kind, spec, *rest = argv
    if kind == "turns":
        worker, sessions, n_turns, every = (int(x) for x in rest[:4])
        asyncio.run(turns(spec, worker, sessions, n_turns, every, rest[4]))
    elif kind == "lane":
        for line in crash_lane(spec, rest[0], int(rest[1]), int(rest[2])):
            print(line)
    else:
        raise SystemExit(f"unknown workload {kind!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
