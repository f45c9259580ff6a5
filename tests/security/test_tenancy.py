"""Tenant isolation (issue 12): one test per attack, on SQLite and PostgreSQL wherever a store is involved.

A namespace is one tenant. What must hold: a tenant's command never deletes another tenant's sessions;
a name outside the grammar is refused at every entry (settings, CLI, stores, workspace, MCP URLs); files
land only under the tenant's own directory; the SQLite files are private; and an MCP client only ever
sees a one-line tool error, never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from contextmem.cli.main import main
from contextmem.errors import ConfigError, StoreError
from contextmem.messages import Message, assistant, user
from contextmem.runtime import ContextMem
from contextmem.settings import Settings
from contextmem.store.base import SessionInfo, SessionStore
from contextmem.store.postgres import PostgresSessionStore
from contextmem.store.sqlite import SqliteSessionStore
from contextmem.testing import InMemoryDatabase, InMemorySessionStore, ScriptedLLM
from tests.test_cli import write_transcript

BAD_NAMESPACES = ["../x", "a/b", "%", " ", "\x01", "A", "", "a" * 65]
DAY = 86_400.0


def _open(url: str, clock: Callable[[], float] = time.time) -> SessionStore:
    if url.startswith("sqlite:"):
        return SqliteSessionStore(url.removeprefix("sqlite:///"), clock=clock)
    return PostgresSessionStore(url, clock=clock)


async def _seed(url: str, sessions: dict[str, list[str]], *, age_days: float = 0.0) -> None:
    """Sessions per namespace, last touched ``age_days`` ago."""
    store = _open(url, clock=lambda: time.time() - age_days * DAY)
    try:
        for namespace, ids in sessions.items():
            for sid in ids:
                await store.append(namespace, sid, [user(f"{namespace}'s {sid}"), assistant("ok")])
    finally:
        await store.close()


async def _listing(url: str, *namespaces: str) -> dict[str, list[str]]:
    store = _open(url)
    try:
        return {ns: sorted(i.session_id for i in await store.list_sessions(ns)) for ns in namespaces}
    finally:
        await store.close()


# --- cleanup never crosses tenants -----------------------------------------------------------------


def test_cli_cleanup_of_one_namespace_leaves_the_others(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(_seed(store_url, {"alice": ["a1", "a2"], "bob": ["b1", "b2"]}))
    argv = ["--workspace", str(tmp_path), "--store", store_url, "--namespace", "alice"]
    assert main([*argv, "sessions", "cleanup", "--days", "0", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "removed 2 sessions" in out and "in namespace 'alice'" in out and "bob" not in out
    assert asyncio.run(_listing(store_url, "alice", "bob")) == {"alice": [], "bob": ["b1", "b2"]}


def test_cli_cleanup_of_every_namespace_is_an_explicit_flag(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    asyncio.run(_seed(store_url, {"alice": ["a1"], "bob": ["b1", "b2"], "carol": []}))
    argv = ["--workspace", str(tmp_path), "--store", store_url, "--namespace", "alice"]
    assert main([*argv, "sessions", "cleanup", "--days", "0", "--yes", "--all-namespaces"]) == 0
    out = capsys.readouterr().out
    assert "removed 3 sessions" in out and "in every namespace" in out
    assert "namespaces touched: alice, bob" in out and "bob/b2" in out
    assert asyncio.run(_listing(store_url, "alice", "bob")) == {"alice": [], "bob": []}


async def test_runtime_cleanup_touches_only_its_namespace(store_url: str, tmp_path: Path) -> None:
    await _seed(store_url, {"alice": ["old"], "bob": ["old"]}, age_days=40)
    await _seed(store_url, {"alice": ["fresh"]})
    settings = Settings(workspace=tmp_path, namespace="alice", session_retention_days=30)
    runtime = await ContextMem.open(settings, llm=ScriptedLLM(), store=_open(store_url), memory=False)
    try:
        assert await runtime.cleanup_sessions() == [("alice", "old")]
    finally:
        await runtime.close()
    assert await _listing(store_url, "alice", "bob") == {"alice": ["fresh"], "bob": ["old"]}


# --- invalid namespaces are refused at every entry -------------------------------------------------


@pytest.mark.parametrize("bad", BAD_NAMESPACES)
def test_settings_refuse_invalid_namespaces(bad: str, tmp_path: Path) -> None:
    for make in (
        lambda: Settings(namespace=bad),
        lambda: Settings.load(env={"CONTEXTMEM_NAMESPACE": bad}),
        lambda: Settings().with_value("namespace", bad),
    ):
        with pytest.raises(ConfigError, match="namespace") as exc:
            make()
        assert "Fix: use 1-64 lowercase letters" in str(exc.value)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"namespace": bad}))
    with pytest.raises(ConfigError, match="Fix"):
        Settings.load(config, env={})


@pytest.mark.parametrize("bad", BAD_NAMESPACES)
def test_cli_refuses_invalid_namespaces(bad: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = f"sqlite:///{tmp_path / 's.sqlite'}"
    ws = tmp_path / "ws"
    for command in (["sessions", "list"], ["sessions", "cleanup", "--days", "0"]):
        assert main(["--workspace", str(ws), "--store", store, "--namespace", bad, *command]) == 2
        err = capsys.readouterr().err
        assert err.startswith("contextmem: invalid settings: namespace") and "Fix:" in err
        assert len(err.strip().splitlines()) == 1
    assert not ws.exists() and not (tmp_path / "s.sqlite").exists()  # refused before any I/O


async def _refuses_every_method(store: SessionStore, bad: str) -> None:
    calls: list[Callable[[], Awaitable[object]]] = [
        lambda: store.open_session(bad, "s"),
        lambda: store.append(bad, "s", [user("x")]),
        lambda: store.append(bad, "s", [], expected_next_seq=1),
        lambda: store.replace(bad, "s", 1, user("x")),
        lambda: store.archive(bad, "s", [1]),
        lambda: store.set_meta(bad, "s", summary="x"),
        lambda: store.messages(bad, "s"),
        lambda: store.list_sessions(bad),
        lambda: store.delete_session(bad, "s"),
        lambda: store.cleanup_idle(0, namespace=bad),
    ]
    for call in calls:
        with pytest.raises(ConfigError, match=r"is not allowed\. Fix"):
            await call()
    with pytest.raises(ConfigError, match="Fix"):
        async with store.lock(bad, "s"):
            pass


async def test_stores_refuse_invalid_namespaces_at_every_method(store_url: str) -> None:
    store = _open(store_url)
    try:
        for bad in BAD_NAMESPACES:
            await _refuses_every_method(store, bad)
        assert await store.integrity_check() == []
        assert await store.cleanup_idle(0, namespace=None) == []  # nothing was stored under any name
    finally:
        await store.close()
    memory = InMemorySessionStore()
    for bad in BAD_NAMESPACES:
        await _refuses_every_method(memory, bad)
    assert await memory.cleanup_idle(0, namespace=None) == []


@pytest.mark.parametrize("bad", BAD_NAMESPACES)
def test_workspace_refuses_invalid_namespaces(bad: str, tmp_path: Path) -> None:
    from contextmem.workspace import Workspace

    with pytest.raises(ConfigError, match="Fix"):
        Workspace(tmp_path, bad)


# --- the MCP router: the URL names the namespace, and only the grammar gets through ----------------

ROUTER_REFUSED = [
    "/ns/..%2Fx/mcp",
    "/ns/..%2f..%2fetc/mcp",
    "/ns/%2e%2e/mcp",
    "/ns/a/b/mcp",
    "/ns/A/mcp",
    "/ns/a%20b/mcp",
    "/ns/%25/mcp",
    "/ns/%01/mcp",
    "/ns//mcp",
    f"/ns/{'a' * 65}/mcp",
]


@pytest.fixture
def namespaces(tmp_path: Path) -> Iterator[Any]:
    pytest.importorskip("mcp")
    from contextmem.mcp.namespaces import ANY_NAMESPACE, Namespaces
    from contextmem.testing import HashEmbedder

    yield Namespaces(
        Settings(workspace=tmp_path, namespace="alice"),
        store=InMemorySessionStore(),
        llm=None,
        embedder=HashEmbedder(64),
        allowed=[ANY_NAMESPACE],  # every valid name: what is refused below is refused by the grammar
    )


@pytest.mark.parametrize("path", ROUTER_REFUSED)
async def test_mcp_router_refuses_names_outside_the_grammar(namespaces: Any, path: str) -> None:
    httpx = pytest.importorskip("httpx")
    from contextmem.mcp.namespaces import NAMESPACE_SCOPE_KEY, NamespaceRouter
    from contextmem.mcp.server import http_app

    seen: list[str] = []

    async def endpoint(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope[NAMESPACE_SCOPE_KEY])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    for app in (http_app(namespaces), NamespaceRouter(endpoint, namespaces)):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as http:
            refused = await http.post(path, json=body)
            assert refused.status_code == 403, (path, refused.text)
            assert "is not allowed. Fix" in refused.text
            # The control: a valid name reaches the endpoint, tagged with its namespace.
            if isinstance(app, NamespaceRouter) and app.app is endpoint:
                assert (await http.post("/ns/bob/mcp", json=body)).text == "ok"
    assert seen == ["bob"]
    assert not (namespaces.settings.workspace_path / "namespaces").exists()


# --- files of one namespace stay in its directory --------------------------------------------------


def test_replay_in_a_namespace_writes_only_under_its_directory(store_url: str, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    transcript = tmp_path / "t.jsonl"
    write_transcript(transcript)
    argv = ["--workspace", str(ws), "--store", store_url, "--namespace", "bob"]
    assert main([*argv, "replay", str(transcript), "--context-window", "5000", "--json"]) == 0
    bob = ws / "namespaces" / "bob"
    if store_url.startswith("sqlite"):  # a shared store (PostgreSQL) is the archive: no dialog files at all
        assert list((bob / "dialog").iterdir()) and list((bob / "tool_results").iterdir())
    assert not (ws / "dialog").exists() and not (ws / "tool_results").exists()  # the default's folders
    written = {p.relative_to(ws).parts[:3] for p in ws.rglob("*") if p.is_file()}
    assert all(parts[:2] == ("namespaces", "bob") for parts in written), written


def test_the_same_session_id_in_two_namespaces_does_not_collide(
    store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = tmp_path / "ws"
    for namespace in ("alice", "bob"):
        lines: list[dict[str, Any]] = []
        for i in range(4):
            lines.append({"role": "user", "content": f"{namespace} question {i}"})
            lines.append({"role": "assistant", "content": f"{namespace} answer {i}"})
        path = tmp_path / f"{namespace}.jsonl"
        path.write_text("\n".join(json.dumps(m) for m in lines), encoding="utf-8")
        argv = ["--workspace", str(ws), "--store", store_url, "--namespace", namespace]
        assert main([*argv, "replay", str(path), "--session", "shared", "--json"]) == 0
    capsys.readouterr()
    for namespace, other in (("alice", "bob"), ("bob", "alice")):
        out = tmp_path / f"{namespace}-export.jsonl"
        argv = ["--workspace", str(ws), "--store", store_url, "--namespace", namespace]
        assert main([*argv, "sessions", "export", "shared", "-o", str(out)]) == 0
        rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
        assert len(rows) == 8
        assert all(row["content"].startswith(f"{namespace} ") for row in rows)
        assert other not in out.read_text(encoding="utf-8")


# --- the SQLite store's files are private, whatever the umask --------------------------------------


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o277])
async def test_sqlite_files_are_private(tmp_path: Path, umask: int) -> None:
    db = tmp_path / "data" / "sessions.sqlite"
    old = os.umask(umask)
    try:
        store = SqliteSessionStore(db)
        try:
            await store.append("alice", "s", [user("secret")])
            async with store.lock("alice", "s"):
                locks = Path(f"{db}.locks")
                lock_files = list(locks.iterdir())
                assert lock_files and all(_mode(f) == 0o600 for f in lock_files)
                assert _mode(locks) == 0o700
            wal, shm = Path(f"{db}-wal"), Path(f"{db}-shm")
            assert wal.exists() and shm.exists()
            assert (_mode(db), _mode(wal), _mode(shm)) == (0o600, 0o600, 0o600)
            assert await store.append("alice", "s", [user("still writable")]) == [2]
        finally:
            await store.close()
    finally:
        os.umask(old)


# --- MCP: every failure is a one-line tool error -----------------------------------------------------


class _FailingStore(InMemorySessionStore):
    def __init__(self, error: Exception) -> None:
        super().__init__()
        self.error = error

    async def list_sessions(self, namespace: str) -> list[SessionInfo]:
        raise self.error


@asynccontextmanager
async def _client(tmp_path: Path, store: SessionStore) -> AsyncIterator[Any]:
    pytest.importorskip("mcp")
    from mcp import Client

    from contextmem.mcp.namespaces import Namespaces
    from contextmem.mcp.server import build_server
    from contextmem.testing import HashEmbedder

    namespaces = Namespaces(
        Settings(workspace=tmp_path, namespace="alice", context_window=2000, max_tokens=300),
        store=store,
        llm=None,
        embedder=HashEmbedder(64),
    )
    try:
        async with Client(build_server(namespaces)) as client:
            yield client
    finally:
        await namespaces.close()


def _tool_error(result: Any) -> str:
    assert result.is_error
    text = "\n".join(block.text for block in result.content)
    assert text and "Traceback" not in text and 'File "' not in text, text
    return str(text)


async def test_mcp_bad_arguments_are_tool_errors(tmp_path: Path) -> None:
    async with _client(tmp_path, InMemorySessionStore()) as client:
        for tool in ("memory_get", "read_archive"):
            long = _tool_error(await client.call_tool(tool, {"path": "m" * 5000}))
            assert len(long.splitlines()) == 1 and len(long) < 2000
            _tool_error(await client.call_tool(tool, {"path": 12345}))
            _tool_error(await client.call_tool(tool, {"path": ["MEMORY.md"]}))
        ok = await client.call_tool("memory_write", {"text": "still serving", "target": "core"})
        assert not ok.is_error  # the server survived every refusal


async def test_mcp_unknown_sessions_are_tool_errors_and_are_not_created(tmp_path: Path) -> None:
    database = InMemoryDatabase()
    store = InMemorySessionStore(database=database)
    stored: list[Message] = [user("kept"), assistant("yes")]
    await store.append("alice", "real", stored)
    await store.append("bob", "bobs", stored)
    async with _client(tmp_path, store) as client:
        for tool in ("context_stats", "compact"):
            for sid in ("nope", "bobs"):  # bob's session is unknown in alice's namespace
                text = _tool_error(await client.call_tool(tool, {"session_id": sid}))
                assert f"no session {sid!r} in this namespace" in text and "Fix" in text
        stats = await client.call_tool("context_stats", {"session_id": "real"})
        assert not stats.is_error and json.loads(stats.content[0].text)["messages"] == 2
    store = InMemorySessionStore(database=database)  # the server closed its own on the way out
    assert [i.session_id for i in await store.list_sessions("alice")] == ["real"]
    assert [i.session_id for i in await store.list_sessions("bob")] == ["bobs"]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (StoreError("the database is gone. Fix: restore it"), "the database is gone. Fix: restore it"),
        (RuntimeError("boom\nsecond line"), "internal error: RuntimeError: boom second line"),
    ],
)
async def test_mcp_failures_inside_a_tool_are_one_line_tool_errors(
    tmp_path: Path, error: Exception, expected: str
) -> None:
    async with _client(tmp_path, _FailingStore(error)) as client:
        text = _tool_error(await client.call_tool("context_stats", {"session_id": "s"}))
        assert text.endswith(expected) and len(text.splitlines()) == 1
