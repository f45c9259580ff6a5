"""Which ``Host`` and ``Origin`` an HTTP MCP server answers: the guard against DNS rebinding.

A web page the user visits can make their browser reach a server on the user's own machine in two ways:
cross-site, by sending a request to ``http://127.0.0.1:PORT`` (the browser then sends the page's
``Origin``), or by DNS rebinding, through a name the attacker controls that they re-point at the loopback
address (the browser then sends that name in ``Host``, and believes the page and the server share an
origin). :class:`HostGuard` refuses both, in front of everything else: a request must name in ``Host``
one of the authorities the server is reached by (421 otherwise), and its ``Origin``, when it has one, must
be ``http://`` or ``https://`` one of the same authorities (403 otherwise).

The authorities are computed from the *normalised* bind address (:mod:`ipaddress`), never from how it was
spelled, so ``127.0.0.2``, ``::1`` and ``0:0:0:0:0:0:0:1`` are guarded as ``127.0.0.1`` is: the loopback
names (``localhost``, ``127.0.0.1``, ``[::1]``) and the bind address itself, each with the server's port,
plus every name the operator allows (``--allowed-host``, needed behind a proxy that passes on its own
Host). A header is parsed as ``host[:port]`` and compared whole, so ``127.0.0.1:PORT@evil.example`` is no
authority and is refused. The SDK's own check stays off: it turns on only for three literal spellings of
the bind address, and its ``host:*`` patterns are prefix matches.
"""

from __future__ import annotations

import errno
import ipaddress
import re
import socket
from collections.abc import Iterable

from ..errors import ConfigError, brief
from .namespaces import ASGIApp, Receive, Scope, Send, refuse

__all__ = ["Authority", "HostGuard", "allowed_authorities", "bind_sockets", "is_loopback", "parse_authority"]

Authority = tuple[str, "int | None"]
"""A normalised ``(host, port)``: lowercase name or canonical IP (no brackets); None when no port is given."""

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
"""Names that only ever reach this machine: allowed on every server, with its port."""

_AUTHORITY = re.compile(
    r"(?:\[(?P<v6>[0-9A-Fa-f:.]{2,45})\]|(?P<name>[A-Za-z0-9.-]{1,253}))(?::(?P<port>[0-9]{1,5}))?"
)
_ORIGIN = re.compile(r"(?P<scheme>https?)://(?P<authority>[^/?#]*)")
_SHOWN = 80  # characters of a refused header echoed back


def _host(text: str) -> str:
    """``text`` as compared: a canonical IP address when it is one, else the lowercase name."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return text.lower()


def is_loopback(host: str) -> bool:
    """Whether a bind address reaches this machine only, however it is spelled (``127.0.0.2``, ``::1``)."""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_authority(text: str) -> Authority | None:
    """``host[:port]`` as a normalised :data:`Authority`, or None when ``text`` is not exactly that."""
    match = _AUTHORITY.fullmatch(text)
    if match is None:
        return None
    if match["v6"] is not None:
        try:
            host = str(ipaddress.IPv6Address(match["v6"]))
        except ValueError:
            return None
    else:
        host = _host(match["name"])
    port = int(match["port"]) if match["port"] is not None else None
    if port is not None and not 0 < port < 65536:
        return None
    return host, port


def allowed_authorities(host: str, port: int, extra: Iterable[str] = ()) -> frozenset[Authority]:
    """What a server bound to ``host:port`` answers to: the loopback names and the bind address with
    ``port`` (bare too when the port is 80), and each of ``extra`` exactly as written (``name[:port]``)."""
    names = set(LOOPBACK_NAMES)
    bound = _host(host.strip("[]"))
    try:
        if not ipaddress.ip_address(bound).is_unspecified:  # 0.0.0.0 and :: are no name a client uses
            names.add(bound)
    except ValueError:
        names.add(bound)
    allowed: set[Authority] = {(name, port) for name in names}
    if port == 80:
        allowed |= {(name, None) for name in names}
    for entry in extra:
        authority = parse_authority(entry)
        if authority is None:
            raise ConfigError(
                f"allowed host {entry[:_SHOWN]!r} is not a host name or address with an optional port. "
                "Fix: give it as the clients' Host header reads, e.g. mcp.example.com or mcp.example.com:8443"
            )
        allowed.add(authority)
    return frozenset(allowed)


class HostGuard:
    """ASGI wrapper refusing a request whose ``Host`` or ``Origin`` names no allowed authority.

    ``host`` and ``port`` are where the server is bound; ``allowed_hosts`` the operator's extra names (see
    :func:`allowed_authorities`).
    """

    def __init__(self, app: ASGIApp, *, host: str, port: int, allowed_hosts: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed = allowed_authorities(host, port, allowed_hosts)
        self._example = f"http://127.0.0.1:{port}"

    def _problem(self, scope: Scope) -> tuple[int, str] | None:
        """``(status, text)`` of the refusal, or None when the request may pass."""
        headers = scope.get("headers", ())
        hosts = [value.decode("latin-1") for key, value in headers if key.lower() == b"host"]
        origins = [value.decode("latin-1") for key, value in headers if key.lower() == b"origin"]
        if len(hosts) != 1 or parse_authority(hosts[0]) not in self.allowed:
            shown = hosts[0][:_SHOWN] if len(hosts) == 1 else f"{len(hosts)} Host headers"
            return 421, (
                f"Host {shown!r} is not an address of this server (DNS rebinding?). Fix: connect to "
                f"{self._example}, or start the server with --allowed-host NAME for a name it is reached by"
            )
        if not origins:  # not a browser, or a same-origin request of an old one: Host decided
            return None
        match = _ORIGIN.fullmatch(origins[0]) if len(origins) == 1 else None
        if match is None or parse_authority(match["authority"]) not in self.allowed:
            shown = origins[0][:_SHOWN] if len(origins) == 1 else f"{len(origins)} Origin headers"
            return 403, (
                f"Origin {shown!r} may not use this server (a web page of another site?). Fix: if that page "
                "is yours, start the server with --allowed-host HOST:PORT of the page"
            )
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        problem = self._problem(scope) if scope["type"] in ("http", "websocket") else None
        if problem is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "websocket":  # closed before it is accepted: the handshake gets a 403
            await send({"type": "websocket.close", "code": 1008})
        else:
            await refuse(send, *problem)


def bind_sockets(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to every address ``host`` names (as asyncio's ``create_server`` binds them), for
    uvicorn to serve on: binding here makes a port in use one :class:`ConfigError` with a Fix, where
    uvicorn logs the OS's line and exits 3. ``port`` 0: the system picks one, the same for every address."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        raise ConfigError(
            f"cannot resolve --host {brief(host)} ({exc.strerror or exc}). Fix: give an address, "
            "e.g. 127.0.0.1"
        ) from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind((address[0], port, *address[2:]))
            port = port or sock.getsockname()[1]
    except OSError as exc:
        for sock in sockets:
            sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {port} on {brief(host)} is in use. Fix: --port N (a free port), or stop the server "
                "that holds it"
            ) from None
        raise ConfigError(
            f"cannot listen on {brief(host)} port {port}: {exc.strerror or exc}. Fix: --host 127.0.0.1, or "
            "another --port"
        ) from None
    return sockets
