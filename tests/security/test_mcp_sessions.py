"""MCP sessions: the router's memory of them stays bounded, and listing them never crosses namespaces.

* The map from streamable-HTTP session id to namespace (:class:`~contextmem.mcp.NamespaceRouter`) used to
  keep every id ever issued: a client opening and closing sessions in a loop grew it without end. Closed
  and expired sessions now leave it, and it never holds more than ``max_sessions``; a forgotten id is
  refused by the router (404), never passed on to be served on some namespace's URL.
* ``list_sessions`` lists the caller's namespace only, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")

from mcp import Client  # noqa: E402

from contextmem.mcp.namespaces import NamespaceRouter, Namespaces  # noqa: E402
from contextmem.mcp.server import build_server, http_app  # noqa: E402
from contextmem.messages import assistant, user  # noqa: E402
from contextmem.settings import Settings  # noqa: E402
from contextmem.store.open import open_store  # noqa: E402
from contextmem.testing import HashEmbedder, InMemorySessionStore  # noqa: E402
from tests.mcp_server import HEADERS, INIT, LISTING  # noqa: E402


def _namespaces(tmp_path: Path, namespace: str = "alice", store_url: str = "") -> Namespaces:
    return Namespaces(
        Settings(workspace=tmp_path, namespace=namespace, store=store_url),
        store=open_store(store_url) if store_url else InMemorySessionStore(),
        llm=None,
        embedder=HashEmbedder(384),  # the PostgreSQL index stores 384-d vectors
        allowed=["alice", "bob"],
    )


async def test_closed_sessions_leave_the_routers_map(tmp_path: Path) -> None:
    """The real SDK app: 40 sessions opened, used and closed one after another leave nothing behind."""
    namespaces = _namespaces(tmp_path)
    app = http_app(namespaces, max_sessions=4)
    router, starlette = app.app, app.app.app
    try:
        async with (
            starlette.router.lifespan_context(starlette),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1:8765"
            ) as http,
        ):
            for i in range(40):
                path = "/ns/bob/mcp" if i % 2 else "/mcp"
                opened = await http.post(path, json=INIT, headers=HEADERS)
                assert opened.status_code == 200, (i, opened.text)
                session = {
                    **HEADERS,
                    "mcp-session-id": opened.headers["mcp-session-id"],
                    "mcp-protocol-version": "2025-06-18",
                }
                assert (await http.post(path, json=LISTING, headers=session)).status_code == 200
                assert router.tracked_sessions == 1
                assert (await http.delete(path, headers=session)).status_code == 200
                assert router.tracked_sessions == 0, i
                # The closed id is refused by the router itself, on its own URL and on any other.
                for url in ("/mcp", "/ns/bob/mcp"):
                    gone = await http.post(url, json=LISTING, headers=session)
                    assert gone.status_code == 404 and "memory_search" not in gone.text
    finally:
        await namespaces.close()


async def test_the_routers_map_never_exceeds_its_bound(tmp_path: Path) -> None:
    """1,000 sessions that are never closed (their clients vanished): the map keeps the newest 8."""
    namespaces = _namespaces(tmp_path)
    served: list[bytes] = []

    async def endpoint(scope: Any, receive: Any, send: Any) -> None:  # issues a new id on every initialize
        session = dict(scope["headers"]).get(b"mcp-session-id")
        served.append(session or b"")
        issued = [(b"mcp-session-id", b"s%d" % len(served))] if session is None else []
        await send({"type": "http.response.start", "status": 200, "headers": issued})
        await send({"type": "http.response.body", "body": b"ok"})

    router = NamespaceRouter(endpoint, namespaces, max_sessions=8)
    ids = []
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=router), base_url="http://127.0.0.1:8765"
    ) as http:
        for i in range(1000):
            opened = await http.post("/ns/bob/mcp" if i % 2 else "/mcp", json=INIT)
            ids.append(opened.headers["mcp-session-id"])
            assert router.tracked_sessions == min(i + 1, 8)
        # The newest are still served on their own namespace's URL, and refused on the other's.
        assert (
            await http.post("/ns/bob/mcp", json=LISTING, headers={"mcp-session-id": ids[-1]})
        ).text == "ok"
        hijack = await http.post("/mcp", json=LISTING, headers={"mcp-session-id": ids[-1]})
        assert hijack.status_code == 403
        # A forgotten id is refused by the router, on every URL: never passed on to be served.
        before = len(served)
        for url in ("/mcp", "/ns/bob/mcp"):
            forgotten = await http.post(url, json=LISTING, headers={"mcp-session-id": ids[0]})
            assert forgotten.status_code == 404
        # Two session headers: the app would read one and the router check the other, so neither is used.
        twice = [("mcp-session-id", ids[-1]), ("mcp-session-id", ids[-2])]
        assert (await http.post("/ns/bob/mcp", json=LISTING, headers=twice)).status_code == 400
        assert len(served) == before
    await namespaces.close()


async def _stored_sessions(store_url: str) -> None:
    store = open_store(store_url)
    try:
        for namespace in ("alice", "bob"):
            for session in ("shared", f"{namespace}-only"):
                await store.append(
                    namespace, session, [user(f"{namespace} asks"), assistant(f"{namespace} hears")]
                )
        await store.append("bob", "bob-only", [user("bob again")])
    finally:
        await store.close()


async def test_list_sessions_never_shows_another_namespaces_sessions(store_url: str, tmp_path: Path) -> None:
    await _stored_sessions(store_url)
    for namespace, other in (("alice", "bob"), ("bob", "alice")):
        namespaces = _namespaces(tmp_path, namespace, store_url)
        try:
            async with Client(build_server(namespaces)) as client:
                result = await client.call_tool("list_sessions", {})
                # No argument chooses the namespace: one that tries is refused or ignored, never obeyed.
                steered = await client.call_tool("list_sessions", {"namespace": other})
        finally:
            await namespaces.close()
        listed = json.loads("\n".join(block.text for block in result.content))
        assert sorted(s["session_id"] for s in listed["sessions"]) == sorted(["shared", f"{namespace}-only"])
        assert listed["total"] == 2
        counts = {s["session_id"]: s["messages"] for s in listed["sessions"]}
        assert counts == {"shared": 2, f"{namespace}-only": 3 if namespace == "bob" else 2}
        text = "\n".join(block.text for block in steered.content)
        assert f"{other}-only" not in text and f"{other} " not in text
