"""Four processes, one session, turns with tool calls (issue 12, point 7), on SQLite and real PostgreSQL.

Each process runs this module as a worker (``python -m tests.security.test_concurrency URL ROOT N``): a
``ContextEngine`` doing turns of user → assistant tool call → tool result → assistant reply, one ``add``
per step and a ``build`` after each (so offloads and compactions race too), with a small window. Each
worker retries an ``add`` on :class:`SessionBusyError` (another writer's tool call was still open for
longer than its ``busy_timeout``), as an agent would. Afterwards no orphan is stored (in seq order over
every message ever appended), every worker finished every turn, the store is consistent and nothing
archived is missing from the dialog archive.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contextmem.budget import Window
from contextmem.engine import ContextEngine
from contextmem.errors import HistoryError, SessionBusyError
from contextmem.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage, orphan_tool_messages
from contextmem.settings import Settings
from contextmem.store.base import SessionStore
from contextmem.store.postgres import PostgresSessionStore
from contextmem.store.sqlite import SqliteSessionStore

ROOT = Path(__file__).resolve().parents[2]
WORKERS = 4
TURNS = 6
SESSION = "shared"


def open_store(url: str) -> SessionStore:
    if url.startswith("sqlite:///"):
        return SqliteSessionStore(url.removeprefix("sqlite:///"))
    return PostgresSessionStore(url)


def settings(root: Path) -> Settings:
    return Settings(
        tokenizer="heuristic",
        workspace=root,
        agent_max_context_turns=4,
        summary_max_tokens=200,
        pruning_old_msg_max_bytes=300,
        pruning_recent_msg_max_bytes=1500,
        pruning_recent_n=1,
    )


async def worker(url: str, root: Path, name: str, turns: int) -> dict[str, int]:
    store = open_store(url)
    try:
        engine = await ContextEngine.open(
            SESSION, store=store, settings=settings(root), window=Window(3000, 200)
        )
        engine.busy_timeout = 2.0  # short, so the retry path below really runs under contention
        busy = 0
        for t in range(turns):
            call = ToolCall(f"{name}-t{t}", "read_file", json.dumps({"path": f"src/{name}_{t}.py"}))
            steps: list[list[AssistantMessage | ToolMessage | UserMessage]] = [
                [UserMessage(f"{name} turn {t}: 检查 src/{name}_{t}.py")],
                [AssistantMessage(None, tool_calls=(call,))],
                [ToolMessage(call.id, f"{name} line {t}\n" * 120)],
                [AssistantMessage(f"{name} turn {t}: src/{name}_{t}.py is fine")],
            ]
            for group in steps:
                while True:
                    try:
                        await engine.add(*group)
                        break
                    except SessionBusyError:
                        busy += 1
                await engine.build("system prompt")
            await engine.end_turn()
        await engine.wait_idle()
        return {"turns": turns, "busy": busy}
    finally:
        await store.close()


async def check(url: str, root: Path) -> None:
    store = open_store(url)
    try:
        assert await store.integrity_check() == []
        stored = await store.messages("default", SESSION)
        assert [s.seq for s in stored] == list(range(1, WORKERS * TURNS * 4 + 1))
        assert orphan_tool_messages([s.message for s in stored]) == []
        engine = await ContextEngine.open(
            SESSION, store=store, settings=settings(root), window=Window(3000, 200)
        )
        report = await engine.verify()
        assert report.lost == 0 and report.corrupt == (), report
        assert report.appended == WORKERS * TURNS * 4 and report.archived > 0  # compactions really ran
        for w in range(WORKERS):  # every worker's every step is there, each result right after its call
            for t in range(TURNS):
                i = next(i for i, s in enumerate(stored) if isinstance(s.message, AssistantMessage)
                         and s.message.tool_calls and s.message.tool_calls[0].id == f"w{w}-t{t}")  # fmt: skip
                result = stored[i + 1].message
                assert isinstance(result, ToolMessage) and result.tool_call_id == f"w{w}-t{t}"
    finally:
        await store.close()


def run_workers(url: str, root: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.security.test_concurrency", url, str(root), f"w{w}", str(TURNS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        for w in range(WORKERS)
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert [r["turns"] for r in results] == [TURNS] * WORKERS


def test_four_processes_with_tool_calls_store_no_orphan(store_url: str, tmp_path: Path) -> None:
    root = tmp_path / "workspace"
    asyncio.run(open_store(store_url).close())  # schema created once, before the race
    run_workers(store_url, root)
    asyncio.run(check(store_url, root))


async def two_engines(url: str, root: Path) -> tuple[SessionStore, ContextEngine, ContextEngine]:
    store = open_store(url)
    engines = [
        await ContextEngine.open(SESSION, store=store, settings=settings(root), window=Window(30000, 200))
        for _ in range(2)
    ]
    return store, engines[0], engines[1]


async def test_another_writers_open_call_is_waited_for_then_busy(store_url: str, tmp_path: Path) -> None:
    store, a, b = await two_engines(store_url, tmp_path)
    try:
        call = ToolCall("a1", "read_file", "{}")
        await a.add(UserMessage("a asks"), AssistantMessage(None, tool_calls=(call,)))
        b.busy_timeout = 0.3
        with pytest.raises(SessionBusyError, match=r"\['a1'\].*nothing was written.*Fix:"):
            await b.add(UserMessage("b asks"))
        assert len(await store.messages("default", SESSION)) == 2  # nothing written
        assert b.history.messages[-1] == AssistantMessage(None, tool_calls=(call,))  # b is reloaded
        await a.add(ToolMessage("a1", "result"), AssistantMessage("a done"))
        await b.add(UserMessage("b asks"))  # the same engine goes on once the call has its result
        stored = [s.message for s in await store.messages("default", SESSION)]
        assert stored[-1] == UserMessage("b asks") and orphan_tool_messages(stored) == []
        # While b waits, a's result arrives: b appends after it, no error.
        await b.add(AssistantMessage(None, tool_calls=(ToolCall("b1", "x", "{}"),)))
        b.busy_timeout = 10.0
        waiting = asyncio.create_task(a.add(UserMessage("a again")))
        await asyncio.sleep(0.1)
        assert not waiting.done()
        await b.add(ToolMessage("b1", "ok"), AssistantMessage("b done"))
        await asyncio.wait_for(waiting, 10)
        stored = [s.message for s in await store.messages("default", SESSION)]
        assert stored[-1] == UserMessage("a again") and orphan_tool_messages(stored) == []
    finally:
        await store.close()


async def test_own_open_call_is_a_history_error_at_once(store_url: str, tmp_path: Path) -> None:
    store, a, _ = await two_engines(store_url, tmp_path)
    try:
        await a.add(UserMessage("q"), AssistantMessage(None, tool_calls=(ToolCall("c1", "x", "{}"),)))
        with pytest.raises(HistoryError, match="c1"):
            await a.add(UserMessage("forgot the result"))
        assert len(await store.messages("default", SESSION)) == 2
    finally:
        await store.close()


async def test_stale_view_is_reloaded_not_an_error(store_url: str, tmp_path: Path) -> None:
    store, a, b = await two_engines(store_url, tmp_path)
    try:
        await a.add(UserMessage("q"), AssistantMessage(None, tool_calls=(ToolCall("c1", "x", "{}"),)))
        await b.add(ToolMessage("c1", "b ran the tool"))  # b sees a's call and delivers its result
        await a.add(AssistantMessage("a read b's result"))  # a's view lacks the result: reloaded, fine
        stored = [s.message for s in await store.messages("default", SESSION)]
        assert len(stored) == 4 and orphan_tool_messages(stored) == []
        assert list(a.history.messages[-2:]) == [
            ToolMessage("c1", "b ran the tool"),
            AssistantMessage("a read b's result"),
        ]
    finally:
        await store.close()


async def test_offload_of_a_message_another_process_archived_reloads(store_url: str, tmp_path: Path) -> None:
    store, a, b = await two_engines(store_url, tmp_path)
    try:
        for i in range(4):
            call = ToolCall(f"c{i}", "x", "{}")
            await a.add(UserMessage(f"q{i}"), AssistantMessage(None, tool_calls=(call,)))
            await a.add(ToolMessage(f"c{i}", "row\n" * 2000), AssistantMessage(f"a{i}"))
        await b._load()
        await b.clear()  # another process archives everything a is about to offload
        request = await a.build("system")  # a's offload meets archived messages: it reloads instead
        assert [m.kind for m in request.messages] == ["system"] and len(a.history) == 0
        assert (await a.verify()).lost == 0
    finally:
        await store.close()


if __name__ == "__main__":
    url, root, name, turns = sys.argv[1:5]
    print(json.dumps(asyncio.run(worker(url, Path(root), name, int(turns)))), flush=True)
