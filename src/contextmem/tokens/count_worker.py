"""Counting megabytes of text in a process of its own, at a low priority: for a server's other callers.

A server answers every tenant from one process. Counting a stored session's big tool results the first time
(three 9 MB logs: ~1 s of CPU) ran in a worker thread, off the event loop, but it still held the GIL a piece
at a time and took a core from everyone else: on 2 cores the other tenants' worst call grew by ~0.6 s while
one tenant opened such a session (the MCP load bench). Counted in this worker process instead, with its
nice value raised by :data:`NICE`, the count takes no GIL of the server's and gets a core only when the
callers of the moment leave one: that tenant waits longer for its first count, the others do not. With the
count free of cost, the same bench added 43-90 ms.

One worker per process, started on the first count past :data:`AWAY_CHARS` once :func:`use_count_worker`
switched it on (``contextmem mcp`` does; a one-shot CLI would pay the worker's start for nothing), and
reused. Counts are exact: the worker runs :func:`.tiktoken_backend.count_linear`, the same code. If the
worker cannot start, dies or stays silent for :data:`TIMEOUT_SECONDS`, the count is made here as before
(logged once): slower for the others, never wrong, never lost.

The worker is :mod:`contextmem.tokens.count_process` (its protocol is there).
"""

from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading
from pathlib import Path

from ..logs import get_logger

__all__ = ["AWAY_CHARS", "NICE", "TIMEOUT_SECONDS", "CountWorker", "count_away", "use_count_worker"]

logger = get_logger(__name__)

AWAY_CHARS = 1_000_000
"""Texts longer than this are counted by the worker (a 1 MB text: ~30 ms here; the pipe costs ~1 ms)."""
NICE = 10
"""How much the worker lowers its own priority (``os.nice``)."""
TIMEOUT_SECONDS = 120.0
"""A worker silent this long over one count is stopped, and the count made in the calling process."""

_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])  # the folder holding the contextmem package


class CountWorker:
    """The worker process and the lock that gives it one count at a time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._failed = False  # logged once

    def count(self, encoding: str, text: str) -> int | None:
        """Tokens of ``text`` in ``encoding``, counted by the worker; ``None`` when it could not count."""
        data = text.encode("utf-8", "surrogatepass")
        with self._lock:
            try:
                proc = self._started()
                assert proc.stdin is not None and proc.stdout is not None
                timer = threading.Timer(TIMEOUT_SECONDS, proc.kill)
                timer.start()
                try:
                    proc.stdin.write(f"{encoding} {len(data)}\n".encode("ascii") + data)
                    proc.stdin.flush()
                    answer = proc.stdout.readline().decode("utf-8", "replace").strip()
                finally:
                    timer.cancel()
                if answer.startswith("E "):  # the text's own error: made again, and raised, here
                    return None
                return int(answer)
            except (OSError, ValueError) as exc:
                self._give_up(f"{type(exc).__name__}: {exc}"[:200])
                return None

    def _started(self) -> subprocess.Popen[bytes]:
        if self._proc is None or self._proc.poll() is not None:
            path = os.pathsep.join(filter(None, [_PACKAGE_ROOT, os.environ.get("PYTHONPATH")]))
            env = {**os.environ, "PYTHONPATH": path}
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "contextmem.tokens.count_process"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        return self._proc

    def _give_up(self, why: str) -> None:
        self.close()
        if not self._failed:
            self._failed = True
            logger.warning("the token-count worker failed (%s); counting in this process", why)

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()


class _Switch:
    worker: CountWorker | None = None  # the process's worker, once switched on


def use_count_worker(enabled: bool = True) -> None:
    """Count texts past :data:`AWAY_CHARS` in the worker process from now on (``False``: here again)."""
    if enabled and _Switch.worker is None:
        _Switch.worker = CountWorker()
        atexit.register(_Switch.worker.close)
    elif not enabled and _Switch.worker is not None:
        _Switch.worker.close()
        _Switch.worker = None


def count_away(encoding: str, text: str) -> int | None:
    """The worker's count of ``text``, or ``None`` (not switched on, a short text, or it failed)."""
    worker = _Switch.worker
    if worker is None or len(text) <= AWAY_CHARS:
        return None
    return worker.count(encoding, text)
