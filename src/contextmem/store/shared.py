"""The session store algorithm, once: every backend shares it and keeps only its storage code.

:class:`SessionStoreBase` implements the public :class:`~contextmem.store.base.SessionStore` methods:
the namespace check at every entry (before any I/O), the empty-append shortcut, encoding each message
once (so a message that could not be read back is refused before anything is written), de-duplicating
and sorting the seqs to archive, validating the ``state`` filter and computing ``cleanup_idle``'s cutoff.
It then calls one storage hook per method (``_load_session``, ``_append_rows``, …), which a backend
implements in one transaction of its own; the hooks receive validated arguments and already-encoded
messages. :class:`EncodedSessionStore` stores messages as :func:`~contextmem.store.common.encode_message`
text, as both durable stores do.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Generic, Literal, Self, TypeVar

from ..errors import StoreError
from ..messages import Message
from ..namespace import check_namespace
from .base import SessionInfo, SessionState, StoredMessage
from .common import encode_message

__all__ = ["EncodedSessionStore", "SessionStoreBase", "StateFilter"]

StateFilter = Literal["live", "archived", "all"]
E = TypeVar("E")  # a message as the backend stores it


class SessionStoreBase(ABC, Generic[E]):
    """The :class:`~contextmem.store.base.SessionStore` methods over per-backend storage hooks."""

    _clock: Callable[[], float]

    # -- storage hooks (namespace already checked) -----------------------------------------------

    @abstractmethod
    def _encode(self, message: Message) -> E:
        """The stored form of ``message``; raises if it could not be read back."""

    @abstractmethod
    async def _load_session(self, namespace: str, session_id: str) -> SessionState: ...

    @abstractmethod
    async def _append_rows(
        self, namespace: str, session_id: str, encoded: list[E], expected_next_seq: int | None
    ) -> list[int]:
        """Append at least one message; compare ``expected_next_seq`` in the same transaction."""

    @abstractmethod
    async def _replace_row(self, namespace: str, session_id: str, seq: int, encoded: E) -> None: ...

    @abstractmethod
    async def _archive_rows(
        self, namespace: str, session_id: str, seqs: list[int], summary: str | None, meta: str | None
    ) -> None:
        """Archive ``seqs`` (distinct, ascending) and set summary and meta, atomically."""

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
    async def _session_infos(self, namespace: str) -> list[SessionInfo]: ...

    @abstractmethod
    async def _delete_session(self, namespace: str, session_id: str) -> None: ...

    @abstractmethod
    async def _delete_idle(self, cutoff: float, namespace: str | None) -> list[tuple[str, str]]:
        """Delete sessions updated before ``cutoff`` (of ``namespace``; ``None``: all); sorted pairs."""

    # -- SessionStore ----------------------------------------------------------------------------

    async def open_session(self, namespace: str, session_id: str) -> SessionState:
        check_namespace(namespace)
        return await self._load_session(namespace, session_id)

    async def append(
        self,
        namespace: str,
        session_id: str,
        messages: Sequence[Message],
        *,
        expected_next_seq: int | None = None,
    ) -> list[int]:
        check_namespace(namespace)
        if not messages:
            return []
        encoded = [self._encode(m) for m in messages]
        return await self._append_rows(namespace, session_id, encoded, expected_next_seq)

    async def replace(self, namespace: str, session_id: str, seq: int, message: Message) -> None:
        check_namespace(namespace)
        await self._replace_row(namespace, session_id, seq, self._encode(message))

    async def archive(
        self,
        namespace: str,
        session_id: str,
        seqs: Sequence[int],
        *,
        summary: str | None = None,
        meta: str | None = None,
    ) -> None:
        check_namespace(namespace)
        await self._archive_rows(namespace, session_id, sorted(set(seqs)), summary, meta)

    async def set_meta(
        self, namespace: str, session_id: str, *, summary: str | None = None, meta: str | None = None
    ) -> None:
        check_namespace(namespace)
        await self._write_meta(namespace, session_id, summary, meta)

    async def messages(
        self, namespace: str, session_id: str, *, state: StateFilter = "all"
    ) -> list[StoredMessage]:
        check_namespace(namespace)
        if state not in ("live", "archived", "all"):
            raise StoreError(f"state={state!r} is not a message state. Fix: use 'live', 'archived' or 'all'.")
        return await self._message_rows(namespace, session_id, state)

    def lock(self, namespace: str, session_id: str) -> AbstractAsyncContextManager[None]:
        """Exclusive compaction lock of one session (``async with``); the backend says how far it reaches."""
        check_namespace(namespace)
        return self._session_lock(namespace, session_id)

    async def list_sessions(self, namespace: str) -> list[SessionInfo]:
        check_namespace(namespace)
        return await self._session_infos(namespace)

    async def delete_session(self, namespace: str, session_id: str) -> None:
        check_namespace(namespace)
        await self._delete_session(namespace, session_id)

    async def cleanup_idle(
        self, older_than_seconds: float, *, namespace: str | None, now: float | None = None
    ) -> list[tuple[str, str]]:
        if namespace is not None:  # None: every namespace, the operator's explicit choice
            check_namespace(namespace)
        cutoff = (self._clock() if now is None else now) - older_than_seconds
        return await self._delete_idle(cutoff, namespace)


class EncodedSessionStore(SessionStoreBase[str]):
    """A durable store: messages kept as :func:`~contextmem.store.common.encode_message` JSON text.

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
