"""The agent tools (SPEC M5): schemas a model can use, confinement, and the write → search round trip."""

from __future__ import annotations

import json
from datetime import date, datetime
from pathlib import Path

import pytest

from contextmem import ContextEngine, Settings, ToolSpec, user
from contextmem.errors import StoreUnavailableError
from contextmem.memory import TOOL_SCHEMAS, HashEmbedder, MemoryTools, SqliteMemoryIndex
from contextmem.testing import InMemorySessionStore
from contextmem.workspace import Workspace


def _tools(root: Path, namespace: str = "default") -> MemoryTools:
    index = SqliteMemoryIndex(Workspace(root, namespace), HashEmbedder(128))
    index.workspace.ensure()
    return MemoryTools(index, clock=lambda: datetime(2026, 3, 8, 14, 30))


def test_schemas_are_complete_json_schemas() -> None:
    assert set(TOOL_SCHEMAS) == {"memory_search", "memory_get", "memory_write", "read_file"}
    for name, schema in TOOL_SCHEMAS.items():
        params = schema["parameters"]
        assert schema["description"] and params["type"] == "object"
        assert set(params["required"]) <= set(params["properties"]), name
        json.dumps(schema)
    assert TOOL_SCHEMAS["memory_write"]["parameters"]["properties"]["target"]["enum"] == ["core", "daily"]


def test_write_then_search_then_get(tmp_path: Path) -> None:
    tools = _tools(tmp_path)
    assert tools.call("memory_write", {"text": "User's cat is named Miso.", "target": "core"}) == (
        "saved to MEMORY.md"
    )
    assert (
        tools.call("memory_write", '{"text": "Shipped release 2.4 today."}')
        == "saved to memory/2026-03-08.md"
    )
    hits = json.loads(tools.call("memory_search", {"query": "cat named Miso", "k": 1}))
    assert hits == [
        {
            "path": "MEMORY.md",
            "start_line": 1,
            "end_line": 1,
            "score": 1.0,
            "snippet": "- User's cat is named Miso.",
        }
    ]
    got = tools.call("memory_get", {"path": "memory/2026-03-08.md", "from_line": 3, "lines": 1})
    assert got == "[memory/2026-03-08.md lines 3-3 of 3]\n- Shipped release 2.4 today."


class _Counting(HashEmbedder):
    """Counts the characters of the passages it embeds (what a model's passes cost grows with)."""

    def __init__(self) -> None:
        super().__init__(128)
        self.chars = 0

    def embed(self, texts, kind):  # type: ignore[no-untyped-def]
        if kind == "passage":
            self.chars += sum(map(len, texts))
        return super().embed(texts, kind)


def test_notes_saved_in_one_minute_are_each_embedded_once_and_each_found(tmp_path: Path) -> None:
    """A note used to join its minute's list, one chunk of up to 1,200 characters that the index embedded
    again after every note: 30 notes in a minute cost ~10 times their own length in model passes."""
    embedder = _Counting()
    index = SqliteMemoryIndex(Workspace(tmp_path), embedder)
    index.workspace.ensure()
    tools = MemoryTools(index, clock=lambda: datetime(2026, 3, 8, 14, 30))
    notes = [f"Service {n} is owned by the team of person {n % 7}, on call weekly." for n in range(30)]
    for note in notes:
        tools.call("memory_write", {"text": note})
        index.sync()
    assert embedder.chars <= 2 * sum(len(n) for n in notes)  # each note once, with its heading
    for n in (0, 17, 29):
        hits = json.loads(tools.call("memory_search", {"query": f"Service {n} owned", "k": 1}))
        assert hits[0]["snippet"].endswith(f"- {notes[n]}"), hits


def test_memory_write_notes_are_list_items_of_their_section(tmp_path: Path) -> None:
    """Issue 31: a note was a paragraph after a blank line; now each is one list item of the list it joins."""
    tools = _tools(tmp_path)
    ws = tools.workspace
    ws.core_file.write_text("# Facts\nWritten by hand, a paragraph.\n", encoding="utf-8")
    for text in (
        "User's cat is named Miso.",
        "- Deploys happen on Tuesdays.",
        "Three steps:\n1. build\n\n2. ship",
    ):
        assert tools.call("memory_write", {"text": text, "target": "core"}) == "saved to MEMORY.md"
    assert ws.core_file.read_text(encoding="utf-8") == (
        "# Facts\nWritten by hand, a paragraph.\n\n"  # a list starts after the paragraph, once
        "- User's cat is named Miso.\n"
        "- Deploys happen on Tuesdays.\n"  # the note's own bullet is not doubled
        "- Three steps:\n  1. build\n\n  2. ship\n"  # continuation lines indented: one item
    )
    for text in ("Shipped release 2.4.", "Rolled back 2.4."):
        tools.call("memory_write", {"text": text})
    tools.clock = lambda: datetime(2026, 3, 8, 14, 31)
    tools.call("memory_write", {"text": "Release 2.4.1 is out."})
    daily = ws.daily_file(date(2026, 3, 8)).read_text(encoding="utf-8")
    assert daily == (  # each note an entry of its own: it is indexed alone, not with the minute's list
        "## 14:30\n\n- Shipped release 2.4.\n\n## 14:30\n\n- Rolled back 2.4.\n\n"
        "## 14:31\n\n- Release 2.4.1 is out.\n"
    )
    # What memory_search and memory_get give back: the item, its continuation lines with it.
    hits = json.loads(tools.call("memory_search", {"query": "three steps build ship", "k": 1}))
    assert hits[0]["path"] == "MEMORY.md" and "- Three steps:\n  1. build" in hits[0]["snippet"]
    got = tools.call("memory_get", {"path": "MEMORY.md", "from_line": 6, "lines": 4})
    assert got.endswith("- Three steps:\n  1. build\n\n  2. ship")


def test_read_file_reads_dialog_and_tool_results_by_lines(tmp_path: Path) -> None:
    tools = _tools(tmp_path)
    ws = tools.workspace
    (ws.dialog_dir / "2026-03-08.jsonl").write_text("".join(f'{{"n": {i}}}\n' for i in range(10)))
    (ws.tool_results_dir / "call_1.txt").write_text("full output\n")
    out = tools.call("read_file", {"path": "dialog/2026-03-08.jsonl", "offset": 9, "limit": 5})
    assert out == '[dialog/2026-03-08.jsonl lines 9-10 of 10]\n{"n": 8}\n{"n": 9}'
    assert tools.call("read_file", {"path": "tool_results/call_1.txt"}).endswith("full output")
    assert "4 more" in tools.call("read_file", {"path": "dialog/2026-03-08.jsonl", "limit": 6})


def test_tools_refuse_paths_outside_their_area(tmp_path: Path) -> None:
    tools = _tools(tmp_path / "root", "alice")
    (tmp_path / "secret.txt").write_text("top secret")
    other = _tools(tmp_path / "root", "bob")
    other.call("memory_write", {"text": "bob's private note", "target": "core"})
    (tools.workspace.dialog_dir / "escape").symlink_to(tmp_path)
    refused = [
        ("read_file", {"path": "../../../secret.txt"}),
        ("read_file", {"path": str(tmp_path / "secret.txt")}),
        ("read_file", {"path": "dialog/escape/secret.txt"}),
        ("read_file", {"path": "MEMORY.md"}),  # memory is read with memory_get
        ("memory_get", {"path": "../bob/MEMORY.md"}),
        ("memory_get", {"path": "dialog/2026-03-08.jsonl"}),
        ("memory_get", {"path": "/etc/passwd"}),
    ]
    for name, args in refused:
        out = tools.call(name, args)
        assert out.startswith("error:"), (name, args, out)
        assert "top secret" not in out
    assert "top secret" not in tools.call("read_file", {"path": "dialog/escape/secret.txt"})
    assert tools.call("memory_search", {"query": "bob private note"}) == "[]"


def test_model_mistakes_come_back_as_text(tmp_path: Path) -> None:
    tools = _tools(tmp_path)
    assert tools.call("nope", {}).startswith("error: unknown tool 'nope'")
    assert tools.call("memory_get", {"path": "MEMORY.md"}).startswith("error:")  # does not exist yet
    assert tools.call("memory_write", {"text": "x", "target": "elsewhere"}).startswith("error:")
    assert tools.call("memory_write", {"txt": "x"}).startswith("error:")
    assert tools.call("memory_write", "{not json").startswith("error:")
    assert [t["function"]["name"] for t in tools.openai_tools()] == list(TOOL_SCHEMAS)


async def test_acall_runs_off_the_loop(tmp_path: Path) -> None:
    tools = _tools(tmp_path)
    assert await tools.acall("memory_write", {"text": "async note", "target": "core"}) == "saved to MEMORY.md"
    assert json.loads(await tools.acall("memory_search", {"query": "async note"}))[0]["path"] == "MEMORY.md"


async def test_the_tools_in_each_provider_form_build_the_same_request(tmp_path: Path) -> None:
    """Issue 29: ``openai_tools()`` went to ``build`` and was refused; every form is accepted alike now."""
    tools = _tools(tmp_path / "memory")
    specs = tools.specs()
    assert specs == [ToolSpec(name, s["description"], s["parameters"]) for name, s in TOOL_SCHEMAS.items()]
    assert tools.openai_tools() == [
        {"type": "function", "function": {"name": name, **s}} for name, s in TOOL_SCHEMAS.items()
    ]
    assert tools.anthropic_tools() == [
        {"name": name, "description": s["description"], "input_schema": s["parameters"]}
        for name, s in TOOL_SCHEMAS.items()
    ]
    engine = await ContextEngine.open(
        "s",
        store=InMemorySessionStore(),
        settings=Settings(workspace=tmp_path),
        workspace_dir=tmp_path / "files",
    )
    await engine.add(user("What do you remember?"))
    requests = [
        await engine.build("sys", form) for form in (specs, tools.openai_tools(), tools.anthropic_tools())
    ]
    assert all(r.tools == tuple(specs) for r in requests)
    assert requests[0].estimate == requests[1].estimate == requests[2].estimate


def test_a_write_indexes_its_note_so_the_next_search_embeds_nothing(tmp_path: Path) -> None:
    """The search after a note paid for embedding it (on a shared store: the next search of any host).
    The write indexes what it saved; the search only searches."""
    embedder = _Counting()
    index = SqliteMemoryIndex(Workspace(tmp_path), embedder)
    index.workspace.ensure()
    tools = MemoryTools(index, clock=lambda: datetime(2026, 3, 8, 14, 30))
    tools.call("memory_write", {"text": "The cutover owner is Priya Raman."})
    embedded = embedder.chars
    assert embedded > 0  # by the write
    hits = json.loads(tools.call("memory_search", {"query": "cutover owner", "k": 1}))
    assert embedder.chars == embedded and hits[0]["snippet"].endswith("- The cutover owner is Priya Raman.")


def test_a_note_whose_indexing_fails_is_saved_and_found_by_the_next_search(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = SqliteMemoryIndex(Workspace(tmp_path), HashEmbedder(128))
    index.workspace.ensure()
    tools = MemoryTools(index, clock=lambda: datetime(2026, 3, 8, 14, 30))

    def down(*args: object, **kwargs: object) -> None:
        raise StoreUnavailableError("the memory index", 0.0, "connection refused")

    with monkeypatch.context() as patch:
        patch.setattr(index, "sync", down)
        assert (
            tools.call("memory_write", {"text": "Deploys freeze on Fridays."})
            == "saved to memory/2026-03-08.md"
        )
    hits = json.loads(tools.call("memory_search", {"query": "deploys freeze", "k": 1}))
    assert hits[0]["snippet"].endswith("- Deploys freeze on Fridays.")
