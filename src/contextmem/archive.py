"""The dialog archive (C12): what leaves the context is appended here, durably, *before* it leaves.

One JSON object per line in ``dialog/YYYY-MM-DD.jsonl`` of the namespace's tree::

    {"crc":"1a2b3c4d","namespace":"default","session":"s1","seq":17,"reason":"turn_trim","ts":…,"message":{…}}

``message`` is the OpenAI dict (:func:`~contextmem.formats.openai.to_openai`); the ``extra`` keys that form
never emits (an Anthropic thinking signature, a tool result's ``is_error``, blocks OpenAI has no form for)
go beside it in ``anthropic_extra``, so every archived message reads back equal to what left the context.

Invariants:

* **Every line is verifiable.** ``crc`` is the CRC-32 of the line's bytes after the 18-byte
  ``{"crc":"xxxxxxxx",`` prefix, as written (newline excluded). Lines written before checksums existed
  (no ``crc``, no ``namespace``) are still read, as belonging to the namespace whose tree holds them.
* **Readers never raise on a bad line.** A line that is not UTF-8, not JSON, fails its checksum, is not
  an archive record, or is the unterminated last line of a file is skipped and reported
  (:class:`ArchiveProblem`, via ``read(..., report=list)`` or :meth:`DialogArchive.problems`).
  Records are keyed and de-duplicated by ``(namespace, session, seq)`` (a line may be written twice: a
  crash between the archive write and the store update, then a retry).
* **Appends self-heal.** Under the file's exclusive ``flock`` (so processes never interleave lines), an
  unterminated tail left by a crash or a full disk is first appended to the quarantine file
  ``dialog/YYYY-MM-DD.jsonl.corrupt`` (0600) and then cut away; the new lines are written, ``fsync``-ed
  (the directory too when the file is new), and a failed write is cut back to where it started, so the
  next append never glues onto half a line.
* **Nothing is marked archived unless its line is durable.** :meth:`DialogArchive.append` returns only
  after ``fsync``; every failure is an :class:`~contextmem.errors.ArchiveError` naming the path and the
  cause, and the caller keeps the messages in the session.
* **Any text can be archived.** A message holding a lone surrogate (an old database may) is written with
  ``\\u`` escapes, as the store's ``encode_message`` does, never raising ``UnicodeEncodeError``.
* **Every open goes through the namespace's** :class:`~contextmem.safefs.Confined` tree: no symlink is
  followed, files are 0600 and directories 0700.
"""

from __future__ import annotations

import errno
import json
import os
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .errors import ArchiveError, PathEscapeError, UsageError
from .formats.openai import anthropic_extra, from_openai_stored, to_openai
from .messages import Message
from .namespace import DEFAULT_NAMESPACE
from .safefs import Confined, append_or_cut_back
from .workspace import DIALOG_DIR, dialog_relative, namespace_tree

__all__ = ["ArchiveProblem", "ArchiveRef", "ArchivedMessage", "DialogArchive", "encode_line", "error_cause"]

QUARANTINE_SUFFIX = ".corrupt"
_CRC_HEAD = b'{"crc":"'
_PREFIX_LEN = len(_CRC_HEAD) + 8 + 2  # {"crc":"xxxxxxxx",
_CHUNK = 1 << 16


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
    namespace: str = DEFAULT_NAMESPACE


@dataclass(frozen=True, slots=True)
class ArchiveProblem:
    """A line a reader skipped (``line`` is 1-based), or a quarantine file (``line`` 0), and why."""

    path: str
    line: int
    why: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.why}" if self.line else f"{self.path}: {self.why}"


def encode_line(namespace: str, session: str, seq: int, message: Message, *, reason: str, ts: float) -> bytes:
    """One archive line, checksummed, newline-terminated. Never fails on text UTF-8 cannot encode."""
    record: dict[str, Any] = {
        "namespace": namespace,
        "session": session,
        "seq": seq,
        "reason": reason,
        "ts": ts,
        "message": to_openai(message),
    }
    if kept := anthropic_extra(message):
        record["anthropic_extra"] = kept
    try:
        body = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: \\u escapes, which JSON round-trips
        body = json.dumps(record, separators=(",", ":")).encode("ascii")
    rest = body[1:]  # drop the opening brace: the checksum covers what follows the prefix
    return b'%s%08x",%s\n' % (_CRC_HEAD, zlib.crc32(rest), rest)


def _decode_line(raw: bytes) -> dict[str, Any] | str:
    """The record of one line (without its newline), or why it is unreadable."""
    if raw.startswith(_CRC_HEAD):
        head, rest = raw[:_PREFIX_LEN], raw[_PREFIX_LEN:]
        try:
            crc = int(head[len(_CRC_HEAD) : len(_CRC_HEAD) + 8], 16)
        except ValueError:
            return "checksum field is not hex"
        if not head.endswith(b'",') or zlib.crc32(rest) != crc:
            return "checksum mismatch (the line was damaged)"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 at byte {exc.start}"
    try:
        row = json.loads(text)
    except (ValueError, RecursionError) as exc:
        return f"not JSON ({str(exc)[:80]})"
    if (
        not isinstance(row, dict)
        or not isinstance(row.get("session"), str)
        or type(row.get("seq")) is not int
        or not isinstance(row.get("message"), dict)
        or not isinstance(row.get("namespace", ""), str)
    ):
        return "not an archive record (session, seq, message)"
    return row


def error_cause(exc: BaseException) -> str:
    """The cause of a failed file operation, for error messages: ``strerror (ENAME)`` for an OS error."""
    if isinstance(exc, PathEscapeError):
        return str(exc)
    if isinstance(exc, OSError) and exc.errno is not None:
        name = errno.errorcode.get(exc.errno, str(exc.errno))
        return f"{exc.strerror or os.strerror(exc.errno)} ({name})"
    return str(exc) or type(exc).__name__


def _fix(exc: BaseException) -> str:
    if isinstance(exc, PathEscapeError):
        return "make dialog/ a real directory of the workspace (no link, no file in its place)"
    code = getattr(exc, "errno", None)
    if code in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
        return "free disk space (or raise the file size limit) in the workspace"
    if code in (errno.ENOTDIR, errno.EEXIST):
        return "make dialog/ a directory (something else is in its place)"
    return "make the workspace's dialog/ directory writable"


class DialogArchive:
    """Appends to and reads ``dialog/*.jsonl`` in one namespace's tree (see the module invariants).

    ``files`` is the namespace's :class:`~contextmem.safefs.Confined` tree (a plain directory is taken
    to be the namespace's own); ``namespace`` is written on every line and filters what is read.
    """

    def __init__(
        self,
        files: Confined | str | os.PathLike[str],
        *,
        namespace: str = DEFAULT_NAMESPACE,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.files = files if isinstance(files, Confined) else namespace_tree(files, namespace, own_dir=True)
        self.namespace = namespace
        self.root = self.files.dir
        self.dir = self.root / DIALOG_DIR
        self._clock = clock
        self._lines: dict[str, tuple[int, int]] = {}  # relative path -> (byte offset, lines up to it)

    def _relative_for(self, ts: float) -> str:
        return dialog_relative(datetime.fromtimestamp(ts).date())

    # --- writing ------------------------------------------------------------------------------------

    def append(self, session: str, items: Sequence[tuple[int, Message]], reason: str) -> ArchiveRef:
        """Durably append ``(seq, message)`` items; returns where they are. Raises ArchiveError."""
        if not items:
            raise UsageError("nothing to archive. Fix: pass at least one (seq, message) item")
        ts = self._clock()
        relative = self._relative_for(ts)
        payload = b"".join(
            encode_line(self.namespace, session, seq, m, reason=reason, ts=ts) for seq, m in items
        )
        try:
            with self.files.locked_append(relative, under=(DIALOG_DIR,), readable=True) as (fd, _):
                size = self._heal(fd, relative, os.fstat(fd).st_size)
                start = self._count_lines(fd, relative, size)
                append_or_cut_back(fd, payload, size)
                self._lines[relative] = (size + len(payload), start + len(items))
        except OSError as exc:
            raise ArchiveError(
                f"cannot append {len(items)} message(s) of session {session!r} to "
                f"{str(self.files.dir / relative)!r}: {error_cause(exc)}. They stay in the session. "
                f"Fix: {_fix(exc)}."
            ) from exc
        return ArchiveRef(relative, start + 1, start + len(items))

    def _heal(self, fd: int, relative: str, size: int) -> int:
        """Move an unterminated tail to the quarantine file and cut it off; returns the new size."""
        if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
            return size
        end = size
        cut = 0
        while end > 0:  # find the last newline, reading backwards
            begin = max(0, end - _CHUNK)
            at = os.pread(fd, end - begin, begin).rfind(b"\n")
            if at >= 0:
                cut = begin + at + 1
                break
            end = begin
        torn = b"".join(_pread_all(fd, cut, size))
        self.files.append(relative + QUARANTINE_SUFFIX, torn + b"\n", under=(DIALOG_DIR,))
        os.ftruncate(fd, cut)
        os.fsync(fd)
        cached = self._lines.get(relative)
        if cached is not None and cached[0] > cut:
            del self._lines[relative]
        return cut

    def _count_lines(self, fd: int, relative: str, size: int) -> int:
        """Lines in the file up to ``size`` bytes, reading only what this process has not seen yet."""
        offset, count = self._lines.get(relative, (0, 0))
        if offset > size:
            offset, count = 0, 0
        for chunk in _pread_all(fd, offset, size):
            count += chunk.count(b"\n")
        return count

    # --- reading ------------------------------------------------------------------------------------

    def files_in_order(self) -> list[str]:
        """The archive files (relative paths), oldest first."""
        found = self.files.walk(DIALOG_DIR, suffix=".jsonl", max_depth=0)
        return [rel for rel, _ in found.files]

    def read(
        self, session: str | None = None, *, report: list[ArchiveProblem] | None = None
    ) -> Iterator[ArchivedMessage]:
        """Every archived message of this namespace (of ``session`` if given), oldest file first, each
        ``(namespace, session, seq)`` once. Unreadable lines are skipped and added to ``report``.

        A skipped line never hides an archived message: a message is marked archived only after its
        line was complete and fsynced.
        """
        seen: set[tuple[str, int]] = set()
        for relative in self.files_in_order():
            for number, row in self._rows(relative, report):
                if row.get("namespace", self.namespace) != self.namespace:
                    continue
                key = (row["session"], row["seq"])
                if (session is not None and key[0] != session) or key in seen:
                    continue
                try:
                    kept = row.get("anthropic_extra")
                    message = from_openai_stored(row["message"], kept if isinstance(kept, dict) else None)
                except (ValueError, TypeError, KeyError) as exc:
                    if report is not None:
                        report.append(ArchiveProblem(relative, number, f"not a message ({str(exc)[:80]})"))
                    continue
                seen.add(key)
                ts = row.get("ts")
                yield ArchivedMessage(
                    key[0],
                    key[1],
                    str(row.get("reason", "")),
                    float(ts) if isinstance(ts, int | float) else 0.0,
                    message,
                    self.namespace,
                )

    def _rows(
        self, relative: str, report: list[ArchiveProblem] | None
    ) -> Iterator[tuple[int, dict[str, Any]]]:
        try:
            fd = self.files.open(relative, os.O_RDONLY, under=(DIALOG_DIR,))
        except OSError as exc:
            if report is not None:
                report.append(ArchiveProblem(relative, 0, f"unreadable: {error_cause(exc)}"))
            return
        with os.fdopen(fd, "rb") as handle:
            for number, raw in enumerate(handle, start=1):
                if not raw.endswith(b"\n"):
                    if report is not None:
                        report.append(ArchiveProblem(relative, number, "unterminated last line (torn write)"))
                    return
                line = raw.rstrip(b"\r\n")
                if not line.strip():
                    continue
                row = _decode_line(line)
                if isinstance(row, str):
                    if report is not None:
                        report.append(ArchiveProblem(relative, number, row))
                    continue
                yield number, row

    def problems(self) -> list[ArchiveProblem]:
        """Every line readers skip, in every archive file of the tree (all sessions, all namespaces)."""
        report: list[ArchiveProblem] = []
        for relative in self.files_in_order():
            for _ in self._rows(relative, report):
                pass
        return report

    def quarantined(self) -> list[str]:
        """Quarantine files holding torn tails cut off by appends (relative paths)."""
        found = self.files.walk(DIALOG_DIR, suffix=QUARANTINE_SUFFIX, max_depth=0)
        return [rel for rel, _ in found.files]


def _pread_all(fd: int, start: int, end: int) -> Iterator[bytes]:
    position = start
    while position < end:
        chunk = os.pread(fd, min(_CHUNK * 16, end - position), position)
        if not chunk:
            return
        position += len(chunk)
        yield chunk
