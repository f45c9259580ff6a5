"""SIGKILL a process in the middle of appends and compactions, many times: nothing is ever lost."""

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from contextmem.archive import DialogArchive
from contextmem.budget import Window
from contextmem.engine import ContextEngine
from contextmem.settings import Settings
from contextmem.store.sqlite import SqliteSessionStore

KILLS = int(os.environ.get("CONTEXTMEM_CRASH_KILLS", "50"))


def run_child_until_killed(root: Path, rng: random.Random) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    child = subprocess.Popen(
        [sys.executable, "-m", "tests.engine_crash_worker", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=Path(__file__).resolve().parent.parent,
    )
    assert child.stdout is not None
    line = child.stdout.readline()  # wait until it is past start-up and working
    assert line.strip() == b"ready", child.stderr.read() if child.stderr else line
    time.sleep(rng.uniform(0.0, 0.25))
    child.send_signal(signal.SIGKILL)
    child.wait()


async def check(root: Path) -> tuple[int, int]:
    acked = [int(x) for x in (root / "ACK").read_text().split()] if (root / "ACK").exists() else [0]
    store = SqliteSessionStore(root / "sessions.sqlite")
    try:
        assert await store.integrity_check() == []
        engine = await ContextEngine.open(
            "crash",
            store=store,
            settings=Settings(tokenizer="heuristic"),
            workspace_dir=root,
            window=Window(2500, 200),
        )
        report = await engine.verify()
        assert report.lost == 0, report
        assert report.appended >= max(acked)  # every acknowledged message survived
        archived_in_files = {a.seq for a in DialogArchive(root).read("crash")}
        live = {s.seq for s in await store.messages("default", "crash", state="live")}
        assert live | archived_in_files >= set(range(1, report.appended + 1))
        return report.appended, report.archived
    finally:
        await store.close()


def test_sigkill_during_compaction_loses_nothing(tmp_path):
    rng = random.Random(1234)
    appended = archived = 0
    for _ in range(KILLS):
        run_child_until_killed(tmp_path, rng)
        appended, archived = asyncio.run(check(tmp_path))
    assert appended > 100 and archived > 0  # the kills really hit a session that was compacting
