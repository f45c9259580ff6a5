"""How the PostgreSQL store talks to its server: bounded waits, retried outages, and only typed errors.

Many hosts share one PostgreSQL, so the server restarts, fails over and sits behind links that
break. The rules, and why:

* **Every wait is bounded.** Connections carry ``connect_timeout``, TCP keepalives (idle 10 s, every 5 s,
  3 probes) and ``tcp_user_timeout``, so the kernel ends a link that died idle or with data in flight; the
  server cancels a statement after ``statement_timeout`` and a lock wait after ``lock_timeout`` (both set
  in the startup packet, so no extra round trip can hang). A link can also be cut where the kernel never
  notices (a blackholing middlebox): a client-side **watchdog** shuts the socket down once an attempt has
  run a little past those limits, which makes the pending read fail at once. Shutting the socket, rather
  than cancelling the coroutine, matters: psycopg answers a cancelled query by asking the server to cancel
  it, which on a dead link waits 5 + 5 s more.
  The server gets the same keepalives, and ``idle_in_transaction_session_timeout``, so the row locks and
  the compaction lock of a client that vanished are freed in seconds rather than hours. (Behind PgBouncer,
  which refuses startup ``options``, list ``options`` in its ``ignore_startup_parameters`` and set these
  on the server or role instead.)
* **Transient failures are retried**, with jittered exponential backoff, until ``retry_seconds`` have
  passed since the first failure of the streak: a lost connection, a server restart or admin shutdown,
  "cannot connect now", too many connections, a pool checkout timeout, a cancelled statement, a
  serialization failure or deadlock. Then :class:`~contextmem.errors.StoreUnavailableError`.
* **A write whose COMMIT may have been sent is in doubt.** PostgreSQL applies nothing of a transaction
  whose COMMIT it never received, so a failure before that point is simply retried. After it, an
  idempotent write is retried as well; a write that is not idempotent (an append) gets a ``settle``
  function that looks at what landed (a conditional append can tell); without one the caller gets a
  ``StoreUnavailableError`` whose ``may_have_landed`` is set.
* **One error tree.** Every psycopg and psycopg_pool error is translated here, including those of the
  compaction lock's own connection (connect, ``SET``, ``pg_advisory_lock`` and close): a lock wait past
  ``lock_timeout`` is :class:`~contextmem.errors.StoreLockedError`, everything else a ``StoreError``.

Exceptions: migrations and ``integrity_check`` scan whole tables, so they run without the watchdog (the
keepalives still end a dead link) and migrations without ``statement_timeout``.
"""

from __future__ import annotations

import asyncio
import math
import random
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from ..dsn import printable_store_url, scrub_store_secrets, store_url_password
from ..errors import MissingExtraError, StoreError, StoreLockedError, StoreUnavailableError, StoreURLError

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

__all__ = ["Patience", "PgConnections", "import_psycopg"]

T = TypeVar("T")
Body = Callable[["AsyncConnection[Any]"], Awaitable[T]]

KEEPALIVES = {"keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5, "keepalives_count": 3}
TCP_USER_TIMEOUT_MS = (10 + 5 * 3) * 1000  # unacknowledged data for as long as keepalives take to give up
# Server states that pass: connection exceptions (class 08) and these.
TRANSIENT_SQLSTATES = frozenset(
    {
        "57014",  # query_canceled (statement_timeout, or a cancel)
        "57P01",  # admin_shutdown (fast shutdown, pg_terminate_backend)
        "57P02",  # crash_shutdown
        "57P03",  # cannot_connect_now (starting up, shutting down)
        "57P05",  # idle_session_timeout
        "53300",  # too_many_connections
        "40001",  # serialization_failure
        "40P01",  # deadlock_detected
        "25P03",  # idle_in_transaction_session_timeout
    }
)
FIRST_DELAY = 0.05
MAX_DELAY = 2.0


def import_psycopg() -> tuple[ModuleType, ModuleType]:
    try:
        import psycopg
    except ImportError:
        raise MissingExtraError("psycopg", "postgres") from None
    try:
        import psycopg_pool
    except ImportError:
        raise MissingExtraError("psycopg_pool", "postgres") from None
    return psycopg, psycopg_pool


def one_line(exc: BaseException, dsn: str, limit: int = 300) -> str:
    """A driver error as one line (psycopg's messages may span several), shortened, without ``dsn``'s
    secrets (libpq echoes pieces of a DSN it cannot read: ``invalid percent-encoded token: "…"``)."""
    text = " ".join(scrub_store_secrets(str(exc), dsn).split()) or type(exc).__name__
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)  # a DSN's controls, escaped
    return text if len(text) <= limit else text[: limit - 1] + "…"


@dataclass(frozen=True, slots=True)
class Patience:
    """How long the store waits, in seconds (the ``store_*`` settings)."""

    connect_timeout: float = 10.0
    statement_timeout: float = 30.0
    lock_timeout: float = 30.0
    retry_seconds: float = 30.0

    @property
    def statement_limit(self) -> float:
        """The server's ``statement_timeout`` for the store's transactions: ``statement_timeout``, but never
        below the lock wait (PostgreSQL starts the statement's clock first, so with equal limits a long row
        lock would end as a cancelled statement instead of ``StoreLockedError``)."""
        return max(self.statement_timeout, self.lock_timeout + 1.0)

    def bound(self, wait: float) -> float:
        """The watchdog's limit for a server-side limit of ``wait`` s: a little later, so the server's own
        (clearer) error normally comes first."""
        return wait + 1.0 + 0.1 * wait

    def conninfo(self, psycopg: ModuleType, dsn: str, *, statement_timeout: float) -> str:
        """``dsn`` with the timeouts and keepalives; ``options`` already in it are kept (ours come last)."""
        try:
            params = psycopg.conninfo.conninfo_to_dict(dsn)
        except (psycopg.Error, UnicodeError) as exc:  # UnicodeError: a %XX sequence that is not UTF-8
            problem = "a percent-encoded part is not UTF-8" if isinstance(exc, UnicodeError) else ""
            raise StoreURLError(
                f"{printable_store_url(dsn)} is not a PostgreSQL URL or DSN: "
                f"{problem or one_line(exc, dsn)}. "
                "Fix: write postgresql://user@host:5432/dbname or 'host=... dbname=...'."
            ) from None
        password = store_url_password(dsn)
        if password is not None and params.get("password") != password:
            # libpq ends the password at the first '@' or '/': the rest would go to the host, port and
            # database, and from there into every connection error
            raise StoreURLError(
                f"the password in {printable_store_url(dsn)} is not the one libpq reads: it holds a "
                "character libpq ends it at ('@', '/'), or a ?password= repeats it. "
                "Fix: percent-encode the password (urllib.parse.quote(password, safe='')), and give it once."
            )
        ours = " ".join(
            f"-c {name}={value}"
            for name, value in (
                ("statement_timeout", _ms(statement_timeout)),
                ("lock_timeout", _ms(self.lock_timeout)),
                # a transaction whose client vanished mid-way must not keep its row locks
                ("idle_in_transaction_session_timeout", _ms(self.statement_timeout)),
                # the server's side of the link: a dead host's compaction lock is freed within ~25 s
                *((f"tcp_{key}", value) for key, value in KEEPALIVES.items() if key != "keepalives"),
                ("tcp_user_timeout", TCP_USER_TIMEOUT_MS),
            )
        )
        options = f"{params['options']} {ours}" if params.get("options") else ours
        return str(
            psycopg.conninfo.make_conninfo(
                dsn,
                options=options,
                connect_timeout=max(2, math.ceil(self.connect_timeout)),  # libpq: whole seconds, >= 2
                tcp_user_timeout=TCP_USER_TIMEOUT_MS,
                **KEEPALIVES,
            )
        )


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


class _Failed(Exception):
    """A driver error of one attempt, with what the retry loop needs to decide."""

    def __init__(self, error: BaseException, *, transient: bool, in_doubt: bool, cut: bool) -> None:
        super().__init__(" ".join(str(error).split()))  # never shown: the retry loop says one_line
        self.error = error
        self.transient = transient
        self.in_doubt = in_doubt  # COMMIT may have been sent
        self.cut = cut  # the watchdog ended it


@dataclass(slots=True)
class _Phase:
    committing: bool = False
    cut: bool = False


class PgConnections:
    """The store's way to its server: a pool for transactions, a dedicated connection per held lock."""

    def __init__(
        self,
        dsn: str,
        patience: Patience,
        *,
        min_size: int,
        max_size: int,
        prepare: Body[object],
    ) -> None:
        self._psycopg, self._psycopg_pool = import_psycopg()
        self.dsn = dsn
        self.patience = patience
        self._min = min_size
        self._max = max_size
        self._prepare = prepare
        self._conninfo = patience.conninfo(self._psycopg, dsn, statement_timeout=patience.statement_limit)
        # On the lock's connection the lock wait must end first: its statement limit is the sum of both.
        lock_statement = patience.lock_timeout + patience.statement_timeout
        self._lock_conninfo = patience.conninfo(self._psycopg, dsn, statement_timeout=lock_statement)
        self._pool: AsyncConnectionPool[Any] | None = None
        self._prepared = False
        self._opening = asyncio.Lock()
        self._closed = False

    def closed(self) -> str:
        return f"the store on {printable_store_url(self.dsn)} is closed. Fix: open a new store."

    def where(self, what: str) -> str:
        return f"{what} on PostgreSQL at {printable_store_url(self.dsn)}"

    # -- public: transactions, the raw connection, locks ------------------------------------------

    async def run(
        self,
        what: str,
        fn: Body[T],
        *,
        snapshot: bool = False,
        idempotent: bool = True,
        settle: Body[T] | None = None,
        bounded: bool = True,
        transaction: bool = True,
    ) -> T:
        """``fn`` in one transaction (``snapshot``: repeatable read, read only), retried while failures are
        transient. After a failure that may have followed the COMMIT, ``settle`` (else ``fn`` again if
        ``idempotent``) runs in its place; with neither, a ``StoreUnavailableError(may_have_landed=True)``.
        ``transaction=False`` is for one read: no BEGIN and COMMIT around it (one round trip, not three)."""
        pool = await self._ready()
        in_doubt = False

        async def once() -> T:
            body = settle if in_doubt and settle is not None else fn
            if not transaction:
                return await self._attempt(pool, body, begin=None, bound=self.patience.statement_limit)
            return await self._transaction(pool, body, snapshot=snapshot, bounded=bounded)

        def on_failure(failure: _Failed, waited: float) -> None:
            nonlocal in_doubt
            if not failure.in_doubt:
                return
            if settle is not None:
                in_doubt = True  # until an attempt settles it
            elif not idempotent:
                cause = one_line(failure.error, self.dsn)
                raise StoreUnavailableError(
                    self.where(what), waited, cause, may_have_landed=True
                ) from failure.error

        try:
            return await self._retrying(what, once, on_failure)
        except StoreUnavailableError as exc:
            if in_doubt and not idempotent and not exc.may_have_landed:  # never settled: say so
                raise StoreUnavailableError(
                    exc.what, exc.waited, exc.cause, may_have_landed=True
                ) from exc.__cause__
            raise

    @asynccontextmanager
    async def advisory_lock(self, what: str, key: int) -> AsyncIterator[None]:
        """Hold ``pg_advisory_lock(key)`` on a connection of its own for the ``async with`` block."""
        conn = await self._retrying(what, lambda: self._lock_once(key))
        try:
            yield
        finally:
            await _close_quietly(conn)  # ends the server session, which releases the lock in every case

    async def close(self) -> None:
        self._closed = True
        pool, self._pool = self._pool, None
        if pool is not None:
            with suppress(self._psycopg.Error):
                await pool.close()

    # -- plumbing ----------------------------------------------------------------------------------

    async def _ready(self) -> AsyncConnectionPool[Any]:
        if self._closed:
            raise StoreError(self.closed())
        if self._pool is not None and self._prepared:
            return self._pool
        async with self._opening:
            if self._pool is None:
                pool = self._psycopg_pool.AsyncConnectionPool(
                    self._conninfo,
                    min_size=self._min,
                    max_size=self._max,
                    kwargs={"autocommit": True},
                    open=False,
                    name="contextmem",
                    timeout=self.patience.connect_timeout,
                    # Give up on a background reconnection soon: the next checkout starts a fresh one
                    # at once, where the pool's own backoff could leave a restarted server unused for
                    # tens of seconds. Our retries pace the attempts.
                    reconnect_timeout=max(2.0, self.patience.connect_timeout),
                )
                await pool.open(wait=False)  # connects in the background; checkouts wait, bounded
                self._pool = pool
            if not self._prepared:
                pool = self._pool

                async def prepare() -> object:
                    return await self._attempt(pool, self._prepare, begin=None, bound=None)

                await self._retrying("migrate", prepare)
                self._prepared = True
        return self._pool

    async def _retrying(
        self,
        what: str,
        once: Callable[[], Awaitable[T]],
        on_failure: Callable[[_Failed, float], None] | None = None,
    ) -> T:
        """``once()`` until it succeeds, a failure is not transient, or the retry time is spent."""
        first_failure: float | None = None
        delay = FIRST_DELAY
        while True:
            try:
                return await once()
            except _Failed as failure:
                now = time.monotonic()
                first_failure = now if first_failure is None else first_failure
                waited = now - first_failure
                if not failure.transient:
                    raise self._translate(what, failure.error) from failure.error
                if on_failure is not None:
                    on_failure(failure, waited)
                pause = delay * random.uniform(0.5, 1.5)
                if waited + pause > self.patience.retry_seconds:
                    cause = one_line(failure.error, self.dsn)
                    if failure.cut:
                        cause = f"no answer within the store's timeouts, the link may be down: {cause}"
                    raise StoreUnavailableError(self.where(what), waited, cause) from failure.error
                await asyncio.sleep(pause)
                delay = min(delay * 2, MAX_DELAY)

    async def _transaction(
        self, pool: AsyncConnectionPool[Any], fn: Body[T], *, snapshot: bool, bounded: bool
    ) -> T:
        begin = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY" if snapshot else "BEGIN"
        bound = self.patience.statement_limit if bounded else None
        return await self._attempt(pool, fn, begin=begin, bound=bound)

    async def _attempt(
        self, pool: AsyncConnectionPool[Any], fn: Body[T], *, begin: str | None, bound: float | None
    ) -> T:
        """One try: check a connection out, run ``fn`` (in a transaction when ``begin``), return it."""
        try:
            conn = await pool.getconn(timeout=self.patience.connect_timeout)
        except self._psycopg.Error as exc:  # nothing was sent
            raise self._failed(exc, _Phase()) from exc
        phase = _Phase()
        watchdog = None if bound is None else self._watch(conn, phase, bound)
        reusable = False
        try:
            if begin is not None:
                await conn.execute(begin)
            result = await fn(conn)
            if begin is not None:
                phase.committing = True
                await conn.execute("COMMIT")
            reusable = True
            return result
        except self._psycopg.Error as exc:
            raise self._failed(exc, phase) from exc
        except Exception:
            reusable = not phase.cut  # our own error (a conflict, a bad seq): the connection is fine
            raise
        finally:
            if watchdog is not None:
                watchdog.cancel()
            await self._put_back(pool, conn, reusable=reusable)

    async def _put_back(
        self, pool: AsyncConnectionPool[Any], conn: AsyncConnection[Any], *, reusable: bool
    ) -> None:
        """Return ``conn`` idle, or closed (the pool replaces it): never with a transaction open."""
        pq = self._psycopg.pq.TransactionStatus
        if reusable and conn.info.transaction_status in (pq.INTRANS, pq.INERROR):
            phase = _Phase()
            watchdog = self._watch(conn, phase, self.patience.statement_timeout)
            try:
                await conn.execute("ROLLBACK")
            except self._psycopg.Error:
                reusable = False
            finally:
                watchdog.cancel()
        if not reusable or conn.info.transaction_status != pq.IDLE:
            await _close_quietly(conn)
        with suppress(self._psycopg.Error):
            await pool.putconn(conn)

    async def _lock_once(self, key: int) -> AsyncConnection[Any]:
        try:
            conn: AsyncConnection[Any] = await self._psycopg.AsyncConnection.connect(
                self._lock_conninfo, autocommit=True
            )
        except self._psycopg.Error as exc:
            raise self._failed(exc, _Phase()) from exc
        phase = _Phase()
        watchdog = self._watch(conn, phase, self.patience.lock_timeout)
        try:
            # If this process dies while waiting, let the server notice soon rather than take the lock
            # for a client that is gone (Linux servers; harmless where unsupported).
            with suppress(self._psycopg.Error):
                await conn.execute("SET client_connection_check_interval = '1s'")
            await conn.execute("SELECT pg_advisory_lock(%s)", (key,))
            return conn
        except BaseException as exc:
            await _close_quietly(conn)
            if isinstance(exc, self._psycopg.Error):
                raise self._failed(exc, phase) from exc
            raise
        finally:
            watchdog.cancel()

    def _watch(self, conn: AsyncConnection[Any], phase: _Phase, wait: float) -> asyncio.TimerHandle:
        """Shut ``conn``'s socket down if still busy after ``wait`` (plus grace): the read fails at once."""

        def cut() -> None:
            phase.cut = True
            with suppress(Exception):
                sock = socket.socket(fileno=conn.pgconn.socket)
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                finally:
                    sock.detach()  # the fd stays libpq's

        return asyncio.get_running_loop().call_later(self.patience.bound(wait), cut)

    def _failed(self, exc: BaseException, phase: _Phase) -> _Failed:
        sqlstate = getattr(exc, "sqlstate", None)
        errors, pool_errors = self._psycopg.errors, self._psycopg_pool
        if isinstance(exc, pool_errors.PoolClosed | errors.LockNotAvailable):
            transient = False
        elif isinstance(exc, pool_errors.PoolTimeout | pool_errors.TooManyRequests) or phase.cut:
            transient = True
        elif sqlstate is None:  # the client's own: refused, lost, timed out connecting
            transient = isinstance(exc, self._psycopg.OperationalError)
        else:
            transient = sqlstate.startswith("08") or sqlstate in TRANSIENT_SQLSTATES
        return _Failed(exc, transient=transient, in_doubt=phase.committing, cut=phase.cut)

    def _translate(self, what: str, exc: BaseException) -> StoreError:
        if isinstance(exc, self._psycopg.errors.LockNotAvailable):
            return StoreLockedError(
                self.where(what),
                self.patience.lock_timeout,
                fix="another process holds this session (compacting it, or a long transaction); retry "
                "later, or raise store_lock_timeout",
            )
        if isinstance(exc, self._psycopg_pool.PoolClosed):
            return StoreError(self.closed())
        return StoreError(
            f"{self.where(what)} failed: {one_line(exc, self.dsn)}. "
            "Fix: see the server's log for this error; integrity_check() tells whether the data is sound."
        )


async def _close_quietly(conn: AsyncConnection[Any]) -> None:
    """Close ``conn`` without a word: closing a connection whose server or link is gone is not an error."""
    with suppress(Exception):
        await conn.close()
