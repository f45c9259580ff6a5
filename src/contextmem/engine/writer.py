"""Appending to a session other processes may write too: one writer at a time.

Every append is conditional (``expected_next_seq``): it lands only on the exact tail it was validated
against. When another writer went first (:class:`~contextmem.errors.SessionConflictError`), the session
is reloaded and the new messages are validated against the *fresh* tail. Invariants:

* **No orphan is ever stored.** The messages are appended only after ``validate_history(tail + new)``
  passed on the very tail the store then confirms.
* **Another writer's open tool calls are waited for, for a bounded time.** If the fresh tail ends with
  tool calls made by another writer (not by this engine) that still lack results, and the new messages
  would otherwise be valid, the append waits with exponential backoff (10 ms doubling to 0.5 s, jittered)
  and retries, for at most ``busy_timeout`` seconds per call (:data:`BUSY_TIMEOUT`, 30 s by default), then
  raises :class:`~contextmem.errors.SessionBusyError`. Nothing is written.
* **An append lands only on the tail it was validated against.** Besides ``expected_next_seq`` it names
  the tail's seqs (``expected_live``): a compaction that archived part of that tail meanwhile (which does
  not move ``next_seq``) makes it a conflict, never an orphan.
* **A crashed writer cannot hold a session.** Another writer's open call carries a lease of
  ``lease.seconds`` from when the store took it. Once it ran out, the waiting writer closes the call with
  an error result per missing call id (:data:`LEASE_TEXT`), appended with the store's ``lease_closure``
  mark, and goes on. A result that comes after its call was closed is a
  :class:`~contextmem.errors.ToolCallExpiredError`.
* **A closure is known by its mark, never by its text.** Only the rows the store marked
  (:attr:`~contextmem.store.base.StoredMessage.lease_closure`) are closures: a tool's own result that
  begins with, or equals, :data:`LEASE_TEXT` is a result like any other.
* **A stale view never produces a false error.** A validation failure against the engine's view is
  re-checked once against a fresh load before :class:`~contextmem.errors.HistoryError` is raised.
* **The engine is never left stuck.** Every path reloads before it retries or raises, so the engine's
  view is the store's and the next call starts from it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass

from ..compaction.pairs import Group, open_group
from ..errors import HistoryError, SessionBusyError, SessionConflictError, ToolCallExpiredError
from ..messages import AssistantMessage, Message, ToolMessage, validate_history
from ..store.base import SessionStore

__all__ = ["BACKOFF_FIRST", "BACKOFF_MAX", "BUSY_TIMEOUT", "LEASE_TEXT", "Lease", "View", "append_after_tail"]

BUSY_TIMEOUT = 30.0
BACKOFF_FIRST = 0.01
BACKOFF_MAX = 0.5
LEASE_TEXT = (
    "error: no result. The writer that made this call stopped before returning it, and the call was "
    "closed after its lease of {seconds:g} s ran out."
)

View = tuple[Sequence[Message], Sequence[int], int]
"""What the engine believes: the newest turn's messages, their seqs, and the session's next seq."""


@dataclass(frozen=True, slots=True)
class Lease:
    """How long another writer's open call may hold the session: ``seconds`` from ``started(seq)`` (when the
    store took the call's message; ``None``: unknown, never expires) by ``clock`` (the store's clock)."""

    seconds: float
    started: Callable[[int], float | None]
    clock: Callable[[], float] = time.time

    def expired(self, seq: int) -> bool:
        began = self.started(seq)
        return began is not None and self.clock() - began >= self.seconds


def _blocking(view: View, messages: Sequence[Message], own: set[int]) -> Group | None:
    """Another writer's open group that alone stands in the way of ``messages``, else None."""
    tail, seqs, _ = view
    found = open_group(tail)
    if found is None or found.owner is None:
        return None
    if seqs[found.owner] in own:
        return None  # our own call: the caller forgot its results, a HistoryError to report
    try:
        validate_history([*tail[: found.owner], *messages])
    except HistoryError:
        return None  # the messages are invalid whatever the other writer does
    return found


def _closing(view: View, group: Group, seconds: float) -> list[Message]:
    """Error results closing ``group``'s unanswered calls (its lease ran out)."""
    owner = view[0][group.owner or 0]
    assert isinstance(owner, AssistantMessage)
    names = {c.id: c.name for c in owner.tool_calls}
    return [ToolMessage(i, LEASE_TEXT.format(seconds=seconds), name=names[i]) for i in group.missing]


def _expired_answers(closed: Collection[str], messages: Sequence[Message]) -> list[str]:
    """Call ids ``messages`` answer that were ``closed`` by a lease."""
    return [m.tool_call_id for m in messages if isinstance(m, ToolMessage) and m.tool_call_id in closed]


async def append_after_tail(
    store: SessionStore,
    namespace: str,
    session_id: str,
    messages: Sequence[Message],
    *,
    view: Callable[[], View],
    reload: Callable[[], Awaitable[None]],
    own: set[int],
    busy_timeout: float = BUSY_TIMEOUT,
    lease: Lease | None = None,
    on_closed: Callable[[list[str]], None] | None = None,
    closed: Callable[[], Collection[str]] = frozenset,
) -> list[int]:
    """Append ``messages`` right after the tail ``view()`` shows; returns their seqs (see module docs).

    ``reload()`` refreshes what ``view()`` returns from the store; ``own`` holds the seqs this writer
    appended (its own open calls are never waited for). ``lease`` bounds another writer's open call
    (``on_closed(ids)`` is told when one is closed); ``closed()`` gives the call ids the live history
    shows closed by a lease (the store's marks), where a late result's call is looked for. Raises
    :class:`HistoryError` when the messages break the history whatever others do,
    :class:`SessionBusyError` after ``busy_timeout`` seconds.
    """
    deadline: float | None = None
    waited_on = 0  # the seq of the call the deadline is for
    delay = BACKOFF_FIRST
    fresh = False
    while True:
        current = view()
        tail, seqs, next_seq = current
        batch: Sequence[Message] = messages
        try:
            validate_history([*tail, *messages])
        except HistoryError:
            blocking = _blocking(current, messages, own)
            if blocking is None:
                if fresh:
                    expired = _expired_answers(closed(), messages)
                    if expired and lease is not None:
                        raise ToolCallExpiredError(namespace, session_id, expired, lease.seconds) from None
                    raise
                await reload()
                fresh = True
                continue
            owner = seqs[blocking.owner] if blocking.owner is not None else 0
            if lease is None or not lease.expired(owner):
                now = time.monotonic()
                if deadline is None or waited_on != owner:  # each call gets the whole busy_timeout
                    deadline, waited_on = now + busy_timeout, owner
                if now >= deadline:
                    raise SessionBusyError(
                        namespace, session_id, list(blocking.missing), busy_timeout
                    ) from None
                await asyncio.sleep(min(delay, deadline - now) * random.uniform(0.5, 1.0))
                delay = min(delay * 2, BACKOFF_MAX)
                await reload()
                fresh = True
                continue
            batch = _closing(current, blocking, lease.seconds)  # then ours, on the tail that closes
        try:
            landed = await store.append(
                namespace,
                session_id,
                batch,
                expected_next_seq=next_seq,
                expected_live=seqs,
                lease_closure=batch is not messages,
            )
        except SessionConflictError:
            await reload()  # another writer went first: validate against its tail
            fresh = True
            continue
        if batch is messages:
            return landed
        if on_closed is not None:
            on_closed([m.tool_call_id for m in batch if isinstance(m, ToolMessage)])
        await reload()
        fresh = True
