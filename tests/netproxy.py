"""A TCP proxy whose link can be cut like a blackholing network: for tests of what clients do then.

``Proxy(target)`` listens on ``127.0.0.1:<free port>`` (:attr:`Proxy.port`) and forwards every connection
to ``target``: a unix socket path (the test PostgreSQL listens only on one), a ``(host, port)`` pair or a
``"host:port"`` string.

* :meth:`Proxy.cut` stops forwarding silently, both ways: bytes are read and swallowed, connections stay
  open, new connections are accepted (and swallowed too). Nothing is reset or closed, so neither side's
  kernel reports anything: only a client's own timeouts can notice. This is a link that went dark, not a
  server that died.
* :meth:`Proxy.cut_after` arms a cut that falls right after the next client-to-server chunk containing
  some bytes has been forwarded: the server gets the request (a ``COMMIT``), its answer is swallowed.
* :meth:`Proxy.restore` forwards again (what was swallowed stays lost); :meth:`Proxy.close` ends it all.

Plain threads, two per connection: the proxy must keep working while the test's event loop is blocked
inside the code under test.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from pathlib import Path
from types import TracebackType
from typing import Self

__all__ = ["Proxy"]

CHUNK = 65536


class Proxy:
    def __init__(self, target: str | Path | tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)  # lets the accept loop notice close()
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._cut = False
        self._cut_after: bytes | None = None
        self.was_cut = threading.Event()  # set whenever a cut (immediate or armed) takes effect
        self._closed = threading.Event()
        self._sockets: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._start(self._accept_loop)

    # -- the switches ------------------------------------------------------------------------------

    @property
    def is_cut(self) -> bool:
        return self._cut

    def cut(self) -> None:
        """Swallow everything from now on, both ways; keep every connection open."""
        with self._lock:
            self._cut = True
            self.was_cut.set()

    def cut_after(self, marker: bytes) -> None:
        """Cut right after forwarding the next client-to-server chunk that contains ``marker``."""
        with self._lock:
            self._cut_after = marker

    def restore(self) -> None:
        """Forward again (bytes swallowed meanwhile are gone for good)."""
        with self._lock:
            self._cut = False
            self._cut_after = None
            self.was_cut.clear()

    def close(self) -> None:
        """Stop accepting and close every connection, both sides."""
        self._closed.set()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in [self._listener, *sockets]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join(timeout=5)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- plumbing ----------------------------------------------------------------------------------

    def _start(self, fn: object, *args: object) -> None:
        thread = threading.Thread(target=fn, args=args, daemon=True)  # type: ignore[arg-type]
        self._threads.append(thread)
        thread.start()

    def _connect_target(self) -> socket.socket:
        if isinstance(self.target, tuple):
            return socket.create_connection(self.target)
        tcp = re.fullmatch(r"([\w.-]+):(\d+)", str(self.target))
        if isinstance(self.target, str) and tcp:
            return socket.create_connection((tcp.group(1), int(tcp.group(2))))
        upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        upstream.connect(str(self.target))
        return upstream

    def _accept_loop(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return  # closed
            client.settimeout(None)
            try:
                upstream = self._connect_target()
            except OSError:
                client.close()  # the target is down: as a refused connection would be
                continue
            with self._lock:
                if self._closed.is_set():
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
            self._start(self._pump, client, upstream, True)
            self._start(self._pump, upstream, client, False)

    def _pump(self, source: socket.socket, sink: socket.socket, to_server: bool) -> None:
        while True:
            try:
                data = source.recv(CHUNK)
            except OSError:
                data = b""
            if not data:  # that side closed: pass the end on, unless the link is dark
                if not self._cut:
                    with contextlib.suppress(OSError):
                        sink.shutdown(socket.SHUT_WR)
                return
            with self._lock:
                if self._cut:
                    continue  # swallowed
                if to_server and self._cut_after is not None and self._cut_after in data:
                    # Dark from now on, before the server can answer: this chunk is the last to pass.
                    self._cut, self._cut_after = True, None
                    self.was_cut.set()
            try:
                sink.sendall(data)
            except OSError:
                return
