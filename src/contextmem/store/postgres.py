"""The scale-out session store: PostgreSQL through psycopg 3, shared by many processes on many hosts.

Same contract, schema and message codec as :mod:`contextmem.store.sqlite`. Differences, and why:

* **A connection pool** (``psycopg_pool``, opened on first use) serves the store's calls; a store belongs
  to the event loop that first used it. Timeouts, keepalives, retries of transient failures (a server
  restart, a lost link) and the translation of every driver error live in
  :mod:`contextmem.store.pg_connect`; this module is the SQL.
* **Shared** (``shared = True``): every host reaches the same rows, so the archived messages are the
  archive, and offloaded tool results are found through :meth:`offloaded` on any host.
* **Appends are one upsert**: ``INSERT … ON CONFLICT DO UPDATE SET next_seq = next_seq + n RETURNING``
  creates the session if needed and reserves the seqs under the session row's lock, so concurrent
  appenders on any host get disjoint, consecutive seqs. A **conditional append** (``expected_next_seq``)
  adds ``WHERE next_seq = expected`` to that update: the row lock makes compare-and-reserve one step (a
  second writer waiting on the lock re-reads the row, finds it moved and gets no row back: a conflict).
  ``expected_live`` is read after that lock is taken. **Archives take the same row lock** first, so an
  archive and an append never interleave: a conditional archive sees the ``next_seq`` appends left.
* **An append cut off while committing** may have landed. A conditional one settles it on a new
  connection: its rows at ``expected_next_seq…`` with exactly its originals mean it landed (their seqs
  are returned); a ``next_seq`` still at the expectation means it did not (it is written now); anything
  else is a conflict. An unconditional one cannot tell and says so
  (:class:`~contextmem.errors.StoreUnavailableError` with ``may_have_landed``).
* **Reads that span statements** (``open_session``, ``integrity_check``) run in ``REPEATABLE READ`` so
  they see one snapshot.
* **Compaction locks** are session-level advisory locks, ``pg_advisory_lock(key)`` with a 64-bit key
  derived from ``(namespace, session_id)`` (:func:`~contextmem.store.sql.session_lock_key`; 64 bits
  rather than ``hashtext``'s 32, so unrelated sessions practically never share a lock). Each lock holds a
  dedicated connection for the duration of the ``async with``: the server releases it when that
  connection ends, so a crashed worker never leaves a session locked, on any host. The flip side: a
  server restart (or a lost link) ends the lock while its block still runs. Leaving the block is then
  quiet, and what the block writes should be conditional (``archive(..., expected_next_seq=n)``), so a
  compaction that lost its lock can never land over another's.
* **Migrations** (:mod:`contextmem.store.migrations.postgres`) run in one transaction under a
  transaction-level advisory lock, so processes starting together migrate once.
* **pgvector** is not used by the session store; the memory index adds its own migrations (component
  ``memory``) and creates the extension there, where its privileges can be documented.

Timestamps are epoch seconds from the store's ``clock`` (the process's wall clock by default), the same
clock ``cleanup_idle(now=…)`` is given; keep hosts' clocks in sync (NTP) for idle cleanup to be exact.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from ..errors import InternalError, StoreError
from ..messages import Message
from ..offloop import off_loop
from .backend import EncodedSessionStore, StateFilter, check_append, check_archive, not_live_error
from .base import SessionInfo, SessionState, StoredMessage
from .codec import decode_message
from .migrations import Migration, discover, migrate_postgres, pg_schema_version
from .pg_connect import Patience, PgConnections
from .sql import (
    COMPONENT,
    MESSAGES_SQL,
    OFFLOAD_SQL,
    OFFLOADED_SQL,
    SESSION_SEQS_SQL,
    MessageProblems,
    idle_sessions_where,
    session_lock_key,
    session_problems,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PostgresSessionStore"]

MIGRATIONS: tuple[Migration, ...] = discover("contextmem.store.migrations.postgres")
_RETRIES = 5


class PostgresSessionStore(EncodedSessionStore):
    """A :class:`~contextmem.store.base.SessionStore` on PostgreSQL (extra ``contextmem[postgres]``).

    The timeouts are the ``store_*`` settings (seconds): one connection attempt, one statement, the wait
    for a compaction or row lock, and how long transient failures are retried.
    """

    shared = True  # every host reaches the same database

    def __init__(
        self,
        dsn: str,
        *,
        min_connections: int = 1,
        max_connections: int = 4,
        clock: Callable[[], float] = time.time,
        connect_timeout: float = 10.0,
        statement_timeout: float = 30.0,
        lock_timeout: float = 30.0,
        retry_seconds: float = 30.0,
    ) -> None:
        self.dsn = dsn
        self._clock = clock
        self.patience = Patience(connect_timeout, statement_timeout, lock_timeout, retry_seconds)
        self._db = PgConnections(
            dsn, self.patience, min_size=min_connections, max_size=max_connections, prepare=migrate
        )

    def reopen(self) -> PostgresSessionStore:
        """A store on the same database with the same patience, and a pool of one connection."""
        p = self.patience
        return PostgresSessionStore(
            self.dsn,
            min_connections=1,
            max_connections=1,
            clock=self._clock,
            connect_timeout=p.connect_timeout,
            statement_timeout=p.statement_timeout,
            lock_timeout=p.lock_timeout,
            retry_seconds=p.retry_seconds,
        )

    # -- plumbing --------------------------------------------------------------------------------

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

    # -- storage hooks of the SessionStore methods (contextmem.store.backend) -----------------------

    async def _load_session(self, namespace: str, session_id: str) -> SessionState:
        async def load(conn: AsyncConnection[Any]) -> tuple[Any, list[Any]] | None:
            cur = await conn.execute(
                "SELECT id, summary, meta, next_seq, updated_at, version FROM cm_sessions "
                "WHERE namespace = %s AND session_id = %s",
                (namespace, session_id),
            )
            row = await cur.fetchone()
            if row is None:
                return None
            cur = await conn.execute(
                "SELECT seq, COALESCE(current, original), created_at, lease_closure FROM cm_messages "
                "WHERE session = %s AND state = 'live' ORDER BY seq",
                (row[0],),
            )
            return row, await cur.fetchall()

        def decode(row: Any, rows: list[Any]) -> SessionState:
            _, summary, meta, next_seq, updated_at, version = row
            live = tuple(
                StoredMessage(seq, decode_message(text), "live", at, closure)
                for seq, text, at, closure in rows
            )
            return SessionState(namespace, session_id, live, summary, meta, next_seq, updated_at, version)

        async def create(conn: AsyncConnection[Any]) -> None:
            now = self._clock()
            await conn.execute(
                "INSERT INTO cm_sessions (namespace, session_id, created_at, updated_at) "
                "VALUES (%s, %s, %s, %s) ON CONFLICT (namespace, session_id) DO NOTHING",
                (namespace, session_id, now, now),
            )

        for _ in range(_RETRIES):
            found = await self._db.run("open_session", load, snapshot=True)
            if found is not None:  # parsed outside the transaction, and off the loop when large
                return await off_loop(sum(len(r[1]) for r in found[1]), decode, *found)
            await self._db.run("open_session", create)  # a concurrent delete may undo it: load again
        raise StoreError(
            f"session ({namespace!r}, {session_id!r}) was deleted while being opened, repeatedly. "
            "Fix: find what deletes it (a cleanup_idle with a tiny age?) and open it again."
        )

    async def _session_version(self, namespace: str, session_id: str) -> int | None:
        async def run(conn: AsyncConnection[Any]) -> int | None:
            cur = await conn.execute(
                "SELECT version FROM cm_sessions WHERE namespace = %s AND session_id = %s",
                (namespace, session_id),
            )
            row = await cur.fetchone()
            return None if row is None else int(row[0])

        return await self._db.run("open_session", run)

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
                found = await _session_row(conn, namespace, session_id)
                at = 1 if found is None else found[1]
                check_append(
                    namespace, session_id, expected_next_seq=expected, next_seq=at, expected_live=[], live=()
                )
                raise InternalError("a failed conditional append was not reported as a conflict")
            pk, next_seq = row  # the row is locked: no archive can move the tail until we commit
            first = next_seq - n
            if expected_live:
                live = await _live_among(conn, pk, expected_live)
                check_append(
                    namespace,
                    session_id,
                    expected_next_seq=expected,
                    next_seq=first,
                    expected_live=expected_live,
                    live=live,
                )
            seqs = list(range(first, next_seq))
            await conn.execute(
                "INSERT INTO cm_messages (session, seq, original, created_at, lease_closure) "
                "SELECT %s, u.seq, u.original, %s, %s "
                "FROM unnest(%s::bigint[], %s::text[]) AS u (seq, original)",
                (pk, now, lease_closure, seqs, encoded),
            )
            return seqs

        async def settle(conn: AsyncConnection[Any]) -> list[int]:
            """After a connection lost while committing: our rows, if they landed; else append now."""
            assert expected is not None
            found = await _session_row(conn, namespace, session_id)
            if found is not None and found[1] >= expected + n:
                cur = await conn.execute(
                    "SELECT seq, original FROM cm_messages WHERE session = %s AND seq >= %s AND seq < %s "
                    "ORDER BY seq",
                    (found[0], expected, expected + n),
                )
                ours = list(zip(range(expected, expected + n), encoded, strict=True))
                if [tuple(r) for r in await cur.fetchall()] == ours:
                    return list(range(expected, expected + n))
            return await run(conn)

        if expected is None:
            return await self._db.run("append", run, idempotent=False)
        return await self._db.run("append", run, idempotent=False, settle=settle)

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

        await self._db.run("replace", run)

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
        async def run(conn: AsyncConnection[Any]) -> None:
            pk, next_seq = await self._ensure_session(
                conn, namespace, session_id
            )  # the row lock appends take
            live = await _live_among(conn, pk, wanted) if expected_next_seq is not None else set()
            check_archive(
                namespace,
                session_id,
                wanted,
                next_seq=next_seq,
                live=live,
                expected_next_seq=expected_next_seq,
            )
            now = self._clock()
            await conn.execute(
                "UPDATE cm_messages SET state = 'archived', archived_at = %s "
                "WHERE session = %s AND seq = ANY(%s::bigint[]) AND state = 'live'",
                (now, pk, wanted),
            )
            await _set_meta(conn, pk, summary, meta, now)

        async def settle(conn: AsyncConnection[Any]) -> None:
            """After a connection lost while committing: done if the session is as this archive leaves it."""
            cur = await conn.execute(
                "SELECT s.summary, s.meta, COUNT(m.seq) FILTER (WHERE m.state = 'archived') "
                "FROM cm_sessions AS s LEFT JOIN cm_messages AS m "
                "ON m.session = s.id AND m.seq = ANY(%s::bigint[]) "
                "WHERE s.namespace = %s AND s.session_id = %s GROUP BY s.id",
                (wanted, namespace, session_id),
            )
            found = await cur.fetchone()
            if (
                found is not None
                and found[2] == len(wanted)
                and summary in (None, found[0])
                and meta in (None, found[1])
            ):
                return
            await run(conn)

        await self._db.run("archive", run, settle=settle if expected_next_seq is not None else None)

    async def _write_meta(
        self, namespace: str, session_id: str, summary: str | None, meta: str | None
    ) -> None:
        async def run(conn: AsyncConnection[Any]) -> None:
            pk, _ = await self._ensure_session(conn, namespace, session_id)
            await _set_meta(conn, pk, summary, meta, self._clock())

        await self._db.run("set_meta", run)

    async def _message_rows(self, namespace: str, session_id: str, state: StateFilter) -> list[StoredMessage]:
        async def run(conn: AsyncConnection[Any]) -> list[Any]:
            cur = await conn.execute(
                "SELECT m.seq, m.original, m.state, m.created_at, m.lease_closure FROM cm_messages AS m "
                "JOIN cm_sessions AS s ON s.id = m.session WHERE s.namespace = %s AND s.session_id = %s "
                "AND (%s = 'all' OR m.state = %s) ORDER BY m.seq",
                (namespace, session_id, state, state),
            )
            return list(await cur.fetchall())

        def decode(rows: list[Any]) -> list[StoredMessage]:
            return [
                StoredMessage(seq, decode_message(t), st, at, closure) for seq, t, st, at, closure in rows
            ]

        rows = await self._db.run("messages", run)
        return await off_loop(sum(len(r[1]) for r in rows), decode, rows)

    @asynccontextmanager
    async def _session_lock(self, namespace: str, session_id: str) -> AsyncIterator[None]:
        """Exclusive compaction lock of one session, for every process on every host (``async with``)."""
        what = f"compaction lock of session ({namespace!r}, {session_id!r})"
        async with self._db.advisory_lock(what, session_lock_key(namespace, session_id)):
            yield

    async def _record_offload(self, namespace: str, session_id: str, seq: int, path: str) -> None:
        async def run(conn: AsyncConnection[Any]) -> None:
            row = await _session_row(conn, namespace, session_id)
            if row is None or not 1 <= seq < row[1]:
                raise not_live_error(namespace, session_id, seq, None)
            now = self._clock()
            drop_others, upsert = (sql.format(p="%s") for sql in OFFLOAD_SQL)
            await conn.execute(drop_others, (path, row[0], namespace))
            await conn.execute(upsert, (row[0], path, seq, now))
            await conn.execute("UPDATE cm_sessions SET updated_at = %s WHERE id = %s", (now, row[0]))

        await self._db.run("record_offload", run)

    async def _offloaded_row(self, namespace: str, path: str) -> Message | None:
        async def run(conn: AsyncConnection[Any]) -> Message | None:
            cur = await conn.execute(OFFLOADED_SQL.format(p="%s"), (namespace, path))
            found = await cur.fetchone()
            return None if found is None else decode_message(found[0])

        return await self._db.run("offloaded", run)

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

        return await self._db.run("list_sessions", run)

    async def _delete_session(self, namespace: str, session_id: str) -> None:
        async def run(conn: AsyncConnection[Any]) -> None:
            await conn.execute(
                "DELETE FROM cm_sessions WHERE namespace = %s AND session_id = %s", (namespace, session_id)
            )

        await self._db.run("delete_session", run)

    async def _delete_idle(self, cutoff: float, namespace: str | None) -> list[tuple[str, str]]:
        where, args = idle_sessions_where(cutoff, namespace, "%s")

        async def run(conn: AsyncConnection[Any]) -> list[tuple[str, str]]:
            sql = f"DELETE FROM cm_sessions WHERE {where} RETURNING namespace, session_id"
            cur = await conn.execute(sql, args)
            return sorted((ns, sid) for ns, sid in await cur.fetchall())

        return await self._db.run("cleanup_idle", run)

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

        return await self._db.run("integrity_check", run, snapshot=True, bounded=False)  # scans everything

    async def schema_version(self) -> int:
        """The session schema version of the database (after the migrations applied on first use)."""
        return await self._db.run("schema_version", _schema_version)

    async def close(self) -> None:
        await self._db.close()


async def _schema_version(conn: AsyncConnection[Any]) -> int:
    return await pg_schema_version(conn, COMPONENT)


async def migrate(conn: AsyncConnection[Any], upto: int | None = None) -> int:
    """Apply pending migrations (up to ``upto``, default all) in one transaction; return the version."""
    return await migrate_postgres(conn, COMPONENT, MIGRATIONS, upto=upto)


async def _session_row(conn: AsyncConnection[Any], namespace: str, session_id: str) -> Any:
    """``(id, next_seq)`` of the session, or None."""
    cur = await conn.execute(
        "SELECT id, next_seq FROM cm_sessions WHERE namespace = %s AND session_id = %s",
        (namespace, session_id),
    )
    return await cur.fetchone()


async def _live_among(conn: AsyncConnection[Any], pk: int, seqs: list[int]) -> set[int]:
    cur = await conn.execute(
        "SELECT seq FROM cm_messages WHERE session = %s AND seq = ANY(%s::bigint[]) AND state = 'live'",
        (pk, seqs),
    )
    return {seq for (seq,) in await cur.fetchall()}


async def _set_meta(
    conn: AsyncConnection[Any], pk: int, summary: str | None, meta: str | None, now: float
) -> None:
    await conn.execute(
        "UPDATE cm_sessions SET summary = COALESCE(%s, summary), meta = COALESCE(%s, meta), updated_at = %s "
        "WHERE id = %s",
        (summary, meta, now, pk),
    )
