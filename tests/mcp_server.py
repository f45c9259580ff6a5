"""The real ``contextmem mcp --transport http`` in a subprocess, and raw MCP requests, for HTTP tests.

:func:`mcp_http_server` starts it on a given bind address, waits until it listens and has written its
startup line, and stops it afterwards. :func:`ipv6_loopback` is the one rule for tests that bind ``::1``:
they skip on a machine without an IPv6 loopback, and fail instead when ``CONTEXTMEM_REQUIRE_IPV6`` is set
(CI sets it, so CI cannot go green with them skipped).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from .servers import free_port

REQUIRE_IPV6 = "CONTEXTMEM_REQUIRE_IPV6"

# Raw streamable-HTTP requests, for tests that speak to the endpoint below the SDK's client.
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
LISTING = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}


def ipv6_loopback() -> None:
    """Return when ``::1`` can be bound; else skip the test, or fail it under ``CONTEXTMEM_REQUIRE_IPV6``."""
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError as exc:
        reason = f"this machine has no IPv6 loopback (binding ::1: {exc})"
        if os.environ.get(REQUIRE_IPV6):
            pytest.fail(f"{REQUIRE_IPV6} is set but {reason}")
        pytest.skip(reason)


@contextmanager
def mcp_http_server(
    env: Mapping[str, str], args: Sequence[str], *, host: str = "127.0.0.1", stderr: Path
) -> Iterator[tuple[str, int, str]]:
    """``(host, port, startup line)`` of a running server bound to ``host`` (extra CLI ``args``)."""
    with mcp_http_process(env, args, host=host, stderr=stderr) as (_, port, line):
        yield host, port, line


@contextmanager
def mcp_http_process(
    env: Mapping[str, str], args: Sequence[str], *, host: str = "127.0.0.1", stderr: Path
) -> Iterator[tuple[subprocess.Popen[bytes], int, str]]:
    """:func:`mcp_http_server`'s server as ``(its process, port, startup line)``: for a bench that samples
    the process (its memory, its CPU time)."""
    port = free_port()
    argv = ["--transport", "http", "--host", host, "--port", str(port), "--embedder", "hash", "--no-llm"]
    with stderr.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "contextmem.mcp", *argv, *args], env=env, stderr=err)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection((host, port), timeout=1).close()
                if stderr.read_text(encoding="utf-8").endswith("\n"):  # the startup line is written
                    break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the MCP HTTP server did not start: {stderr.read_text(encoding='utf-8')}")
            time.sleep(0.1)
        yield proc, port, stderr.read_text(encoding="utf-8").splitlines()[0]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
