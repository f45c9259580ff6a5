"""How the PostgreSQL memory index reaches its server: the session store's policy, from synchronous code.

The server restarts, fails over and goes away; the index must ride that out as the session store does,
not keep a dead connection forever. So it goes through the store's
:class:`~contextmem.store.pg_connect.PgConnections` (bounded waits, transient failures retried for
``retry_seconds``, then :class:`~contextmem.errors.StoreUnavailableError`; every driver error typed; a
lost pooled connection replaced). That policy is asynchronous and the index's methods are not, so a
:class:`PgLink` runs it on a private event loop in a thread of its own, the calling thread waiting for
each result (Ctrl-C there cancels the work, whose transaction the server then rolls back).

pgvector's ``vector`` travels in binary (:func:`register_vector_type`): its type oid exists once the
migrations created the extension, so it is looked up right after them, and every connection of the pool
(the first, or one replacing a lost one) gets the adapters before its first use.
"""

from __future__ import annotations

import asyncio
import struct
import threading
import weakref
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import suppress
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
from numpy.typing import NDArray

from ..dsn import printable_store_url
from ..errors import StoreError
from ..store.pg_connect import Patience, PgConnections

if TYPE_CHECKING:
    from psycopg import AsyncConnection, Connection

__all__ = ["PgLink", "register_vector_type"]

T = TypeVar("T")
Body = Callable[["AsyncConnection[Any]"], Awaitable[T]]


def register_vector_type(conn: AsyncConnection[Any] | Connection[Any], vector_oid: int) -> None:
    """Send and receive pgvector ``vector`` values (type ``vector_oid``: ``SELECT 'vector'::regtype::oid``)
    in binary: numpy float32 arrays in, out (exact, fast).

    Parameters that are numpy arrays are dumped as ``vector`` (``%b`` placeholders); ``vector`` columns
    of results fetched with ``binary=True`` load as float32 arrays.
    """
    from psycopg.adapt import Dumper, Loader
    from psycopg.pq import Format

    class VectorDumper(Dumper):
        format = Format.BINARY
        oid = vector_oid

        def dump(self, obj: Any) -> bytes:
            values = np.asarray(obj, dtype=">f4").ravel()
            return struct.pack(">HH", values.size, 0) + values.tobytes()

    class VectorLoader(Loader):
        format = Format.BINARY

        def load(self, data: Any) -> NDArray[np.float32]:
            dim = struct.unpack_from(">H", data)[0]
            return np.frombuffer(bytes(data), dtype=">f4", count=dim, offset=4).astype(np.float32)

    conn.adapters.register_dumper(np.ndarray, VectorDumper)
    conn.adapters.register_loader(vector_oid, VectorLoader)


class _LoopThread:
    """A private event loop in a daemon thread, for a synchronous caller of asynchronous connections."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def call(self, work: Coroutine[Any, Any, T]) -> T:
        """``work``'s result, run on the loop; the caller's thread waits (Ctrl-C cancels the work too)."""
        future = asyncio.run_coroutine_threadsafe(work, self.loop)
        try:
            return future.result()
        except BaseException:
            future.cancel()
            raise

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class PgLink:
    """One pooled connection to the index's database, used from synchronous code (by one caller at a time:
    the index's lock). ``migrate`` runs once, before the first use (and again after a failed attempt)."""

    def __init__(self, dsn: str, patience: Patience, *, name: str, migrate: Body[object]) -> None:
        self.dsn = dsn
        self._migrate = migrate
        self._vector_oid = 0  # known once the migrations created the extension
        self._adapted: weakref.WeakSet[AsyncConnection[Any]] = weakref.WeakSet()
        self._db = PgConnections(dsn, patience, min_size=1, max_size=1, prepare=self._prepare)
        self._loop = _LoopThread(name)
        self._name = name
        self._closed = False

    async def _prepare(self, conn: AsyncConnection[Any]) -> None:
        await self._migrate(conn)
        cur = await conn.execute("SELECT 'vector'::regtype::oid")
        row = await cur.fetchone()
        self._vector_oid = int(row[0]) if row else 0

    def run(
        self,
        what: str,
        fn: Body[T],
        *,
        snapshot: bool = False,
        bounded: bool = True,
        transaction: bool = True,
    ) -> T:
        """``fn`` by :meth:`PgConnections.run` (the options are its): retried through outages, every
        failure a ``StoreError``."""
        if self._closed:
            raise StoreError(
                f"{self._name} on {printable_store_url(self.dsn)} is closed. Fix: open a new index."
            )

        async def body(conn: AsyncConnection[Any]) -> T:
            if conn not in self._adapted:  # a new connection (the first, or one replacing a lost one)
                register_vector_type(conn, self._vector_oid)
                self._adapted.add(conn)
            return await fn(conn)

        work = self._db.run(what, body, snapshot=snapshot, bounded=bounded, transaction=transaction)
        return self._loop.call(work)

    def rows(self, what: str, sql: str, params: Any, *, binary: bool = False) -> list[Any]:
        """The rows of one read (no transaction around it: one round trip)."""

        async def read(conn: AsyncConnection[Any]) -> list[Any]:
            cur = await conn.execute(sql, params, binary=binary)
            return await cur.fetchall()

        return self.run(what, read, transaction=False)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with suppress(Exception):
            self._loop.call(self._db.close())
        self._loop.stop()
