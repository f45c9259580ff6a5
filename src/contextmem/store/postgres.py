"""The scale-out session store: PostgreSQL through psycopg 3, shared by many processes on many hosts.

Same contract, schema and message codec as :mod:`contextmem.store.sqlite`. Differences, and why:

* **A connection pool** (``psycopg_pool``, opened on first use) serves the store's calls; a store belongs
  to the event loop that first used it.
* **Appends are one upsert**: ``INSERT … ON CONFLICT DO UPDATE SET next_seq = next_seq + n RETURNING``
  creates the session if needed and reserves the seqs under the session row's lock, so concurrent
  appenders on any host get disjoint, consecutive seqs. A **conditional append** (``expected_next_seq``)
  adds ``WHERE next_seq = expected`` to that update: the row lock makes compare-and-reserve one step (a
  second writer waiting on the lock re-reads the row, finds it moved and gets no row back: a conflict).
* **Reads that span statements** (``open_session``, ``integrity_check``) run in ``REPEATABLE READ`` so
  they see one snapshot.
* **Compaction locks** are session-level advisory locks, ``pg_advisory_lock(key)`` with a 64-bit key
  derived from ``(namespace, session_id)`` (:func:`~contextmem.store.common.session_lock_key`; 64 bits
  rather than ``hashtext``'s 32, so unrelated sessions practically never share a lock). Each lock holds a
  dedicated connection for the duration of the ``async with``: the server releases it when that
  connection ends, so a crashed worker never leaves a session locked, on any host.
* **Migrations** (:mod:`contextmem.store.migrations.postgres`) run in one transaction under a
  transaction-level advisory lock, so processes starting together migrate once.
* **pgvector** is not used by the session store; the memory index adds its own migrations (component
  ``memory``) and creates the extension there, where its privileges can be documented.

Timestamps are epoch seconds from the store's ``clock`` (the process's wall clock by default), the same
clock ``cleanup_idle(now=…)`` is given; keep hosts' clocks in sync (NTP) for idle cleanup to be exact.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import MissingExtraError, StoreError, StoreSchemaError
from .base import SessionInfo, SessionState, StoredMessage
from .common import (
    COMPONENT,
    MESSAGES_SQL,
    SESSION_SEQS_SQL,
    MessageProblems,
    check_expected_seq,
    decode_message,
    idle_sessions_where,
    not_live_error,
    session_lock_key,
    session_problems,
)
from .migrations import PG_MIGRATIONS_TABLE, PG_RECORD_MIGRATION, Migration, discover
from .shared import EncodedSessionStore, StateFilter

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["PostgresSessionStore"]

T = TypeVar("T")
MIGRATIONS: tuple[Migration, ...] = discover("contextmem.store.migrations.postgres")
MIGRATION_LOCK_KEY = 0x636D_6D69_6772_6174  # "cmmigrat": serialises migrations across processes
_RETRIES = 5


def _import_psycopg() -> tuple[ModuleType, ModuleType]:
    try:
        import psycopg
    except ImportError:
        raise MissingExtraError("psycopg", "postgres") from None
    try:
        import psycopg_pool
    except ImportError:
        raise MissingExtraError("psycopg_pool", "postgres") from None
    return psycopg, psycopg_pool


def redact(dsn: str) -> str:
    """``dsn`` without its password, for error messages."""
    dsn = re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", dsn)
    return re.sub(r"(password\s*=\s*)('[^']*'|\S+)", r"\1***", dsn)


class PostgresSessionStore(EncodedSessionStore):
    """A :class:`~contextmem.store.base.SessionStore` on PostgreSQL (extra ``contextmem[postgres]``)."""

    def __init__(
        self,
        dsn: str,
        *,
        min_connections: int = 1,
        max_connections: int = 4,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._psycopg, self._psycopg_pool = _import_psycopg()
        self.dsn = dsn
        self._min = min_connections
        self._max = max_connections
        self._clock = clock
        self._pool: AsyncConnectionPool[Any] | None = None
        self._opening = asyncio.Lock()
        self._closed = False

    # -- plumbing --------------------------------------------------------------------------------

    async def _get_pool(self) -> AsyncConnectionPool[Any]:
        if self._closed:
            raise StoreError(f"the store on {redact(self.dsn)!r} is closed. Fix: open a new store.")
        if self._pool is not None:
            return self._pool
        async with self._opening:
            if self._pool is None:
                pool = self._psycopg_pool.AsyncConnectionPool(
                    self.dsn,
                    min_size=self._min,
                    max_size=self._max,
                    kwargs={"autocommit": True},
                    open=False,
                    name="contextmem",
                )
                try:
                    await pool.open(wait=True, timeout=30.0)
                    async with pool.connection() as conn:
                        await migrate(conn)
                except self._psycopg_pool.PoolTimeout as exc:
                    await pool.close()
                    raise StoreError(
                        f"cannot connect to PostgreSQL at {redact(self.dsn)!r} within 30 s. "
                        "Fix: check that the server runs and the DSN (host, port, user, dbname) is right."
                    ) from exc
                except self._psycopg.Error as exc:
                    await pool.close()
                    raise StoreError(f"migrating PostgreSQL at {redact(self.dsn)!r} failed: {exc}") from exc
                except BaseException:
                    await pool.close()
                    raise
                self._pool = pool
        return self._pool

    async def _run(
        self, what: str, fn: Callable[[AsyncConnection[Any]], Awaitable[T]], *, snapshot: bool = False
    ) -> T:
        """Run ``fn`` in one transaction; retry it on deadlocks and serialization failures."""
        pool = await self._get_pool()
        errors = self._psycopg.errors
        for attempt in range(_RETRIES):
            try:
                async with pool.connection() as conn, conn.transaction():
                    if snapshot:
                        await conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
                    return await fn(conn)
            except (errors.DeadlockDetected, errors.SerializationFailure) as exc:
                if attempt == _RETRIES - 1:
                    raise StoreError(f"{what} kept conflicting with other transactions: {exc}") from exc
                await asyncio.sleep(0.01 * 2**attempt)
            except self._psycopg.Error as exc:
                raise StoreError(f"{what} failed on PostgreSQL at {redact(self.dsn)!r}: {exc}") from exc
        raise AssertionError("unreachable")

    async def _ensure_session(self, conn: AsyncConnection[Any], namespace: str, session_id: str) -> Any:
        """Create the session if missing and lock its row; returns ``(id, next_seq)``."""
        now = self._clock()
        cur = await conn.execute(
            "INSERT INTO cm_sessions AS s (namespace, session_id, created_at, updated_at) "
            "VALUES (%s, %s, %s, %s) ON CONFLICT (namespace, session_id) DO UPDATE SET updated_at = %s "
            "RETURNING s.id, s.next_seq",
            (namespace, session_id, now, now, now),
        )
        return await cur.fetchone()

    # -- storage hooks of the SessionStore methods (contextmem.store.shared) -----------------------

    async def _load_session(self, namespace: str, session_id: str) -> SessionState:
        async def load(conn: AsyncConnection[Any]) -> SessionState | None:
            cur = await conn.execute(
                "SELECT id, summary, meta, next_seq, updated_at FROM cm_sessions "
                "WHERE namespace = %s AND session_id = %s",
                (namespace, session_id),
            )
            row = await cur.fetchone()
            if row is None:
                return None
            pk, summary, meta, next_seq, updated_at = row
            cur = await conn.execute(
                "SELECT seq, COALESCE(current, original), created_at FROM cm_messages "
                "WHERE session = %s AND state = 'live' ORDER BY seq",
                (pk,),
            )
            live = tuple(
                StoredMessage(seq, decode_message(text), "live", at) for seq, text, at in await cur.fetchall()
            )
            return SessionState(namespace, session_id, live, summary, meta, next_seq, updated_at)

        async def create(conn: AsyncConnection[Any]) -> None:
            now = self._clock()
            await conn.execute(
                "INSERT INTO cm_sessions (namespace, session_id, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (namespace, session_id) DO NOTHING",
                (namespace, session_id, now, now),
            )

        for _ in range(_RETRIES):
            state = await self._run("open_session", load, snapshot=True)
            if state is not None:
                return state
            await self._run("open_session", create)  # a concurrent delete may undo it: load again
        raise StoreError(
            f"session ({namespace!r}, {session_id!r}) was deleted while being opened, repeatedly"
        )

    async def _append_rows(
        self, namespace: str, session_id: str, encoded: list[str], expected_next_seq: int | None
    ) -> list[int]:
        n = len(encoded)
        expected = expected_next_seq

        async def run(conn: AsyncConnection[Any]) -> list[int]:
            now = self._clock()
            if expected is None or expected == 1:  # may create the session (a new one has next_seq 1)
                cur = await conn.execute(
                    "INSERT INTO cm_sessions AS s (namespace, session_id, next_seq, created_at, updated_at) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (namespace, session_id) "
                    "DO UPDATE SET next_seq = s.next_seq + %s, updated_at = %s "
                    "WHERE %s::bigint IS NULL OR s.next_seq = %s::bigint RETURNING s.id, s.next_seq",
                    (namespace, session_id, 1 + n, now, now, n, now, expected, expected),
                )
            else:  # only an existing session can be at ``expected``
                cur = await conn.execute(
                    "UPDATE cm_sessions SET next_seq = next_seq + %s, updated_at = %s "
                    "WHERE namespace = %s AND session_id = %s AND next_seq = %s RETURNING id, next_seq",
                    (n, now, namespace, session_id, expected),
                )
            row = await cur.fetchone()
            if row is None:  # the expectation failed, nothing was written: report where the session is
                cur = await conn.execute(
                    "SELECT next_seq FROM cm_sessions WHERE namespace = %s AND session_id = %s",
                    (namespace, session_id),
                )
                found = await cur.fetchone()
                check_expected_seq(namespace, session_id, expected, 1 if found is None else found[0])
                raise AssertionError("unreachable: a failed conditional append must be a conflict")
            pk, next_seq = row
            seqs = list(range(next_seq - n, next_seq))
            await conn.execute(
                "INSERT INTO cm_messages (session, seq, original, created_at) "
                "SELECT %s, u.seq, u.original, %s FROM unnest(%s::bigint[], %s::text[]) AS u (seq, original)",
                (pk, now, seqs, encoded),
            )
            return seqs

        return await self._run("append", run)

    async def _replace_row(self, namespace: str, session_id: str, seq: int, encoded: str) -> None:
        async def run(conn: AsyncConnection[Any]) -> None:
            now = self._clock()
            cur = await conn.execute(
                "SELECT s.id, m.state FROM cm_sessions AS s "
                "LEFT JOIN cm_messages AS m ON m.session = s.id AND m.seq = %s "
                "WHERE s.namespace = %s AND s.session_id = %s FOR UPDATE OF s",
                (seq, namespace, session_id),
            )
            row = await cur.fetchone()
            state = None if row is None else row[1]
            if row is None or state != "live":
                raise not_live_error(namespace, session_id, seq, state)
            await conn.execute(
                "UPDATE cm_messages SET current = %s WHERE session = %s AND seq = %s", (encoded, row[0], seq)
            )
            await conn.execute("UPDATE cm_sessions SET updated_at = %s WHERE id = %s", (now, row[0]))

        await self._run("replace", run)

    async def _archive_rows(
        self, namespace: str, session_id: str, wanted: list[int], summary: str | None, meta: str | None
    ) -> None:
        async def run(conn: AsyncConnection[Any]) -> None:
            pk, next_seq = await self._ensure_session(conn, namespace, session_id)
            unknown = [s for s in wanted if not 1 <= s < next_seq]
            if unknown:
                raise not_live_error(namespace, session_id, unknown[0], None)
            now = self._clock()
            await conn.execute(
                "UPDATE cm_messages SET state = 'archived', archived_at = %s "
                "WHERE session = %s AND seq = ANY(%s::bigint[]) AND state = 'live'",
                (now, pk, wanted),
            )
            await _set_meta(conn, pk, summary, meta, now)

        await self._run("archive", run)

    async def _write_meta(
        self, namespace: str, session_id: str, summary: str | None, meta: str | None
    ) -> None:
        async def run(conn: AsyncConnection[Any]) -> None:
            pk, _ = await self._ensure_session(conn, namespace, session_id)
            await _set_meta(conn, pk, summary, meta, self._clock())

        await self._run("set_meta", run)

    async def _message_rows(self, namespace: str, session_id: str, state: StateFilter) -> list[StoredMessage]:
        async def run(conn: AsyncConnection[Any]) -> list[StoredMessage]:
            cur = await conn.execute(
                "SELECT m.seq, m.original, m.state, m.created_at FROM cm_messages AS m "
                "JOIN cm_sessions AS s ON s.id = m.session WHERE s.namespace = %s AND s.session_id = %s "
                "AND (%s = 'all' OR m.state = %s) ORDER BY m.seq",
                (namespace, session_id, state, state),
            )
            return [StoredMessage(seq, decode_message(t), st, at) for seq, t, st, at in await cur.fetchall()]

        return await self._run("messages", run)

    @asynccontextmanager
    async def _session_lock(self, namespace: str, session_id: str) -> AsyncIterator[None]:
        """Exclusive compaction lock of one session, for every process on every host (``async with``)."""
        try:
            conn = await self._psycopg.AsyncConnection.connect(self.dsn, autocommit=True)
        except self._psycopg.OperationalError as exc:
            raise StoreError(f"lock: cannot connect to PostgreSQL at {redact(self.dsn)!r}: {exc}") from exc
        try:
            # If this process dies while waiting, let the server notice soon rather than take the lock
            # for a client that is gone (Linux servers; harmless where unsupported).
            with suppress(self._psycopg.Error):
                await conn.execute("SET client_connection_check_interval = '1s'")
            await conn.execute("SELECT pg_advisory_lock(%s)", (session_lock_key(namespace, session_id),))
            yield
        finally:
            await conn.close()  # ends the server session, which releases the lock in every case

    async def _session_infos(self, namespace: str) -> list[SessionInfo]:
        async def run(conn: AsyncConnection[Any]) -> list[SessionInfo]:
            cur = await conn.execute(
                "SELECT s.session_id, s.created_at, s.updated_at, "
                "COUNT(*) FILTER (WHERE m.state = 'live'), COUNT(*) FILTER (WHERE m.state = 'archived') "
                "FROM cm_sessions AS s LEFT JOIN cm_messages AS m ON m.session = s.id "
                "WHERE s.namespace = %s GROUP BY s.id ORDER BY s.updated_at DESC, s.session_id",
                (namespace,),
            )
            return [SessionInfo(namespace, sid, lv, ar, c, u) for sid, c, u, lv, ar in await cur.fetchall()]

        return await self._run("list_sessions", run)

    async def _delete_session(self, namespace: str, session_id: str) -> None:
        async def run(conn: AsyncConnection[Any]) -> None:
            await conn.execute(
                "DELETE FROM cm_sessions WHERE namespace = %s AND session_id = %s", (namespace, session_id)
            )

        await self._run("delete_session", run)

    async def _delete_idle(self, cutoff: float, namespace: str | None) -> list[tuple[str, str]]:
        where, args = idle_sessions_where(cutoff, namespace, "%s")

        async def run(conn: AsyncConnection[Any]) -> list[tuple[str, str]]:
            sql = f"DELETE FROM cm_sessions WHERE {where} RETURNING namespace, session_id"
            cur = await conn.execute(sql, args)
            return sorted((ns, sid) for ns, sid in await cur.fetchall())

        return await self._run("cleanup_idle", run)

    async def integrity_check(self) -> list[str]:
        async def run(conn: AsyncConnection[Any]) -> list[str]:
            problems: list[str] = []
            version = await _schema_version(conn)
            if version != len(MIGRATIONS):
                problems.append(f"schema version is {version}, expected {len(MIGRATIONS)}")
            cur = await conn.execute(SESSION_SEQS_SQL)
            for row in await cur.fetchall():
                problems += session_problems(row)
            bad = MessageProblems()
            async with conn.cursor(name="cm_integrity_messages") as named:  # streams, not all in memory
                await named.execute(MESSAGES_SQL)
                async for row in named:
                    bad.check(row)
            return problems + bad.problems

        return await self._run("integrity_check", run, snapshot=True)

    async def schema_version(self) -> int:
        """The session schema version of the database (after the migrations applied on first use)."""
        return await self._run("schema_version", _schema_version)

    async def close(self) -> None:
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()


async def _schema_version(conn: AsyncConnection[Any]) -> int:
    cur = await conn.execute("SELECT to_regclass('cm_schema_migrations') IS NOT NULL")
    row = await cur.fetchone()
    if row is None or not row[0]:
        return 0
    cur = await conn.execute(
        "SELECT COALESCE(MAX(version), 0) FROM cm_schema_migrations WHERE component = %s", (COMPONENT,)
    )
    row = await cur.fetchone()
    return 0 if row is None else int(row[0])


async def migrate(conn: AsyncConnection[Any], upto: int | None = None) -> int:
    """Apply pending migrations (up to ``upto``, default all) in one transaction; return the version.

    ``conn`` must be in autocommit mode. A transaction-level advisory lock serialises processes that
    migrate at the same time; the second one finds nothing left to do.
    """
    target = len(MIGRATIONS) if upto is None else upto
    if await _schema_version(conn) == target:
        return target
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK_KEY,))
        await conn.execute(PG_MIGRATIONS_TABLE)
        current = await _schema_version(conn)
        if current > len(MIGRATIONS):
            raise StoreSchemaError(
                f"the database has session schema version {current}, but this contextmem only knows "
                f"versions up to {len(MIGRATIONS)}. Fix: upgrade contextmem to open this database."
            )
        for m in MIGRATIONS[current:target]:
            for statement in m.statements:
                await conn.execute(statement)
            await conn.execute(
                PG_RECORD_MIGRATION,
                (COMPONENT, m.version, m.name, time.time()),
            )
    return max(current, target)


async def _set_meta(
    conn: AsyncConnection[Any], pk: int, summary: str | None, meta: str | None, now: float
) -> None:
    await conn.execute(
        "UPDATE cm_sessions SET summary = COALESCE(%s, summary), meta = COALESCE(%s, meta), updated_at = %s "
        "WHERE id = %s",
        (summary, meta, now, pk),
    )
