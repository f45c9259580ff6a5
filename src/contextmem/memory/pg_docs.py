"""The shared memory documents on PostgreSQL (:class:`~contextmem.memory_docs.SharedDocuments`).

One row per namespace and document in ``cm_memory_docs`` (migration ``memory`` 6). Every write runs in
one transaction that first makes sure the row exists (``INSERT … ON CONFLICT DO NOTHING``: two hosts
creating the same daily file at once both land on the one row), then locks it (``SELECT … FOR UPDATE``),
so appends from many hosts queue on the row and each sees the text before it: none is lost. An edit or a
delete is conditional on the version its caller read (the base); a moved document refuses it with
:class:`~contextmem.errors.MemoryConflictError`. It goes through the memory index's
:class:`~contextmem.memory.pg_link.PgLink` (the store's timeouts and retries, migrations run on open).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..memory_docs import MAX_DOC_BYTES, DocState, Document, conflict, doc_hash, too_large
from .pg_link import PgLink

if TYPE_CHECKING:
    from psycopg import AsyncConnection

__all__ = ["PgDocuments"]

_ENSURE = (
    "INSERT INTO cm_memory_docs (namespace, path, version, content, hash, mtime_ns, deleted, updated_at)"
    " VALUES (%s, %s, 0, ''::bytea, %s, 0, true, %s) ON CONFLICT (namespace, path) DO NOTHING"
)
_LOCK = (
    "SELECT version, content, mtime_ns, deleted, writer FROM cm_memory_docs"
    " WHERE namespace = %s AND path = %s FOR UPDATE"
)
_WRITE = (
    "UPDATE cm_memory_docs SET version = %s, content = %s, hash = %s, mtime_ns = %s, deleted = %s,"
    " updated_at = %s, writer = %s WHERE namespace = %s AND path = %s"
)
_EMPTY = doc_hash(b"")


class PgDocuments:
    """One namespace's documents in the index's database (see the module docstring)."""

    def __init__(self, link: PgLink, namespace: str) -> None:
        self._db = link
        self.namespace = namespace

    def states(self) -> dict[str, DocState]:
        rows = self._db.rows(
            f"listing the memory documents of {self.namespace!r}",
            "SELECT path, version, hash, mtime_ns, length(content), deleted FROM cm_memory_docs"
            " WHERE namespace = %s AND version > 0",
            (self.namespace,),
        )
        return {r[0]: DocState(int(r[1]), r[2], int(r[3]), int(r[4]), bool(r[5])) for r in rows}

    def get(self, path: str) -> Document | None:
        rows = self._db.rows(
            f"reading a memory document of {self.namespace!r}",
            "SELECT version, content, mtime_ns, deleted FROM cm_memory_docs"
            " WHERE namespace = %s AND path = %s AND version > 0",
            (self.namespace, path),
        )
        if not rows:
            return None
        version, content, mtime_ns, deleted = rows[0]
        return Document(path, int(version), bytes(content), int(mtime_ns), bool(deleted))

    def _locked(
        self, what: str, path: str, change: Callable[[Document], tuple[bytes, bool, int] | None]
    ) -> Document:
        """Run ``change(the document as locked)`` -> ``(content, deleted, mtime_ns)`` (``None``: write
        nothing) in one transaction under the row's lock; the document as it is afterwards.

        The link retries a transaction that failed in transit, and its commit may have landed: the row
        then carries this write's token, and the retry returns it as it is instead of writing again (an
        append is never doubled)."""
        ns = self.namespace
        token = uuid.uuid4().hex

        async def body(conn: AsyncConnection[Any]) -> Document:
            await conn.execute(_ENSURE, (ns, path, _EMPTY, time.time()))
            cur = await conn.execute(_LOCK, (ns, path))
            row = await cur.fetchone()
            assert row is not None  # just ensured, and rows are never deleted
            now = Document(path, int(row[0]), bytes(row[1]), int(row[2]), bool(row[3]))
            if row[4] == token:  # this very write, committed by an attempt whose answer was lost
                return now
            new = change(now)
            if new is None:
                return now
            content, deleted, mtime_ns = new
            version = now.version + 1
            await conn.execute(
                _WRITE, (version, content, doc_hash(content), mtime_ns, deleted, time.time(), token, ns, path)
            )
            return Document(path, version, content, mtime_ns, deleted)

        return self._db.run(f"{what} of {ns!r}", body)

    def append(self, path: str, make: Callable[[bytes], bytes], mtime_ns: int) -> Document:
        def change(now: Document) -> tuple[bytes, bool, int] | None:
            current = b"" if now.deleted else now.content
            added = make(current)
            if not added:  # nothing to append (an entry another host already wrote): no new version
                return None
            content = current + added
            if len(content) > MAX_DOC_BYTES:
                raise too_large(path, len(content))
            return content, False, mtime_ns

        return self._locked("appending to a memory document", path, change)

    def put(self, path: str, content: bytes, base_version: int, mtime_ns: int) -> Document:
        if len(content) > MAX_DOC_BYTES:
            raise too_large(path, len(content))

        def change(now: Document) -> tuple[bytes, bool, int]:
            if now.version != base_version:
                raise conflict(path, now.version, base_version)
            return content, False, mtime_ns

        return self._locked("writing a memory document", path, change)

    def delete(self, path: str, base_version: int) -> Document:
        def change(now: Document) -> tuple[bytes, bool, int] | None:
            if now.version != base_version:
                raise conflict(path, now.version, base_version)
            return None if now.deleted else (b"", True, time.time_ns())

        return self._locked("deleting a memory document", path, change)
