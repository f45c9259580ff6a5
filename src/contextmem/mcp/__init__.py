"""The MCP server (A4): ``contextmem mcp`` / ``python -m contextmem.mcp``. Needs the ``mcp`` extra.

Importing this package is free; the SDK is imported when a server is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .cli import add_arguments, main_mcp, run
from .namespaces import ANY_NAMESPACE, NamespaceRouter, Namespaces

if TYPE_CHECKING:
    from .server import build_server, http_app, serve_http, serve_stdio

__all__ = [
    "ANY_NAMESPACE",
    "NamespaceRouter",
    "Namespaces",
    "add_arguments",
    "build_server",
    "http_app",
    "main_mcp",
    "run",
    "serve_http",
    "serve_stdio",
]


def __getattr__(name: str) -> Any:
    if name in ("build_server", "http_app", "serve_http", "serve_stdio"):
        from . import server

        return getattr(server, name)
    raise AttributeError(name)
