"""A host's memory files as a working copy of the shared documents (:mod:`contextmem.memory_docs`).

:meth:`WorkingCopy.sync` brings the two in line, one document at a time as :func:`~contextmem.memory_docs.
decide` says: a hand edit of the copy is written back with the version it was made on, a daily file's
new entries merge into the shared one, a document another host changed is pulled, a deletion travels
both ways. A conflicting edit of ``MEMORY.md`` or a note is refused: the copy keeps it, the shared
document is untouched, and :attr:`Reconciled.conflicts` holds the one-line error with its Fix (with
``overwrite`` the shared version is taken instead).

What the copy was last in line with (per file: the document's version and hash, the file's mtime and
size) is kept in ``memory/.shared.json``, written atomically through the gate; a file whose size and
mtime still match it is not read. A pulled file gets the document's mtime, so every host's copy of a
document has the same size and mtime and the memory index re-reads none of them. Syncs of one workspace
(several processes on one host) take turns on ``memory/.shared.lock``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import ConfigError, ContextmemError, MemoryConflictError, NotFoundError, PathEscapeError
from ..logs import get_logger
from ..memory_docs import (
    MAX_DOC_BYTES,
    Action,
    Base,
    DocState,
    Document,
    SharedDocuments,
    conflict,
    decide,
    doc_hash,
    document_name,
    new_daily_entries,
    too_large,
)
from ..safefs import WalkResult
from ..workspace import DAILY_DIR, Workspace, daily_date

__all__ = ["STATE_FILE", "DocumentSource", "Reconciled", "WorkingCopy", "WriteThrough"]

logger = get_logger("contextmem.memory")
STATE_FILE = f"{DAILY_DIR}/.shared.json"
LOCK_FILE = f"{DAILY_DIR}/.shared.lock"
MAX_STATE_BYTES = 16 * 1024 * 1024
_RACY_NS = 2_000_000_000  # a base younger than this is not trusted without reading the file


@dataclass(slots=True)
class Reconciled:
    """What one sync of the working copy did, by document name."""

    pushed: list[str] = field(default_factory=list)  # written back (edited, created, deleted here)
    merged: list[str] = field(default_factory=list)  # daily files whose new entries were appended
    pulled: list[str] = field(default_factory=list)  # taken from the shared store (or deleted here)
    conflicts: list[str] = field(default_factory=list)  # refused edits: one-line errors with their Fix
    skipped: list[str] = field(default_factory=list)  # links and the like: never read nor written
    # The shared documents as this sync listed them, when it wrote none of them (else ``None``): what the
    # index reads next (:class:`DocumentSource`), without listing them again.
    listing: dict[str, DocState] | None = None

    @property
    def changed(self) -> bool:
        return bool(self.pushed or self.merged or self.pulled)


class DocumentSource:
    """The shared documents as the memory index reads them (:class:`.sync.Source`): whatever any host's
    working copy holds, the index is built from these, once per content. A document's ``stat`` is its
    mtime and size; a deleted one is not listed."""

    def __init__(self, docs: SharedDocuments, listing: dict[str, DocState] | None = None) -> None:
        self.docs = docs
        self._listing = listing  # the documents as just listed (:attr:`Reconciled.listing`), used once
        self._hashes: dict[str, str] = {}  # the content hashes the last scan listed

    def scan(self) -> WalkResult:
        found = WalkResult()
        listing, self._listing = self._listing, None
        listed = listing if listing is not None else self.docs.states()
        self._hashes = {rel: state.hash for rel, state in listed.items() if not state.deleted}
        for rel, state in sorted(listed.items()):
            if not state.deleted:
                found.files.append((rel, _stat(state.mtime_ns, state.size)))
        return found

    def listed_hash(self, relative: str) -> str | None:
        return self._hashes.get(relative)

    def read(self, relative: str) -> tuple[bytes, os.stat_result]:
        doc = self.docs.get(relative)
        if doc is None or doc.deleted:  # a FileNotFoundError too, as a file read raises it
            raise NotFoundError(
                f"memory document {relative!r} is not in the shared store (deleted meanwhile). "
                "Fix: search again; the next sync no longer lists it"
            )
        return doc.content, _stat(doc.mtime_ns, len(doc.content))


def _stat(mtime_ns: int, size: int) -> os.stat_result:
    """A ``stat`` that says what an index reads of one: the size and the mtime (in s and ns)."""
    seconds = mtime_ns // 1_000_000_000
    return os.stat_result(
        (0, 0, 0, 1, 0, 0, size, seconds, seconds, seconds) + (seconds,) * 3 + (mtime_ns,) * 3
    )


class WriteThrough:
    """The shared documents as this host writes them: each write also lands in the working copy at once
    (:meth:`WorkingCopy.take`), so the host that wrote reads its file without waiting for a sync."""

    def __init__(self, docs: SharedDocuments, copy: WorkingCopy) -> None:
        self.inner = docs
        self.copy = copy
        self.namespace = docs.namespace

    def states(self) -> dict[str, DocState]:
        return self.inner.states()

    def get(self, path: str) -> Document | None:
        return self.inner.get(path)

    def append(self, path: str, make: Callable[[bytes], bytes], mtime_ns: int) -> Document:
        return self._took(self.inner.append(path, make, mtime_ns))

    def put(self, path: str, content: bytes, base_version: int, mtime_ns: int) -> Document:
        return self._took(self.inner.put(path, content, base_version, mtime_ns))

    def delete(self, path: str, base_version: int) -> Document:
        return self._took(self.inner.delete(path, base_version))

    def _took(self, doc: Document) -> Document:
        try:
            self.copy.take(doc)
        except (OSError, ContextmemError) as exc:  # the write landed; the next sync brings the copy along
            logger.warning(
                "the working copy of %r was not updated (%s); the next sync does it", doc.path, exc
            )
        return doc


class WorkingCopy:
    """The memory files of ``workspace`` as a working copy of ``docs`` (see the module docstring)."""

    def __init__(self, workspace: Workspace, docs: SharedDocuments) -> None:
        self.workspace = workspace
        self.docs = docs
        self._warned: set[str] = set()

    def sync(self, *, overwrite: bool = False) -> Reconciled:
        """Push this copy's edits, pull the others'; ``overwrite``: a conflict takes the shared version
        (the edit is lost from the copy: the caller said so)."""
        files = self.workspace.files
        with files.locked_append(LOCK_FILE):
            done = Reconciled()
            bases = self._load()
            before = dict(bases)
            scan = self.workspace.scan_memory_files()
            done.skipped = [rel for rel, _ in scan.skipped]
            seen = dict(scan.files)
            shared = self.docs.states()
            for rel in sorted(set(seen) | set(bases) | set(shared)):
                if rel in done.skipped:
                    continue
                try:
                    name = document_name(files, rel)
                    self._one(
                        name,
                        st=seen.get(rel),
                        bases=bases,
                        shared=shared.get(name),
                        done=done,
                        overwrite=overwrite,
                    )
                except (MemoryConflictError, ConfigError) as exc:  # refused (a conflict, a size): kept here
                    done.conflicts.append(str(exc))
                except (PathEscapeError, FileNotFoundError):
                    done.skipped.append(rel)  # became a link, or vanished, while we looked
            if bases != before:  # a search syncs first: an idle sync writes nothing
                self._save(bases)
            if not (done.pushed or done.merged):
                done.listing = shared
        for problem in done.conflicts:
            if problem not in self._warned:
                self._warned.add(problem)
                logger.warning("%s", problem)
        return done

    def take(self, doc: Document) -> None:
        """Bring the copy of ``doc`` (just written to the shared store by this host) up to it, unless the
        file was edited since its base (the next :meth:`sync` merges that) or already holds a newer one."""
        files = self.workspace.files
        with files.locked_append(LOCK_FILE):
            bases = self._load()
            base = bases.get(doc.path)
            if base is not None and base.version >= doc.version:
                return
            try:
                st = files.lstat(doc.path)
            except FileNotFoundError:
                st = None
            if st is None:
                if base is not None:
                    return  # deleted here since: the next sync decides
            elif base is None or (st.st_mtime_ns, st.st_size) != (base.mtime_ns, base.size):
                return  # a file this copy has not synced yet, or one edited since
            if doc.deleted:
                return
            self._record(doc.path, bases, doc, write=True)
            self._save(bases)

    # --- one document -------------------------------------------------------------------------

    def _one(
        self,
        rel: str,
        *,
        st: os.stat_result | None,
        bases: dict[str, Base],
        shared: DocState | None,
        done: Reconciled,
        overwrite: bool,
    ) -> None:
        base = bases.get(rel)
        content: bytes | None = None
        local: str | None = None
        if st is not None:
            fresh = time.time_ns() - st.st_mtime_ns > _RACY_NS
            if base is not None and fresh and (st.st_mtime_ns, st.st_size) == (base.mtime_ns, base.size):
                local = base.hash
            else:
                content = self._read(rel)
                local = doc_hash(content)
        action: Action = decide(rel, local, base, shared)
        if action == "conflict" and overwrite:
            action = "pull"
        if action == "keep":
            return
        if action == "conflict":
            assert shared is not None
            raise conflict(rel, shared.version, base.version if base else 0)
        if action in ("forget", "delete_local"):
            if action == "delete_local":
                self.workspace.files.unlink(rel)
                done.pulled.append(rel)
            bases.pop(rel, None)
            return
        if action == "delete_shared":
            assert base is not None
            try:
                self.docs.delete(rel, base.version)
            except MemoryConflictError:  # changed elsewhere meanwhile: it comes back
                self._pull(rel, bases, done)
                return
            bases.pop(rel, None)
            done.pushed.append(rel)
            return
        if action == "pull":
            self._pull(rel, bases, done)
            return
        assert content is not None and st is not None  # the copy changed: it was read
        if action == "adopt":
            assert shared is not None
            self._record(rel, bases, Document(rel, shared.version, content, shared.mtime_ns))
            return
        if action in ("push", "create"):
            at = base.version if action == "push" and base is not None else (shared.version if shared else 0)
            try:
                doc = self.docs.put(rel, content, at, st.st_mtime_ns)
            except MemoryConflictError:
                if daily_date(rel) is None:
                    raise
            else:
                bases[rel] = Base(doc.version, doc_hash(content), st.st_mtime_ns, st.st_size)
                done.pushed.append(rel)
                return
        # a daily file changed here and elsewhere: its new entries join the shared one, which comes back
        written = content
        self.docs.append(rel, lambda current: new_daily_entries(written, current), time.time_ns())
        done.merged.append(rel)
        self._pull(rel, bases, done, count=False)

    def _read(self, rel: str) -> bytes:
        data = self.workspace.files.read_bytes(rel, max_bytes=MAX_DOC_BYTES + 1)
        if len(data) > MAX_DOC_BYTES:
            raise too_large(rel, len(data))
        return data

    def _pull(self, rel: str, bases: dict[str, Base], done: Reconciled, *, count: bool = True) -> None:
        doc = self.docs.get(rel)
        if doc is None or doc.deleted:
            self.workspace.files.unlink(rel)
            bases.pop(rel, None)
        else:
            self._record(rel, bases, doc, write=True)
        if count:
            done.pulled.append(rel)

    def _record(self, rel: str, bases: dict[str, Base], doc: Document, *, write: bool = False) -> None:
        """The copy of ``rel`` is ``doc`` now (``write``: make it so): give the file the document's mtime
        and remember the base."""
        files = self.workspace.files
        if write:
            files.write_atomic(rel, doc.content)
        fd = files.open(rel)
        try:
            os.utime(fd, ns=(doc.mtime_ns, doc.mtime_ns))
            st = os.fstat(fd)
        finally:
            os.close(fd)
        bases[rel] = Base(doc.version, doc_hash(doc.content), st.st_mtime_ns, st.st_size)

    # --- the bases ----------------------------------------------------------------------------

    def _load(self) -> dict[str, Base]:
        try:
            raw = json.loads(self.workspace.files.read_bytes(STATE_FILE, max_bytes=MAX_STATE_BYTES))
        except (FileNotFoundError, ValueError):
            return {}
        kept = raw.get("docs") if isinstance(raw, dict) else None
        bases: dict[str, Base] = {}
        for rel, value in (kept or {}).items():
            try:
                version, hash_, mtime_ns, size = value
                bases[str(rel)] = Base(int(version), str(hash_), int(mtime_ns), int(size))
            except (TypeError, ValueError):
                continue  # a damaged entry: the file is read and compared again
        return bases

    def _save(self, bases: dict[str, Base]) -> None:
        state = {"docs": {rel: [b.version, b.hash, b.mtime_ns, b.size] for rel, b in sorted(bases.items())}}
        self.workspace.files.write_atomic(STATE_FILE, json.dumps(state, ensure_ascii=False).encode("utf-8"))
