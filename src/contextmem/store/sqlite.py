"""The default session store: one SQLite file, safe for several processes on one machine (SPEC S2).

Choices, and why:

* **WAL + ``synchronous=FULL``** (default). WAL lets readers run beside the one writer; FULL fsyncs the
  WAL on every commit, so a message the store acknowledged survives a power cut, not only a crash of the
  process. The archive (C12) is only as good as that promise. ``synchronous="NORMAL"`` commits 10-20x
  faster for one writer (``bench/bench_store.py``) and still loses nothing when a *process* dies
  (SIGKILL), but a power loss may roll back the last commits; pass it when that trade is right for you.
* **Every write is one ``BEGIN IMMEDIATE`` transaction**: it takes the write lock up front, so SQLite's
  busy handler (``timeout`` seconds) applies, and a read-then-write upgrade can never fail with
  ``SQLITE_BUSY`` half-way. The few busy cases the handler does not cover (WAL recovery after a crash, a
  snapshot that went stale) are retried with backoff until ``timeout``; only then does
  :class:`~contextmem.errors.StoreLockedError` surface. "database is locked" never reaches users.
* **One connection per store, on one worker thread.** The async API hands each call to that thread, so the
  event loop never blocks and the connection is never shared between threads.
* **Compaction locks are ``flock`` locks on one file per session** in ``<db>.locks/``. The kernel releases
  them when the holder dies, so a SIGKILLed compactor never leaves a session locked; waiting polls without
  holding a thread, so a cancelled waiter leaves nothing behind. Locks are per machine, like the file
  (POSIX only: on Windows the rest of the store works, ``lock`` raises).
* **Migrations** (:mod:`contextmem.store.migrations.sqlite`) are applied on first use, in one transaction.

Messages are stored as JSON text of their OpenAI dict (:func:`encode_message`), which round-trips exactly.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace as dc_replace
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

from ..errors import MessageStateError, StoreError, StoreLockedError, StoreSchemaError
from ..formats.openai import ANTHROPIC_EXTRA_KEYS, from_openai, to_openai
from ..messages import Message
from .base import SessionInfo, SessionState, StoredMessage
from .migrations import Migration, discover

__all__ = ["SqliteSessionStore", "decode_message", "encode_message", "migrate", "session_lock_key"]

T = TypeVar("T")
StateFilter = Literal["live", "archived", "all"]

COMPONENT = "sessions"
MIGRATIONS: tuple[Migration, ...] = discover("contextmem.store.migrations.sqlite")
_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


# --- shared by both stores: message codec and lock keys -------------------------------------------


def encode_message(message: Message) -> str:
    """JSON text of ``to_openai(message)``; ``decode_message`` gives back an equal message.

    Keys the OpenAI format never emits (those :mod:`contextmem.formats.anthropic` keeps in ``extra``) are
    wrapped alongside: ``{"openai": {...}, "anthropic_extra": {...}}``. A plain OpenAI dict always has
    ``role``, so the two shapes cannot be confused.
    """
    doc: dict[str, Any] = to_openai(message)
    kept = {k: v for k, v in message.extra.items() if k in ANTHROPIC_EXTRA_KEYS}
    if kept:
        doc = {"openai": doc, "anthropic_extra": kept}
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: keep them as \\u escapes, which JSON round-trips
            text = json.dumps(doc, separators=(",", ":"))
    return text


def decode_message(text: str) -> Message:
    """Inverse of :func:`encode_message`; raises ``ValueError`` (or a ``MessageFormatError``) if corrupt."""
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise ValueError(f"stored message is not a JSON object: {text[:80]!r}")
    if "role" in doc:
        return from_openai(doc)
    message = from_openai(doc["openai"])
    return dc_replace(message, extra={**message.extra, **doc["anthropic_extra"]})


def session_lock_key(namespace: str, session_id: str) -> int:
    """A signed 64-bit key naming one session's compaction lock (unambiguous for any two strings)."""
    raw = f"{len(namespace)}:{namespace}/{session_id}".encode()
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big", signed=True)


# --- migrations -----------------------------------------------------------------------------------


def _schema_version(conn: sqlite3.Connection) -> int:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'cm_schema_migrations'"
    ).fetchone()
    if exists is None:
        return 0
    row = conn.execute(
        "SELECT COALESCE(MAX(version), 0) FROM cm_schema_migrations WHERE component = ?", (COMPONENT,)
    ).fetchone()
    return int(row[0])


def migrate(conn: sqlite3.Connection, upto: int | None = None, *, now: float | None = None) -> int:
    """Apply pending migrations (up to version ``upto``, default all) in one transaction; return the version.

    ``conn`` must be in autocommit mode (``isolation_level=None``). Several processes may call this at
    once: ``BEGIN IMMEDIATE`` serialises them and the second finds nothing left to do.
    """
    target = len(MIGRATIONS) if upto is None else upto
    if _schema_version(conn) == target:
        return target
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS cm_schema_migrations (component TEXT NOT NULL, "
            "version INTEGER NOT NULL, name TEXT NOT NULL, applied_at REAL NOT NULL, "
            "PRIMARY KEY (component, version))"
        )
        current = _schema_version(conn)
        if current > len(MIGRATIONS):
            raise StoreSchemaError(
                f"the database has session schema version {current}, but this contextmem only knows "
                f"versions up to {len(MIGRATIONS)}. Fix: upgrade contextmem to open this database."
            )
        for m in MIGRATIONS[current:target]:
            for statement in m.statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO cm_schema_migrations (component, version, name, applied_at) VALUES (?, ?, ?, ?)",
                (COMPONENT, m.version, m.name, time.time() if now is None else now),
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return max(current, target)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _BUSY_CODES
    text = str(exc)
    return "locked" in text or "busy" in text


# --- the store ------------------------------------------------------------------------------------


class SqliteSessionStore:
    """A :class:`~contextmem.store.base.SessionStore` on one SQLite file (created if missing)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        timeout: float = 30.0,
        synchronous: Literal["FULL", "NORMAL"] = "FULL",
        clock: Callable[[], float] = time.time,
    ) -> None:
        if synchronous not in ("FULL", "NORMAL"):
            raise StoreError(f"synchronous={synchronous!r} is not supported. Fix: use 'FULL' or 'NORMAL'.")
        self.path = Path(path)
        self._timeout = timeout
        self._synchronous = synchronous
        self._clock = clock
        self._lock_dir = Path(f"{self.path}.locks")
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="contextmem-sqlite")
        self._conn: sqlite3.Connection | None = None  # used only on the executor's thread
        self._closed = False

    # -- plumbing --------------------------------------------------------------------------------

    async def __aenter__(self) -> SqliteSessionStore:
        return self

    async def __aexit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def _call(self, fn: Callable[[], T]) -> T:
        if self._closed:
            raise StoreError(f"the store on {str(self.path)!r} is closed. Fix: open a new store.")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn)

    async def _write_async(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self._call(lambda: self._transaction(what, fn, write=True))

    async def _read_async(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        return await self._call(lambda: self._transaction(what, fn, write=False))

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=self._timeout, isolation_level=None)
            try:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute(f"PRAGMA synchronous = {self._synchronous}")
                conn.execute("PRAGMA foreign_keys = ON")
                migrate(conn)
            except BaseException:
                conn.close()
                raise
            self._conn = conn
        return self._conn

    def _transaction(self, what: str, fn: Callable[[sqlite3.Connection], T], *, write: bool) -> T:
        """Run ``fn`` in one transaction, retrying the whole transaction while the database is busy."""
        started = time.monotonic()
        delay = 0.002
        while True:
            try:
                conn = self._connection()
                conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                try:
                    result = fn(conn)
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
                return result
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise StoreError(f"{what} failed on {str(self.path)!r}: {exc}") from exc
                waited = time.monotonic() - started
                if waited >= self._timeout:
                    raise StoreLockedError(f"{what} on {str(self.path)!r}", waited) from exc
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.25)
            except sqlite3.DatabaseError as exc:
                raise StoreError(f"{what} failed on {str(self.path)!r}: {exc}") from exc

    def _write(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        return self._transaction(what, fn, write=True)

    def _read(self, what: str, fn: Callable[[sqlite3.Connection], T]) -> T:
        return self._transaction(what, fn, write=False)

    @staticmethod
    def _session_row(conn: sqlite3.Connection, namespace: str, session_id: str) -> Any:
        return conn.execute(
            "SELECT id, summary, meta, next_seq, updated_at FROM cm_sessions "
            "WHERE namespace = ? AND session_id = ?",
            (namespace, session_id),
        ).fetchone()

    def _ensure_session(self, conn: sqlite3.Connection, namespace: str, session_id: str) -> Any:
        row = self._session_row(conn, namespace, session_id)
        if row is None:
            now = self._clock()
            conn.execute(
                "INSERT INTO cm_sessions (namespace, session_id, created_at, updated_at) VALUES (?, ?, ?, ?)",
                (namespace, session_id, now, now),
            )
            row = self._session_row(conn, namespace, session_id)
        return row

    # -- SessionStore ----------------------------------------------------------------------------

    async def open_session(self, namespace: str, session_id: str) -> SessionState:
        def load(conn: sqlite3.Connection, create: bool) -> SessionState | None:
            row = (
                self._ensure_session(conn, namespace, session_id)
                if create
                else self._session_row(conn, namespace, session_id)
            )
            if row is None:
                return None
            pk, summary, meta, next_seq, updated_at = row
            live = tuple(
                StoredMessage(seq, decode_message(text), "live", created_at)
                for seq, text, created_at in conn.execute(
                    "SELECT seq, COALESCE(current, original), created_at FROM cm_messages "
                    "WHERE session = ? AND state = 'live' ORDER BY seq",
                    (pk,),
                )
            )
            return SessionState(namespace, session_id, live, summary, meta, next_seq, updated_at)

        def run() -> SessionState:
            state = self._read("open_session", lambda c: load(c, False))
            if state is None:
                state = self._write("open_session", lambda c: load(c, True))
            assert state is not None
            return state

        return await self._call(run)

    async def append(self, namespace: str, session_id: str, messages: Sequence[Message]) -> list[int]:
        if not messages:
            return []
        encoded = [encode_message(m) for m in messages]

        def run(conn: sqlite3.Connection) -> list[int]:
            pk, _, _, first, _ = self._ensure_session(conn, namespace, session_id)
            now = self._clock()
            seqs = list(range(first, first + len(encoded)))
            conn.executemany(
                "INSERT INTO cm_messages (session, seq, original, created_at) VALUES (?, ?, ?, ?)",
                [(pk, seq, text, now) for seq, text in zip(seqs, encoded, strict=True)],
            )
            conn.execute(
                "UPDATE cm_sessions SET next_seq = ?, updated_at = ? WHERE id = ?", (seqs[-1] + 1, now, pk)
            )
            return seqs

        return await self._write_async("append", run)

    async def replace(self, namespace: str, session_id: str, seq: int, message: Message) -> None:
        encoded = encode_message(message)

        def run(conn: sqlite3.Connection) -> None:
            row = self._session_row(conn, namespace, session_id)
            state = None
            if row is not None:
                found = conn.execute(
                    "SELECT state FROM cm_messages WHERE session = ? AND seq = ?", (row[0], seq)
                ).fetchone()
                state = None if found is None else found[0]
            if state != "live":
                raise not_live_error(namespace, session_id, seq, state)
            now = self._clock()
            conn.execute(
                "UPDATE cm_messages SET current = ? WHERE session = ? AND seq = ?", (encoded, row[0], seq)
            )
            conn.execute("UPDATE cm_sessions SET updated_at = ? WHERE id = ?", (now, row[0]))

        await self._write_async("replace", run)

    async def archive(
        self,
        namespace: str,
        session_id: str,
        seqs: Sequence[int],
        *,
        summary: str | None = None,
        meta: str | None = None,
    ) -> None:
        wanted = sorted(set(seqs))

        def run(conn: sqlite3.Connection) -> None:
            pk, _, _, next_seq, _ = self._ensure_session(conn, namespace, session_id)
            unknown = [s for s in wanted if not 1 <= s < next_seq]
            if unknown:
                raise not_live_error(namespace, session_id, unknown[0], None)
            now = self._clock()
            conn.executemany(
                "UPDATE cm_messages SET state = 'archived', archived_at = ? "
                "WHERE session = ? AND seq = ? AND state = 'live'",
                [(now, pk, s) for s in wanted],
            )
            _set_meta(conn, pk, summary, meta, now)

        await self._write_async("archive", run)

    async def set_meta(
        self, namespace: str, session_id: str, *, summary: str | None = None, meta: str | None = None
    ) -> None:
        def run(conn: sqlite3.Connection) -> None:
            pk = self._ensure_session(conn, namespace, session_id)[0]
            _set_meta(conn, pk, summary, meta, self._clock())

        await self._write_async("set_meta", run)

    async def messages(
        self, namespace: str, session_id: str, *, state: StateFilter = "all"
    ) -> list[StoredMessage]:
        if state not in ("live", "archived", "all"):
            raise StoreError(f"state={state!r} is not a message state. Fix: use 'live', 'archived' or 'all'.")

        def run(conn: sqlite3.Connection) -> list[StoredMessage]:
            sql = (
                "SELECT m.seq, m.original, m.state, m.created_at FROM cm_messages AS m "
                "JOIN cm_sessions AS s ON s.id = m.session WHERE s.namespace = ? AND s.session_id = ?"
            )
            args: tuple[str, ...] = (namespace, session_id)
            if state != "all":
                sql += " AND m.state = ?"
                args += (state,)
            rows = conn.execute(sql + " ORDER BY m.seq", args).fetchall()
            return [StoredMessage(seq, decode_message(text), st, at) for seq, text, st, at in rows]

        return await self._read_async("messages", run)

    @asynccontextmanager
    async def _session_lock(self, namespace: str, session_id: str) -> AsyncIterator[None]:
        path = self._lock_dir / f"{session_lock_key(namespace, session_id) & (2**64 - 1):016x}.lock"
        delay = 0.002
        while True:
            fd = _try_flock(path)
            if fd is not None:
                break
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.05)
        try:
            yield
        finally:
            os.close(fd)  # releases the flock

    def lock(self, namespace: str, session_id: str) -> AbstractAsyncContextManager[None]:
        """Exclusive compaction lock of one session, for every process on this machine (``async with``)."""
        return self._session_lock(namespace, session_id)

    async def list_sessions(self, namespace: str) -> list[SessionInfo]:
        def run(conn: sqlite3.Connection) -> list[SessionInfo]:
            rows = conn.execute(
                "SELECT s.session_id, s.created_at, s.updated_at, "
                "(SELECT COUNT(*) FROM cm_messages AS m WHERE m.session = s.id AND m.state = 'live'), "
                "(SELECT COUNT(*) FROM cm_messages AS m WHERE m.session = s.id AND m.state = 'archived') "
                "FROM cm_sessions AS s WHERE s.namespace = ? ORDER BY s.updated_at DESC, s.session_id",
                (namespace,),
            ).fetchall()
            return [SessionInfo(namespace, sid, live, arch, c, u) for sid, c, u, live, arch in rows]

        return await self._read_async("list_sessions", run)

    async def delete_session(self, namespace: str, session_id: str) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute(
                "DELETE FROM cm_sessions WHERE namespace = ? AND session_id = ?", (namespace, session_id)
            )

        await self._write_async("delete_session", run)
        self._drop_lock_file(namespace, session_id)

    async def cleanup_idle(
        self, older_than_seconds: float, *, now: float | None = None
    ) -> list[tuple[str, str]]:
        cutoff = (self._clock() if now is None else now) - older_than_seconds

        def run(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            rows = conn.execute(
                "SELECT namespace, session_id FROM cm_sessions WHERE updated_at < ? "
                "ORDER BY namespace, session_id",
                (cutoff,),
            ).fetchall()
            conn.execute("DELETE FROM cm_sessions WHERE updated_at < ?", (cutoff,))
            return [(ns, sid) for ns, sid in rows]

        removed = await self._write_async("cleanup_idle", run)
        for ns, sid in removed:
            self._drop_lock_file(ns, sid)
        return removed

    async def integrity_check(self) -> list[str]:
        return await self._read_async("integrity_check", _integrity_problems)

    async def schema_version(self) -> int:
        """The session schema version of the database (after the migrations applied on open)."""
        return await self._read_async("schema_version", _schema_version)

    async def close(self) -> None:
        if self._closed:
            return

        def shut() -> None:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

        try:
            await self._call(shut)
        finally:
            self._closed = True
            self._executor.shutdown(wait=False)

    def _drop_lock_file(self, namespace: str, session_id: str) -> None:
        """Remove a deleted session's lock file if nobody holds it (holders re-check the inode)."""
        path = self._lock_dir / f"{session_lock_key(namespace, session_id) & (2**64 - 1):016x}.lock"
        fd = _try_flock(path, create=False)
        if fd is not None:
            try:
                path.unlink(missing_ok=True)
            finally:
                os.close(fd)


def _try_flock(path: Path, *, create: bool = True) -> int | None:
    """An fd holding an exclusive flock on ``path``, or None if someone else holds it.

    A lock file may be unlinked (session deleted) between our ``open`` and our ``flock``; we then hold a
    lock on an orphaned inode that nobody else can see, so the inode is checked after locking.
    """
    try:
        import fcntl
    except ImportError:  # Windows
        raise StoreError(
            "SQLite compaction locks need POSIX file locks (fcntl), which this platform lacks. "
            "Fix: run on Linux or macOS, or use the PostgreSQL store."
        ) from None
    flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
    try:
        fd = os.open(path, flags, 0o666)
    except FileNotFoundError:
        if not create:
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, flags, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held = os.fstat(fd)
        now = os.stat(path)
        if (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino):
            return fd
    except (BlockingIOError, FileNotFoundError):
        pass
    os.close(fd)
    return None


def _set_meta(conn: sqlite3.Connection, pk: int, summary: str | None, meta: str | None, now: float) -> None:
    conn.execute(
        "UPDATE cm_sessions SET summary = COALESCE(?, summary), meta = COALESCE(?, meta), updated_at = ? "
        "WHERE id = ?",
        (summary, meta, now, pk),
    )


def not_live_error(namespace: str, session_id: str, seq: int, state: str | None) -> MessageStateError:
    where = f"session ({namespace!r}, {session_id!r})"
    if state is None:
        return MessageStateError(
            f"seq {seq!r} does not exist in {where}. Fix: use a seq returned by append() for this session."
        )
    return MessageStateError(
        f"seq {seq!r} of {where} is {state}, not live. Fix: only live messages can be replaced or archived."
    )


def _integrity_problems(conn: sqlite3.Connection) -> list[str]:
    problems = [f"sqlite integrity_check: {r[0]}" for r in conn.execute("PRAGMA integrity_check")]
    if problems == ["sqlite integrity_check: ok"]:
        problems = []
    problems += [
        f"foreign key: row {rowid} of {table} points to a missing {parent} row"
        for table, rowid, parent, _ in conn.execute("PRAGMA foreign_key_check")
    ]
    version = _schema_version(conn)
    if version != len(MIGRATIONS):
        problems.append(f"schema version is {version}, expected {len(MIGRATIONS)}")
    for row in conn.execute(SESSION_SEQS_SQL):
        problems += session_problems(row)
    bad = MessageProblems()
    for row in conn.execute(MESSAGES_SQL):
        bad.check(row)
    return problems + bad.problems


# Integrity checks shared by both stores (PostgreSQL runs the same two queries).
SESSION_SEQS_SQL = (
    "SELECT s.namespace, s.session_id, s.next_seq, COUNT(m.seq), MIN(m.seq), MAX(m.seq), "
    "SUM(CASE WHEN m.seq IS NULL OR m.state IN ('live', 'archived') THEN 0 ELSE 1 END) "
    "FROM cm_sessions AS s LEFT JOIN cm_messages AS m ON m.session = s.id "
    "GROUP BY s.id, s.namespace, s.session_id, s.next_seq ORDER BY s.namespace, s.session_id"
)
MESSAGES_SQL = (
    "SELECT s.namespace, s.session_id, m.seq, m.original, m.current FROM cm_messages AS m "
    "JOIN cm_sessions AS s ON s.id = m.session ORDER BY s.id, m.seq"
)


def session_problems(row: Sequence[Any]) -> list[str]:
    """Problems of one row of :data:`SESSION_SEQS_SQL`: seqs must be exactly 1..next_seq-1, states valid."""
    ns, sid, next_seq, count, low, high, bad_states = row
    where = f"session ({ns!r}, {sid!r})"
    problems = []
    if count != next_seq - 1 or (count and (low != 1 or high != next_seq - 1)):
        problems.append(
            f"{where}: seqs are not contiguous: {count} messages with seqs {low}..{high}, "
            f"expected 1..{next_seq - 1}"
        )
    if bad_states:
        problems.append(f"{where}: {bad_states} messages are neither live nor archived")
    return problems


class MessageProblems:
    """Collects messages (rows of :data:`MESSAGES_SQL`) whose stored JSON does not decode."""

    def __init__(self, limit: int = 50) -> None:
        self.limit = limit
        self.bad = 0
        self._found: list[str] = []

    def check(self, row: Sequence[Any]) -> None:
        ns, sid, seq, original, current = row
        for column, text in (("original", original), ("current", current)):
            if text is None and column == "current":
                continue
            try:
                decode_message(text)
            except (ValueError, TypeError, KeyError) as exc:  # MessageFormatError is a ValueError
                self.bad += 1
                if self.bad <= self.limit:
                    self._found.append(
                        f"session ({ns!r}, {sid!r}) seq {seq}: {column} does not decode: {exc}"
                    )

    @property
    def problems(self) -> list[str]:
        more = self.bad - self.limit
        return self._found + ([f"... and {more} more messages that do not decode"] if more > 0 else [])
