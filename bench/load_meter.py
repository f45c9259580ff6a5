"""What a load bench costs and what the loaded process holds: the two meters of ``bench_mcp_load.py``.

:class:`ProcessSampler` reads another process (the server) from ``/proc``: its CPU seconds, and its
resident memory every second. :class:`GeneratorMeter` measures the bench itself: its CPU seconds (all its
threads) and how late its event loop wakes a task that sleeps 10 ms. On a 2-core machine the generator's
CPU competes with the server's and PostgreSQL's; a late loop adds its lag to every latency it times, so
a bench whose loop lags measures itself, not the server.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

TICK = 0.010
"""The lag ticker's sleep (seconds)."""


class ProcessSampler:
    """``VmRSS`` (MB) and CPU seconds of process ``pid``, every ``every`` seconds, in a thread."""

    def __init__(self, pid: int, every: float = 1.0) -> None:
        self.pid = pid
        self.every = every
        self.points: list[tuple[float, float]] = []  # (perf_counter, RSS MB)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return 0.0

    def cpu_seconds(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            try:
                self.points.append((time.perf_counter(), self.rss_mb()))
            except OSError:
                return

    def __enter__(self) -> ProcessSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def between(self, start: float, end: float) -> list[float]:
        return [mb for t, mb in self.points if start <= t <= end]


class GeneratorMeter:
    """The bench process's own CPU time and its event loop's lag, while ``async with`` is open.

    ``lags`` are how much later than :data:`TICK` each wake-up came: ``(perf_counter, lag ms)``.
    """

    def __init__(self) -> None:
        self.lags: list[tuple[float, float]] = []  # (perf_counter at wake-up, lag ms)
        self._task: asyncio.Task[None] | None = None

    async def _tick(self) -> None:
        while True:
            asleep = time.perf_counter()
            await asyncio.sleep(TICK)
            now = time.perf_counter()
            self.lags.append((now, max(0.0, (now - asleep - TICK) * 1000)))

    async def __aenter__(self) -> GeneratorMeter:
        self._task = asyncio.create_task(self._tick())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()

    @staticmethod
    def cpu_seconds() -> float:
        """CPU seconds of this process so far (every thread, user and system)."""
        return time.process_time()

    def lags_between(self, start: float, end: float) -> list[float]:
        return [lag for t, lag in self.lags if start <= t <= end]
