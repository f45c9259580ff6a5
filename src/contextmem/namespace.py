"""Namespaces (SPEC M6): who owns a session, a memory, an archive — and where its files live.

A namespace names one tenant / user / agent. It is validated at every entry (settings, the CLI, MCP URLs,
the library) by :func:`check_namespace`, and everything that belongs to it is keyed by it: store rows,
index rows, the dialog archive's lines, offload files, and its directory::

    ROOT/                      namespace "default" lives at the root (CowAgent's layout)
    ROOT/namespaces/<name>/    every other namespace: the same layout, one directory each

The grammar is strict on purpose: 1–64 characters of lowercase ASCII letters, digits, ``.``, ``_``, ``-``
and ``@``, starting with a letter or digit. Nothing in it can name a parent directory, a separator, a
control character, whitespace or a URL escape, and lowercase-only means two tenants can never share a
directory on a case-insensitive file system.
"""

from __future__ import annotations

import re
from pathlib import Path

from .errors import ConfigError
from .safefs import Confined

__all__ = ["DEFAULT_NAMESPACE", "NAMESPACES_DIR", "check_namespace", "namespace_dir", "namespace_tree"]

DEFAULT_NAMESPACE = "default"
NAMESPACES_DIR = "namespaces"
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


def namespace_dir(root: str | Path, namespace: str) -> Path:
    """The directory of ``namespace`` under the workspace ``root`` (the root itself for the default)."""
    name = check_namespace(namespace)
    base = Path(root)
    return base if name == DEFAULT_NAMESPACE else base / NAMESPACES_DIR / name


def namespace_tree(root: str | Path, namespace: str) -> Confined:
    """The confined file tree of ``namespace`` under the workspace ``root`` (see :mod:`contextmem.safefs`).

    ``namespaces/<name>`` is walked without following links, and the default namespace may not reach
    into ``namespaces/``, where the other tenants live.
    """
    name = check_namespace(namespace)
    if name == DEFAULT_NAMESPACE:
        return Confined(root, reserved=(NAMESPACES_DIR,))
    return Confined(root, prefix=(NAMESPACES_DIR, name))
