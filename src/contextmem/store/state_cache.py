"""Loaded sessions kept for the next load, while the store says they have not changed.

Every process that opens a stored session reads and decodes all of its live messages: an MCP server
does so on each ``context_stats``, and a session of three 9 MB tool results is 27 MB read from the
database, parsed and turned into messages every time. :class:`SessionStateCache` keeps the last
:class:`~contextmem.store.base.SessionState` of each session it was given, and
:meth:`~contextmem.store.backend.SessionStoreBase.open_session` hands it back only when the session's
stored :attr:`~contextmem.store.base.SessionState.version` (one cheap read, ``_session_version``) is the
one it was loaded at: every write changes the version, on any host, so a kept state is never stale.

* **Bounded by bytes**: the memory the kept states' texts hold (``sys.getsizeof`` of each string:
  content, parts, tool calls, reasoning, summary, meta), at most ``limit`` in all
  (:data:`SESSION_CACHE_BYTES` by default); the least recently used go first, and a state larger than
  ``limit`` on its own is not kept. ``limit`` 0 keeps nothing.
* **Keyed by ``(namespace, session_id)``**, the namespace the caller asked for: a state is only ever
  handed back to a load of the same namespace and session, and :class:`SessionState` names both.
* What it holds is immutable (frozen dataclasses, tuples, strings), so sharing a state between callers
  shares no mutable data.
"""

from __future__ import annotations

import sys
from collections import OrderedDict

from ..messages import AssistantMessage, Message
from .base import SessionState

__all__ = ["SESSION_CACHE_BYTES", "SessionStateCache", "state_bytes"]

SESSION_CACHE_BYTES = 64 * 1024 * 1024
"""What one store keeps of loaded sessions at most, by default (bytes of their texts in memory)."""

_ENTRY_BYTES = 1024  # the tuples, dataclasses and small strings around the texts, per session (rough)


def _message_bytes(message: Message) -> int:
    texts: list[object] = [message.content, message.name]
    if isinstance(message.content, tuple):
        texts = [getattr(p, "text", getattr(p, "url", None)) for p in message.content]
    if isinstance(message, AssistantMessage):
        texts.append(message.reasoning)
        texts += [c.arguments for c in message.tool_calls]
    return 200 + sum(sys.getsizeof(t) for t in texts if isinstance(t, str))


def state_bytes(state: SessionState) -> int:
    """The memory ``state``'s texts hold, about: what :class:`SessionStateCache` is bounded by."""
    texts = (state.summary, state.meta)
    return (
        _ENTRY_BYTES
        + sum(_message_bytes(s.message) for s in state.live)
        + sum(sys.getsizeof(t) for t in texts if t is not None)
    )


class SessionStateCache:
    """The last loaded state of recently opened sessions, at most ``limit`` bytes (:func:`state_bytes`)."""

    def __init__(self, limit: int = SESSION_CACHE_BYTES) -> None:
        self.limit = limit
        self.bytes = 0
        self._states: OrderedDict[tuple[str, str], tuple[SessionState, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._states)

    def get(self, namespace: str, session_id: str) -> SessionState | None:
        """The kept state of ``(namespace, session_id)``, now the most recently used; ``None`` if none."""
        found = self._states.get((namespace, session_id))
        if found is None:
            return None
        self._states.move_to_end((namespace, session_id))
        return found[0]

    def put(self, state: SessionState) -> None:
        """Keep ``state`` (replacing its session's), dropping the least recently used over ``limit``."""
        key = (state.namespace, state.session_id)
        self.drop(*key)
        size = state_bytes(state)
        if size > self.limit:
            return
        self._states[key] = (state, size)
        self.bytes += size
        while self.bytes > self.limit:
            _, (_, dropped) = self._states.popitem(last=False)
            self.bytes -= dropped

    def drop(self, namespace: str, session_id: str) -> None:
        found = self._states.pop((namespace, session_id), None)
        if found is not None:
            self.bytes -= found[1]
