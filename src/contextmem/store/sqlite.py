"""The default session store: one SQLite file, safe for several processes on one machine (S2).

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
* **Private files**: the database, its ``-wal``/``-shm`` and the lock files are 0600, the lock directory
  0700, whatever the umask (:mod:`contextmem.safefs`, :mod:`contextmem.store.locks`).
* **Conditional appends and archives** (``expected_next_seq``, ``expected_live``) compare and write inside
  the one ``BEGIN IMMEDIATE`` transaction, so no other writer can move the session in between.
* **Not shared** (``shared = False``): the file is one machine's, so is its archive.
* **Migrations** (:mod:`contextmem.store.migrations.sqlite`) are applied on first use, in one transaction.

Messages are stored as JSON text of their OpenAI dict (:func:`~contextmem.store.codec.encode_message`),
which round-trips exactly.
"""

from __future__ import annotations

import asyncio
import os
import random
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

from ..errors import StoreError, StoreLockedError
from ..messages import Message
from ..safefs import ensure_private_file
from .backend import EncodedSessionStore, StateFilter, check_append, check_archive, not_live_error
from .base import SessionInfo, SessionState, StoredMessage
from .codec import decode_message
from .locks import try_flock
from .sql import OFFLOAD_SQL, OFFLOADED_SQL, idle_sessions_where, session_lock_key
from .sqlite_schema import MIGRATIONS, integrity_problems, migrate
from .sqlite_schema import schema_version as _schema_version

__all__ = [
    "MIGRATIONS",
    "SqliteSessionStore",
    "migrate",
    "session_lock_key",
]

T = TypeVar("T")

_BUSY_CODES = (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in _BUSY_CODES
    text = str(exc)
    return "locked" in text or "busy" in text


# --- the store ------------------------------------------------------------------------------------


class SqliteSessionStore(EncodedSessionStore):
    """A :class:`~contextmem.store.base.SessionStore` on one SQLite file (created if missing)."""

    shared = False  # one machine's file

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

    def reopen(self) -> SqliteSessionStore:
        return SqliteSessionStore(
            self.path, timeout=self._timeout, synchronous=self._synchronous, clock=self._clock
        )

    # -- plumbing --------------------------------------------------------------------------------

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
            ensure_private_file(self.path)  # before SQLite opens it: -wal and -shm inherit its mode
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
            "SELECT id, summary, meta, next_seq, updated_at, version FROM cm_sessions "
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

    # -- storage hooks of the SessionStore methods (contextmem.store.backend) -----------------------

    async def _load_session(self, namespace: str, session_id: str) -> SessionState:
        def load(conn: sqlite3.Connection, create: bool) -> SessionState | None:
            row = (
                self._ensure_session(conn, namespace, session_id)
                if create
                else self._session_row(conn, namespace, session_id)
            )
            if row is None:
                return None
            pk, summary, meta, next_seq, updated_at, version = row
            live = tuple(
                StoredMessage(seq, decode_message(text), "live", created_at, bool(closure))
                for seq, text, created_at, closure in conn.execute(
                    "SELECT seq, COALESCE(current, original), created_at, lease_closure FROM cm_messages "
                    "WHERE session = ? AND state = 'live' ORDER BY seq",
                    (pk,),
                )
            )
            return SessionState(namespace, session_id, live, summary, meta, next_seq, updated_at, version)

        def run() -> SessionState:
            state = self._read("open_session", lambda c: load(c, False))
            if state is None:
                state = self._write("open_session", lambda c: load(c, True))
            assert state is not None
            return state

        return await self._call(run)

    async def _session_version(self, namespace: str, session_id: str) -> int | None:
        def run(conn: sqlite3.Connection) -> int | None:
            row = conn.execute(
                "SELECT version FROM cm_sessions WHERE namespace = ? AND session_id = ?",
                (namespace, session_id),
            ).fetchone()
            return None if row is None else int(row[0])

        return await self._read_async("open_session", run)

    async def _append_rows(
        self,
        namespace: str,
        session_id: str,
        encoded: list[str],
        expected_next_seq: int | None,
        expected_live: list[int],
        *,
        lease_closure: bool,
    ) -> list[int]:
        def run(conn: sqlite3.Connection) -> list[int]:  # BEGIN IMMEDIATE: no writer moves next_seq meanwhile
            row = self._session_row(conn, namespace, session_id)
            live = _live_seqs(conn, row[0]) if row is not None and expected_live else set()
            at = 1 if row is None else row[3]
            check_append(
                namespace,
                session_id,
                expected_next_seq=expected_next_seq,
                next_seq=at,
                expected_live=expected_live,
                live=live,
            )
            pk, _, _, first, _, _ = (
                row if row is not None else self._ensure_session(conn, namespace, session_id)
            )
            now = self._clock()
            seqs = list(range(first, first + len(encoded)))
            conn.executemany(
                "INSERT INTO cm_messages (session, seq, original, created_at, lease_closure) "
                "VALUES (?, ?, ?, ?, ?)",
                [(pk, seq, text, now, int(lease_closure)) for seq, text in zip(seqs, encoded, strict=True)],
            )
            conn.execute(
                "UPDATE cm_sessions SET next_seq = ?, updated_at = ? WHERE id = ?", (seqs[-1] + 1, now, pk)
            )
            return seqs

        return await self._write_async("append", run)

    async def _replace_row(self, namespace: str, session_id: str, seq: int, encoded: str) -> None:
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

    async def _archive_rows(
        self,
        namespace: str,
        session_id: str,
        wanted: list[int],
        summary: str | None,
        meta: str | None,
        *,
        expected_next_seq: int | None,
    ) -> None:
        def run(conn: sqlite3.Connection) -> None:
            pk, _, _, next_seq, _, _ = self._ensure_session(conn, namespace, session_id)
            live = _live_seqs(conn, pk) if expected_next_seq is not None else set()
            check_archive(
                namespace,
                session_id,
                wanted,
                next_seq=next_seq,
                live=live,
                expected_next_seq=expected_next_seq,
            )
            now = self._clock()
            conn.executemany(
                "UPDATE cm_messages SET state = 'archived', archived_at = ? "
                "WHERE session = ? AND seq = ? AND state = 'live'",
                [(now, pk, s) for s in wanted],
            )
            _set_meta(conn, pk, summary, meta, now)

        await self._write_async("archive", run)

    async def _write_meta(
        self, namespace: str, session_id: str, summary: str | None, meta: str | None
    ) -> None:
        def run(conn: sqlite3.Connection) -> None:
            pk = self._ensure_session(conn, namespace, session_id)[0]
            _set_meta(conn, pk, summary, meta, self._clock())

        await self._write_async("set_meta", run)

    async def _record_offload(self, namespace: str, session_id: str, seq: int, path: str) -> None:
        def run(conn: sqlite3.Connection) -> None:
            row = self._session_row(conn, namespace, session_id)
            if row is None or not 1 <= seq < row[3]:
                raise not_live_error(namespace, session_id, seq, None)
            now = self._clock()
            drop_others, upsert = (sql.format(p="?") for sql in OFFLOAD_SQL)
            conn.execute(drop_others, (path, row[0], namespace))
            conn.execute(upsert, (row[0], path, seq, now))
            conn.execute("UPDATE cm_sessions SET updated_at = ? WHERE id = ?", (now, row[0]))

        await self._write_async("record_offload", run)

    async def _offloaded_row(self, namespace: str, path: str) -> Message | None:
        def run(conn: sqlite3.Connection) -> Message | None:
            found = conn.execute(OFFLOADED_SQL.format(p="?"), (namespace, path)).fetchone()
            return None if found is None else decode_message(found[0])

        return await self._read_async("offloaded", run)

    async def _message_rows(self, namespace: str, session_id: str, state: StateFilter) -> list[StoredMessage]:
        def run(conn: sqlite3.Connection) -> list[StoredMessage]:
            sql = (
                "SELECT m.seq, m.original, m.state, m.created_at, m.lease_closure FROM cm_messages AS m "
                "JOIN cm_sessions AS s ON s.id = m.session WHERE s.namespace = ? AND s.session_id = ?"
            )
            args: tuple[str, ...] = (namespace, session_id)
            if state != "all":
                sql += " AND m.state = ?"
                args += (state,)
            rows = conn.execute(sql + " ORDER BY m.seq", args).fetchall()
            return [
                StoredMessage(seq, decode_message(text), st, at, bool(closure))
                for seq, text, st, at, closure in rows
            ]

        return await self._read_async("messages", run)

    @asynccontextmanager
    async def _session_lock(self, namespace: str, session_id: str) -> AsyncIterator[None]:
        """Exclusive compaction lock of one session, for every process on this machine (``async with``)."""
        path = self._lock_path(namespace, session_id)
        delay = 0.002
        while True:
            fd = try_flock(path)
            if fd is not None:
                break
            await asyncio.sleep(delay * (0.5 + random.random()))
            delay = min(delay * 2, 0.05)
        try:
            yield
        finally:
            os.close(fd)  # releases the flock

    async def _session_infos(self, namespace: str) -> list[SessionInfo]:
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

    async def _delete_session(self, namespace: str, session_id: str) -> None:
        def run(conn: sqlite3.Connection) -> None:
            conn.execute(
                "DELETE FROM cm_sessions WHERE namespace = ? AND session_id = ?", (namespace, session_id)
            )

        await self._write_async("delete_session", run)
        self._drop_lock_file(namespace, session_id)

    async def _delete_idle(self, cutoff: float, namespace: str | None) -> list[tuple[str, str]]:
        where, args = idle_sessions_where(cutoff, namespace, "?")

        def run(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            rows = conn.execute(
                f"SELECT namespace, session_id FROM cm_sessions WHERE {where} ORDER BY namespace, session_id",
                args,
            ).fetchall()
            conn.execute(f"DELETE FROM cm_sessions WHERE {where}", args)
            return [(ns, sid) for ns, sid in rows]

        removed = await self._write_async("cleanup_idle", run)
        for ns, sid in removed:
            self._drop_lock_file(ns, sid)
        return removed

    async def integrity_check(self) -> list[str]:
        return await self._read_async("integrity_check", integrity_problems)

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

    def _lock_path(self, namespace: str, session_id: str) -> Path:
        return self._lock_dir / f"{session_lock_key(namespace, session_id) & (2**64 - 1):016x}.lock"

    def _drop_lock_file(self, namespace: str, session_id: str) -> None:
        """Remove a deleted session's lock file if nobody holds it (holders re-check the inode)."""
        path = self._lock_path(namespace, session_id)
        fd = try_flock(path, create=False)
        if fd is not None:
            try:
                path.unlink(missing_ok=True)
            finally:
                os.close(fd)


def _live_seqs(conn: sqlite3.Connection, pk: int) -> set[int]:
    return {
        seq
        for (seq,) in conn.execute("SELECT seq FROM cm_messages WHERE session = ? AND state = 'live'", (pk,))
    }


def _set_meta(conn: sqlite3.Connection, pk: int, summary: str | None, meta: str | None, now: float) -> None:
    conn.execute(
        "UPDATE cm_sessions SET summary = COALESCE(?, summary), meta = COALESCE(?, meta), updated_at = ? "
        "WHERE id = ?",
        (summary, meta, now, pk),
    )
