"""Replies first: a gate per model endpoint that keeps background calls (summaries) out of a reply's way.

One local server, or the in-process local model, does one thing at a time (or a few). A summary that
starts while the user waits for a reply makes the reply wait, and a reply that runs while a summary waits
eats into the summary's timeout. The gate fixes both:

* every call is ``"foreground"`` (someone waits for it: a reply) or ``"background"`` (a summary). The
  priority travels in a context variable, set with :func:`background_calls` (the summariser does) or
  :func:`foreground_calls`, so no call signature changes; unmarked calls are foreground;
* :func:`admit`, a pure function, is the one owner of the rules: a background call never *starts* while a
  foreground call runs or waits on its endpoint; a foreground call never waits behind a *queued*
  background call, only for a free slot; within a priority, first come first served; no slot stays idle
  while a call it may admit waits;
* a background call already running is not interrupted. On a one-slot endpoint (the local model) a reply
  may therefore wait for the one summary call in progress, at most that call's timeout;
* :func:`wait_running` bounds a call by the time it actually *runs*: time queued at a gate is not
  counted (a separate, optional bound covers the queue), so a summary is not timed out by the replies it
  politely let go first.

Who is gated: :class:`~contextmem.llm.base.BaseLLM` (the SDK adapters, the local model, the test fakes)
holds its endpoint's gate around every ``complete`` and for a stream's whole life. A third-party object
that only satisfies the :class:`~contextmem.llm.base.LLM` protocol is not gated, and for it
:func:`wait_running` is a plain timeout.

The gate is thread-safe (its state sits behind a lock, and a waiter on another event loop is woken with
``call_soon_threadsafe``), because the local model is shared by every loop of the process.
"""

from __future__ import annotations

import asyncio
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Hashable, Iterator, Sequence
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Literal, TypeVar

from ..errors import ConfigError, LLMTimeoutError
from ..logs import get_logger

__all__ = [
    "EndpointGate",
    "GateState",
    "Priority",
    "QueueClock",
    "admit",
    "background_calls",
    "current_priority",
    "foreground_calls",
    "gate_for",
    "wait_running",
]

T = TypeVar("T")
Priority = Literal["foreground", "background"]
logger = get_logger(__name__)

_PRIORITY: ContextVar[Priority | None] = ContextVar("contextmem_call_priority", default=None)
_QUEUE_CLOCK: ContextVar[QueueClock | None] = ContextVar("contextmem_queue_clock", default=None)


# --- priority, carried by the context -----------------------------------------------------------


def current_priority() -> Priority:
    """The priority of a model call made here: foreground unless marked background."""
    return _PRIORITY.get() or "foreground"


@contextmanager
def _calls_at(priority: Priority) -> Iterator[None]:
    token = _PRIORITY.set(priority)
    try:
        yield
    finally:
        _PRIORITY.reset(token)


def background_calls() -> AbstractContextManager[None]:
    """Mark the model calls made inside (and in tasks started inside) as background.

    An enclosing :func:`foreground_calls` wins: code that knows someone waits (a ``/compact`` the user
    typed) says so once, around code that would otherwise mark its calls background.
    """
    return _calls_at("foreground" if _PRIORITY.get() == "foreground" else "background")


def foreground_calls() -> AbstractContextManager[None]:
    """Mark the model calls made inside as foreground, even where inner code marks them background."""
    return _calls_at("foreground")


# --- the rules ----------------------------------------------------------------------------------


def admit(
    waiting: Sequence[Priority], *, running_foreground: int, running_background: int, slots: int | None
) -> tuple[int, ...]:
    """Which of ``waiting`` (in arrival order) start now, as indices in order. Pure.

    Invariants: running plus started never exceeds ``slots`` (``None``: unbounded); a background call
    starts only when no foreground call runs, starts now or still waits; foreground calls start before
    any background call, each priority first come first served; a waiting call that the rules allow is
    started (no slot idles).
    """
    free = None if slots is None else max(0, slots - running_foreground - running_background)
    foreground = [i for i, p in enumerate(waiting) if p == "foreground"]
    started = foreground if free is None else foreground[:free]
    if running_foreground or started or len(started) < len(foreground):
        return tuple(started)
    background = [i for i, p in enumerate(waiting) if p == "background"]
    return tuple(background if free is None else background[:free])


# --- the gate -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GateState:
    """What a gate is doing now (for ``/context``, logs and tests)."""

    running_foreground: int = 0
    running_background: int = 0
    waiting_foreground: int = 0
    waiting_background: int = 0


@dataclass(eq=False, slots=True)
class _Waiter:
    priority: Priority
    future: asyncio.Future[None]
    granted: bool = False


def _wake(future: asyncio.Future[None]) -> bool:
    """Resolve ``future`` on its own loop; ``False`` if nobody will ever see it (cancelled, loop closed)."""

    def resolve() -> None:
        if not future.done():
            future.set_result(None)

    if future.done():
        return False
    try:
        future.get_loop().call_soon_threadsafe(resolve)
    except RuntimeError:  # the loop is closed: its tasks are gone
        return False
    return True


class EndpointGate:
    """The slots of one model endpoint, handed out by :func:`admit`'s rules.

    ``slots`` bounds the calls running at once (``None``: unbounded, e.g. a hosted API; the rules still
    hold background calls back while a foreground call runs or waits). A slot is held for the body of
    :meth:`hold`. Invariant: a slot is released exactly once, by whoever was granted it — a waiter
    cancelled after its grant gives it back itself, one cancelled before takes nothing.
    """

    def __init__(self, slots: int | None = None, *, name: str = "") -> None:
        if slots is not None and slots < 1:
            raise ConfigError(f"gate slots={slots!r} must be at least 1. Fix: use 1, or None for unbounded.")
        self.slots = slots
        self.name = name
        self._lock = threading.Lock()
        self._running: dict[Priority, int] = {"foreground": 0, "background": 0}
        self._waiting: list[_Waiter] = []

    def __repr__(self) -> str:
        return f"EndpointGate({self.name!r}, slots={self.slots!r}, {self.state()})"

    def state(self) -> GateState:
        with self._lock:
            queued = [w.priority for w in self._waiting]
            return GateState(
                self._running["foreground"],
                self._running["background"],
                queued.count("foreground"),
                queued.count("background"),
            )

    @asynccontextmanager
    async def hold(self, priority: Priority | None = None) -> AsyncIterator[None]:
        """Hold a slot for the body; ``priority`` defaults to :func:`current_priority`."""
        priority = priority or current_priority()
        await self._acquire(priority)
        try:
            yield
        finally:
            with self._lock:
                self._release_locked(priority)

    async def _acquire(self, priority: Priority) -> None:
        waiter = _Waiter(priority, asyncio.get_running_loop().create_future())
        with self._lock:
            self._waiting.append(waiter)
            self._admit_locked()
            if waiter.granted:
                return
        clock = _QUEUE_CLOCK.get() or QueueClock()
        clock.enter()
        try:
            await waiter.future
        except BaseException:
            with self._lock:
                if waiter.granted:
                    self._release_locked(priority)
                elif waiter in self._waiting:
                    self._waiting.remove(waiter)
                    self._admit_locked()  # a foreground waiter leaving may let background ones start
            raise
        finally:
            waited = clock.leave()
            logger.debug("%s call waited %.2fs for %s", priority, waited, self.name or "its endpoint")

    def _release_locked(self, priority: Priority) -> None:
        self._running[priority] -= 1
        self._admit_locked()

    def _admit_locked(self) -> None:
        while chosen := admit(
            [w.priority for w in self._waiting],
            running_foreground=self._running["foreground"],
            running_background=self._running["background"],
            slots=self.slots,
        ):
            for waiter in [self._waiting[i] for i in chosen]:
                self._waiting.remove(waiter)
                if _wake(waiter.future):
                    waiter.granted = True
                    self._running[waiter.priority] += 1


_GATES: weakref.WeakValueDictionary[Hashable, EndpointGate] = weakref.WeakValueDictionary()
_GATES_LOCK = threading.Lock()


def gate_for(key: Hashable, slots: int | None = None) -> EndpointGate:
    """The process's one gate for endpoint ``key`` (created with ``slots`` on first use).

    Kept only while some call uses it: an idle gate holds no state worth keeping.
    """
    with _GATES_LOCK:
        gate = _GATES.get(key)
        if gate is None:
            gate = _GATES[key] = EndpointGate(slots, name=str(key))
        return gate


# --- time running, not time queued -------------------------------------------------------------


class QueueClock:
    """Seconds the calls of one task spent queued at gates; overlapping waits count once."""

    def __init__(self) -> None:
        self._depth = 0
        self._since = 0.0
        self._total = 0.0

    def enter(self) -> None:
        if self._depth == 0:
            self._since = time.monotonic()
        self._depth += 1

    def leave(self) -> float:
        """End one wait; returns the seconds queued so far."""
        self._depth -= 1
        if self._depth == 0:
            self._total += time.monotonic() - self._since
        return self.queued

    @property
    def queued(self) -> float:
        return self._total + (time.monotonic() - self._since if self._depth else 0.0)


async def wait_running(
    call: Awaitable[T], timeout: float, *, max_queue: float | None = None, clock: QueueClock | None = None
) -> T:
    """``call``'s result, cancelling it once it has *run* for ``timeout`` seconds or, if ``max_queue`` is
    set, once it has been queued at gates for that long in all. Either raises :class:`TimeoutError`
    whose message says which.

    ``call`` runs in a task of its own (with the current context, so its priority holds). Whatever it
    holds is released before this returns or raises: a cancelled call has finished unwinding.
    """
    clock = clock or QueueClock()
    token = _QUEUE_CLOCK.set(clock)
    try:
        task = asyncio.ensure_future(call)
    finally:
        _QUEUE_CLOCK.reset(token)
    started = time.monotonic()
    try:
        while not task.done():
            queued = clock.queued
            left = timeout - (time.monotonic() - started - queued)
            if left <= 0:
                raise LLMTimeoutError(
                    f"timed out after {timeout}s of running (and {queued:.1f}s queued). "
                    "Fix: raise the timeout or use a faster model"
                )
            if max_queue is not None:
                if queued >= max_queue:
                    raise LLMTimeoutError(
                        f"queued {queued:.1f}s for the endpoint, the limit is {max_queue}s. Fix: raise the "
                        "queue limit, or lower the endpoint's load"
                    )
                left = min(left, max_queue - queued)
            await asyncio.wait({task}, timeout=left)
        return task.result()
    finally:
        if not task.done():
            task.cancel()
            await asyncio.wait({task})
            if not task.cancelled():
                task.exception()  # retrieved: it is superseded by the timeout or the cancellation
