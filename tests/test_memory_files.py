"""Durable, concurrent-safe memory writes and the daily summary job (SPEC M2)."""

from __future__ import annotations

import asyncio
import multiprocessing
from datetime import date, datetime
from pathlib import Path

import pytest

from contextmem.errors import ConfigError
from contextmem.memory_files import DailySummaryJob, append_daily, write_core
from contextmem.workspace import Workspace

WRITES_PER_PROCESS = 300


def _writer(root: str, tag: str, start: multiprocessing.synchronize.Event) -> None:  # type: ignore[name-defined]
    ws = Workspace(root, "shared")
    start.wait()
    for i in range(WRITES_PER_PROCESS):
        # Long multi-line entries: a torn or interleaved write would split them.
        body = f"{tag}-{i} begin\n" + (f"{tag}-{i} " * 200) + f"\n{tag}-{i} end"
        append_daily(ws, body, datetime(2026, 3, 8, 12, 0))


def test_two_processes_appending_to_one_daily_file_lose_and_tear_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), tag, start)) for tag in ("A", "B")]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(120)
        assert proc.exitcode == 0
    text = Workspace(tmp_path, "shared").daily_file(date(2026, 3, 8)).read_text()
    entries = text.split("## 12:00\n\n")[1:]
    assert len(entries) == 2 * WRITES_PER_PROCESS
    seen = set()
    for entry in entries:
        lines = entry.strip("\n").split("\n")
        assert len(lines) == 3, entry[:200]
        name = lines[0].removesuffix(" begin")
        assert lines[1] == f"{name} " * 200
        assert lines[2] == f"{name} end"
        seen.add(name)
    assert seen == {f"{t}-{i}" for t in "AB" for i in range(WRITES_PER_PROCESS)}


def test_daily_file_is_created_on_first_write_and_entries_are_separated(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    day = date(2026, 3, 8)
    assert not ws.daily_file(day).exists()
    append_daily(ws, "first", datetime(2026, 3, 8, 9, 5))
    append_daily(ws, "second\n", datetime(2026, 3, 8, 9, 6), title="trim summary")
    assert ws.daily_file(day).read_text() == "## 09:05\n\nfirst\n\n## 09:06 trim summary\n\nsecond\n"
    write_core(ws, "User prefers tea.")
    write_core(ws, "User lives in Lyon.")
    assert ws.core_file.read_text() == "User prefers tea.\n\nUser lives in Lyon.\n"
    with pytest.raises(ConfigError):
        write_core(ws, "  \n")


def test_next_run_is_the_next_occurrence_of_the_time() -> None:
    job = DailySummaryJob(Workspace("/nonexistent"), lambda text: text, at="23:55")
    assert job.next_run(datetime(2026, 3, 8, 10, 0)) == datetime(2026, 3, 8, 23, 55)
    assert job.next_run(datetime(2026, 3, 8, 23, 55)) == datetime(2026, 3, 9, 23, 55)
    with pytest.raises(ConfigError):
        DailySummaryJob(Workspace("/nonexistent"), lambda text: text, at="25:99")


async def test_daily_summary_runs_once_per_change(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    ws.ensure()
    calls: list[str] = []

    def summarise(material: str) -> str:
        calls.append(material)
        return f"summary of {len(material.splitlines())} messages"

    job = DailySummaryJob(ws, summarise)
    now = datetime(2026, 3, 8, 23, 55)
    assert await job.run_once(now) is None  # no dialog at all: nothing to summarise
    archive = ws.dialog_dir / "2026-03-08.jsonl"
    archive.write_text('{"role": "user", "content": "hi"}\n')
    written = await job.run_once(now)
    assert written == ws.daily_file(now.date())
    assert await job.run_once(now) is None  # unchanged since the last run: skipped
    assert len(calls) == 1
    with archive.open("a") as handle:
        handle.write('{"role": "assistant", "content": "hello"}\n')
    assert await DailySummaryJob(ws, summarise).run_once(now) == written  # state survives a restart
    assert written.read_text().count("daily summary") == 2
    assert "summary of 2 messages" in written.read_text()


async def test_async_summariser_and_scheduler_loop(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    ws.ensure()
    (ws.dialog_dir / "2026-03-08.jsonl").write_text("{}\n")

    async def summarise(material: str) -> str:
        return "async summary"

    job = DailySummaryJob(ws, summarise, at="23:55")
    moments = iter([datetime(2026, 3, 8, 23, 54, 59, 990000), datetime(2026, 3, 8, 23, 55)])
    stop = asyncio.Event()

    def clock() -> datetime:
        try:
            return next(moments)
        except StopIteration:
            stop.set()
            return datetime(2026, 3, 8, 23, 55, 1)

    await asyncio.wait_for(job.run_forever(stop, clock=clock), timeout=5)
    assert "async summary" in ws.daily_file(date(2026, 3, 8)).read_text()
