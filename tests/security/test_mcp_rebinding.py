"""DNS rebinding and cross-site requests against the HTTP MCP server, on every spelling of loopback.

The attacker is a web page in the user's browser. Through DNS rebinding their own name resolves to the
loopback address the server listens on, so the browser sends ``Host: evil.example``; a plain cross-site
request sends ``Origin: http://evil.example``. Either one used to reach the tools when the server was
bound to a loopback address spelled another way than ``127.0.0.1``/``localhost``/``::1`` (the SDK's own
check turned on only for those), and ``127.0.0.1:PORT@evil.example`` passed the SDK's prefix match on
any. Each case below is refused (421 for Host, 403 for Origin) while the legitimate request is served.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")

from tests.mcp_server import HEADERS, INIT, ipv6_loopback, mcp_http_server  # noqa: E402

SECRET = "bob's vault code is 4711 (zebra-quartz)"
SPELLINGS = ["127.0.0.1", "127.0.0.2", "::1", "0:0:0:0:0:0:0:1"]
READ_BOBS_MEMORY = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "memory_get", "arguments": {"path": "MEMORY.md"}},
}


@pytest.fixture(scope="module", params=SPELLINGS)
def server(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a server bound to one spelling of loopback, serving alice (default) and bob."""
    host = request.param
    if ":" in host:
        ipv6_loopback()
    workspace = tmp_path_factory.mktemp("ws")
    bob = workspace / "namespaces" / "bob"
    bob.mkdir(parents=True)
    (bob / "MEMORY.md").write_text(f"# Bob\n{SECRET}\n", encoding="utf-8")
    env = {**os.environ, "CONTEXTMEM_WORKSPACE": str(workspace)}
    args = ["--namespace", "alice", "--namespace", "bob"]
    stderr = tmp_path_factory.mktemp("server") / "stderr.txt"
    with mcp_http_server(env, args, host=host, stderr=stderr) as (_, port, _line):
        yield f"http://{f'[{host}]' if ':' in host else host}:{port}"


def _port(base: str) -> int:
    return int(base.rsplit(":", 1)[1])


async def _post(base: str, path: str, body: dict[str, Any], **headers: str) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.post(f"{base}{path}", json=body, headers={**HEADERS, **headers})


async def test_the_legitimate_host_is_served(server: str) -> None:
    for host in (None, f"127.0.0.1:{_port(server)}", f"localhost:{_port(server)}"):
        served = await _post(server, "/ns/bob/mcp", INIT, **({"host": host} if host else {}))
        assert served.status_code == 200 and "serverInfo" in served.text, (host, served.text)
    origin = await _post(server, "/mcp", INIT, origin=f"http://localhost:{_port(server)}")
    assert origin.status_code == 200, origin.text


@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:{port}",
        "127.0.0.1:{port}@evil.example",  # a prefix match on "127.0.0.1:" passed this
        "127.0.0.1:{port}.evil.example",
        "localhost.evil.example:{port}",
        "127.0.0.1",  # the right name on the wrong port
        "127.0.0.1:1{port}",
        "",
    ],
)
async def test_a_foreign_host_is_refused(server: str, host: str) -> None:
    refused = await _post(server, "/ns/bob/mcp", INIT, host=host.format(port=_port(server)))
    assert refused.status_code == 421, (host, refused.status_code, refused.text)
    assert "serverInfo" not in refused.text and "Fix: " in refused.text


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",
        "https://evil.example:{port}",
        "http://127.0.0.1:{port}@evil.example",
        "http://127.0.0.1:{port}.evil.example",
        "http://localhost:{port}/../evil",
        "null",  # a sandboxed frame or a file:// page
        "file://",
    ],
)
async def test_a_foreign_origin_is_refused(server: str, origin: str) -> None:
    legitimate_host = f"127.0.0.1:{_port(server)}"
    refused = await _post(
        server, "/ns/bob/mcp", INIT, host=legitimate_host, origin=origin.format(port=_port(server))
    )
    assert refused.status_code == 403, (origin, refused.status_code, refused.text)
    assert "serverInfo" not in refused.text


async def test_a_rebound_page_cannot_read_another_namespaces_memory(server: str) -> None:
    """The attack as found: a page on evil.example opens a session on bob's URL and reads MEMORY.md."""
    for attack in ({"host": "evil.example"}, {"origin": "http://evil.example"}):
        opened = await _post(server, "/ns/bob/mcp", INIT, **attack)
        assert opened.status_code in (403, 421), (attack, opened.text)
        assert "mcp-session-id" not in opened.headers
        # Even holding a session id opened legitimately, the rebound page cannot use it.
        own = await _post(server, "/ns/bob/mcp", INIT)
        session = {"mcp-session-id": own.headers["mcp-session-id"], "mcp-protocol-version": "2025-06-18"}
        read = await _post(server, "/ns/bob/mcp", READ_BOBS_MEMORY, **session, **attack)
        assert read.status_code in (403, 421), (attack, read.text)
        assert "4711" not in read.text
    # The control: the same call from a legitimate client reads it (the refusals above are the guard's).
    read = await _post(server, "/ns/bob/mcp", READ_BOBS_MEMORY, **session)
    assert read.status_code == 200 and "4711" in read.text


@pytest.mark.parametrize("bind", ["0.0.0.0", "::"])
async def test_a_remote_server_answers_only_the_names_it_is_given(tmp_path: Path, bind: str) -> None:
    """With --allow-remote on every interface, a Host is answered only if the operator named it."""
    from contextmem.mcp.namespaces import Namespaces
    from contextmem.mcp.server import http_app
    from contextmem.settings import Settings
    from contextmem.testing import HashEmbedder, InMemorySessionStore

    namespaces = Namespaces(
        Settings(workspace=tmp_path, namespace="alice"),
        store=InMemorySessionStore(),
        llm=None,
        embedder=HashEmbedder(64),
    )
    unspecified = f"[{bind}]:8765" if ":" in bind else f"{bind}:8765"
    app = http_app(namespaces, host=bind, port=8765, allowed_hosts=["mcp.example.com", "10.0.0.5:8765"])
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app)) as http:

        async def status(host: str, **headers: str) -> int:
            response = await http.post(f"http://{host}/nowhere", json=INIT, headers={**HEADERS, **headers})
            return response.status_code

        # Past the guard, the router answers 404 for a path that is no endpoint: the request was admitted.
        for host in ("mcp.example.com", "MCP.example.com", "10.0.0.5:8765", "127.0.0.1:8765", "[::1]:8765"):
            assert await status(host) == 404, host
        assert await status("mcp.example.com", origin="https://mcp.example.com") == 404
        for host in ("evil.example", "mcp.example.com:8765", "10.0.0.5", "10.0.0.6:8765", unspecified):
            assert await status(host) == 421, host  # an address the server never heard of, or a new port
        assert await status("mcp.example.com", origin="https://evil.example") == 403


async def test_a_rebound_websocket_is_closed_before_it_is_accepted() -> None:
    """The MCP app serves no WebSocket, but the guard stands in front of every kind of request."""
    from contextmem.mcp.hosts import HostGuard

    reached: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        reached.append(scope["type"])

    async def receive() -> dict[str, Any]:
        return {"type": "websocket.connect"}

    guard = HostGuard(app, host="127.0.0.2", port=8765)
    for host, expected in (
        (b"evil.example", [{"type": "websocket.close", "code": 1008}]),
        (b"127.0.0.2:8765", []),
    ):
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any], sent: list[dict[str, Any]] = sent) -> None:
            sent.append(message)

        scope = {"type": "websocket", "path": "/mcp", "headers": [(b"host", host)]}
        await guard(scope, receive, send)
        assert sent == expected, host
    assert reached == ["websocket"]  # only the legitimate one got through
