"""Issue 16: calibrated fusion, probed. A logistic regression over each candidate's evidence, trained on
some dev sets and tested on the others, re-orders the top 200 hits of the shipped hybrid search.

Features per candidate (each query's hits): min-max cosine, min-max BM25, min-max sparse dot, "has a
keyword match", the cosine's gap to the query's best, and the shipped fused score over its maximum.
Labels: the hit covers a relevant item. Class-balanced, L2 1e-3, 3,000 full-batch gradient steps.
Sets whose questions name a day are left out (a named day's chunks rank first by rule, not by score).

    .venv/bin/python bench/bench_memory_calibrated.py "MADial EN,synthetic EN" "MADial ZH,synthetic ZH,..."

Measured, not shipped (``bench/results/memory_variants.md``).
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_memory_madial import CachingEmbedder
from bench_memory_variants import KS, synced

from contextmem.memory import MemoryHit
from contextmem.memory.evaluate import LabelledQuery, QueryResult, score

FEATURES = ("cosine", "bm25", "sparse", "has keyword", "cosine gap", "shipped score")
Array = NDArray[np.float64]


def _minmax(x: Array) -> Array:
    low, high = x.min(), x.max()
    return np.ones_like(x) if high - low < 1e-12 else (x - low) / (high - low)


def features(hits: list[MemoryHit]) -> Array:
    cos = np.array([np.nan if h.vector_score is None else h.vector_score for h in hits], float)
    cos = np.where(np.isnan(cos), np.nanmin(cos) if np.isfinite(cos).any() else 0.0, cos)
    bm25 = np.array([h.keyword_score or 0.0 for h in hits], float)
    has_kw = np.array([h.keyword_score is not None for h in hits], float)
    sparse = np.array([h.sparse_score or 0.0 for h in hits], float)
    fused = np.array([h.score for h in hits], float)
    return np.stack(
        [
            _minmax(cos),
            _minmax(bm25),
            _minmax(sparse),
            has_kw,
            cos - cos.max(),
            fused / max(fused.max(), 1e-9),
        ],
        1,
    )


def collect(
    names: list[str], embedder: CachingEmbedder
) -> dict[str, list[tuple[LabelledQuery, list[MemoryHit]]]]:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            queries = synced(name, Path(tmp) / name, embedder)
            out[name] = [(q, index.search(q.query, 200, candidates=200, sync=False)) for index, q in queries]
    return out


def fit(rows: list[tuple[LabelledQuery, list[MemoryHit]]]) -> tuple[Array, Array, Array]:
    """(mean, scale, weights) of a class-balanced, L2-regularised logistic regression."""
    xs, ys = [], []
    for q, hits in rows:
        if hits:
            xs.append(features(hits))
            ys.append(np.array([any(r.covered_by(h) for r in q.relevant) for h in hits], float))
    x, y = np.concatenate(xs), np.concatenate(ys)
    mean, scale = x.mean(0), x.std(0) + 1e-9
    z = (x - mean) / scale
    w, b = np.zeros(z.shape[1]), 0.0
    balance = np.where(y > 0, 0.5 / y.mean(), 0.5 / (1 - y.mean()))
    for _ in range(3000):
        grad = (1 / (1 + np.exp(-(z @ w + b))) - y) * balance
        w -= 0.1 * (z.T @ grad / len(y) + 1e-3 * w)
        b -= 0.1 * grad.mean()
    return mean, scale, w


def _cell(results: list[QueryResult]) -> str:
    report = score(results, KS)
    return f"{100 * report.recall[5]:.1f} / {100 * report.recall[10]:.1f} / {100 * report.mrr:.1f}"


def main(train: list[str], test: list[str]) -> None:
    embedder = CachingEmbedder.from_cache(Path("/tmp/madial-vectors.pkl"))
    data = collect(sorted(set(train + test)), embedder)
    mean, scale, w = fit([row for name in train for row in data[name]])
    print("weights", dict(zip(FEATURES, np.round(w, 2).tolist(), strict=True)), file=sys.stderr)
    print("| set | shipped R@5 / R@10 / MRR | calibrated R@5 / R@10 / MRR |\n|---|---|---|")
    for name in train + test:
        shipped, calibrated = [], []
        for q, hits in data[name]:
            shipped.append(QueryResult(q, hits[:10], 0.0))
            order = np.argsort(-(((features(hits) - mean) / scale) @ w), kind="stable") if hits else []
            calibrated.append(QueryResult(q, [hits[i] for i in order[:10]], 0.0))
        print(f"| {name}{' (train)' if name in train else ''} | {_cell(shipped)} | {_cell(calibrated)} |")


if __name__ == "__main__":
    main(sys.argv[1].split(","), sys.argv[2].split(","))
