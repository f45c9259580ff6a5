"""Namespaces (M6): who owns a session, a memory, an archive.

A namespace names one tenant / user / agent. It is validated at every entry (settings, the CLI, MCP URLs,
the library) by :func:`check_namespace`, and everything that belongs to it is keyed by it: store rows,
index rows, the dialog archive's lines, offload files, and its directory (placed by
:func:`contextmem.workspace.namespace_tree`, the one owner of the workspace's layout).

The grammar is strict on purpose: 1–64 characters of lowercase ASCII letters, digits, ``.``, ``_``, ``-``
and ``@``, starting with a letter or digit. Nothing in it can name a parent directory, a separator, a
control character, whitespace or a URL escape, and lowercase-only means two tenants can never share a
directory on a case-insensitive file system.
"""

from __future__ import annotations

import re

from .errors import ConfigError

__all__ = ["DEFAULT_NAMESPACE", "check_namespace"]

DEFAULT_NAMESPACE = "default"
MAX_NAMESPACE_CHARS = 64

_GRAMMAR = re.compile(r"[a-z0-9][a-z0-9._@-]{0,63}")


def check_namespace(namespace: object) -> str:
    """Return ``namespace`` if it follows the grammar above, else raise :class:`ConfigError`."""
    if not isinstance(namespace, str) or not _GRAMMAR.fullmatch(namespace):
        shown = namespace if not isinstance(namespace, str) else namespace[:80]
        raise ConfigError(
            f"namespace {shown!r} is not allowed. Fix: use 1-{MAX_NAMESPACE_CHARS} lowercase letters, "
            "digits, '.', '_', '-' or '@', starting with a letter or digit (e.g. 'alice' or 'agent-7')"
        )
    return namespace
