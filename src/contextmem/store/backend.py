"""What every session store backend builds on: the store algorithm once, and the rules of a conflict.

A backend (SQLite, PostgreSQL, the in-memory store of :mod:`contextmem.testing`) keeps only its storage
code.

:class:`SessionStoreBase` implements the public :class:`~contextmem.store.base.SessionStore` methods:
the namespace check at every entry (before any I/O), the empty-append shortcut, encoding each message
once (so a message that could not be read back is refused before anything is written), de-duplicating
and sorting the seqs to archive, validating the ``state`` filter and offload paths, and computing
``cleanup_idle``'s cutoff. It then calls one storage hook per method (``_load_session``, ``_append_rows``,
…), which a backend implements in one transaction of its own; the hooks receive validated arguments and
already-encoded messages. Inside that transaction a backend reads the facts (``next_seq``, which seqs are
live) and hands them to :func:`check_append` / :func:`check_archive`, which decide, for every backend, when
a conditional write conflicts. :class:`EncodedSessionStore` stores messages as
:func:`~contextmem.store.codec.encode_message` text, as both durable stores do.

:meth:`SessionStoreBase.open_session` keeps the states it loads in a :class:`~.state_cache.SessionStateCache`
(bounded by bytes, keyed by namespace and session) and hands one back while ``_session_version`` (one
small read) finds the session at the version it was loaded at: the rows of an unchanged session are not
read, decoded and turned into messages again.

Session ids are checked at every entry too, by :func:`~contextmem.namespace.check_session_id`: an id is
stored and listed back exactly, or refused before any I/O.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Collection, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import PurePosixPath
from types import TracebackType
from typing import Generic, Literal, Self, TypeVar

from ..errors import MessageStateError, PathEscapeError, SessionConflictError, StoreError
from ..messages import Message
from ..namespace import check_namespace, check_session_id
from .base import SessionInfo, SessionState, SessionStore, StoredMessage
from .codec import encode_message
from .state_cache import SESSION_CACHE_BYTES, SessionStateCache

__all__ = [
    "EncodedSessionStore",
    "SessionStoreBase",
    "StateFilter",
    "check_append",
    "check_archive",
    "check_expected_seq",
    "not_live_error",
    "offload_key",
]

StateFilter = Literal["live", "archived", "all"]
E = TypeVar("E")  # a message as the backend stores it


def not_live_error(namespace: str, session_id: str, seq: int, state: str | None) -> MessageStateError:
    """The error for a seq that is not live: one that does not exist (``state`` ``None``) or is ``state``."""
    where = f"session ({namespace!r}, {session_id!r})"
    if state is None:
        return MessageStateError(
            f"seq {seq!r} does not exist in {where}. Fix: use a seq returned by append() for this session."
        )
    return MessageStateError(
        f"seq {seq!r} of {where} is {state}, not live. Fix: only live messages can be replaced or archived."
    )


def check_expected_seq(namespace: str, session_id: str, expected: int | None, actual: int) -> None:
    """Raise :class:`SessionConflictError` when a conditional append's expectation is not the session's."""
    if expected is not None and expected != actual:
        raise SessionConflictError(namespace, session_id, expected, actual)


def check_append(
    namespace: str,
    session_id: str,
    *,
    expected_next_seq: int | None,
    next_seq: int,
    expected_live: Sequence[int],
    live: Collection[int],
) -> None:
    """Raise :class:`SessionConflictError` unless a conditional append may land: ``next_seq`` (1 for a
    session that does not exist) is the expected one, and each of ``expected_live`` is among ``live``
    (the seqs of ``expected_live`` the backend found live, read in the write's transaction)."""
    check_expected_seq(namespace, session_id, expected_next_seq, next_seq)
    gone = [q for q in expected_live if q not in live]
    if gone:
        expected = next_seq if expected_next_seq is None else expected_next_seq
        raise SessionConflictError(namespace, session_id, expected, next_seq, archived=gone)


def check_archive(
    namespace: str,
    session_id: str,
    wanted: Sequence[int],
    *,
    next_seq: int,
    live: Collection[int],
    expected_next_seq: int | None,
) -> None:
    """Raise unless ``wanted`` may be archived: every seq must exist (else ``MessageStateError``, the
    caller's mistake); with ``expected_next_seq``, ``next_seq`` must equal it and every seq be among
    ``live`` (else ``SessionConflictError``: the session moved since the plan was made)."""
    check_expected_seq(namespace, session_id, expected_next_seq, next_seq)
    unknown = [q for q in wanted if not 1 <= q < next_seq]
    if unknown:
        raise not_live_error(namespace, session_id, unknown[0], None)
    if expected_next_seq is not None:
        gone = [q for q in wanted if q not in live]
        if gone:
            raise SessionConflictError(namespace, session_id, expected_next_seq, next_seq, archived=gone)


def offload_key(path: str) -> str | None:
    """The key an offload path is recorded under (``./a//b`` is ``a/b``); ``None`` if it leaves the tree."""
    key = PurePosixPath(path).as_posix()
    if key in ("", ".") or key.startswith("/") or ".." in PurePosixPath(key).parts:
        return None
    return key


class SessionStoreBase(ABC, Generic[E]):
    """The :class:`~contextmem.store.base.SessionStore` methods over per-backend storage hooks."""

    _clock: Callable[[], float]
    shared: bool = False
    """Whether every host using the store reaches the same data (see ``SessionStore.shared``)."""
    session_cache_bytes: int = SESSION_CACHE_BYTES
    """How much of the sessions it loaded a store keeps for their next open (bytes of text; 0: none)."""
    _states: SessionStateCache | None = None

    # -- storage hooks (namespace already checked) -----------------------------------------------

    @abstractmethod
    def _encode(self, message: Message) -> E:
        """The stored form of ``message``; raises if it could not be read back."""

    @abstractmethod
    async def _load_session(self, namespace: str, session_id: str) -> SessionState: ...

    async def _session_version(self, namespace: str, session_id: str) -> int | None:
        """The session's stored version (:attr:`SessionState.version`), read without its messages;
        ``None`` when it does not exist, or when the backend keeps no versions (then nothing is cached)."""
        return None

    @abstractmethod
    async def _append_rows(
        self,
        namespace: str,
        session_id: str,
        encoded: list[E],
        expected_next_seq: int | None,
        expected_live: list[int],
        *,
        lease_closure: bool,
    ) -> list[int]:
        """Append at least one message, each marked ``lease_closure``; :func:`check_append` in the same
        transaction."""

    @abstractmethod
    async def _replace_row(self, namespace: str, session_id: str, seq: int, encoded: E) -> None: ...

    @abstractmethod
    async def _archive_rows(
        self,
        namespace: str,
        session_id: str,
        seqs: list[int],
        summary: str | None,
        meta: str | None,
        *,
        expected_next_seq: int | None,
    ) -> None:
        """:func:`check_archive`, then archive ``seqs`` (distinct, ascending) and set summary and meta,
        atomically."""

    @abstractmethod
    async def _record_offload(self, namespace: str, session_id: str, seq: int, path: str) -> None:
        """Upsert the record of ``path`` (a valid key) for message ``seq``, which must exist."""

    @abstractmethod
    async def _offloaded_row(self, namespace: str, path: str) -> Message | None:
        """The original of the message most recently recorded for ``path`` in ``namespace``."""

    @abstractmethod
    async def _write_meta(
        self, namespace: str, session_id: str, summary: str | None, meta: str | None
    ) -> None: ...

    @abstractmethod
    async def _message_rows(
        self, namespace: str, session_id: str, state: StateFilter
    ) -> list[StoredMessage]: ...

    @abstractmethod
    def _session_lock(self, namespace: str, session_id: str) -> AbstractAsyncContextManager[None]: ...

    @abstractmethod
    def reopen(self) -> SessionStore:
        """A new store on the same data with the same options, for use on another event loop (a store's
        connections belong to the loop that opened them). Nothing is opened until its first call; the
        caller closes it."""

    @abstractmethod
    async def _session_infos(self, namespace: str) -> list[SessionInfo]: ...

    @abstractmethod
    async def _delete_session(self, namespace: str, session_id: str) -> None: ...

    @abstractmethod
    async def _delete_idle(self, cutoff: float, namespace: str | None) -> list[tuple[str, str]]:
        """Delete sessions updated before ``cutoff`` (of ``namespace``; ``None``: all); sorted pairs."""

    # -- SessionStore ----------------------------------------------------------------------------

    @property
    def session_cache(self) -> SessionStateCache:
        """The states :meth:`open_session` keeps (created on first use, ``session_cache_bytes`` large)."""
        if self._states is None:
            self._states = SessionStateCache(self.session_cache_bytes)
        return self._states

    async def open_session(self, namespace: str, session_id: str) -> SessionState:
        check_namespace(namespace)
        check_session_id(session_id)
        kept = self.session_cache.get(namespace, session_id)
        if kept is not None and await self._session_version(namespace, session_id) == kept.version:
            return kept
        state = await self._load_session(namespace, session_id)
        if state.version:
            self.session_cache.put(state)
        else:
            self.session_cache.drop(namespace, session_id)
        return state

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
        check_namespace(namespace)
        check_session_id(session_id)
        if not messages:
            return []
        encoded = [self._encode(m) for m in messages]
        live = sorted(set(expected_live))
        return await self._append_rows(
            namespace, session_id, encoded, expected_next_seq, live, lease_closure=lease_closure is True
        )

    async def replace(self, namespace: str, session_id: str, seq: int, message: Message) -> None:
        check_namespace(namespace)
        check_session_id(session_id)
        await self._replace_row(namespace, session_id, seq, self._encode(message))

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
        check_namespace(namespace)
        check_session_id(session_id)
        await self._archive_rows(
            namespace, session_id, sorted(set(seqs)), summary, meta, expected_next_seq=expected_next_seq
        )

    async def set_meta(
        self, namespace: str, session_id: str, *, summary: str | None = None, meta: str | None = None
    ) -> None:
        check_namespace(namespace)
        check_session_id(session_id)
        await self._write_meta(namespace, session_id, summary, meta)

    async def record_offload(self, namespace: str, session_id: str, seq: int, path: str) -> None:
        check_namespace(namespace)
        check_session_id(session_id)
        key = offload_key(path)
        if key is None:
            raise PathEscapeError(
                f"offload path {path!r} leaves the namespace's tree. "
                "Fix: record the path relative to it, e.g. 'tool_results/result.txt'."
            )
        await self._record_offload(namespace, session_id, seq, key)

    async def offloaded(self, namespace: str, path: str) -> Message | None:
        check_namespace(namespace)
        key = offload_key(path)
        return None if key is None else await self._offloaded_row(namespace, key)

    async def messages(
        self, namespace: str, session_id: str, *, state: StateFilter = "all"
    ) -> list[StoredMessage]:
        check_namespace(namespace)
        check_session_id(session_id)
        if state not in ("live", "archived", "all"):
            raise StoreError(f"state={state!r} is not a message state. Fix: use 'live', 'archived' or 'all'.")
        return await self._message_rows(namespace, session_id, state)

    def lock(self, namespace: str, session_id: str) -> AbstractAsyncContextManager[None]:
        """Exclusive compaction lock of one session (``async with``); the backend says how far it reaches."""
        check_namespace(namespace)
        check_session_id(session_id)
        return self._session_lock(namespace, session_id)

    async def list_sessions(self, namespace: str) -> list[SessionInfo]:
        check_namespace(namespace)
        return await self._session_infos(namespace)

    async def delete_session(self, namespace: str, session_id: str) -> None:
        check_namespace(namespace)
        check_session_id(session_id)
        self.session_cache.drop(namespace, session_id)
        await self._delete_session(namespace, session_id)

    async def cleanup_idle(
        self, older_than_seconds: float, *, namespace: str | None, now: float | None = None
    ) -> list[tuple[str, str]]:
        if namespace is not None:  # None: every namespace, the operator's explicit choice
            check_namespace(namespace)
        cutoff = (self._clock() if now is None else now) - older_than_seconds
        removed = await self._delete_idle(cutoff, namespace)
        for ns, sid in removed:
            self.session_cache.drop(ns, sid)
        return removed


class EncodedSessionStore(SessionStoreBase[str]):
    """A durable store: messages kept as :func:`~contextmem.store.codec.encode_message` JSON text.

    ``async with store:`` closes it on the way out.
    """

    @abstractmethod
    async def close(self) -> None: ...

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _encode(self, message: Message) -> str:
        return encode_message(message)
