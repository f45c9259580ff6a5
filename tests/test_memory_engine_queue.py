"""The engine queue: one thread, a bounded queue, batches by key, a failure kept to its own callers."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from contextmem.errors import ConfigError
from contextmem.memory.engine_queue import EngineQueue, Request


def _until(ready: Callable[[], bool]) -> None:
    """Wait for ``ready()`` (threads reaching the queue); a guard against a hang, not a timing assertion."""
    deadline = time.monotonic() + 60
    while not ready():
        assert time.monotonic() < deadline, "the threads never reached the engine queue"
        time.sleep(0.005)


class _Engine:
    """Runners that record each call (its thread and items); ``hold`` blocks the thread until released."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[Any]]] = []
        self.threads: set[int] = set()
        self.busy, self.release = threading.Event(), threading.Event()

    def runner(self, name: str) -> Callable[[list[Any]], list[Any]]:
        def run(items: list[Any]) -> list[Any]:
            self.calls.append((name, list(items)))
            self.threads.add(threading.get_ident())
            if name == "hold":
                self.busy.set()
                self.release.wait()
            if "poison" in items:  # the engine refuses the whole call for one item it cannot take
                raise ConfigError(f"cannot encode {items!r}. Fix: give it text it can encode")
            return [f"{name}:{item}" for item in items]

        return run


def _start(target: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    """``target()`` on a thread; the returned dict gets its ``result`` or its ``error``."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["result"] = target()
        except Exception as exc:
            out["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()
    return thread, out


def test_requests_waiting_together_run_as_one_batch_and_a_failure_fails_only_its_own_caller() -> None:
    queue, engine = EngineQueue("test-engine"), _Engine()
    held, _ = _start(lambda: queue.run_all([Request(engine.runner("hold"), "first")]))
    engine.busy.wait()
    good = [
        _start(lambda i=i: queue.run_all([Request(engine.runner("good"), i, key="good")])) for i in range(3)
    ]
    _until(lambda: queue.waiting == 3)
    mixed = [
        _start(lambda item=item: queue.run_all([Request(engine.runner("mixed"), item, key="mixed")]))
        for item in ("a", "poison", "b")
    ]
    _until(lambda: queue.waiting == 6)
    lone = _start(lambda: queue.call(lambda: "alone"))
    _until(lambda: queue.waiting == 7)
    engine.release.set()
    for thread, _ in [(held, None), *good, *mixed, lone]:
        thread.join()

    assert engine.calls[0] == ("hold", ["first"])
    assert engine.calls[1][0] == "good" and sorted(engine.calls[1][1]) == [0, 1, 2]  # one call for three
    assert sorted(out["result"][0] for _, out in good) == ["good:0", "good:1", "good:2"]
    # The mixed group's call failed, so each of its requests ran alone: only the poisoned one fails.
    assert engine.calls[2][0] == "mixed" and sorted(engine.calls[2][1]) == ["a", "b", "poison"]
    assert sorted(items[0] for name, items in engine.calls[3:6]) == ["a", "b", "poison"]
    outcomes = {mixed[i][1].get("result", ["?"])[0] for i in range(3)}
    assert outcomes == {"mixed:a", "mixed:b", "?"}
    (error,) = [out["error"] for _, out in mixed if "error" in out]
    assert isinstance(error, ConfigError) and "'poison'" in str(error) and "'a'" not in str(error)
    assert "\n" not in str(error) and "Fix:" in str(error)
    assert lone[1] == {"result": "alone"}
    assert len(engine.threads) == 1 and threading.get_ident() not in engine.threads
    assert queue.run_all([Request(engine.runner("later"), "x", key="mixed")]) == ["later:x"]  # it runs on


def test_the_queue_is_bounded_and_takes_all_it_holds_into_the_next_batch() -> None:
    queue, engine = EngineQueue("test-engine", max_waiting=3), _Engine()
    held, _ = _start(lambda: queue.run_all([Request(engine.runner("hold"), "first")]))
    engine.busy.wait()
    first = [_start(lambda i=i: queue.run_all([Request(engine.runner("q"), i, key="q")])) for i in range(3)]
    _until(lambda: queue.waiting == 3)
    late = _start(lambda: queue.run_all([Request(engine.runner("q"), 3, key="q")]))
    _until(lambda: queue.waiting_for_room == 1)  # the late caller finds the queue full and waits outside
    assert queue.waiting == 3
    engine.release.set()
    for thread, _ in [(held, None), *first, late]:
        thread.join()
    assert sorted(engine.calls[1][1]) == [0, 1, 2]  # everything that waited, in the very next batch
    assert engine.calls[2] == ("q", [3])
    assert late[1] == {"result": ["q:3"]}


@pytest.mark.parametrize("results", [[], ["a", "b"]])
def test_a_runner_giving_the_wrong_number_of_results_fails_its_callers_with_one_line(
    results: list[str],
) -> None:
    queue = EngineQueue("test-engine")
    with pytest.raises(AssertionError, match=r"^an engine runner gave \d results for 1 requests\. Fix: .*$"):
        queue.run_all([Request(lambda items: results, "x", key="k")])
    assert queue.call(lambda: 42) == 42
