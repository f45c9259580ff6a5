"""The memory-index protocol (M3, M4, M6, S2) and the values it returns.

A memory index is the derived search index over one namespace's memory files (``MEMORY.md`` and
``memory/**/*.md``). The markdown files are the truth — or, with a shared PostgreSQL store, the shared
documents they are a working copy of (:mod:`contextmem.memory_docs`; a sync brings the copy in line first
and the index reads the documents); the index can be deleted at any time and is rebuilt by
:meth:`MemoryIndex.sync`. Every implementation keeps these invariants:

* **Fresh.** ``search`` syncs first (unless ``sync=False``). Sync ``stat``s each file and re-reads only
  those whose size or mtime moved (an mtime within the last 2 s is not trusted, so a same-tick edit is
  still caught), compares the content hash, and swaps a changed file's chunks in one transaction: no stale
  hit, no duplicate chunk, also when several processes sync the same namespace at once.
* **Resumable.** A sync commits in parts of whole files (about :data:`sync.COMMIT_CHUNKS` chunk texts to
  embed each; a file's chunks and its file row in one transaction), so an interrupted sync (Ctrl-C, a
  kill) leaves a consistent index holding the parts it committed, and the next sync embeds only the rest.
  A rebuild (below) is the exception: it swaps the whole namespace in one transaction.
* **Incremental.** A chunk whose text already has a vector for this embedder in the namespace is not
  embedded again: an edit embeds only the chunks whose text changed, a rename embeds nothing.
* **One derivation.** The index records, per namespace, the embedder and the keyword scheme (tokenizer,
  CJK mode, :data:`text.KEYWORD_SCHEME`) it was built with. When either differs from the index's own,
  the next sync **rebuilds the namespace in one transaction**: every file is re-read and re-chunked (all
  reported as ``updated``), and only chunk texts without a vector for the current embedder are embedded.
  A keyword-scheme change therefore re-embeds nothing; an embedder change re-embeds every chunk.
* **Isolated.** Every stored row carries its namespace and every read filters on it: a search, sync,
  check or repair of one namespace never sees or touches another's chunks.
* **Anchored.** A chunk is lines ``start_line..end_line`` of its file, verbatim but for redaction;
  ``check`` verifies it, and ``check(repair=True)`` rebuilds the namespace when anything is wrong. A
  chunk of headings only is never indexed (an empty section's heading is no answer to anything).
* **Confined.** Files are found by :meth:`Workspace.scan_memory_files` and read through
  ``workspace.files``: a symlink or hard-linked file is never read, it is reported in
  :attr:`SyncReport.skipped`, and a file that turns into one leaves the index.
* **No secrets.** What reaches the keyword index, the embedder and the stored snippets is the chunk text
  after :func:`~contextmem.redaction.redact_secrets` (:func:`text.index_chunks`).
* **Bounded queries.** A query is cut to :data:`text.MAX_QUERY_CHARS` characters before it is embedded or
  tokenised, and a keyword query ORs at most :data:`text.MAX_QUERY_TERMS` distinct tokens.

An async twin is the method's name with an ``a`` in front, as across the public API (``MemoryTools.acall``):
:meth:`MemoryIndex.asearch` runs ``search`` off the event loop, and syncs first as ``search`` does. ``sync``
has no twin, since ``a`` + ``sync`` is the keyword ``async``: ``await asyncio.to_thread(index.sync)``.

Ranking is the same everywhere (:mod:`.ranking`): each retriever returns up to ``candidates`` chunks, the
union is read in context (each candidate with the chunks just before and after it in its file, the
shorter it is the more; not in daily files, whose entries stand alone) and min-max fused with the
vector/keyword weights, daily files decay down to a floor, ``min_score`` is judged on the fused score or
the keyword evidence, and ``mmr_lambda`` diversifies.
Implementations are thread-safe.

Implementations: :class:`~contextmem.memory.sqlite_index.SqliteMemoryIndex` (default, one file) and
:class:`~contextmem.memory.pg_index.PgMemoryIndex` (PostgreSQL + pgvector, many hosts), both on the shared
algorithm of :mod:`.indexing`; :func:`~contextmem.memory.open.open_memory_index` picks one. One contract
test suite (``tests/test_memory_contract.py``) runs against both.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any, Literal, Protocol, Self, runtime_checkable

from ..workspace import Workspace

if TYPE_CHECKING:
    from .embedders import Embedder  # numpy: the memory extra

__all__ = [
    "IntegrityReport",
    "MemoryHit",
    "MemoryIndex",
    "Progress",
    "ProgressRate",
    "RateMeter",
    "SearchMode",
    "SyncReport",
]

SearchMode = Literal["hybrid", "keyword", "vector"]
Progress = Callable[[int, int], None]  # (chunks embedded so far, chunks to embed); see RateMeter


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"


@dataclass(frozen=True, slots=True)
class ProgressRate:
    """Where a sync's embedding stands: ``str()`` is e.g. ``"11.2 chunks/s, ETA 6m50s"``."""

    done: int
    total: int
    elapsed: float  # seconds since the meter started

    @property
    def rate(self) -> float | None:
        """Chunks embedded per second so far (``None`` before the first is done)."""
        return self.done / self.elapsed if self.done > 0 and self.elapsed > 0 else None

    @property
    def eta(self) -> float | None:
        """Seconds left at the rate so far (``None`` while unknown)."""
        rate = self.rate
        return max(self.total - self.done, 0) / rate if rate else None

    def __str__(self) -> str:
        rate, eta = self.rate, self.eta
        if rate is None or eta is None:
            return ""
        return f"{rate:.1f} chunks/s, " + ("done" if self.done >= self.total else f"ETA {_duration(eta)}")


class RateMeter:
    """Rate and ETA for a :data:`Progress` callback: ``meter(done, total)`` -> :class:`ProgressRate`.

    The clock starts when the meter is made (make it just before ``sync``); ``Progress`` keeps its
    ``(done, total)`` signature, a display keeps a meter and shows ``str(meter(done, total))``.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._start = clock()

    def __call__(self, done: int, total: int) -> ProgressRate:
        return ProgressRate(done, total, self._clock() - self._start)


@dataclass(frozen=True, slots=True)
class MemoryHit:
    """One search result: read it back with ``memory_get(path, start_line, end_line - start_line + 1)``.

    ``snippet`` is lines ``snippet_start_line..snippet_end_line`` of the chunk: those that best match the
    query (see :func:`~contextmem.memory.text.best_snippet`), not necessarily its first lines.
    """

    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    namespace: str
    kind: str
    vector_score: float | None = None  # raw cosine
    keyword_score: float | None = None  # raw keyword score (BM25 or ts_rank; higher is better)
    snippet_start_line: int | None = None  # the snippet's first line in the file
    snippet_end_line: int | None = None
    sparse_score: float | None = None  # raw sparse-head dot product (hybrid search with a sparse head)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class SyncReport:
    """What one sync did. ``changed`` is true when the index moved (and caches were invalidated).

    ``skipped``: relative paths of memory-file entries that were not indexed because contextmem never
    reads through them: symlinks (to anything, anywhere), hard-linked files, other non-regular entries;
    and files whose name is not valid UTF-8, shown with their bytes escaped (``memory/caf\\xe9.md``).
    """

    added: list[str] = field(default_factory=list)
    updated: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    chunks_embedded: int = 0
    chunks_total: int = 0
    skipped: list[str] = field(default_factory=list)
    # With shared documents (a PostgreSQL store): the working copy's edits that were refused, each a
    # one-line MemoryConflictError message with its Fix; the copy keeps them and the index the shared text.
    conflicts: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.added or self.updated or self.removed or self.chunks_embedded)


@dataclass(frozen=True, slots=True)
class IntegrityReport:
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems


@runtime_checkable
class MemoryIndex(Protocol):
    """Hybrid (vector + keyword) search over one namespace's memory files; see the module docstring."""

    workspace: Workspace
    namespace: str
    embedder: Embedder

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
        """The ``k`` best chunks of this namespace for ``query``, best first; syncs with the files first.

        ``candidates`` (default ``max(50, 4k)``) come from each retriever before fusion. An unknown
        ``mode`` raises :class:`~contextmem.errors.ConfigError`; an empty query or ``k <= 0`` returns ``[]``.
        """
        ...

    def sync(self, progress: Progress | None = None) -> SyncReport:
        """Bring the index in line with the files; cheap (one ``stat`` per file) when nothing changed."""
        ...

    def check(self, *, repair: bool = False) -> IntegrityReport:
        """Verify the index against itself and the files; ``repair`` rebuilds the namespace if needed."""
        ...

    def stats(self) -> dict[str, int]:
        """``{"files": n, "chunks": m}`` of this namespace."""
        ...

    def close(self) -> None:
        """Release the connection; the index is unusable afterwards. Also on leaving a ``with`` block."""
        ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...

    async def asearch(self, query: str, k: int = 5, **options: Any) -> list[MemoryHit]:
        """:meth:`search` off the event loop."""
        ...
