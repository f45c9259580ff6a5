"""The storage hooks: what a memory-index backend implements, and all it implements.

:class:`~contextmem.memory.indexing.BaseMemoryIndex` holds the algorithm (sync planning, embedding, ranking,
checks) and calls these methods, each with the index's lock held; a backend (:mod:`.sqlite_index`,
:mod:`.pg_index`) subclasses it and only stores and retrieves. They are kept apart from the algorithm so a
new backend's author reads here the whole of what it must provide, each method with its contract.

A search's reads are written as a flow (:data:`Flow`, sans-I/O): a generator that yields each read it needs
(:class:`Read`, naming the hook) and is sent the answer. :meth:`IndexStorage._drive` answers each by calling
the hook; a backend whose every call costs a thread hop (:mod:`.pg_index`) runs the whole flow as one job
instead, answering the reads from its own coroutines (:mod:`.pg_reads`). Same reads, same answers, in the
same order: the ranking cannot tell the two apart.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Collection, Generator, Iterable, Mapping
from datetime import date
from typing import Any, Literal, NamedTuple, TypeVar

from .index_options import StoredChunk, Vector
from .ranking import Neighbours
from .sync import FileState, IndexState, SyncPlan

__all__ = ["Flow", "IndexStorage", "Read", "adrive", "drive"]

T = TypeVar("T")

SearchHook = Literal[
    "keyword_scores",
    "vector_scores",
    "chunks_of_days",
    "chunk_rows",
    "chunk_terms",
    "chunk_neighbours",
    "chunk_vectors",
]


class Read(NamedTuple):
    """One read a search's flow needs: the storage hook ``_<hook>`` called with ``args``."""

    hook: SearchHook
    args: tuple[Any, ...]


Flow = Generator[Read, Any, T]


def drive(flow: Flow[T], answer: Callable[[Read], Any]) -> T:
    """Run ``flow`` to its end, sending it ``answer(read)`` for each read it yields; its result."""
    reply = None
    while True:
        try:
            read = flow.send(reply)
        except StopIteration as done:
            result: T = done.value
            return result
        reply = answer(read)


async def adrive(flow: Flow[T], answer: Callable[[Read], Awaitable[Any]]) -> T:
    """:func:`drive` for a backend whose reads are coroutines: the same steps, each answer awaited."""
    reply = None
    while True:
        try:
            read = flow.send(reply)
        except StopIteration as done:
            result: T = done.value
            return result
        reply = await answer(read)


class IndexStorage(ABC):
    """The storage hooks of a memory index (see the module docstring); every one is abstract."""

    def _drive(self, flow: Callable[[], Flow[T]]) -> T:
        """The result of a flow ``flow()`` makes, each of its reads answered by its hook. A backend may
        run it otherwise (all of it as one job) if each read gets the answer its hook would give."""
        return drive(flow(), lambda read: getattr(self, f"_{read.hook}")(*read.args))

    @abstractmethod
    def _load_state(self) -> IndexState:
        """The namespace's indexed files and the embedder and keyword scheme recorded for it."""

    @abstractmethod
    def _stored_vectors(self, hashes: list[str]) -> Mapping[str, Vector | None]:
        """Of ``hashes`` (chunk texts), those with a vector for this embedder the backend can reuse.

        The value is the vector, or ``None`` when the backend keeps vectors by text hash itself.
        """

    @abstractmethod
    def _stored_terms(self, hashes: list[str]) -> Mapping[str, bytes | None]:
        """Of ``hashes``, those with stored sparse terms for ``self.sparse.sparse_name`` (only called when
        there is a sparse head): the :func:`.sparse.pack` blob, or ``None`` when kept by hash."""

    @abstractmethod
    def _write(
        self, plan: SyncPlan, vectors: Mapping[str, Vector | None], terms: Mapping[str, bytes | None]
    ) -> None:
        """Apply ``plan`` (a whole sync, or one part of it: :meth:`SyncPlan.parts`) in one transaction:
        with ``plan.rebuild`` drop every chunk and file row of the namespace and insert ``plan.rows()``,
        else apply :meth:`SyncPlan.write_set` of the chunk rows of ``plan.replaced``, read in the
        transaction (vector of a chunk: ``vectors[chunk.hash]``; its sparse terms, when there is a sparse
        head: ``terms[chunk.hash]``); write ``plan.files``; record
        ``self._encoders`` and ``self._keywords`` for the namespace and move what tells searches the
        namespace changed. Sparse terms no chunk uses any more are deleted."""

    @abstractmethod
    def _record_files(self, files: dict[str, FileState]) -> None:
        """Write the file rows of files whose content did not change (new mtimes), in one transaction."""

    @abstractmethod
    def _keyword_scores(self, query: str, limit: int) -> dict[int, float]:
        """The best ``limit`` keyword matches of this namespace: chunk id -> score (higher is better)."""

    @abstractmethod
    def _vector_scores(self, query: Vector, limit: int, also: Collection[int]) -> dict[int, float]:
        """The ``limit`` nearest chunks of this namespace by cosine, plus the cosine of chunks ``also``."""

    @abstractmethod
    def _chunks_of_days(self, paths: list[str], days: list[date], limit: int) -> set[int]:
        """The ids of at most ``limit`` chunks of this namespace (the first by path and line) that are of
        one of ``days``: in their daily files ``paths``, or under a heading that writes one of them
        (``heading_day``)."""

    @abstractmethod
    def _chunk_rows(self, ids: Iterable[int]) -> dict[int, StoredChunk]:
        """The chunks of this namespace among ``ids``."""

    @abstractmethod
    def _speaker_names(self) -> frozenset[str]:
        """The speaker names this namespace's chunks carry (:func:`.speakers.speakers`), read again when
        its generation moves. A backend may read only the chunks added since (SQLite: ids are never
        reused and commits are serial); a name whose chunks were all deleted then stays known until the
        index is reopened, and only steers how a query that says it is encoded (:mod:`.query_encoding`)."""

    @abstractmethod
    def _chunk_terms(self, ids: list[int]) -> dict[int, bytes]:
        """The stored sparse terms (for ``self.sparse.sparse_name``) of the chunks ``ids`` of this
        namespace that have them."""

    @abstractmethod
    def _chunk_neighbours(self, ids: list[int]) -> Neighbours:
        """For each chunk of ``ids``, the chunks just before and after it in its file (by line)."""

    @abstractmethod
    def _chunk_vectors(self, ids: list[int]) -> Vector:
        """The vectors of chunks ``ids`` (all of this namespace), one row each, in order."""

    @abstractmethod
    def _storage_problems(self) -> list[str]:
        """What is wrong inside the storage itself (the files are checked by the caller)."""

    @abstractmethod
    def _indexed_files(self) -> dict[str, str]:
        """The namespace's indexed files: path -> content hash."""

    @abstractmethod
    def _chunks_of(self, path: str) -> list[tuple[int, int, str]]:
        """``(start_line, end_line, text)`` of every stored chunk of ``path`` in this namespace."""

    @abstractmethod
    def _stats(self) -> dict[str, int]:
        """``{"files": n, "chunks": m}`` of this namespace."""

    @abstractmethod
    def _close(self) -> None: ...
