"""The loaded sessions a store keeps (contextmem.store.state_cache): bounded by bytes, keyed by namespace.

How a store uses it (versions, writes on other connections) is in the contract suite,
tests/test_store_contract.py.
"""

from __future__ import annotations

import asyncio

from hypothesis import assume, given
from hypothesis import strategies as st

from contextmem.errors import UsageError
from contextmem.messages import tool_result, user
from contextmem.namespace import check_session_id
from contextmem.store.base import SessionState, StoredMessage
from contextmem.store.state_cache import SessionStateCache, state_bytes
from contextmem.testing import InMemorySessionStore

from .security.doors import hostile_text


def state(namespace: str, session_id: str, text: str, version: int = 1) -> SessionState:
    live = (StoredMessage(1, user("hi")), StoredMessage(2, tool_result("c1", text)))
    return SessionState(namespace, session_id, live, None, None, 3, 0.0, version)


def test_the_bound_is_the_bytes_of_the_texts() -> None:
    small, big = state("ns", "s", "x" * 10), state("ns", "s", "x" * 1_000_000)
    assert 1_000_000 < state_bytes(big) < 1_010_000
    assert state_bytes(small) < 4_000
    wide = state("ns", "s", "你" * 1_000_000)  # two bytes a character in memory
    assert state_bytes(wide) > 2_000_000


def test_the_least_recently_used_go_first_and_the_total_stays_under_the_limit() -> None:
    a, b, c = (state("ns", sid, "x" * 400_000) for sid in "abc")
    cache = SessionStateCache(limit=1_000_000)
    cache.put(a)
    cache.put(b)
    assert cache.get("ns", "a") is a  # a is now the most recently used
    cache.put(c)
    assert cache.get("ns", "b") is None
    assert (cache.get("ns", "a"), cache.get("ns", "c")) == (a, c)
    assert cache.bytes == state_bytes(a) + state_bytes(c) <= cache.limit


def test_a_state_over_the_limit_is_not_kept_and_replaces_nothing_it_should_not() -> None:
    cache = SessionStateCache(limit=100_000)
    old = state("ns", "s", "small")
    cache.put(old)
    cache.put(state("ns", "s", "x" * 200_000, version=2))  # too big: the old one of s goes too (stale)
    assert cache.get("ns", "s") is None
    assert (len(cache), cache.bytes) == (0, 0)


def test_states_are_kept_per_namespace_and_session() -> None:
    cache = SessionStateCache()
    alice, bob = state("alice", "s", "alice's"), state("bob", "s", "bob's")
    cache.put(alice)
    assert cache.get("bob", "s") is None
    cache.put(bob)
    assert (cache.get("alice", "s"), cache.get("bob", "s")) == (alice, bob)
    cache.drop("alice", "s")
    assert (cache.get("alice", "s"), cache.get("bob", "s")) == (None, bob)


@given(
    session_id=hostile_text(surrogates=False),
    texts=st.tuples(hostile_text(surrogates=False), hostile_text(surrogates=False)),
)
def test_any_session_id_of_any_namespace_gets_only_its_own_state_back(
    session_id: str, texts: tuple[str, str]
) -> None:
    """The door: session ids are free text (namespace.check_session_id), and a store keeps the sessions
    of every tenant of a server side by side. Whatever the id, a load through the store's cache gives
    back its own namespace's session, as stored now."""
    try:
        check_session_id(session_id)
    except UsageError:
        assume(False)

    async def run() -> None:
        store = InMemorySessionStore()
        for namespace, text in zip(("alice", "bob"), texts, strict=True):
            await store.append(namespace, session_id, [user(f"{namespace}: {text}")])
        for _ in range(2):  # the second round comes from the cache
            for namespace, text in zip(("alice", "bob"), texts, strict=True):
                got = await store.open_session(namespace, session_id)
                assert (got.namespace, got.session_id) == (namespace, session_id)
                assert [m.message for m in got.live] == [user(f"{namespace}: {text}")]
        await store.append("bob", session_id, [user("later")])
        assert len((await store.open_session("bob", session_id)).live) == 2
        assert len((await store.open_session("alice", session_id)).live) == 1

    asyncio.run(run())
