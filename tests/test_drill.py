"""The drill of issue 30: hosts with their own disks share a store and sessions with tool calls.

Workers (:mod:`tests.drill_worker`, fresh interpreters) drive the same two sessions at a 4,000-token
window, so compaction runs constantly. On PostgreSQL: two hosts (a workspace each) × two workers, a
database restart halfway, one worker SIGKILLed right after storing a tool call, before its results. On
SQLite: three workers on one host (one workspace), one SIGKILLed the same way. Afterwards, from every
host's workspace (:func:`inspect_drill`):

* ``verify()`` finds nothing lost, on any host (issue 30 point 1);
* no orphan is stored — live or archived: a call whose results were never stored, a result without its
  call, results not right after their call — and none was sent in any request (point 2);
* no session is wedged (:func:`tests.drill_worker.wedged`), and every session takes a fresh turn with a
  tool call from every host at the end (points 2, 3);
* no driver exception reached a caller, no call hung, no worker had to be stopped (point 4); no
  ``BudgetExceededError`` (point 5); no request over the window;
* every acknowledged message is stored exactly once; ``integrity_check()`` is clean;
* every note a worker's ``memory_write`` acknowledged (issue 53: on PostgreSQL the shared daily document,
  written from both hosts) is seen from every host after one sync: in its working copy, by
  ``memory_get``, and (a sample) by ``memory_search``.

Each oracle is first shown catching what it guards against, so the drill cannot pass vacuously.

A third drill cuts one host's link to PostgreSQL (:class:`tests.netproxy.Proxy`) for a while; all three run
in CI, short. Opt-in: ``CONTEXTMEM_DRILL_SECONDS=120`` runs them that long.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from contextmem import ContextEngine, ContextMem
from contextmem.messages import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from tests.drill_worker import (
    BUSY_TIMEOUT,
    EMBEDDER,
    SYSTEM,
    TOOLS,
    Spec,
    ack_problems,
    collect,
    drill_settings,
    error_class,
    request_orphans,
    start,
    stored_orphans,
    wedged,
)
from tests.netproxy import Proxy
from tests.pg import LocalPostgres  # private_pg, a fixture from tests/conftest.py: .dsn and .restart()

NS = "default"
SESSIONS = ("drill-0", "drill-1")
LONG = float(os.environ.get("CONTEXTMEM_DRILL_SECONDS", "0"))
PG_SECONDS = LONG or 14.0
SQLITE_SECONDS = LONG or 10.0
KILL_AT_TURN = 5
CUT_SECONDS = 15.0
# A dark link is noticed by the store's own timeouts, on every host alike (the cut host's server-side
# session may hold locks the others wait for): short ones, so an operation ends well before it counts
# as hung (tests.drill_worker's --hang-seconds, 30).
CUT_SETTINGS = {
    "store_connect_timeout": 3,
    "store_statement_timeout": 5,
    "store_lock_timeout": 10,
    "store_retry_seconds": 10,
}


def plan(
    root: Path,
    store: str,
    hosts: int,
    per_host: int,
    kill: str,
    settings: Mapping[str, object] | None = None,
    **host_store: str,
) -> dict[str, Spec]:
    """Workers ``h{host}w{n}``; those of one host share its workspace ``root/host{h}``. ``kill`` SIGKILLs
    itself after a tool call; ``host_store`` gives a host another way to the store (``h1=``)."""
    specs = {}
    for h in range(hosts):
        for n in range(per_host):
            name = f"h{h}w{n}"
            specs[name] = Spec(
                name,
                f"h{h}",
                h * per_host + n,
                host_store.get(f"h{h}", store),
                root / f"host{h}",
                root / f"{name}.json",
                SESSIONS,
                kill_at_turn=KILL_AT_TURN if name == kill else None,
                settings=settings or {},
            )
    return specs


def run_drill(
    specs: Mapping[str, Spec], seconds: float, midway: Callable[[], None] | None = None
) -> dict[str, dict[str, Any]]:
    """Run the workers; ``midway()`` (a restart, a cut) halfway through. Returns their reports."""
    procs = start(specs, seconds)
    if midway is not None:
        time.sleep(seconds / 2)
        midway()
    return collect(procs, specs, timeout=seconds + 90)


async def inspect_drill(
    store: str, reports: Mapping[str, dict[str, Any]]
) -> tuple[dict[str, Any], Counter[str]]:
    """Everything the drill must find at zero, from every host's workspace (only what is not zero), and
    how many messages each session archived (the drill is vacuous unless compaction ran)."""
    acked: dict[str, list[str]] = {}
    for r in reports.values():
        for sid, marks in r["acked"].items():
            acked.setdefault(sid, []).extend(marks)
    found: dict[str, Any] = {
        "raw": {w: r["raw_errors"] for w, r in reports.items()},
        "hung": {w: r["errors"].get("hung") for w, r in reports.items()},
        "budget": {w: r["errors"].get("BudgetExceededError") for w, r in reports.items()},
        "orphans_sent": [o for r in reports.values() for o in r["orphans_sent"]],
        "over_window": {w: r["over_window"] for w, r in reports.items()},
        "wedged": {f"{w}/{sid}": v for w, r in reports.items() for sid, v in r["wedged"].items()},
        "stopped": {w: r["in_flight"] or "?" for w, r in reports.items() if r["terminated"]},
        "lost": {},
        "orphans_stored": {},
        "acks": {},
        "live_orphans": {},
    }
    archived: Counter[str] = Counter()
    workspaces = sorted({Path(r["workspace"]) for r in reports.values()})
    mems = [
        await ContextMem.open(drill_settings(ws, store), memory=True, embedder=EMBEDDER) for ws in workspaces
    ]
    try:
        engines: dict[str, ContextEngine] = {}
        for ws, mem in zip(workspaces, mems, strict=True):
            for sid in SESSIONS:
                engine = engines[f"{ws.name}/{sid}"] = await mem.session(sid)
                engine.busy_timeout = BUSY_TIMEOUT
                report = await engine.verify()
                found["lost"][f"{ws.name}/{sid}"] = report.lost
                archived[sid] = report.archived
        noted = sorted(mark for r in reports.values() for mark in r["acked_memory"])
        found["memory_unseen"] = {
            ws.name: await memory_unseen(mem, noted) for ws, mem in zip(workspaces, mems, strict=True)
        }
        sessions = mems[0].store
        found["integrity"] = await sessions.integrity_check()
        for sid in SESSIONS:
            stored = [s.message for s in await sessions.messages(NS, sid, state="all")]
            found["orphans_stored"][sid] = stored_orphans(stored)
            found["acks"][sid] = ack_problems(acked.get(sid, []), stored)
        # The end: every session takes a fresh turn from every host, then its live history pairs up.
        finals = await asyncio.gather(*(fresh_turn(e, key.replace("/", ".")) for key, e in engines.items()))
        found["final_turn"] = dict(zip(engines, finals, strict=True))
        for sid in SESSIONS:
            live = [s.message for s in await sessions.messages(NS, sid, state="live")]
            found["live_orphans"][sid] = len(request_orphans(live))
    finally:
        for mem in mems:
            await mem.close()
    return nonzero(found), archived


async def memory_unseen(mem: ContextMem, marks: Sequence[str]) -> dict[str, list[str]]:
    """The acknowledged notes (their markers) one host does not see after one sync: in its working copy's
    daily files, in what ``memory_get`` reads of them, and — for a sample — in ``memory_search``."""
    assert mem.memory is not None
    await asyncio.to_thread(mem.memory.sync)
    tools = mem.tools
    on_disk, read = "", ""
    for path in sorted(mem.workspace.daily_dir.glob("*.md")):
        on_disk += path.read_text()
        read += await read_all(tools, f"memory/{path.name}")
    searched = []
    for mark in marks[:: max(len(marks) // 3, 1)][:3]:
        hits = json.loads(await tools.acall("memory_search", {"query": f"⟦{mark}⟧", "k": 50}))
        searched.append("" if not any(f"⟦{mark}⟧" in h["snippet"] for h in hits) else mark)
    return {
        "files": [m for m in marks if f"⟦{m}⟧" not in on_disk],
        "memory_get": [m for m in marks if f"⟦{m}⟧" not in read],
        "memory_search": [m for m in marks[:: max(len(marks) // 3, 1)][:3] if m not in searched],
    }


async def read_all(tools: Any, path: str) -> str:
    """Every line of memory file ``path`` through ``memory_get``, a page at a time."""
    text, first = "", 1
    while True:
        got = await tools.acall("memory_get", {"path": path, "from_line": first, "lines": 400})
        header, _, body = got.partition("\n")
        match = re.match(r"\[.* lines (\d+)-(\d+) of (\d+)", header)
        assert match is not None, got[:300]
        text += body + "\n"
        if int(match[2]) >= int(match[3]):
            return text
        first = int(match[2]) + 1


def nonzero(found: dict[str, Any]) -> dict[str, Any]:
    """``found`` without its empty entries (``None``, a count of 0, nothing listed), at every depth."""
    kept = {k: nonzero(v) if isinstance(v, dict) else v for k, v in found.items()}
    return {k: v for k, v in kept.items() if v not in (None, [], {}) and not (type(v) is int and v == 0)}


async def fresh_turn(engine: ContextEngine, tag: str) -> str | None:
    """A turn with a tool call on ``engine``; ``None`` if it went through, else what went wrong."""
    call = ToolCall(f"final-{tag}", "read_log", '{"service": "svc-final"}')
    steps: list[Sequence[Message]] = [
        [UserMessage(f"⟦final.{tag}.u⟧ one more check")],
        [AssistantMessage(f"⟦final.{tag}.a⟧", tool_calls=(call,))],
        [ToolMessage(call.id, f"⟦final.{tag}.r0⟧ all quiet")],
        [AssistantMessage(f"⟦final.{tag}.f⟧ all quiet")],
    ]
    try:
        for i, messages in enumerate(steps):
            await engine.add(*messages)
            if i in (0, 2):
                bad = request_orphans((await engine.build(SYSTEM, TOOLS)).messages)
                if bad:
                    return f"the request after step {i} has orphans at {bad}"
    except Exception as exc:
        return f"{error_class(exc)}: {str(exc)[:300]}"
    return None


def summary(reports: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    """What the workers did, for the log: turns, the crash, errors by class (an example of each),
    add/build latencies."""
    errors: Counter[str] = Counter()
    examples: dict[str, str] = {}
    for w, r in reports.items():
        errors.update(r["errors"])
        examples |= {cls: f"{w}: {text}" for cls, text in r["examples"].items() if cls not in examples}
    return {
        "turns": {w: r["turns_done"] for w, r in reports.items()},
        "killed": {w: r["killed_self"] for w, r in reports.items() if r["killed_self"]},
        "notes": {w: len(r["acked_memory"]) for w, r in reports.items()},
        "errors": dict(errors),
        "examples": examples,
        "latency_ms": {w: r["latency_ms"] for w, r in reports.items()},
    }


def check_drill(store: str, reports: Mapping[str, dict[str, Any]], killed: str) -> None:
    print("drill:", summary(reports))
    found, archived = asyncio.run(inspect_drill(store, reports))
    print("drill findings:", found)
    assert found == {}, found
    # Not vacuous: the writer crashed mid-tool, the others got work done, compaction ran in every session.
    assert reports[killed]["killed_self"] is not None, "the crashed writer never crashed"
    assert all(r["turns_done"] >= 3 for w, r in reports.items() if w != killed), summary(reports)["turns"]
    assert all(archived[sid] > 0 for sid in SESSIONS), archived
    # memory was written from every host (and is seen from every host: memory_unseen above)
    hosts = {r["host"] for r in reports.values()}
    assert {r["host"] for r in reports.values() if r["acked_memory"]} == hosts, summary(reports)["turns"]


# --- the oracles catch what they guard against ---------------------------------------------------------


def test_orphan_oracles_catch_hand_made_orphans() -> None:
    call = ToolCall("c1", "read_log", "{}")
    pair: list[Message] = [
        UserMessage("q"),
        AssistantMessage(None, tool_calls=(call,)),
        ToolMessage("c1", "ok"),
    ]
    assert request_orphans(pair) == []
    assert stored_orphans(pair) == {"calls": [], "results": [], "out_of_place": []}
    open_call: list[Message] = [UserMessage("q"), AssistantMessage(None, tool_calls=(call,))]
    assert request_orphans(open_call) == [1]  # a request ending in an open call cannot be answered
    assert stored_orphans(open_call)["calls"] == ["c1"]
    lone_result: list[Message] = [UserMessage("q"), ToolMessage("c9", "ok")]
    assert request_orphans(lone_result) == [1]
    assert stored_orphans(lone_result)["results"] == ["c9"]
    apart = [*open_call, UserMessage("another writer"), ToolMessage("c1", "ok")]
    assert stored_orphans(apart)["out_of_place"] == ["c1"]


def test_wedge_oracle_flags_a_failure_streak_only_while_it_lasts() -> None:
    ok = (0.0, 0.1, None)
    streak = [(1.0 + 6 * i, 7.0 + 6 * i, "SessionBusyError") for i in range(3)]  # 3 failures over 18 s
    found = wedged([ok, *streak])
    assert found is not None and found["failures"] == 3 and found["errors"] == {"SessionBusyError": 3}
    assert wedged([ok, *streak, (20.0, 20.1, None)]) is None  # it worked again: a restart, not a wedge
    assert wedged([ok, *streak[:2]]) is None  # two failures are not yet a wedge
    quick = [(1.0 + 0.1 * i, 1.05 + 0.1 * i, "StoreUnavailableError") for i in range(20)]
    assert wedged(quick) is None  # 20 failures within 2 s: an outage being ridden out


def test_ack_oracle_finds_missing_and_duplicated_messages() -> None:
    stored: list[Message] = [
        UserMessage("⟦w0.1.u⟧ q"),
        AssistantMessage("⟦w0.1.f⟧ a"),
        UserMessage("⟦w0.1.f⟧ again"),
    ]
    assert ack_problems(["w0.1.u", "w0.2.u"], stored) == {"missing": ["w0.2.u"], "duplicated": ["w0.1.f"]}
    assert ack_problems(["w0.1.u"], stored[:2]) == {"missing": [], "duplicated": []}


def test_findings_keep_everything_not_zero() -> None:
    """The drill asserts ``nonzero(found) == {}``: only empties may go, never a finding."""
    found = {
        "lost": {"host0/s": 0, "host1/s": 2},
        "sent": [],
        "acks": {"s": {"missing": [], "duplicated": ["x"]}},
    }
    assert nonzero(found) == {"lost": {"host1/s": 2}, "acks": {"s": {"duplicated": ["x"]}}}
    streak = {"wedged": {"w/s": {"failures": 3, "from": 0.0}}, "final": {"h/s": "SessionBusyError: …"}}
    assert nonzero(streak) == streak
    assert nonzero({"raw": {"w": {}}, "hung": {"w": None}, "integrity": []}) == {}


def test_verify_finds_a_deleted_archive_line(tmp_path: Path) -> None:
    """The drill trusts ``verify().lost``: it must see an archived message gone from the dialog files."""

    async def scenario() -> tuple[int, int]:
        mem = await ContextMem.open(drill_settings(tmp_path, f"sqlite:///{tmp_path / 's.db'}"), memory=False)
        try:
            engine = await mem.session("oracle")
            for i in range(40):
                await engine.add(UserMessage(f"⟦o.{i}.u⟧ " + "step details " * 60))
                await engine.build(SYSTEM, TOOLS)
                await engine.add(AssistantMessage(f"⟦o.{i}.f⟧ done"))
                await engine.end_turn()
            before = await engine.verify()
            files = sorted(tmp_path.rglob("dialog/*.jsonl"))
            assert before.archived > 0 and files, "nothing was archived: the oracle would test nothing"
            lines = files[0].read_bytes().splitlines(keepends=True)
            files[0].write_bytes(b"".join(lines[:-1]))
            return before.lost, (await engine.verify()).lost
        finally:
            await mem.close()

    assert asyncio.run(scenario()) == (0, 1)


# --- the drills ---------------------------------------------------------------------------------------


def test_drill_postgres_two_hosts_restart_and_sigkill(private_pg: LocalPostgres, tmp_path: Path) -> None:
    specs = plan(tmp_path, private_pg.dsn, hosts=2, per_host=2, kill="h1w1")
    reports = run_drill(specs, PG_SECONDS, midway=private_pg.restart)
    check_drill(private_pg.dsn, reports, killed="h1w1")


def test_drill_sqlite_one_host_sigkill(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'host0' / 'sessions.sqlite'}"
    specs = plan(tmp_path, store, hosts=1, per_host=3, kill="h0w2")
    reports = run_drill(specs, SQLITE_SECONDS)
    check_drill(store, reports, killed="h0w2")


def test_drill_postgres_link_cut(private_pg: LocalPostgres, tmp_path: Path) -> None:
    """Host 1 reaches PostgreSQL through a TCP link that goes dark for ``CUT_SECONDS`` halfway through
    (bytes swallowed, nothing reset: only the store's timeouts can notice). Its calls must end in
    contextmem errors, never hang, and the hosts must come out of it as from the restart."""
    with Proxy(private_pg.socket) as link:
        via_link = f"postgresql://postgres@127.0.0.1:{link.port}/postgres"

        def cut() -> None:
            link.cut()
            time.sleep(CUT_SECONDS)
            link.restore()

        seconds = (LONG or 20.0) + CUT_SECONDS  # short in CI: the cut falls halfway, 17.5 s in
        specs = plan(tmp_path, private_pg.dsn, 2, 2, kill="h0w1", settings=CUT_SETTINGS, h1=via_link)
        reports = run_drill(specs, seconds, midway=cut)
    check_drill(private_pg.dsn, reports, killed="h0w1")
