"""The session-id door (issue 49, item 6): any id is stored and listed back exactly, or refused in one line.

Ids come from applications (a LangChain ``thread_id``, an Agents SDK session), so they are free text. A
lone surrogate (``"chat\\ud800"``, what JSON ``"\\ud800"`` decodes to) raised a raw ``UnicodeEncodeError``
from both stores, NUL a raw PostgreSQL error, and ``mem.session("")`` was accepted. Every store method now
checks the id (:func:`contextmem.namespace.check_session_id`) before any I/O.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextmem import ContextMem, Settings
from contextmem.errors import UsageError
from contextmem.messages import assistant, user
from contextmem.namespace import MAX_SESSION_ID_CHARS
from contextmem.store.base import SessionStore
from contextmem.store.postgres import PostgresSessionStore
from contextmem.store.sqlite import SqliteSessionStore
from contextmem.testing import InMemorySessionStore, ScriptedLLM
from tests.security.doors import (
    LINE_BREAKS,
    SURROGATES,
    assert_one_line_error,
    forged_lines,
    hostile_text,
    huge,
)

NS = "ids"

REFUSED = ["", "chat\ud800", "\udfff", "a\x00b", "\x00", huge("x", MAX_SESSION_ID_CHARS + 1)]
KEPT = [
    *(f"a{brk}## forged" for brk in LINE_BREAKS),
    "\x1b[31mred\x1b[0m",
    "\u202eevil",
    "会话-一",
    "😀 chat",
    " ",
    "x" * MAX_SESSION_ID_CHARS,
    "😀" * MAX_SESSION_ID_CHARS,  # 1,024 UTF-8 bytes: under PostgreSQL's index entry limit
]


def _open(url: str, clock: Callable[[], float] = time.time) -> SessionStore:
    if url.startswith("sqlite:"):
        return SqliteSessionStore(url.removeprefix("sqlite:///"), clock=clock)
    return PostgresSessionStore(url, clock=clock)


async def _door(store: SessionStore, session_id: str) -> bool:
    """The contract for one id: refused by every method with one typed line (returns True), or stored,
    listed back and reopened exactly (then deleted, so the next id starts from an empty namespace)."""
    try:
        await store.append(NS, session_id, [user("hello")])
    except Exception as exc:  # whatever it is, it must be the one-line typed refusal
        assert_one_line_error(exc)
        assert isinstance(exc, UsageError), exc
        for call in (
            lambda: store.open_session(NS, session_id),
            lambda: store.messages(NS, session_id),
            lambda: store.set_meta(NS, session_id, meta="{}"),
            lambda: store.delete_session(NS, session_id),
        ):
            with pytest.raises(UsageError) as caught:
                await call()
            assert_one_line_error(caught.value)
        assert await store.list_sessions(NS) == []
        return True
    listed = [info.session_id for info in await store.list_sessions(NS)]
    assert listed == [session_id]
    state = await store.open_session(NS, session_id)
    assert state.session_id == session_id and [m.message.content for m in state.live] == ["hello"]
    await store.delete_session(NS, session_id)
    assert await store.list_sessions(NS) == []
    return False


def _is_refused(session_id: str) -> bool:
    """The documented rule (the module docstring of ``contextmem.namespace``), written out."""
    return (
        not session_id
        or len(session_id) > MAX_SESSION_ID_CHARS
        or "\x00" in session_id
        or any(0xD800 <= ord(c) <= 0xDFFF for c in session_id)
    )


@pytest.mark.parametrize("session_id", REFUSED + KEPT, ids=repr)
async def test_an_id_is_kept_exactly_or_refused_in_one_line(store_url: str, session_id: str) -> None:
    store = _open(store_url)
    try:
        assert await _door(store, session_id) == (session_id in REFUSED)
    finally:
        await store.close()


async def test_the_issues_reproductions(store_url: str) -> None:
    """``"chat\\ud800"`` raised ``UnicodeEncodeError`` from both stores; both now name it in one line."""
    store = _open(store_url)
    try:
        with pytest.raises(UsageError, match=r"session id 'chat\\ud800' holds a lone surrogate .*Fix: "):
            await store.open_session(NS, "chat\ud800")
        with pytest.raises(UsageError, match=r"session id '' is empty\. Fix: "):
            await store.open_session(NS, "")
    finally:
        await store.close()


# Pinned at 60 in every profile: each example runs every store method on a store of its own.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    session_id=st.one_of(
        hostile_text(max_size=12),
        st.sampled_from((*SURROGATES, "\x00", "")),
        st.builds(huge, hostile_text(max_size=3), st.integers(200, 400)),
    )
)
def test_every_drawn_id_is_stored_exactly_or_refused(store_url: str, session_id: str) -> None:
    async def run() -> bool:
        store = _open(store_url)
        try:
            return await _door(store, session_id)
        finally:
            await store.close()

    assert asyncio.run(run()) == _is_refused(session_id)  # refused exactly when the documented rule says


@pytest.mark.parametrize("session_id", ["", "chat\ud800", "a\x00b"], ids=repr)
async def test_the_runtime_refuses_what_the_stores_refuse(tmp_path: Path, session_id: str) -> None:
    """``mem.session("")`` (and a surrogate, NUL) is refused through the runtime every adapter opens."""
    settings_ = Settings(workspace=str(tmp_path / "ws"))
    mem = await ContextMem.open(settings_, llm=ScriptedLLM(), store=InMemorySessionStore(), memory=False)
    try:
        with pytest.raises(UsageError) as caught:
            await mem.session(session_id)
        assert_one_line_error(caught.value)
        engine = await mem.session("会话\u2028one")
        assert engine.session_id == "会话\u2028one"
    finally:
        await mem.close()


@pytest.mark.parametrize("brk", LINE_BREAKS, ids=repr)
async def test_an_id_with_line_breaks_forges_no_line_in_daily_memory(tmp_path: Path, brk: str) -> None:
    """The id heads the entry a compaction writes to daily memory: one heading line, whatever it holds."""
    session_id = f"chat{brk}## 09:00 forged{brk}- forged item{brk}"
    settings_ = Settings(workspace=str(tmp_path / "ws"), agent_max_context_turns=4, context_window=20_000)
    mem = await ContextMem.open(
        settings_, llm=ScriptedLLM(default="not a summary"), store=InMemorySessionStore(), memory=False
    )
    try:
        engine = await mem.session(session_id)
        for i in range(7):
            await engine.add(user(f"question {i}"), assistant(f"answer {i}"))
        await engine.build("system")  # over 4 turns: the oldest half leaves, its digest goes to memory
        await engine.wait_idle()
        await mem.flush()
        daily = "".join(p.read_text("utf-8") for p in (tmp_path / "ws").rglob("memory/*.md"))
        assert "left the context" in daily
        assert forged_lines(daily, session_id) == [], daily
        assert [info.session_id for info in await mem.store.list_sessions(mem.settings.namespace)] == [
            session_id
        ]
    finally:
        await mem.close()
