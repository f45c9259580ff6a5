"""Namespaces (M6): who owns a session, a memory, an archive; and the session ids within one.

A namespace names one tenant / user / agent. It is validated at every entry (settings, the CLI, MCP URLs,
the library) by :func:`check_namespace`, and everything that belongs to it is keyed by it: store rows,
index rows, the dialog archive's lines, offload files, and its directory (placed by
:func:`contextmem.workspace.namespace_tree`, the one owner of the workspace's layout).

The grammar is strict on purpose: 1–64 characters of lowercase ASCII letters, digits, ``.``, ``_``, ``-``
and ``@``, starting with a letter or digit. Nothing in it can name a parent directory, a separator, a
control character, whitespace or a URL escape, and lowercase-only means two tenants can never share a
directory on a case-insensitive file system.

A **session id** comes from an application (a LangChain ``thread_id``, an Agents SDK session, a chat's
name), so it is free text: any id is stored and listed back exactly, or refused by
:func:`check_session_id` with one line and a Fix. Refused are only what a store cannot keep exactly:
the empty id, an id over :data:`MAX_SESSION_ID_CHARS` characters (PostgreSQL indexes ``(namespace,
session_id)``, and a B-tree entry holds at most ~2,700 bytes; 256 characters are at most 1,024 UTF-8
bytes), NUL (PostgreSQL ``text`` refuses it) and a lone surrogate (U+D800..U+DFFF, what JSON ``"\ud800"``
decodes to: UTF-8 cannot encode it). Everything else (line separators, controls, bidi marks, any script,
emoji) is stored as given; whoever prints or writes an id into a line escapes it there. Every store
method checks it before any I/O (:class:`~contextmem.store.backend.SessionStoreBase`), the one door
that every adapter (CLI ``--session``, the MCP tools, the integrations, ``ContextMem.session``) passes.
"""

from __future__ import annotations

import re

from .errors import ConfigError, UsageError, brief
from .message_checks import unencodable_at

__all__ = ["DEFAULT_NAMESPACE", "MAX_SESSION_ID_CHARS", "check_namespace", "check_session_id"]

DEFAULT_NAMESPACE = "default"
MAX_NAMESPACE_CHARS = 64

_GRAMMAR = re.compile(r"[a-z0-9][a-z0-9._@-]{0,63}")


def check_namespace(namespace: object) -> str:
    """Return ``namespace`` if it follows the grammar above, else raise :class:`ConfigError`."""
    if not isinstance(namespace, str) or not _GRAMMAR.fullmatch(namespace):
        raise ConfigError(
            f"namespace {brief(namespace)} is not allowed. Fix: use 1-{MAX_NAMESPACE_CHARS} lowercase "
            "letters, digits, '.', '_', '-' or '@', starting with a letter or digit "
            "(e.g. 'alice' or 'agent-7')"
        )
    return namespace


MAX_SESSION_ID_CHARS = 256

_SESSION_ID_FIX = (
    f"use 1-{MAX_SESSION_ID_CHARS} characters with no NUL and no lone surrogate, e.g. a UUID or "
    "'chat-2026-03-14' (decode ids with errors='replace', never 'surrogateescape')"
)


def check_session_id(session_id: object) -> str:
    """Return ``session_id`` if a store keeps it exactly (see the module docstring), else raise
    :class:`~contextmem.errors.UsageError` in one line showing it (:func:`~contextmem.errors.brief`)."""
    if not isinstance(session_id, str):
        problem = f"must be a str, got {type(session_id).__name__}"
    elif not session_id:
        problem = "is empty"
    elif len(session_id) > MAX_SESSION_ID_CHARS:
        problem = f"has {len(session_id):,} characters, more than {MAX_SESSION_ID_CHARS}"
    elif "\x00" in session_id:
        problem = f"holds NUL (U+0000) at character {session_id.index(chr(0))}"
    elif (at := unencodable_at(session_id)) >= 0:
        code = ord(session_id[at])
        problem = f"holds a lone surrogate (U+{code:04X}) at character {at}, which UTF-8 cannot encode"
    else:
        return session_id
    raise UsageError(f"session id {brief(session_id)} {problem}. Fix: {_SESSION_ID_FIX}")
