"""Opening a stored session again that nobody changed: no row is read and no message counted again.

An MCP server opens a session on every ``context_stats``; a session of big tool results used to be read,
parsed and counted (its texts hashed to find their counts) in full each time. The store hands an unchanged
session back (tests/test_store_contract.py: versions), and the engine takes the counts of the same
messages from the engine that loaded them before (contextmem.engine.session).
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

from contextmem.engine import session as live
from contextmem.messages import Message, assistant, tool_call, tool_result, user
from contextmem.store.base import SessionState, StoredMessage
from contextmem.store.sqlite import SqliteSessionStore
from contextmem.tokens.counter import MessageCounter

from .engine_helpers import make_engine


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[Message]:
    """Every message an engine's counter counts (rather than finds in its cache) from now on."""
    seen: list[Message] = []
    count = MessageCounter._count_uncached

    def counting(self: MessageCounter, message: Message) -> int:
        seen.append(message)
        return count(self, message)

    monkeypatch.setattr(MessageCounter, "_count_uncached", counting)
    return seen


async def test_an_unchanged_session_is_neither_read_nor_counted_again(
    tmp_path: Path, counted: list[Message]
) -> None:
    store = SqliteSessionStore(tmp_path / "sessions.db")
    try:
        first = await make_engine(tmp_path, store=store)
        big = "2026-11-29 worker-7 GET /api/v2/invoices 200 12ms\n" * 4_000
        turn = [
            user("fetch the log"),
            assistant(None, tool_calls=[tool_call("c1", "fetch_log", {})]),
            tool_result("c1", big),
            assistant("the log is in"),
        ]
        await store.append(first.namespace, "s1", turn)
        loads: list[Any] = []
        load = store._load_session

        async def counted_load(namespace: str, session_id: str) -> Any:
            loads.append(session_id)
            return await load(namespace, session_id)

        store._load_session = counted_load  # type: ignore[method-assign]
        counted.clear()
        one = await make_engine(tmp_path, store=store)
        assert len(counted) == 4 and len(loads) == 1
        two = await make_engine(tmp_path, store=store)
        assert (len(counted), len(loads)) == (4, 1)  # neither read nor counted again
        assert one.stats() == two.stats()
        assert two.history.messages == turn

        other = SqliteSessionStore(tmp_path / "sessions.db")  # another process, or host, writes
        try:
            await other.append(first.namespace, "s1", [user("and now?")])
        finally:
            await other.close()
        three = await make_engine(tmp_path, store=store)
        assert len(loads) == 2
        assert three.history.messages == [*turn, user("and now?")]
        assert three.stats().messages == two.stats().messages + 1
        before = len(counted)
        await make_engine(tmp_path, store=store, image_tokens=999)  # counts of another counter: not taken
        assert len(counted) == before + 5 and len(loads) == 2
    finally:
        await store.close()


def test_kept_counts_leave_with_their_state() -> None:
    state = SessionState("ns", "s", (StoredMessage(1, user("hi")),), None, None, 2, 0.0, 7)
    live._keep_counts(state, ("heuristic", 765), (4,))
    assert live._known_counts(state, ("heuristic", 765)) == (4,)
    assert live._known_counts(state, ("o200k_base", 765)) is None
    at = id(state)
    del state
    gc.collect()
    assert at not in live._COUNTS
