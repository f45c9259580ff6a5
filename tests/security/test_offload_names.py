"""Offloaded tool results never share a file (issue 12, point 8), and are written only inside the tree.

Names are derived from (namespace, session, seq, call id): a readable prefix plus a hash whenever the
plain spelling could be ambiguous, always under 255 bytes, distinct even on a case-insensitive disk.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from contextmem.budget import Window
from contextmem.compaction.offload import offload_path
from contextmem.engine import ContextEngine, EngineEvent
from contextmem.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from contextmem.store.sqlite import SqliteSessionStore
from tests.engine_helpers import small_settings

ids = st.text(st.characters(codec="utf-8"), min_size=0, max_size=300)


@given(
    st.tuples(st.sampled_from(["default", "bob", "a.b"]), ids, st.integers(1, 10**9), ids),
    st.tuples(st.sampled_from(["default", "bob", "a.b"]), ids, st.integers(1, 10**9), ids),
)
def test_distinct_keys_give_distinct_short_names(one, two):
    a, b = offload_path(*one), offload_path(*two)
    for name in (a, b):
        assert name.startswith("tool_results/") and name.endswith(".txt")
        assert len(name.removeprefix("tool_results/").encode()) <= 255 and "/" not in name[13:]
    if one != two:
        assert a.lower() != b.lower()  # distinct on case-insensitive file systems too
    else:
        assert a == b


def test_known_collisions_of_the_old_scheme_are_gone():
    long = "session-" + "x" * 400
    assert offload_path("default", long + "1", 5, "call_1") != offload_path(
        "default", long + "2", 5, "call_1"
    )
    assert offload_path("default", "a/b", 5, "c") != offload_path("default", "a_b", 5, "c")
    assert offload_path("default", "a-1", 2, "c") != offload_path("default", "a", 1, "2-c")
    assert offload_path("default", "s1", 5, "call") != offload_path("bob", "s1", 5, "call")
    assert offload_path("default", "s1", 5, "call_1") == "tool_results/s1-5-call_1.txt"  # plain stays plain


async def offloading_engine(root: Path, store: SqliteSessionStore, session_id: str) -> ContextEngine:
    return await ContextEngine.open(
        session_id, store=store, settings=small_settings(workspace=root), window=Window(20000, 500)
    )


async def offload_one(engine: ContextEngine, call_id: str, text: str) -> list[EngineEvent]:
    """A big result, aged past pruning_recent_n, then a build: it is offloaded."""
    events: list[EngineEvent] = []
    engine.subscribe(events.append)
    await engine.add(
        UserMessage("run it"), AssistantMessage(None, tool_calls=(ToolCall(call_id, "q", "{}"),))
    )
    await engine.add(ToolMessage(call_id, text), AssistantMessage("done"))
    for i in range(3):
        await engine.add(
            UserMessage(f"next {i}"), AssistantMessage(None, tool_calls=(ToolCall(f"n{i}", "x", "{}"),))
        )
        await engine.add(ToolMessage(f"n{i}", "ok"), AssistantMessage("ok"))
    await engine.build("system")
    return events


async def test_each_offloaded_result_reads_back_its_own_text(tmp_path):
    store = SqliteSessionStore(tmp_path / "s.sqlite")
    # long enough to be hashed in the offload name, short enough for a store (256 characters)
    sessions = ["S-" + "y" * 240 + "-one", "S-" + "y" * 240 + "-two", "a/b", "a_b"]
    paths = {}
    for n, sid in enumerate(sessions):
        engine = await offloading_engine(tmp_path, store, sid)
        text = f"output of session {n}\n" + f"{n} 行数据\n" * 2000
        events = await offload_one(engine, "call_1", text)  # the same call id in every session
        [path] = [e.data["path"] for e in events if e.kind == "offload"]
        paths[sid] = path
        assert (tmp_path / path).read_text() == text
        assert (tmp_path / path).stat().st_mode & 0o777 == 0o600
        cut = next(
            m for m in engine.history.messages if isinstance(m, ToolMessage) and m.tool_call_id == "call_1"
        )
        head = str(cut.content).split("\n\n[...")[0]
        assert path in str(cut.content) and head and text.startswith(head)
    assert len(set(paths.values())) == len(sessions)
    for n, sid in enumerate(sessions):  # nobody overwrote anybody
        assert (tmp_path / paths[sid]).read_text().startswith(f"output of session {n}\n")
    await store.close()


async def test_symlinked_tool_results_is_refused(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "ws"
    root.mkdir()
    (root / "tool_results").symlink_to(outside)
    store = SqliteSessionStore(tmp_path / "s.sqlite")
    engine = await offloading_engine(root, store, "s1")
    text = "secret-ish output\n" * 2000
    events = await offload_one(engine, "call_1", text)
    failed = [e for e in events if e.kind == "offload_failed"]
    assert failed and "tool_results" in failed[0].data["error"] and "Fix:" in failed[0].data["error"]
    assert not [e for e in events if e.kind == "offload"]
    assert list(outside.iterdir()) == []  # nothing written through the link
    kept = next(
        m for m in engine.history.messages if isinstance(m, ToolMessage) and m.tool_call_id == "call_1"
    )
    assert kept.content == text  # the result stays whole in the session
    assert (await engine.verify()).lost == 0
    # Cleanup never follows the link either.
    (outside / "old.txt").write_text("not ours")
    assert engine.cleanup_offloads() == 0 and (outside / "old.txt").exists()
    await store.close()
