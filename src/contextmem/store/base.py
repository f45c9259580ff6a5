"""The session store protocol (S1, S2, C12).

A store keeps, per ``(namespace, session_id)``:

* every message ever appended, in its **original** form, under a per-session sequence number ``seq``
  (1, 2, 3, … never reused) — nothing is ever deleted while the session exists;
* which of them are **live** (in the context) and which are **archived** (left the context);
* for live messages, the **current** form, which may differ from the original (a tool result cut to
  head + tail after its full text was offloaded);
* the running summary and a small ``meta`` document (calibration, counters), both opaque JSON text.

The invariant every implementation keeps, in one transaction per call: a message is always live or
archived, never neither. :meth:`SessionStore.archive` moves messages and sets the new summary
atomically, so a crash leaves either the old state or the new one.

Tenancy and concurrency, also part of the contract:

* **Namespaces are validated at every method entry** with :func:`contextmem.namespace.check_namespace`
  (a :class:`~contextmem.errors.ConfigError` before any I/O), even though settings, the CLI and the MCP
  router validate them first: a store never stores, matches or deletes under a name outside the grammar.
* **Session ids too**: every method taking one refuses, with
  :func:`contextmem.namespace.check_session_id` (a :class:`~contextmem.errors.UsageError` before any
  I/O), an id it could not keep exactly (empty, NUL, a lone surrogate, over 256 characters); any other
  id is stored, matched and listed back exactly.
* **No method crosses namespaces** except :meth:`SessionStore.cleanup_idle` with ``namespace=None``,
  which the caller must spell out: the argument has no default.
* **Conditional appends.** ``append(..., expected_next_seq=n)`` writes only if the session's
  ``next_seq`` is ``n`` when the write happens (a session that does not exist yet has ``next_seq`` 1),
  compared and written in one transaction. Otherwise it raises
  :class:`~contextmem.errors.SessionConflictError` and writes nothing (not even an empty session). Of
  several writers appending with the same expectation, exactly one succeeds; the others reload and
  retry. This is how concurrent writers keep a tool call and its result together.
* **The tail a writer validated against**. ``append(..., expected_live=[seqs])`` also requires
  each of those seqs to be live at write time (same transaction), else ``SessionConflictError``: a
  compactor on another host may have archived that tail without moving ``next_seq``.
* **Conditional archives.** ``archive(..., expected_next_seq=n)`` archives only if ``next_seq`` is still
  ``n`` and every seq to archive is still live, else ``SessionConflictError`` and nothing changes (no
  summary or meta either): a compaction planned on a snapshot never lands on a session that moved.
  Archives and appends serialise on the session (PostgreSQL: its row lock; SQLite: ``BEGIN IMMEDIATE``).
* **Offloaded tool results are in the store too.** :meth:`SessionStore.record_offload` notes which
  message's original a workspace-relative path holds, so :meth:`SessionStore.offloaded` gives it back
  on a host whose disk never had the file. Records die with their session.
* **Versions.** Every write changes the session's stored version (:attr:`SessionState.version`), in its
  own transaction; a version is never reused, also by a session deleted and created again under the same
  id. :meth:`SessionStore.open_session` hands back the state it loaded last (of that namespace and
  session only) while the stored version is still that state's, checked by one small read; else it reads
  the session. So an unchanged session of megabytes is not read and decoded again on every open, and a
  change made on any host is seen by the next open (:mod:`contextmem.store.state_cache`).
* :attr:`SessionStore.shared` says whether every host using the store reaches the same database (then
  its archived rows are the archive, and a host's local files are only a cache).

Implementations: :mod:`contextmem.store.sqlite` (default), :mod:`contextmem.store.postgres` and, for
tests, :class:`contextmem.testing.InMemorySessionStore`; each builds on :mod:`contextmem.store.backend`.
One contract test suite (``tests/test_store_contract.py``) runs against all three.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from ..messages import Message

__all__ = ["SessionInfo", "SessionState", "SessionStore", "StoredMessage"]


@dataclass(frozen=True, slots=True)
class StoredMessage:
    seq: int
    message: Message
    state: Literal["live", "archived"] = "live"
    created_at: float = 0.0  # epoch seconds, set by the store
    lease_closure: bool = False
    """The error result a writer appended to close another writer's tool call whose lease ran out
    (``append(..., lease_closure=True)``). Data kept beside the message, never read from its text."""


@dataclass(frozen=True, slots=True, weakref_slot=True)
class SessionState:
    """A session as loaded: its live messages (current form, ascending seq), summary and meta.

    A store may hand the same object to several loads (see ``open_session``); what was worked out from
    it (the counts of its messages) may be kept beside it by weak reference, for as long as it lives."""

    namespace: str
    session_id: str
    live: tuple[StoredMessage, ...]
    summary: str | None
    meta: str | None
    next_seq: int
    updated_at: float
    version: int = 0
    """The session's stored version as of this load: every write changes it, on any host, and a value is
    never given to another state of any session (:meth:`SessionStore.open_session` keeps a loaded state
    for as long as its version stays the stored one). 0: the store keeps none."""


@dataclass(frozen=True, slots=True)
class SessionInfo:
    namespace: str
    session_id: str
    live_count: int
    archived_count: int
    created_at: float
    updated_at: float


@runtime_checkable
class SessionStore(Protocol):
    """Durable session state. Every method is atomic; all are safe across processes."""

    shared: bool
    """The store is reachable from every host that uses it, so its archived rows are the archive
    (PostgreSQL: True; a SQLite file or an in-process store: False, they are one machine's)."""

    async def open_session(self, namespace: str, session_id: str) -> SessionState:
        """Load the session, creating it empty if it does not exist. An unchanged session (same stored
        version) may come back as the state this store loaded last, without its rows being read again."""
        ...

    async def append(
        self,
        namespace: str,
        session_id: str,
        messages: Sequence[Message],
        *,
        expected_next_seq: int | None = None,
        expected_live: Sequence[int] = (),
        lease_closure: bool = False,
    ) -> list[int]:
        """Append live messages; returns their seqs, consecutive and ascending.

        ``lease_closure``: the messages are the error results closing another writer's tool calls whose
        lease ran out; each is stored with that mark (:attr:`StoredMessage.lease_closure`).

        With ``expected_next_seq``, only if the session's ``next_seq`` equals it; with ``expected_live``,
        only if every one of those seqs is still live. Both are checked in the write's own transaction;
        otherwise :class:`~contextmem.errors.SessionConflictError` (its ``archived`` names the seqs that
        left) and nothing is written. An empty ``messages`` returns ``[]`` and touches nothing.
        """
        ...

    async def replace(self, namespace: str, session_id: str, seq: int, message: Message) -> None:
        """Set the current form of a live message (its original is kept)."""
        ...

    async def archive(
        self,
        namespace: str,
        session_id: str,
        seqs: Sequence[int],
        *,
        summary: str | None = None,
        meta: str | None = None,
        expected_next_seq: int | None = None,
    ) -> None:
        """Atomically mark ``seqs`` archived and, when given, set summary and meta.

        A seq that does not exist is a :class:`~contextmem.errors.MessageStateError`. With
        ``expected_next_seq``: only if the session's ``next_seq`` equals it and every seq in ``seqs`` is
        still live, else :class:`~contextmem.errors.SessionConflictError` and nothing changes. Without it,
        archiving an archived seq again is harmless.
        """
        ...

    async def set_meta(
        self, namespace: str, session_id: str, *, summary: str | None = None, meta: str | None = None
    ) -> None:
        """Set summary and/or meta (``None`` leaves a field unchanged)."""
        ...

    async def record_offload(self, namespace: str, session_id: str, seq: int, path: str) -> None:
        """Record that ``path`` (relative to the namespace's tree, e.g. ``tool_results/x.txt``) holds the
        full text of message ``seq``, i.e. its stored original. Idempotent; a path recorded again (in any
        session of the namespace) now names the new message. An unknown seq is a
        :class:`~contextmem.errors.MessageStateError`; an absolute path or one with ``..`` a
        :class:`~contextmem.errors.PathEscapeError`."""
        ...

    async def offloaded(self, namespace: str, path: str) -> Message | None:
        """The original form of the message ``path`` was recorded for in ``namespace``; ``None`` when no
        session of ``namespace`` recorded it (another namespace's records are never seen)."""
        ...

    async def messages(
        self, namespace: str, session_id: str, *, state: Literal["live", "archived", "all"] = "all"
    ) -> list[StoredMessage]:
        """Messages in their original form, ascending seq, filtered by state."""
        ...

    def lock(self, namespace: str, session_id: str) -> AbstractAsyncContextManager[None]:
        """Exclusive compaction lock for one session, across processes (and hosts, for Postgres)."""
        ...

    async def list_sessions(self, namespace: str) -> list[SessionInfo]: ...

    async def delete_session(self, namespace: str, session_id: str) -> None:
        """Delete the session: its messages, summary, meta and offload records."""
        ...

    async def cleanup_idle(
        self, older_than_seconds: float, *, namespace: str | None, now: float | None = None
    ) -> list[tuple[str, str]]:
        """Delete sessions of ``namespace`` idle longer than ``older_than_seconds``.

        ``namespace=None`` means every namespace: an operator's explicit choice, never a default.
        Returns the removed ``(namespace, session_id)`` pairs, sorted. ``now`` defaults to the store's clock.
        """
        ...

    async def integrity_check(self) -> list[str]:
        """Problems found (empty when consistent): storage-level checks plus the live/archived invariant."""
        ...

    async def close(self) -> None: ...
