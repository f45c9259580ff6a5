"""Appending to a session other processes may write too (issue 12, point 7): one writer at a time.

Every append is conditional (``expected_next_seq``): it lands only on the exact tail it was validated
against. When another writer went first (:class:`~contextmem.errors.SessionConflictError`), the session
is reloaded and the new messages are validated against the *fresh* tail. Invariants:

* **No orphan is ever stored.** The messages are appended only after ``validate_history(tail + new)``
  passed on the very tail the store then confirms.
* **Another writer's open tool calls are waited for, for a bounded time.** If the fresh tail ends with
  tool calls made by another writer (not by this engine) that still lack results, and the new messages
  would otherwise be valid, the append waits with exponential backoff (10 ms doubling to 0.5 s, jittered)
  and retries, for at most ``busy_timeout`` seconds (:data:`BUSY_TIMEOUT`, 30 s by default), then raises
  :class:`~contextmem.errors.SessionBusyError`. Nothing is written.
* **A stale view never produces a false error.** A validation failure against the engine's view is
  re-checked once against a fresh load before :class:`~contextmem.errors.HistoryError` is raised.
* **The engine is never left stuck.** Every path reloads before it retries or raises, so the engine's
  view is the store's and the next call starts from it.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Sequence

from ..errors import HistoryError, SessionBusyError, SessionConflictError
from ..messages import AssistantMessage, Message, ToolMessage, validate_history
from ..store.base import SessionStore

__all__ = ["BACKOFF_FIRST", "BACKOFF_MAX", "BUSY_TIMEOUT", "View", "append_after_tail", "open_calls"]

BUSY_TIMEOUT = 30.0
BACKOFF_FIRST = 0.01
BACKOFF_MAX = 0.5

View = tuple[Sequence[Message], Sequence[int], int]
"""What the engine believes: the newest turn's messages, their seqs, and the session's next seq."""


def open_calls(tail: Sequence[Message]) -> tuple[int, list[str]] | None:
    """``(index, call ids)`` of the assistant message in ``tail`` whose tool calls still lack results at
    the end of ``tail``, or ``None`` when no call is open."""
    owner: int | None = None
    pending: dict[str, None] = {}
    for i, message in enumerate(tail):
        if isinstance(message, ToolMessage):
            pending.pop(message.tool_call_id, None)
            continue
        owner, pending = None, {}
        if isinstance(message, AssistantMessage) and message.tool_calls:
            owner, pending = i, dict.fromkeys(c.id for c in message.tool_calls)
    return (owner, list(pending)) if owner is not None and pending else None


def _waiting_on(view: View, messages: Sequence[Message], own: set[int]) -> list[str] | None:
    """The ids of another writer's open calls that alone stand in the way of ``messages``, else None."""
    tail, seqs, _ = view
    found = open_calls(tail)
    if found is None:
        return None
    owner, ids = found
    if seqs[owner] in own:
        return None  # our own call: the caller forgot its results, a HistoryError to report
    try:
        validate_history([*tail[:owner], *messages])
    except HistoryError:
        return None  # the messages are invalid whatever the other writer does
    return ids


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
) -> list[int]:
    """Append ``messages`` right after the tail ``view()`` shows; returns their seqs (see module docs).

    ``reload()`` refreshes what ``view()`` returns from the store; ``own`` holds the seqs this writer
    appended (its own open calls are never waited for). Raises :class:`HistoryError` when the messages
    break the history whatever others do, :class:`SessionBusyError` after ``busy_timeout`` seconds.
    """
    deadline: float | None = None
    delay = BACKOFF_FIRST
    fresh = False
    while True:
        current = view()
        tail, _, next_seq = current
        try:
            validate_history([*tail, *messages])
        except HistoryError:
            waiting = _waiting_on(current, messages, own)
            if waiting is None:
                if fresh:
                    raise
                await reload()
                fresh = True
                continue
            now = time.monotonic()
            if deadline is None:
                deadline = now + busy_timeout
            if now >= deadline:
                raise SessionBusyError(namespace, session_id, waiting, busy_timeout) from None
            await asyncio.sleep(min(delay, deadline - now) * random.uniform(0.5, 1.0))
            delay = min(delay * 2, BACKOFF_MAX)
            await reload()
            fresh = True
            continue
        try:
            return await store.append(namespace, session_id, messages, expected_next_seq=next_seq)
        except SessionConflictError:
            await reload()  # another writer went first: validate against its tail
            fresh = True
