"""The store URL door (``--store``, ``CONTEXTMEM_STORE``, the ``store`` setting, ``ContextMem.open``):
its password reaches no error message, no log line and no terminal, in any form libpq or a typo gives it.

Sinks: the error ``open_store`` / ``ContextMem.open`` raise, the CLI's stdout and stderr, ``config``'s
listing. Contract: the message shows the URL with ``***`` for the password (host and database kept),
is one line and has a ``Fix:``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from contextmem.cli.main import main
from contextmem.errors import ContextmemError
from contextmem.runtime import ContextMem
from contextmem.settings import Settings
from contextmem.store.open import open_store
from tests.security.doors import assert_one_line_error, hostile_text, leaked_secrets, raw_exception

SECRET = "S3cr3t"
REPRODUCTIONS = [
    "postgresql+psycopg://app:S3cr3t@host/db",
    "host=h user=app password=S3cr3t dbname=db",
    "postgress://app:S3cr3t@h/db",
    "postgresql//app:S3cr3t@h/db",
    "postgresql://app:S3%zzcr3t@h/db",  # psycopg echoes the token it cannot decode
    "postgresql://app:S3/cr3t@h/db",  # libpq reads 'app' as the host and 'S3' as the port
    "postgresql://app@h/db?sslmode=disable&password=S3cr3t",
    "host=h password='S3cr3t dbname=db",  # unterminated quote
    "host=h password=S3 cr3t dbname=db",  # libpq: missing "=" after "cr3t"
]


def _run(argv: list[str], capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> str:
    caplog.clear()
    with caplog.at_level(logging.DEBUG):
        code = main(argv)
    out, err = capsys.readouterr()
    assert code != 0, (argv, out, err)
    return out + err + caplog.text


def _secrets(password: str) -> list[str]:
    return [password, quote(password, safe=""), *password.split()]


@pytest.mark.parametrize("url", REPRODUCTIONS)
def test_the_store_password_is_in_no_output_of_the_cli(
    url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    output = _run(["--workspace", str(tmp_path), "--store", url, "sessions", "list"], capsys, caplog)
    assert leaked_secrets(output, [SECRET, "S3%zzcr3t", "cr3t"]) == []
    [line] = [line for line in output.splitlines() if line.startswith("contextmem:")]
    assert "Fix:" in line and "***" in line and not raw_exception(output)
    assert "h" in line.partition("'")[2]  # the host (or the DSN's shape) still shows


@pytest.mark.parametrize("url", REPRODUCTIONS)
def test_the_environment_variable_and_the_library_hide_it_too(
    url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONTEXTMEM_STORE", url)
    output = _run(["--workspace", str(tmp_path), "sessions", "list"], capsys, caplog)
    assert leaked_secrets(output, [SECRET, "cr3t"]) == []

    async def open_and_close() -> None:  # a well-formed URL opens (nothing connects before first use)
        runtime = await ContextMem.open(Settings(workspace=tmp_path, store=url), llm="none", memory=False)
        await runtime.close()

    try:
        asyncio.run(open_and_close())
    except ContextmemError as exc:
        assert_one_line_error(exc)
        assert leaked_secrets(str(exc), [SECRET, "cr3t"]) == []
    else:
        assert url.startswith("postgresql://app@h/db?")


def test_config_shows_the_store_without_its_password(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = ["--workspace", str(tmp_path)]
    url = "postgresql://app:S3cr3t@db.internal:5432/app"
    assert main([*ws, "config", "set", "store", url]) == 0
    assert main([*ws, "config", "list"]) == 0
    assert main([*ws, "config", "list", "--json"]) == 0
    assert main([*ws, "config", "get", "store"]) == 0
    out, err = capsys.readouterr()
    assert leaked_secrets(out + err, [SECRET]) == []
    assert "postgresql://app:***@db.internal:5432/app" in out
    assert json.loads((tmp_path / "config.json").read_text())["store"] == url  # the file keeps it


def test_a_refused_connection_is_one_line_without_the_password(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("psycopg")
    monkeypatch.setenv("CONTEXTMEM_STORE_RETRY_SECONDS", "0.2")
    monkeypatch.setenv("CONTEXTMEM_STORE_CONNECT_TIMEOUT", "0.5")
    url = "postgresql://app:S3cr3t@127.0.0.1:1/db"  # port 1: refused at once
    argv = ["--workspace", str(tmp_path), "--store", url, "sessions", "list"]
    with caplog.at_level(logging.WARNING):
        code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert leaked_secrets(out + err + caplog.text, [SECRET]) == []
    assert len(err.splitlines()) == 1 and "Fix:" in err and "127.0.0.1" in err  # no driver log lines


# --- the property: any password, in every place a URL or DSN can hold one ---------------------------

URL_SPECIAL = st.sampled_from([*"@:/?#&=%+ '\\\"[]", "%40", "%2F", "%zz", "%00", "\\'"])
passwords = st.tuples(
    st.lists(st.one_of(hostile_text(max_size=6, surrogates=False), URL_SPECIAL), max_size=6).map("".join),
    st.text(st.characters(min_codepoint=0x41, max_codepoint=0x5A), min_size=6, max_size=6),
).map(lambda t: f"{t[1]}{t[0]}{t[1][::-1]}")  # a recognisable head and tail around the hostile middle


def _dsn_quoted(password: str) -> str:
    return "'" + password.replace("\\", "\\\\").replace("'", "\\'") + "'"


FORMS = (
    lambda p: f"postgresql://app:{p}@db.example/app",
    lambda p: f"postgresql://app:{quote(p, safe='')}@db.example/app",
    lambda p: f"postgres://app@db.example/app?sslmode=disable&password={quote(p, safe='')}",
    lambda p: f"postgresql://app@db.example/app?password={p}",
    lambda p: f"host=db.example user=app password={_dsn_quoted(p)} dbname=app",
    lambda p: f"host=db.example user=app password={p} dbname=app",
    lambda p: f"postgress://app:{p}@db.example/app",
    lambda p: f"postgresql//app:{p}@db.example/app",
    lambda p: f"postgresql+psycopg://app:{quote(p, safe='')}@db.example/app",
)


def _leaks(text: str, password: str) -> list[str]:
    head, tail = password[:6], password[-6:]
    return leaked_secrets(text, [password, quote(password, safe=""), head, tail])


# Pinned at 60 in every profile: each example opens a store and a runtime that fail to connect.
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(password=passwords, form=st.sampled_from(range(len(FORMS))))
def test_no_password_reaches_the_error_of_open_store_or_contextmem_open(
    password: str, form: int, tmp_path: Path
) -> None:
    """The URL is accepted (nothing connects yet) or refused by both doors in one line without it."""
    pytest.importorskip("psycopg")
    url = FORMS[form](password)
    try:
        open_store(url)
    except ContextmemError as exc:
        assert_one_line_error(exc)
        assert _leaks(str(exc), password) == [], str(exc)
    else:
        return
    with pytest.raises(ContextmemError) as raised:
        asyncio.run(ContextMem.open(Settings(workspace=tmp_path, store=url), llm="none", memory=False))
    assert_one_line_error(raised.value)
    assert _leaks(str(raised.value), password) == [], str(raised.value)


# Pinned at 25 in every profile: each example runs the CLI in-process against a refused connection.
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(password=passwords, form=st.sampled_from([0, 3, 4, 5, 6, 7]))
def test_no_password_reaches_the_output_of_the_cli(
    password: str,
    form: int,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Forms the CLI refuses before connecting (one run each): nothing of the password on any stream."""
    pytest.importorskip("psycopg")
    url = FORMS[form](password)
    try:
        open_store(url)
        Settings(workspace=tmp_path, store=url)
        from contextmem.store.pg_connect import Patience, import_psycopg

        Patience().conninfo(import_psycopg()[0], url, statement_timeout=1)
    except ContextmemError:
        pass
    else:
        return  # a URL that would connect: the connection path has its own test above
    output = _run(["--workspace", str(tmp_path), "--store", url, "sessions", "list"], capsys, caplog)
    assert _leaks(output, password) == [], output
    assert not raw_exception(output)
