"""The dialog archive (SPEC C12): what leaves the context is appended here, durably, *before* it leaves.

One JSON object per line in ``dialog/YYYY-MM-DD.jsonl``::

    {"session": "s1", "seq": 17, "reason": "turn_trim", "ts": 1763769600.0, "message": {<OpenAI dict>}}

Appends take an exclusive ``flock`` on the file (so processes never interleave lines), write, flush and
``fsync`` (and ``fsync`` the directory when the file is new) before returning. Any failure — a full disk,
a read-only directory — raises :class:`~contextmem.errors.ArchiveError`, and the caller keeps the
messages in the session. A line may be written twice (a crash between the archive write and the store
update, then a retry); readers de-duplicate by ``(session, seq)``.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from .errors import ArchiveError
from .formats.openai import from_openai, to_openai
from .messages import Message


@dataclass(frozen=True, slots=True)
class ArchiveRef:
    """Where a batch landed: a path relative to the workspace and a 1-based inclusive line range."""

    path: str
    first_line: int
    last_line: int

    def __str__(self) -> str:
        return f"{self.path} lines {self.first_line}-{self.last_line}"


@dataclass(frozen=True, slots=True)
class ArchivedMessage:
    session: str
    seq: int
    reason: str
    ts: float
    message: Message


class DialogArchive:
    """Appends to and reads ``dialog/*.jsonl`` under one workspace directory."""

    def __init__(
        self, workspace_dir: str | os.PathLike[str], *, clock: Callable[[], float] = time.time
    ) -> None:
        self.root = Path(workspace_dir)
        self.dir = self.root / "dialog"
        self._clock = clock
        self._lines: dict[Path, tuple[int, int]] = {}  # path -> (byte offset, lines up to it)

    def _path_for(self, ts: float) -> Path:
        return self.dir / f"{datetime.fromtimestamp(ts).date().isoformat()}.jsonl"

    def append(self, session: str, items: Sequence[tuple[int, Message]], reason: str) -> ArchiveRef:
        """Durably append ``(seq, message)`` items; returns where they are. Raises ArchiveError."""
        if not items:
            raise ValueError("nothing to archive")
        ts = self._clock()
        path = self._path_for(ts)
        lines = [
            json.dumps(
                {"session": session, "seq": seq, "reason": reason, "ts": ts, "message": to_openai(msg)},
                ensure_ascii=False,
            )
            for seq, msg in items
        ]
        payload = ("\n".join(lines) + "\n").encode("utf-8")
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            created = not path.exists()
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                start = self._count_lines(path, os.fstat(fd).st_size)
                self._write(fd, payload)
                os.fsync(fd)
                self._lines[path] = (os.fstat(fd).st_size, start + len(lines))
            finally:
                os.close(fd)  # closing releases the lock
            if created:
                _fsync_dir(self.dir)
        except OSError as exc:
            fix = "free disk space" if exc.errno == errno.ENOSPC else "make the directory writable"
            raise ArchiveError(
                f"cannot append {len(items)} message(s) to {str(path)!r}: {exc.strerror or exc}. "
                f"They stay in the session. Fix: {fix}."
            ) from exc
        return ArchiveRef(str(path.relative_to(self.root)), start + 1, start + len(lines))

    def _write(self, fd: int, payload: bytes) -> None:
        view = memoryview(payload)
        while view:
            written = os.write(fd, view)
            view = view[written:]

    def _count_lines(self, path: Path, size: int) -> int:
        """Lines in ``path`` up to ``size`` bytes, reading only what this process has not seen yet."""
        offset, count = self._lines.get(path, (0, 0))
        if offset > size:
            offset, count = 0, 0
        with path.open("rb") as f:
            f.seek(offset)
            remaining = size - offset
            while remaining > 0:
                chunk = f.read(min(remaining, 1 << 20))
                if not chunk:
                    break
                count += chunk.count(b"\n")
                remaining -= len(chunk)
        return count

    def read(self, session: str | None = None) -> Iterator[ArchivedMessage]:
        """Every archived message (of ``session`` if given), oldest file first, duplicates removed.

        A torn last line (a crash mid-write) is skipped: its messages were never removed from the
        session, because removal happens only after a complete, fsynced append.
        """
        seen: set[tuple[str, int]] = set()
        for path in sorted(self.dir.glob("*.jsonl")) if self.dir.exists() else []:
            with path.open(encoding="utf-8") as f:
                for line in f:
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError:
                        continue
                    key = (row["session"], row["seq"])
                    if (session is not None and row["session"] != session) or key in seen:
                        continue
                    seen.add(key)
                    yield ArchivedMessage(
                        row["session"], row["seq"], row["reason"], row["ts"], from_openai(row["message"])
                    )


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
