"""Compaction that keeps the facts (issue 17): answers still in the compacted view, with no model.

Each dev-set conversation (bench/data/compaction/<set>/*.jsonl, questions in *.qa.jsonl; built by
bench/compaction_devsets.py) is replayed through the real engine with default settings and no LLM into a
``--context-window`` (default 8,000) window; the next request's view — summary + live history — is
searched for each answer (case-insensitive, whitespace normalised), and so are two baselines at the same
token cost: the most recent messages, and every n-th message. Totals are pooled over each set's
questions.

Run: python bench/bench_compaction_facts.py [--context-window 8000] [--sets synthetic,madial]
     [--label after] [--json results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from contextmem.agent.replay import load_transcript
from contextmem.cli.eval_compaction import CompactionEval, evaluate, load_questions
from contextmem.settings import Settings

DATA = Path(__file__).parent / "data" / "compaction"


def _pct(kept: int, total: int) -> str:
    return f"{kept / total:.1%}" if total else "-"


async def run_set(folder: Path, settings: Settings) -> list[tuple[str, CompactionEval]]:
    out = []
    for path in sorted(folder.glob("*.jsonl")):
        if path.name.endswith(".qa.jsonl"):
            continue
        system, transcript = load_transcript(path)
        answers = [q["answer"] for q in load_questions(path.with_suffix(".qa.jsonl"))]
        out.append((path.stem, await evaluate(settings, transcript, answers, system)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--context-window", type=int, default=8000)
    ap.add_argument("--sets", default="synthetic,madial")
    ap.add_argument("--json", help="write the per-conversation figures here")
    args = ap.parse_args()
    if not DATA.exists():
        sys.exit("no dev sets: run python bench/compaction_devsets.py first")
    settings = Settings(context_window=args.context_window)
    dump: dict[str, object] = {}
    print(f"window {args.context_window:,}, default settings, no model\n")
    print(f"{'set / conversation':<28} {'tokens':>7} {'qs':>4} {'view tok':>8} ", end="")
    print(f"{'view':>7} {'recent':>7} {'nth':>7}")
    for name in args.sets.split(","):
        started = time.perf_counter()
        results = asyncio.run(run_set(DATA / name, settings))
        totals = {"view": [0, 0, 0], "recent": [0, 0, 0], "nth": [0, 0, 0]}
        for conv, r in results:
            print(
                f"{name + '/' + conv:<28} {r.transcript_tokens:>7,} {r.questions:>4} {r.view.tokens:>8,} "
                f"{r.view.share:>7.1%} {r.recent.share:>7.1%} {r.nth.share:>7.1%}"
                + (f"  LOST {r.lost}" if r.lost else "")
            )
            for key, k in (("view", r.view), ("recent", r.recent), ("nth", r.nth)):
                totals[key][0] += k.kept
                totals[key][1] += k.total
                totals[key][2] += k.tokens
            dump[f"{name}/{conv}"] = r.to_dict()
        n = max(1, len(results))
        print(
            f"{name + ' (pooled)':<28} {'':>7} {totals['view'][1]:>4} {totals['view'][2] // n:>8,} "
            + " ".join(f"{_pct(*totals[k][:2]):>7}" for k in ("view", "recent", "nth"))
            + f"   ({time.perf_counter() - started:.1f}s)\n"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(dump, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
