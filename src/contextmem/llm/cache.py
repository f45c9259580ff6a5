"""Which provider-side prompt cache a model call belongs to, told to the adapters by a context variable.

Providers bill the longest prefix a request shares with an earlier one as a cache read. OpenAI routes
requests to its cache by a prefix hash *and* ``prompt_cache_key``: requests of one session under one key
land on the same cache, so a session's growing prefix keeps being read from it. The caller that knows the
session sets the key around its model calls; the adapter that supports it reads it when it builds the
request (:func:`current_cache_key`)::

    with cache_key(session_cache_key("alice", "chat-1")):
        reply = await llm.complete(messages)

    async for event in keyed(key, llm.stream(messages)):  # a stream: set around each step only
        ...

The agent loop keys its model calls by session. Summaries are other prompts and carry no key: the key is
never set across a ``yield`` (:func:`keyed`), so a background task started meanwhile does not inherit it.
Adapters without a cache key (Anthropic marks ``cache_control`` breakpoints instead) ignore it.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TypeVar

__all__ = ["cache_key", "current_cache_key", "keyed", "session_cache_key"]

T = TypeVar("T")

_KEY: ContextVar[str | None] = ContextVar("contextmem_cache_key", default=None)


def session_cache_key(namespace: str, session_id: str) -> str:
    """An opaque, stable key for one session: 32 hex digits of SHA-256, so no name or id leaves."""
    return hashlib.sha256(f"{namespace}/{session_id}".encode()).hexdigest()[:32]


def current_cache_key() -> str | None:
    """The key of the calls being made now, ``None`` when no caller set one."""
    return _KEY.get()


@contextmanager
def cache_key(key: str | None) -> Iterator[None]:
    """Model calls made inside the block belong to ``key``'s cache (``None``: to none)."""
    token = _KEY.set(key)
    try:
        yield
    finally:
        _KEY.reset(token)


async def keyed(key: str | None, events: AsyncIterator[T]) -> AsyncGenerator[T, None]:
    """``events`` (a model's stream), with ``key`` set while each step runs and never across a ``yield``.

    An adapter builds its request on the stream's first step, which therefore sees the key; the consumer
    between steps does not. Closing this iterator closes ``events``.
    """
    try:
        while True:
            with cache_key(key):
                try:
                    event = await anext(events)
                except StopAsyncIteration:
                    return
            yield event
    finally:
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
