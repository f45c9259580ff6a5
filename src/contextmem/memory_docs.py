"""Shared memory documents: what hosts that share a store keep of memory, and how a working copy meets them.

With a PostgreSQL store the memory documents (``MEMORY.md``, the daily files ``memory/YYYY-MM-DD.md``,
notes ``memory/**.md``) are rows of the database, one per document and namespace, each with a version
counter; the files of a host's workspace are a working copy of them (:mod:`contextmem.memory.working_copy`
pulls and pushes). This module holds what every side needs and nothing that stores: the protocol a
backend implements (:class:`SharedDocuments`; :mod:`contextmem.memory.pg_docs`), the document's values,
the name check, the entries of a daily file and the pure decision of what one sync does with a document
(:func:`decide`).

Invariants (each backend keeps them; ``tests/test_shared_memory.py`` checks them on PostgreSQL):

* **Appends merge.** :meth:`SharedDocuments.append` reads the document and writes what ``make`` adds to it
  under the row's lock, in one transaction: appends from many hosts at once all land, none lost, each
  whole, and each sees the text before it (a note for `MEMORY.md` joins the list it follows).
* **Edits carry their base.** :meth:`SharedDocuments.put` replaces a document only if it is still at
  ``base_version`` (``0``: it must not exist, or be deleted); otherwise nothing is written and
  :class:`~contextmem.errors.MemoryConflictError` says so, with its Fix.
* **Versions only grow.** Every write adds one; a deleted document keeps its row (a tombstone) so a host
  that held an old version never takes a new document of the same name for it.
* **Bounded, exact, confined.** A document is at most :data:`MAX_DOC_BYTES`; its bytes read back exactly
  as written (NUL, lone line separators and all); its name passes :func:`document_name` (the workspace
  gate's rules: no ``..``, no absolute path, only ``MEMORY.md`` and ``memory/**.md``); every row carries
  its namespace and every read filters on it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

from .errors import ConfigError, MemoryConflictError, PathEscapeError, brief
from .safefs import MAX_PATH_CHARS, Confined
from .workspace import CORE_FILE, DAILY_DIR, daily_date

__all__ = [
    "MAX_DOC_BYTES",
    "Action",
    "Base",
    "DocState",
    "Document",
    "SharedDocuments",
    "conflict",
    "daily_blocks",
    "decide",
    "doc_hash",
    "document_name",
    "documents_of",
    "new_daily_entries",
    "too_large",
]

MAX_DOC_BYTES = 16 * 1024 * 1024  # of one document (as memory_get reads at most 16 MiB of a file)

Action = Literal[
    "keep", "pull", "push", "create", "adopt", "merge", "delete_shared", "delete_local", "forget", "conflict"
]


def doc_hash(content: bytes) -> str:
    """The content hash of a document (the memory index's :func:`~contextmem.memory.text.content_hash`)."""
    return hashlib.sha256(content).hexdigest()


@dataclass(frozen=True, slots=True)
class DocState:
    """A document as a listing gives it: no content."""

    version: int
    hash: str
    mtime_ns: int  # when its content was written (a pulled copy's file gets this mtime)
    size: int
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class Document:
    path: str
    version: int
    content: bytes
    mtime_ns: int
    deleted: bool = False

    @property
    def state(self) -> DocState:
        return DocState(self.version, doc_hash(self.content), self.mtime_ns, len(self.content), self.deleted)


@dataclass(frozen=True, slots=True)
class Base:
    """What a working copy's file was last in line with: the document's version and hash, and the file's
    ``(mtime_ns, size)`` as it was written (unchanged since when they still match)."""

    version: int
    hash: str
    mtime_ns: int
    size: int


class SharedDocuments(Protocol):
    """One namespace's memory documents in a shared store. Synchronous (as the memory tools are); see the
    module's invariants."""

    namespace: str

    def states(self) -> dict[str, DocState]:
        """Every document of the namespace, deleted ones (tombstones) included."""
        ...

    def get(self, path: str) -> Document | None:
        """The document ``path`` (a tombstone comes back with ``deleted``), or ``None``."""
        ...

    def append(self, path: str, make: Callable[[bytes], bytes], mtime_ns: int) -> Document:
        """Append ``make(current content)`` to ``path`` (made when missing or deleted) under its row lock."""
        ...

    def put(self, path: str, content: bytes, base_version: int, mtime_ns: int) -> Document:
        """Replace ``path`` with ``content`` if it is at ``base_version``, else ``MemoryConflictError``."""
        ...

    def delete(self, path: str, base_version: int) -> Document:
        """Delete ``path`` (a tombstone) if it is at ``base_version``, else ``MemoryConflictError``."""
        ...


def documents_of(index: object) -> SharedDocuments | None:
    """The shared documents a memory index's files are a working copy of (its ``documents``), else
    ``None``: the files are the truth (SQLite, or an index of another kind)."""
    docs: SharedDocuments | None = getattr(index, "documents", None)
    return docs


def document_name(files: Confined, relative: object) -> str:
    """``relative`` as a document name (``MEMORY.md`` or ``memory/…/*.md``, POSIX, normalised by the
    workspace gate), else :class:`PathEscapeError` / :class:`ConfigError` with the Fix."""
    if not isinstance(relative, str) or len(relative) > MAX_PATH_CHARS:
        raise ConfigError(
            f"memory document name {brief(relative)} is not a path of at most {MAX_PATH_CHARS} characters. "
            "Fix: name MEMORY.md or memory/YYYY-MM-DD.md"
        )
    parts = files.parts(relative, under=(CORE_FILE, DAILY_DIR))
    name = "/".join(parts)
    if name != CORE_FILE and not (parts[0] == DAILY_DIR and len(parts) > 1 and name.endswith(".md")):
        raise PathEscapeError(
            f"{brief(relative)} is not a memory document. Fix: name MEMORY.md or memory/…/*.md"
        )
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"memory document name {brief(relative)} is not UTF-8. Fix: rename it") from None
    return name


def conflict(path: str, actual: int, base: int) -> MemoryConflictError:
    """The one wording of a refused edit: ``path`` is at ``actual``, the edit was made on ``base``."""
    return MemoryConflictError(
        f"memory document {brief(path)} is at version {actual} in the shared store, but this edit was made "
        f"on version {base}: another host changed it, so nothing was written and your edit stays in the "
        "working copy. Fix: copy your edit aside, run `contextmem memory pull --overwrite` to take the "
        "shared version, then make the edit again"
    )


def too_large(path: str, size: int) -> ConfigError:
    return ConfigError(
        f"memory document {brief(path)} would be {size:,} bytes; a shared document holds at most "
        f"{MAX_DOC_BYTES:,}. Fix: move older entries to a note of their own (memory/…/*.md)"
    )


def daily_blocks(text: bytes) -> list[bytes]:
    """The entries of a daily file: each line (cut at ``\n`` only) that starts ``## `` begins one (what
    comes before the first is one more), each without the line ends it finishes with. Blank ones go."""
    blocks: list[list[bytes]] = [[]]
    pieces = text.split(b"\n")
    for i, piece in enumerate(pieces):
        line = piece + b"\n" if i < len(pieces) - 1 else piece
        if line.startswith(b"## "):
            blocks.append([])
        blocks[-1].append(line)
    kept = [b"".join(b).rstrip(b"\r\n") for b in blocks]
    return [b for b in kept if b.strip()]


def new_daily_entries(local: bytes, shared: bytes) -> bytes:
    """What appending to the shared daily file ``shared`` merges ``local`` (a working copy's edit) into it:
    the entries of ``local`` that ``shared`` lacks (by count: two equal entries are two), in ``local``'s
    order, each after a blank line; ``b""`` when it has them all."""
    have: dict[bytes, int] = {}
    for block in daily_blocks(shared):
        have[block] = have.get(block, 0) + 1
    new: list[bytes] = []
    for block in daily_blocks(local):
        if have.get(block, 0) > 0:
            have[block] -= 1
        else:
            new.append(block)
    if not new:
        return b""
    return b"".join(
        gap(shared if i == 0 else b"x\n", blank=True) + block + b"\n" for i, block in enumerate(new)
    )


def gap(tail: bytes, *, blank: bool) -> bytes:
    """What goes between ``tail`` and a new entry: a line end, and a blank line when ``blank``."""
    if not tail:
        return b""
    needed = b"\n\n" if blank else b"\n"
    ends = len(tail) - len(tail.rstrip(b"\n"))
    return needed[min(ends, len(needed)) :]


def decide(path: str, local: str | None, base: Base | None, shared: DocState | None) -> Action:
    """What one sync does with document ``path`` (pure). ``local``: the working copy's content hash
    (``None``: no file), ``base``: what the copy was last in line with, ``shared``: the document now.

    A copy that did not change since its base takes the shared document's news (``pull``, or
    ``delete_local`` when it was deleted); a changed copy is written back with its base (``push``), or
    created, or — when the shared document moved too — merged (a daily file: its new entries appended)
    or refused (``conflict``: ``MEMORY.md`` and notes; the copy is kept, the document untouched). A
    deleted copy deletes the document only if nothing changed it since (else it comes back: ``pull``).
    """
    live = shared is not None and not shared.deleted
    if local is None:
        if base is None:
            return "pull" if live else "keep"
        if not live:
            return "forget"
        assert shared is not None
        return "delete_shared" if shared.version == base.version else "pull"
    if base is not None and local == base.hash:
        if shared is None:
            return "create"  # the shared row is gone (a new database): the copy gives it back
        if shared.deleted:
            return "delete_local"
        return "keep" if shared.version == base.version else "pull"
    if not live:
        return "create"
    assert shared is not None
    if shared.hash == local:
        return "adopt"
    if base is not None and shared.version == base.version:
        return "push"
    return "merge" if daily_date(path) is not None else "conflict"
