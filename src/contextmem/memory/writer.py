"""Durable memory writes (SPEC M2): locked, fsynced appends, and the daily summary job.

Invariant: an entry is appended whole or not at all, and concurrent writers — threads or processes —
never interleave or lose one. Each append takes an exclusive ``fcntl.flock`` on the target file, writes
the complete entry with ``O_APPEND`` (retrying short writes), ``fsync``\\ s it, and only then releases the
lock; a newly created file also has its directory fsynced so the entry survives a crash.
"""

from __future__ import annotations

import asyncio
import fcntl
import inspect
import json
import os
from collections.abc import Awaitable, Callable
from datetime import date, datetime, time, timedelta
from pathlib import Path

from ..errors import ConfigError
from .text import content_hash
from .workspace import Workspace

Summariser = Callable[[str], "str | Awaitable[str | None] | None"]


def append_locked(path: Path, text: str, *, separator: str = "") -> None:
    """Append ``text`` to ``path`` atomically with respect to other lockers; create it if needed.

    ``separator`` is written first when the file is not empty (decided under the lock).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            created = os.fstat(fd).st_size == 0
            view = memoryview((text if created else separator + text).encode("utf-8"))
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    if created:
        _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _entry(text: str, heading: str | None) -> str:
    body = text.strip("\n")
    if not body.strip():
        raise ConfigError("a memory entry is empty. Fix: pass the text to remember")
    return f"## {heading}\n\n{body}\n" if heading else f"{body}\n"


def append_daily(workspace: Workspace, text: str, when: datetime | None = None, *, title: str = "") -> Path:
    """Append an entry headed ``## HH:MM [title]`` to ``memory/YYYY-MM-DD.md`` of ``when`` (local time)."""
    moment = when or datetime.now()
    heading = f"{moment:%H:%M} {title}".strip()
    path = workspace.daily_file(moment.date())
    append_locked(path, _entry(text, heading), separator="\n")
    return path


def write_core(workspace: Workspace, text: str) -> Path:
    """Append a paragraph to ``MEMORY.md``, the core memory that never decays."""
    append_locked(workspace.core_file, _entry(text, None), separator="\n")
    return workspace.core_file


def _dialog_material(workspace: Workspace, day: date) -> str:
    path = workspace.dialog_dir / f"{day.isoformat()}.jsonl"
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


class DailySummaryJob:
    """Writes the day's summary to the daily file at ``at`` (local ``HH:MM``, default 23:55).

    The material (by default the day's dialog archive ``dialog/YYYY-MM-DD.jsonl``) is hashed; when the
    hash equals the last summarised one the run is skipped, so a quiet day or a restart costs nothing.
    The summariser is injected (sync or async ``material -> summary``); it runs in a worker thread when
    synchronous so it never blocks the event loop. The last hash is kept in ``memory/.daily-summary.json``.
    """

    def __init__(
        self,
        workspace: Workspace,
        summarise: Summariser,
        *,
        at: str = "23:55",
        material: Callable[[Workspace, date], str] = _dialog_material,
    ) -> None:
        try:
            hour, minute = (int(p) for p in at.split(":"))
            self.at = time(hour, minute)
        except ValueError:
            raise ConfigError(f"daily summary time {at!r} is not HH:MM. Fix: e.g. '23:55'") from None
        self.workspace = workspace
        self.summarise = summarise
        self.material = material
        self.state_path = workspace.daily_dir / ".daily-summary.json"

    def next_run(self, now: datetime) -> datetime:
        """The first moment at ``at`` strictly after ``now`` (pure)."""
        candidate = datetime.combine(now.date(), self.at, tzinfo=now.tzinfo)
        return candidate if candidate > now else candidate + timedelta(days=1)

    def _last_hash(self) -> str | None:
        try:
            value = json.loads(self.state_path.read_text(encoding="utf-8")).get("hash")
        except (FileNotFoundError, ValueError):
            return None
        return value if isinstance(value, str) else None

    def _save_hash(self, digest: str, day: date) -> None:
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"hash": digest, "day": day.isoformat()}), encoding="utf-8")
        os.replace(tmp, self.state_path)

    async def run_once(self, now: datetime | None = None) -> Path | None:
        """Summarise ``now``'s day unless nothing changed; returns the daily file written, else ``None``."""
        moment = now or datetime.now()
        material = await asyncio.to_thread(self.material, self.workspace, moment.date())
        if not material.strip():
            return None
        digest = content_hash(material)
        if digest == self._last_hash():
            return None
        summarise = self.summarise

        def call() -> object:
            return summarise(material)

        result = call() if inspect.iscoroutinefunction(summarise) else await asyncio.to_thread(call)
        summary = await result if inspect.isawaitable(result) else result
        if not isinstance(summary, str) or not summary.strip():
            return None
        path = await asyncio.to_thread(append_daily, self.workspace, summary, moment, title="daily summary")
        self._save_hash(digest, moment.date())
        return path

    async def run_forever(self, stop: asyncio.Event, *, clock: Callable[[], datetime] = datetime.now) -> None:
        """Sleep until each ``at``, run, repeat until ``stop`` is set. Errors of one run do not stop it."""
        while not stop.is_set():
            now = clock()
            delay = (self.next_run(now) - now).total_seconds()
            try:
                await asyncio.wait_for(stop.wait(), timeout=max(delay, 0.0))
                return
            except TimeoutError:
                pass
            try:
                await self.run_once(clock())
            except Exception:
                continue
