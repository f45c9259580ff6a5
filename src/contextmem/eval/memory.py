"""Score memory search on a labelled set: recall@k, MRR and latency, so users measure on their own data.

A labelled set is JSON Lines, one query per line (``contextmem memory eval`` reads it)::

    {"id": "q1", "query": "Who is my manager?", "relevant": ["memory/2026-01-05.md:3"]}
    {"id": "q2", "query": "数据库迁移", "relevant": [{"path": "MEMORY.md", "line": 12}, "memory/notes.md"]}

``relevant`` lists what a good answer shows; each item is one of

* ``"PATH:LINE"`` or ``{"path": PATH, "line": LINE}`` — a hit covers it when it is a chunk of ``PATH``
  whose lines include ``LINE``;
* ``"PATH:START-END"`` or ``{"path": PATH, "start_line": START, "end_line": END}`` — a hit of ``PATH``
  overlapping those lines;
* ``"PATH"`` or ``{"path": PATH}`` — any hit of that file.

Paths are relative to the namespace's workspace, as :attr:`MemoryHit.path` shows them. Per query,
recall@k is the share of its relevant items that one of the top ``k`` hits covers, and the reciprocal
rank is ``1 / rank`` of the first hit covering any of them (0 when none of the top ``max(ks)`` does);
:func:`score` averages them over the queries. Latency is the wall time of each ``search`` call (the
query's embedding included), reported at the 50th and 95th percentile.

:func:`score` is pure; :func:`evaluate` runs the searches on an index and times them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import MessageFormatError, MissingExtraError
from ..memory.base import MemoryHit, MemoryIndex, SearchMode

__all__ = [
    "EvalReport",
    "LabelledQuery",
    "QueryResult",
    "Relevant",
    "evaluate",
    "labelled_query",
    "parse_relevant",
    "score",
]

DEFAULT_KS = (1, 5, 10)


@dataclass(frozen=True, slots=True)
class Relevant:
    """Lines ``start_line..end_line`` of ``path`` (``None``: the whole file) that a good hit shows."""

    path: str
    start_line: int | None = None
    end_line: int | None = None

    def covered_by(self, hit: MemoryHit) -> bool:
        if hit.path != self.path:
            return False
        if self.start_line is None or self.end_line is None:
            return True
        return hit.start_line <= self.end_line and self.start_line <= hit.end_line


@dataclass(frozen=True, slots=True)
class LabelledQuery:
    id: str
    query: str
    relevant: tuple[Relevant, ...]


@dataclass(frozen=True, slots=True)
class QueryResult:
    """What one search of a labelled query returned, and how long it took."""

    query: LabelledQuery
    hits: Sequence[MemoryHit]
    seconds: float


@dataclass(frozen=True, slots=True)
class EvalReport:
    """Averages over ``queries`` queries (recall and MRR in 0..1, latency in milliseconds)."""

    queries: int
    recall: dict[int, float]  # k -> mean recall@k
    mrr: float  # mean reciprocal rank within the top max(k)
    latency_p50_ms: float
    latency_p95_ms: float
    missed: list[str] = field(default_factory=list)  # ids of queries with no relevant hit in the top max(k)

    def to_dict(self) -> dict[str, Any]:
        return {
            "queries": self.queries,
            **{f"recall@{k}": round(v, 4) for k, v in self.recall.items()},
            "mrr": round(self.mrr, 4),
            "latency_p50_ms": round(self.latency_p50_ms, 2),
            "latency_p95_ms": round(self.latency_p95_ms, 2),
            "missed": self.missed,
        }


def _line_range(text: str) -> tuple[int, int] | None:
    """``"12"`` -> (12, 12), ``"3-9"`` -> (3, 9); ``None`` when ``text`` is not a positive line range."""
    start, dash, end = text.partition("-")
    if not start.isdigit() or (dash and not end.isdigit()):
        return None
    first, last = int(start), int(end) if dash else int(start)
    return (first, last) if 1 <= first <= last else None


def _line_number(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise MessageFormatError(where, f"{value!r} is not a line number", "a whole number from 1")
    return value


def parse_relevant(value: Any, where: str = "relevant") -> Relevant:
    """One ``relevant`` item (see the module docstring); :class:`MessageFormatError` names ``where``."""
    if isinstance(value, str):
        path, colon, lines = value.rpartition(":")
        span = _line_range(lines) if colon else None
        if span is None:
            path = value
        if not path:
            raise MessageFormatError(where, f"{value!r} has no path", "e.g. 'memory/2026-01-05.md:3'")
        return Relevant(path, *span) if span else Relevant(path)
    if isinstance(value, Mapping):
        named = value.get("path")
        if not isinstance(named, str) or not named:
            raise MessageFormatError(
                where, f"{value!r} has no 'path'", 'e.g. {"path": "MEMORY.md", "line": 3}'
            )
        path = named
        if "line" in value:
            line = _line_number(value["line"], f"{where}.line")
            return Relevant(path, line, line)
        if "start_line" in value or "end_line" in value:
            start = _line_number(value.get("start_line"), f"{where}.start_line")
            end = _line_number(value.get("end_line", start), f"{where}.end_line")
            if end < start:
                raise MessageFormatError(where, f"{value!r} ends before it starts", "end_line >= start_line")
            return Relevant(path, start, end)
        return Relevant(path)
    raise MessageFormatError(
        where, f"{value!r} is neither a string nor an object", '"PATH:LINE" or {"path": PATH, "line": LINE}'
    )


def labelled_query(entry: Mapping[str, Any], default_id: str) -> LabelledQuery:
    """One line of a labelled set; :class:`MessageFormatError` names the field at fault and the fix."""
    query = entry.get("query")
    if not isinstance(query, str) or not query.strip():
        raise MessageFormatError(
            "query", "is missing or empty", '{"id": ..., "query": "...", "relevant": [...]}'
        )
    relevant = entry.get("relevant")
    if not isinstance(relevant, list) or not relevant:
        raise MessageFormatError("relevant", "must be a non-empty list", 'e.g. "relevant": ["MEMORY.md:3"]')
    items = tuple(parse_relevant(item, f"relevant[{i}]") for i, item in enumerate(relevant))
    return LabelledQuery(str(entry.get("id", default_id)), query, items)


def _reciprocal_rank(hits: Sequence[MemoryHit], relevant: Sequence[Relevant]) -> float:
    for rank, hit in enumerate(hits, start=1):
        if any(r.covered_by(hit) for r in relevant):
            return 1.0 / rank
    return 0.0


def score(results: Sequence[QueryResult], ks: Sequence[int] = DEFAULT_KS) -> EvalReport:
    """Recall@k for each of ``ks``, MRR within the top ``max(ks)``, latency percentiles (pure)."""
    try:  # the memory extra, as the index scored needs; importing contextmem.eval does not need it
        import numpy as np
    except ImportError:
        raise MissingExtraError("numpy", "memory") from None

    if not results:
        return EvalReport(0, dict.fromkeys(ks, 0.0), 0.0, 0.0, 0.0)
    depth = max(ks)
    recall = dict.fromkeys(ks, 0.0)
    rr_total = 0.0
    missed = []
    for result in results:
        relevant = result.query.relevant
        for k in ks:
            top = result.hits[:k]
            found = sum(1 for r in relevant if any(r.covered_by(h) for h in top))
            recall[k] += found / len(relevant)
        rr = _reciprocal_rank(result.hits[:depth], relevant)
        rr_total += rr
        if rr == 0.0:
            missed.append(result.query.id)
    n = len(results)
    latencies = np.array([r.seconds * 1000 for r in results])
    return EvalReport(
        queries=n,
        recall={k: v / n for k, v in recall.items()},
        mrr=rr_total / n,
        latency_p50_ms=float(np.percentile(latencies, 50)),
        latency_p95_ms=float(np.percentile(latencies, 95)),
        missed=missed,
    )


def evaluate(
    index: MemoryIndex,
    queries: Sequence[LabelledQuery],
    ks: Sequence[int] = DEFAULT_KS,
    *,
    mode: SearchMode = "hybrid",
    clock: Callable[[], float] = time.perf_counter,
) -> EvalReport:
    """Sync ``index`` once, search each query for the top ``max(ks)`` hits, and :func:`score` them."""
    index.sync()
    results = []
    for q in queries:
        start = clock()
        hits = index.search(q.query, max(ks), mode=mode, sync=False)
        results.append(QueryResult(q, hits, clock() - start))
    return score(results, ks)
