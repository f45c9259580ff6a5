"""The MCP server's doors, drawn hostile (issue 49: a property test per door).

Tool arguments (``memory_search``, ``memory_get``, ``memory_write``, ``read_file``, ``context_stats``,
``compact``, ``list_sessions``) of every type and size, with NUL, lone surrogates, line separators and
paths that climb out: the reply is a result, or a tool error of one line with no raw exception; neither
carries another namespace's memory or a file outside the workspace. HTTP ``Host``, ``Origin`` and
``Mcp-Session-Id`` headers and the URL's namespace, as any bytes: refused with their documented status
(421, 403, 404/400), never a 500 or a traceback.

One server per module (the SDK's client on the server object, and the HTTP app in process, both on one
event loop in a thread) serves every example, so each is a request and nothing more.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")

import anyio  # noqa: E402
from anyio.from_thread import BlockingPortal, start_blocking_portal  # noqa: E402
from mcp import Client  # noqa: E402

from contextmem.mcp.namespaces import Namespaces  # noqa: E402
from contextmem.mcp.server import MAX_ERROR_CHARS, build_server, http_app  # noqa: E402
from contextmem.settings import Settings  # noqa: E402
from contextmem.testing import HashEmbedder, InMemorySessionStore  # noqa: E402
from tests.mcp_server import HEADERS, INIT, LISTING  # noqa: E402
from tests.security.doors import (  # noqa: E402
    BIDI,
    CONTROLS,
    FORMAT,
    LINE_BREAKS,
    MARKER_LOOKALIKES,
    SURROGATES,
    TERMINAL_SEQUENCES,
    hostile_text,
    huge,
    raw_exception,
)

BOB_SECRET = "bob-vault-7d1e zebra quartz"
OUTSIDE_SECRET = "outside-the-workspace 93f4 walrus"
PORT = 8765
TOOLS = (
    "memory_search",
    "memory_get",
    "memory_write",
    "read_file",
    "read_archive",
    "context_stats",
    "compact",
)
TOOLS += ("list_sessions",)
PARAMETERS = {
    "memory_search": ("query", "k"),
    "memory_get": ("path", "from_line", "lines"),
    "memory_write": ("text", "target"),
    "read_file": ("path", "offset", "limit"),
    "read_archive": ("path", "offset", "limit"),
    "context_stats": ("session_id",),
    "compact": ("session_id",),
    "list_sessions": ("limit",),
}

CLIMBING = (
    "../outside.md",
    "../../outside.md",
    "namespaces/bob/MEMORY.md",
    "../namespaces/bob/MEMORY.md",
    "memory/../../outside.md",
    "/etc/passwd",
    "MEMORY.md\x00.txt",
    "dialog/..\\..\\outside.md",
    "tool_results/%2e%2e/%2e%2e/outside.md",
    "dialog/\u2028../../outside.md",
    "C:\\outside.md",
    "~/outside.md",
    "MEMORY.md/",
    ".",
    "",
)
climbing = st.sampled_from(CLIMBING)
texts = st.one_of(
    hostile_text(),
    st.sampled_from(MARKER_LOOKALIKES),
    hostile_text(max_size=4).map(lambda t: huge(t or "q", 300_000)),
)
paths = st.one_of(
    climbing,
    st.tuples(climbing, hostile_text(max_size=4)).map("".join),
    st.tuples(
        st.sampled_from(["dialog/", "tool_results/", "memory/", "MEMORY"]), hostile_text(max_size=6)
    ).map("".join),
    texts,
)
junk = st.one_of(
    st.integers(),
    st.sampled_from([0, -1, 10**30, 2**63, True, None, 1.5, float("nan")]),
    st.lists(st.text(max_size=4), max_size=3),
    st.dictionaries(st.text(max_size=4), st.text(max_size=4), max_size=2),
)
# Each argument mostly drawn as its kind (a path, a text, a number), else as anything at all.
KINDS = {"path": paths, "query": texts, "text": texts, "session_id": texts, "target": texts}
values = st.one_of(paths, texts, junk)


@st.composite
def calls(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    tool = draw(st.sampled_from(TOOLS))
    arguments = {}
    for name in PARAMETERS[tool]:
        if draw(st.integers(0, 9)) < 8:  # most calls carry the argument
            kind = KINDS.get(name, junk)
            arguments[name] = draw(st.one_of(kind, values) if draw(st.booleans()) else kind)
    if draw(st.integers(0, 4)) == 0:
        arguments[draw(hostile_text(max_size=3))] = draw(values)  # an argument no tool has
    return tool, arguments


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    with start_blocking_portal() as running:
        yield running


@pytest.fixture(scope="module")
def namespaces(tmp_path_factory: pytest.TempPathFactory, portal: BlockingPortal) -> Iterator[Namespaces]:
    root = tmp_path_factory.mktemp("mcp-doors")
    (root / "outside.md").write_text(f"# Outside\n{OUTSIDE_SECRET}\n", encoding="utf-8")
    workspace = root / "ws"
    bob = workspace / "namespaces" / "bob"
    bob.mkdir(parents=True)
    (bob / "MEMORY.md").write_text(f"# Bob\n{BOB_SECRET}\n", encoding="utf-8")
    alice = workspace / "namespaces" / "alice"
    (alice / "dialog").mkdir(parents=True)
    (alice / "MEMORY.md").write_text("# Alice\nAlice prefers green tea.\n", encoding="utf-8")
    (alice / "dialog" / "s1.jsonl").write_text('{"role": "user", "content": "hello"}\n', encoding="utf-8")
    built = Namespaces(
        Settings(workspace=workspace, namespace="alice", context_window=2000, max_tokens=300),
        store=InMemorySessionStore(),
        llm=None,
        embedder=HashEmbedder(64),
        allowed=("alice", "bob"),
    )
    yield built
    portal.call(built.close)


@pytest.fixture(scope="module")
def client(portal: BlockingPortal, namespaces: Namespaces) -> Iterator[Client]:
    with portal.wrap_async_context_manager(Client(build_server(namespaces))) as connected:
        yield connected


@pytest.fixture(scope="module")
def app(portal: BlockingPortal, namespaces: Namespaces) -> Iterator[Any]:
    """The HTTP app (host guard, namespace router, the SDK's app), its session manager running."""
    served = http_app(namespaces, host="127.0.0.1", port=PORT)
    starlette = served.app.app
    with portal.wrap_async_context_manager(starlette.router.lifespan_context(starlette)):
        yield served


@pytest.fixture(scope="module")
def http(portal: BlockingPortal, app: Any) -> Iterator[httpx.AsyncClient]:
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=f"http://127.0.0.1:{PORT}")
    with portal.wrap_async_context_manager(client) as connected:
        yield connected


async def raw_post(app: Any, raw_path: bytes, body: bytes) -> tuple[int, str]:
    """POST ``body`` to ``raw_path`` exactly as bytes (no client normalises ``..`` or refuses a control
    character): ``(status, body)``."""
    headers = [(b"host", b"127.0.0.1:%d" % PORT)] + [(k.encode(), v.encode()) for k, v in HEADERS.items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": raw_path.decode("latin-1"),
        "raw_path": raw_path,
        "query_string": b"",
        "root_path": "",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", PORT),
    }
    sent = [{"type": "http.request", "body": body, "more_body": False}]
    status, chunks = 0, []

    async def receive() -> dict[str, Any]:
        if sent:
            return sent.pop()
        await anyio.sleep_forever()
        raise AssertionError("never reached")

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    with anyio.fail_after(30):
        await app(scope, receive, send)
    return status, b"".join(chunks).decode("utf-8", "replace")


def assert_clean_reply(text: str) -> None:
    assert BOB_SECRET not in text and OUTSIDE_SECRET not in text, text[:300]
    assert not raw_exception(text), text[:300]


@given(call=calls())
def test_a_tool_call_answers_or_fails_in_one_line_inside_its_namespace(
    portal: BlockingPortal, client: Client, call: tuple[str, dict[str, Any]]
) -> None:
    tool, arguments = call
    result = portal.call(client.call_tool, tool, arguments)
    text = "\n".join(getattr(block, "text", "") for block in result.content)
    assert_clean_reply(text)
    if result.is_error:
        assert len(text.splitlines()) == 1 and "\r" not in text, text[:300]
        assert len(text) <= MAX_ERROR_CHARS + 100, len(text)  # the SDK's "Error executing tool NAME: "


PIECES = LINE_BREAKS + CONTROLS + BIDI + FORMAT + TERMINAL_SEQUENCES + MARKER_LOOKALIKES + SURROGATES
TEXT_ARGUMENTS = [(t, n) for t, names in PARAMETERS.items() for n in names if n in KINDS]


@pytest.mark.parametrize(("tool", "name"), TEXT_ARGUMENTS)
def test_every_hostile_piece_in_every_text_argument(
    portal: BlockingPortal, client: Client, tool: str, name: str
) -> None:
    """Each piece of the harness, alone, around a plain word and after each directory a path may name:
    a sweep, so no piece depends on a draw reaching it."""
    for piece in PIECES:
        for value in (
            piece,
            f"a{piece}b",
            f"dialog/{piece}.jsonl",
            f"tool_results/{piece}",
            f"memory/{piece}.md",
        ):
            result = portal.call(
                client.call_tool, tool, {"path": "MEMORY.md", "session_id": "s1", name: value}
            )
            text = "\n".join(getattr(block, "text", "") for block in result.content)
            assert_clean_reply(text)
            if result.is_error:
                assert len(text.splitlines()) == 1 and "\r" not in text, (tool, name, value, text[:300])


def test_the_climbing_paths_reach_nothing_outside(portal: BlockingPortal, client: Client) -> None:
    """The draws above, every one of them, on both reading tools (a sampled draw may miss some)."""
    for path in CLIMBING:
        for tool in ("memory_get", "read_file"):
            result = portal.call(client.call_tool, tool, {"path": path})
            text = "\n".join(getattr(block, "text", "") for block in result.content)
            assert_clean_reply(text)
            if "outside" in path or "bob" in path or "passwd" in path:
                assert result.is_error and len(text.splitlines()) == 1, (tool, path, text[:200])


header_values = st.one_of(
    hostile_text().map(lambda t: t.encode("utf-8", "surrogatepass")),
    st.binary(max_size=60),
    st.sampled_from(
        [
            b"127.0.0.1:8765@evil.example",
            b"127.0.0.1:8765\r\nX-Injected: 1",
            b"127.0.0.1:8765\x00",
            b"127.0.0.1:99999",
            b"[::1:8765",
            b"LOCALHOST:8765 ",
            b"evil.example",
            b"http://127.0.0.1:8765.evil.example",
            b"null",
            b"x" * 100_000,
        ]
    ),
)


def post(
    portal: BlockingPortal, http: httpx.AsyncClient, path: str, headers: list[tuple[bytes, bytes]]
) -> Any:
    base = [(k.encode(), v.encode()) for k, v in HEADERS.items()]
    return portal.call(lambda: http.post(path, json=LISTING, headers=base + headers))


# The names this server answers to (a draw may reach one: it is then served, as it should be).
SERVED_HOSTS = {b"127.0.0.1:%d" % PORT, b"localhost:%d" % PORT, b"[::1]:%d" % PORT}
SERVED_ORIGINS = {scheme + host for scheme in (b"http://", b"https://") for host in SERVED_HOSTS}


def assert_refused(response: Any, status: int | tuple[int, ...]) -> None:
    expected = status if isinstance(status, tuple) else (status,)
    assert response.status_code in expected, (response.status_code, response.text[:300])
    assert len(response.text.splitlines()) == 1 and len(response.text) <= 600, response.text[:300]
    assert_clean_reply(response.text)
    assert "memory_search" not in response.text  # the tools were not listed


@given(value=header_values)
def test_a_hostile_host_header_is_refused_with_421(
    portal: BlockingPortal, http: httpx.AsyncClient, value: bytes
) -> None:
    if value.lower() not in SERVED_HOSTS:
        assert_refused(post(portal, http, "/mcp", [(b"host", value)]), 421)


@given(value=header_values)
def test_a_hostile_origin_header_is_refused_with_403(
    portal: BlockingPortal, http: httpx.AsyncClient, value: bytes
) -> None:
    if value.lower() not in SERVED_ORIGINS:
        assert_refused(post(portal, http, "/mcp", [(b"origin", value)]), 403)


@given(value=header_values.filter(bool))
def test_a_hostile_session_id_is_refused_with_404(
    portal: BlockingPortal, http: httpx.AsyncClient, value: bytes
) -> None:
    assert_refused(post(portal, http, "/ns/bob/mcp", [(b"mcp-session-id", value)]), 404)


@given(name=st.one_of(hostile_text(max_size=8), st.sampled_from(["..", "%2e%2e", "mallory", "BOB", "a/b"])))
def test_a_hostile_namespace_in_the_url_is_refused_with_403_or_404(
    portal: BlockingPortal, app: Any, name: str
) -> None:
    path = b"/ns/" + name.encode("utf-8", "surrogatepass") + b"/mcp"
    status, text = portal.call(raw_post, app, path, json.dumps(INIT).encode())
    if name in ("alice", "bob"):
        return
    assert status in (403, 404), (status, text[:300])
    assert len(text.splitlines()) == 1 and len(text) <= 600 and not raw_exception(text), text[:300]
