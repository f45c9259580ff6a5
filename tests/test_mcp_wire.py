"""The load bench's lean MCP client (``bench/mcp_wire.py``) against the real HTTP server and the SDK's client.

The bench's figures are only the server's if its client reads the server right: here the lean client,
in both protocol versions (stateless JSON answers, and a session answered as chunked SSE), must get
exactly what the official ``mcp.Client`` gets for the same calls, count an ``isError`` result as the
bench's error, and fail fast (an error, not a hang) on a session the server does not know and on a Host
the server refuses.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("mcp")
pytest.importorskip("uvicorn")

from mcp import Client

from .mcp_server import mcp_http_server

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import bench_mcp_load as bench  # noqa: E402
from mcp_wire import MODERN, SESSION, WireClient, WireError, sse_messages  # noqa: E402

PROTOCOLS = pytest.mark.parametrize("protocol", [MODERN, SESSION])


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``/ns/alice/mcp`` of a running server (hash embedder, SQLite store in a fresh workspace)."""
    import os

    home = tmp_path_factory.mktemp("wire")
    env = {**os.environ, "CONTEXTMEM_WORKSPACE": str(home / "workspace")}
    with mcp_http_server(env, ["--namespace", "alice"], stderr=home / "stderr.txt") as (host, port, _):
        yield f"http://{host}:{port}/ns/alice/mcp"


def seen(result: Any) -> tuple[list[str], bool, Any]:
    """What a tool call returned, read the same way from either client's result."""
    return [block.text for block in result.content], result.is_error, result.structured_content


@PROTOCOLS
async def test_the_wire_client_gets_what_the_official_client_gets(url: str, protocol: str) -> None:
    calls: list[tuple[str, dict[str, Any]]] = [
        ("memory_search", {"query": f"who owns the kettle rota ({protocol})?", "k": 3}),
        ("memory_get", {"path": "MEMORY.md", "lines": 20}),
        ("list_sessions", {"limit": 5}),
        ("context_stats", {"session_id": "no-such-session"}),
    ]
    async with Client(url) as official, WireClient(url, protocol=protocol, timeout=15) as wire:
        assert protocol == MODERN or wire.session_id  # a session was initialised
        mine = await wire.call_tool("memory_write", {"text": f"Odile owns the kettle rota ({protocol})."})
        theirs = await official.call_tool(
            "memory_write", {"text": f"Bram owns the kettle rota ({protocol})."}
        )
        assert seen(mine) == seen(theirs) and not mine.is_error
        for name, arguments in calls:
            assert seen(await wire.call_tool(name, arguments)) == seen(
                await official.call_tool(name, arguments)
            )
        hits = (await wire.call_tool(*calls[0])).structured_content["hits"]
        assert any("Odile" in hit["snippet"] for hit in hits) and any(
            "Bram" in hit["snippet"] for hit in hits
        )


@PROTOCOLS
async def test_an_error_result_is_counted_as_the_benchs_error(url: str, protocol: str) -> None:
    run = bench.Run()
    async with WireClient(url, protocol=protocol, timeout=15) as wire:
        ok = await bench.call(wire, "list_sessions", {"limit": 1}, "alice", run)
        failed = await bench.call(wire, "context_stats", {"session_id": "no-such-session"}, "alice", run)
    assert not ok.error
    assert failed.error.startswith("tool error: ") and "no-such-session" in failed.error
    assert sum(run.errors.values()) == 1


async def test_an_unknown_session_is_an_error_not_a_hang(url: str) -> None:
    async with WireClient(url, protocol=SESSION, timeout=5) as wire:
        wire.session_id = "0123456789abcdef0123456789abcdef"
        with pytest.raises(WireError, match=r"^HTTP 404: no such MCP session"):
            await wire.call_tool("list_sessions", {})
        run = bench.Run()
        sample = await bench.call(wire, "list_sessions", {}, "alice", run)
        assert sample.error.startswith("WireError: HTTP 404") and sum(run.errors.values()) == 1


@PROTOCOLS
async def test_a_refused_host_is_an_error_not_a_hang(url: str, protocol: str) -> None:
    with pytest.raises(WireError, match=r"^HTTP 421: Host 'evil.example' is not an address of this server"):
        async with WireClient(url, protocol=protocol, timeout=5, headers={"Host": "evil.example"}):
            pass


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@given(value=JSON, indent=st.sampled_from([None, 1]), newline=st.sampled_from(["\n", "\r\n"]))
def test_sse_messages_reads_back_every_message_event(value: Any, indent: int | None, newline: str) -> None:
    # Each line of the JSON is one ``data:`` line (the reader joins them with \n), around a comment, a
    # priming event without data and an event of another type, which are no messages.
    text = json.dumps({"id": 7, "result": value}, indent=indent)
    data = "\n".join(f"data: {line}" for line in text.split("\n"))
    events = [
        ": keep-alive",
        "event: message\nid: 1\ndata:",
        f"event: message\n{data}",
        "event: ping\ndata: 1",
    ]
    body = ("\n\n".join(events) + "\n\n").replace("\n", newline)
    assert sse_messages(body.encode()) == [{"id": 7, "result": value}]


@given(body=st.binary(max_size=300), cuts=st.lists(st.integers(0, 300), max_size=6))
async def test_a_chunked_body_is_read_whole_then_the_next_answer(body: bytes, cuts: list[int]) -> None:
    # The body cut into chunks anywhere (CRLF of the framing next to CRLF of the data included), then a
    # second answer on the same connection: both bodies come back exactly, nothing of one in the other.
    edges = sorted({0, len(body), *(c for c in cuts if c <= len(body))})
    pieces = [body[a:b] for a, b in itertools.pairwise(edges) if b > a]
    chunks = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(piece), piece) for piece in pieces)
    wire = WireClient("http://127.0.0.1:1/mcp")
    reader = asyncio.StreamReader()
    reader.feed_data(chunks + b"0\r\nx-trailer: 1\r\n\r\n")
    reader.feed_data(b"HTTP/1.1 202 Accepted\r\ncontent-length: 2\r\n\r\nok")
    reader.feed_eof()
    wire._reader = reader
    first = await wire._response(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
    second = await wire._response(await reader.readuntil(b"\r\n\r\n"))
    assert (first[0], first[2]) == (200, body) and (second[0], second[2]) == (202, b"ok")


async def test_a_server_that_never_answers_is_an_error_within_the_timeout() -> None:
    async def mute(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()  # reads the request, answers nothing

    server = await asyncio.start_server(mute, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        with pytest.raises(WireError, match=r"^no answer within 0.2 s"):
            await WireClient(f"http://127.0.0.1:{port}/mcp", timeout=0.2).connect()
    finally:
        server.close()
