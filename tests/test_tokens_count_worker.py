"""Counting megabytes in a worker process (``contextmem.tokens.count_worker``): the same counts, apart from
the server's GIL, at a lower priority, and never a lost or wrong count when the worker fails."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator

import pytest

from contextmem.tokens import count_worker
from contextmem.tokens.count_worker import AWAY_CHARS, NICE, CountWorker, count_away, use_count_worker
from contextmem.tokens.tiktoken_backend import _big_counts, count_linear

pytest.importorskip("bpe_openai")

# Log lines, a long word, Chinese, special-token text and a lone surrogate: every kind the count must carry.
TEXT = (
    "".join(
        f"2026-11-29 worker-{n % 7} GET /api/v2/items?page={n} 200 {n % 97}ms 已完成\n" for n in range(17_000)
    )
    + "<|endoftext|>"
    + "x" * 200_000
    + "\ud800 end"
)


class _Mute(CountWorker):
    """A worker process that never reads or answers."""

    def _started(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
            self._proc = subprocess.Popen(sleep, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        return self._proc


@pytest.fixture
def worker() -> Iterator[None]:
    use_count_worker()
    _big_counts.clear()  # counted anew, not found by digest
    yield
    use_count_worker(False)
    _big_counts.clear()


def test_a_long_text_is_counted_by_the_worker_exactly_as_here(worker: None) -> None:
    assert len(TEXT) > AWAY_CHARS
    away = count_away("o200k_base", TEXT)
    proc = count_worker._Switch.worker._proc  # type: ignore[union-attr]
    assert proc is not None and proc.pid != os.getpid()  # another process counted it
    use_count_worker(False)
    _big_counts.clear()
    for encoding in ("o200k_base", "cl100k_base"):
        assert count_away(encoding, TEXT) is None  # switched off: counted here
    assert away == count_linear("o200k_base", TEXT)


def test_the_worker_runs_below_the_callers_priority(worker: None) -> None:
    count_away("o200k_base", TEXT)
    proc = count_worker._Switch.worker._proc  # type: ignore[union-attr]
    assert proc is not None
    mine = os.getpriority(os.PRIO_PROCESS, 0)
    assert os.getpriority(os.PRIO_PROCESS, proc.pid) == min(19, mine + NICE)


def test_a_short_text_stays_here(worker: None) -> None:
    assert count_away("o200k_base", "x" * AWAY_CHARS) is None
    assert count_worker._Switch.worker._proc is None  # type: ignore[union-attr]  # never started


def test_a_worker_that_dies_or_falls_silent_costs_time_not_the_count(
    worker: None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Killed between counts, the worker is started again; silent past the timeout, it is stopped and the
    text counted here, with one warning."""
    want = count_linear("o200k_base", TEXT)
    _big_counts.clear()
    current = count_worker._Switch.worker
    assert current is not None and count_away("o200k_base", TEXT) == want
    assert current._proc is not None
    current._proc.kill()
    current._proc.wait()
    _big_counts.clear()
    assert count_away("o200k_base", TEXT) == want  # a new worker

    mute = _Mute()
    monkeypatch.setattr(count_worker, "TIMEOUT_SECONDS", 0.5)
    monkeypatch.setattr(count_worker._Switch, "worker", mute)
    _big_counts.clear()
    with caplog.at_level(logging.WARNING, logger="contextmem.tokens.count_worker"):
        assert count_linear("o200k_base", TEXT) == want  # counted here after the timeout
    assert mute._proc is None
    assert [r.getMessage() for r in caplog.records if "token-count worker failed" in r.getMessage()]
