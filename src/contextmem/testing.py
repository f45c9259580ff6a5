"""Fakes for tests: a scripted LLM (replies, tool calls, errors, delays, usage), an in-memory session store.

Fakes over mocks: these implement the real protocols, so code under test cannot tell them apart from a
provider except by what they were scripted to do.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import StoreError, UsageError
from .llm.base import BaseLLM, ChatResponse, ModelCall, StreamEvent, Usage
from .message_checks import check_message_text
from .messages import AssistantMessage, Message, ToolCall, ToolSpec, text_of
from .store.backend import SessionStoreBase, StateFilter, check_append, check_archive, not_live_error
from .store.base import SessionInfo, SessionState, StoredMessage

# and HashEmbedder, loaded on first use (it needs numpy, the memory extra)
__all__ = ["InMemoryDatabase", "InMemorySessionStore", "Reply", "Script", "ScriptedLLM"]


@dataclass(frozen=True, slots=True)
class Reply:
    """One scripted step: a reply, an error to raise, and/or a delay before answering."""

    text: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    reasoning: str | None = None
    error: BaseException | None = None
    delay: float = 0.0
    usage: Usage | None = None


Script = Reply | str | BaseException | Callable[[Sequence[Message]], "Reply | str | Awaitable[Reply | str]"]


@dataclass
class ScriptedLLM(BaseLLM):
    """An :class:`~contextmem.llm.base.LLM` that plays a script, one entry per call.

    Entries may be a string (a text reply), a :class:`Reply`, an exception (raised), or a function of
    the request's messages returning either — a plain or an ``async`` function, so a reply may itself
    come from another model or a search of what was sent. When the script runs out, ``default`` answers
    (or, if ``None``, a :class:`~contextmem.errors.UsageError` says the test made more calls than it
    scripted). Every request is kept in :attr:`requests` and every reply given in :attr:`replies`, so
    tests can assert on what was actually sent and said.
    """

    script: list[Script] = field(default_factory=list)
    default: Script | None = None
    name: str = "scripted"
    context_window: int | None = None  # set to act like a small local model
    requests: list[list[Message]] = field(default_factory=list)
    request_tools: list[list[ToolSpec]] = field(default_factory=list)
    request_max_tokens: list[int | None] = field(default_factory=list)
    replies: list[AssistantMessage] = field(default_factory=list)

    @classmethod
    def of(cls, *entries: Script, default: Script | None = None) -> ScriptedLLM:
        return cls(list(entries), default)

    def learn_window(self, context_window: int) -> None:
        """Told its window by an overflow, it states it from then on, as a server's adapter does."""
        self.context_window = context_window

    async def _next(self, messages: Sequence[Message]) -> Reply:
        entry: Script | Awaitable[Reply | str]
        if self.script:
            entry = self.script.pop(0)
        elif self.default is not None:
            entry = self.default
        else:
            raise UsageError(
                f"ScriptedLLM ran out of replies at call {len(self.requests)}. Fix: script more replies, "
                "or give it a default"
            )
        if callable(entry) and not isinstance(entry, BaseException):
            entry = entry(messages)
            if inspect.isawaitable(entry):
                entry = await entry
        if isinstance(entry, BaseException):
            return Reply(error=entry)
        if isinstance(entry, str):
            return Reply(text=entry)
        return entry

    def _request(self, call: ModelCall) -> dict[str, Any]:
        return {"call": call}

    async def _complete(self, request: dict[str, Any]) -> ChatResponse:
        call: ModelCall = request["call"]
        messages = call.messages
        self.requests.append(list(messages))
        self.request_tools.append(list(call.tools))
        self.request_max_tokens.append(call.max_tokens)
        step = await self._next(messages)
        if step.delay:
            await asyncio.sleep(step.delay)
        if step.error is not None:
            raise step.error
        message = AssistantMessage(step.text, reasoning=step.reasoning, tool_calls=step.tool_calls)
        usage = step.usage or Usage(
            prompt_tokens=sum(len(text_of(getattr(m, "content", None))) // 4 + 4 for m in messages),
            completion_tokens=len(step.text or "") // 4,
        )
        finish = "tool_calls" if step.tool_calls else "stop"
        self.replies.append(message)
        return ChatResponse(message, usage, finish, self.name)

    async def _stream(self, request: dict[str, Any]) -> AsyncGenerator[StreamEvent, None]:
        response = await self._complete(request)
        text = text_of(response.message.content)
        for chunk in _chunks(text, 8):
            yield StreamEvent("text", chunk)
        for call in response.message.tool_calls:
            yield StreamEvent("tool_call", call.name)
        yield StreamEvent("done", response=response)


def _chunks(text: str, size: int) -> Iterable[str]:
    return (text[i : i + size] for i in range(0, len(text), size))


@dataclass
class _MemSession:
    created_at: float
    updated_at: float
    original: dict[int, Message] = field(default_factory=dict)
    current: dict[int, Message] = field(default_factory=dict)
    created: dict[int, float] = field(default_factory=dict)
    archived: set[int] = field(default_factory=set)
    closures: set[int] = field(default_factory=set)  # seqs appended with lease_closure=True
    offloads: dict[str, int] = field(default_factory=dict)  # path: the seq whose original it holds
    summary: str | None = None
    meta: str | None = None
    version: int = 0


@dataclass
class InMemoryDatabase:
    """The sessions and locks that every :class:`InMemorySessionStore` opened on it shares.

    Two stores on one database are two connections to it: each sees the other's writes and waits for the
    other's locks, as two stores on one SQLite file do (within one process and one event loop).
    """

    sessions: dict[tuple[str, str], _MemSession] = field(default_factory=dict)
    locks: dict[tuple[str, str], asyncio.Lock] = field(default_factory=dict)
    last_version: int = 0  # the versions of every session are drawn from this counter

    def touched(self, session: _MemSession, now: float) -> None:
        """A write to ``session``: its ``updated_at`` and a new version."""
        self.last_version += 1
        session.version = self.last_version
        session.updated_at = now


class InMemorySessionStore(SessionStoreBase[Message]):
    """A :class:`~contextmem.store.base.SessionStore` in this process's memory: the contract, no durability.

    For tests and single-process experiments. The contract suite (``tests/test_store_contract.py``) runs
    on it as on SQLite and PostgreSQL, but for what only a database can show (damage done behind its
    back, a lock held by another process, a URL). The public methods (namespace checks, argument
    validation) are the durable stores' own (:mod:`contextmem.store.backend`); only the storage below
    them is a dict, in ``database`` (a new, private one by default).
    """

    shared = False  # one process's memory

    def __init__(
        self, clock: Callable[[], float] = time.time, *, database: InMemoryDatabase | None = None
    ) -> None:
        self._clock = clock
        self._database = InMemoryDatabase() if database is None else database
        self._closed = False

    @property
    def _db(self) -> InMemoryDatabase:
        if self._closed:
            raise StoreError("the in-memory session store is closed. Fix: open a new one on its database.")
        return self._database

    def reopen(self) -> InMemorySessionStore:
        return InMemorySessionStore(self._clock, database=self._database)

    def _get(self, namespace: str, session_id: str) -> _MemSession:
        """The session, created empty if it does not exist."""
        sessions = self._db.sessions
        key = (namespace, session_id)
        if key not in sessions:
            now = self._clock()
            sessions[key] = _MemSession(created_at=now, updated_at=now)
            self._db.touched(sessions[key], now)
        return sessions[key]

    def _find(self, namespace: str, session_id: str) -> _MemSession | None:
        return self._db.sessions.get((namespace, session_id))

    def _tail(self, namespace: str, session_id: str) -> tuple[int, set[int]]:
        """The session's ``next_seq`` and live seqs, without creating it (a missing one is at 1)."""
        s = self._find(namespace, session_id)
        return (1, set()) if s is None else (len(s.original) + 1, set(s.original) - s.archived)

    def _encode(self, message: Message) -> Message:
        # What the durable stores could not read back, they refuse: so does this one.
        check_message_text(message)
        return message

    async def _load_session(self, namespace: str, session_id: str) -> SessionState:
        s = self._get(namespace, session_id)
        live = tuple(
            StoredMessage(seq, s.current.get(seq, msg), "live", s.created[seq], seq in s.closures)
            for seq, msg in s.original.items()
            if seq not in s.archived
        )
        return SessionState(
            namespace, session_id, live, s.summary, s.meta, len(s.original) + 1, s.updated_at, s.version
        )

    async def _session_version(self, namespace: str, session_id: str) -> int | None:
        s = self._find(namespace, session_id)
        return None if s is None else s.version

    async def _append_rows(
        self,
        namespace: str,
        session_id: str,
        encoded: list[Message],
        expected_next_seq: int | None,
        expected_live: list[int],
        *,
        lease_closure: bool,
    ) -> list[int]:
        next_seq, live = self._tail(namespace, session_id)
        check_append(
            namespace,
            session_id,
            expected_next_seq=expected_next_seq,
            next_seq=next_seq,
            expected_live=expected_live,
            live=live,
        )
        s = self._get(namespace, session_id)
        seqs = []
        for m in encoded:
            seq = len(s.original) + 1
            s.original[seq] = m
            s.created[seq] = self._clock()
            if lease_closure:
                s.closures.add(seq)
            seqs.append(seq)
        self._db.touched(s, self._clock())
        return seqs

    async def _replace_row(self, namespace: str, session_id: str, seq: int, encoded: Message) -> None:
        s = self._find(namespace, session_id)
        if s is None or seq not in s.original or seq in s.archived:
            state = None if s is None or seq not in s.original else "archived"
            raise not_live_error(namespace, session_id, seq, state)
        s.current[seq] = encoded
        self._db.touched(s, self._clock())

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
        next_seq, live = self._tail(namespace, session_id)
        check_archive(
            namespace, session_id, seqs, next_seq=next_seq, live=live, expected_next_seq=expected_next_seq
        )
        s = self._get(namespace, session_id)
        s.archived.update(seqs)
        for q in seqs:
            s.current.pop(q, None)
        await self._write_meta(namespace, session_id, summary, meta)

    async def _write_meta(
        self, namespace: str, session_id: str, summary: str | None, meta: str | None
    ) -> None:
        s = self._get(namespace, session_id)
        if summary is not None:
            s.summary = summary
        if meta is not None:
            s.meta = meta
        self._db.touched(s, self._clock())

    async def _record_offload(self, namespace: str, session_id: str, seq: int, path: str) -> None:
        s = self._find(namespace, session_id)
        if s is None or seq not in s.original:
            raise not_live_error(namespace, session_id, seq, None)
        for (ns, _), other in self._db.sessions.items():
            if ns == namespace:  # one record per path in the namespace: the newest names it
                other.offloads.pop(path, None)
        s.offloads[path] = seq
        self._db.touched(s, self._clock())

    async def _offloaded_row(self, namespace: str, path: str) -> Message | None:
        for (ns, _), s in self._db.sessions.items():
            if ns == namespace and path in s.offloads:
                return s.original[s.offloads[path]]
        return None

    async def _message_rows(self, namespace: str, session_id: str, state: StateFilter) -> list[StoredMessage]:
        s = self._find(namespace, session_id)
        if s is None:
            return []
        out = []
        for seq, msg in s.original.items():
            st: Literal["live", "archived"] = "archived" if seq in s.archived else "live"
            if state in ("all", st):
                out.append(StoredMessage(seq, msg, st, s.created[seq], seq in s.closures))
        return out

    @asynccontextmanager
    async def _session_lock(self, namespace: str, session_id: str) -> AsyncIterator[None]:
        async with self._db.locks.setdefault((namespace, session_id), asyncio.Lock()):
            yield

    async def _session_infos(self, namespace: str) -> list[SessionInfo]:
        infos = [
            SessionInfo(
                ns, sid, len(s.original) - len(s.archived), len(s.archived), s.created_at, s.updated_at
            )
            for (ns, sid), s in self._db.sessions.items()
            if ns == namespace
        ]
        return sorted(infos, key=lambda i: (-i.updated_at, i.session_id))  # newest first, as SQL orders them

    async def _delete_session(self, namespace: str, session_id: str) -> None:
        self._db.sessions.pop((namespace, session_id), None)

    async def _delete_idle(self, cutoff: float, namespace: str | None) -> list[tuple[str, str]]:
        sessions = self._db.sessions
        gone = sorted(
            key for key, s in sessions.items() if s.updated_at < cutoff and namespace in (None, key[0])
        )
        for key in gone:
            del sessions[key]
        return gone

    async def integrity_check(self) -> list[str]:
        problems = []
        for (ns, sid), s in self._db.sessions.items():
            if sorted(s.original) != list(range(1, len(s.original) + 1)):
                problems.append(f"session ({ns!r}, {sid!r}): seqs are not contiguous")
        return problems

    async def close(self) -> None:
        self._closed = True


def __getattr__(name: str) -> object:
    # HashEmbedder needs numpy (the ``memory`` extra): imported only when asked for.
    if name == "HashEmbedder":
        from .memory.embedders import HashEmbedder

        return HashEmbedder
    raise AttributeError(name)
