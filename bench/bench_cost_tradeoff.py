"""Reading against paying: settings swept through both cost harnesses in one run.

The current turn's tool results are kept whole up to ``pruning_recent_msg_max_bytes`` (or what the window
holds): the model reads what it asked for, and each result is sent once, uncached, at that size. Lower
the cap and every request is cheaper, but the agent must ``read_file`` what it was not shown. The two
harnesses see opposite sides of that:

* ``bench/bench_cache.py`` replays a fixed transcript (300 turns, 16k window): its agent never asks again
  for what was cut, so a smaller cap only saves. The sliding window (langchain-core ``trim_messages``)
  is its reference: it sends no result that does not fit, and leaves the newest message out of some
  requests;
* ``evals/current_turn.py`` plays an agent that reads what it was not shown (24 turns, seeds 1-2): a
  smaller cap costs answers in the next request and adds ``read_file`` calls, each billed.

For each ``--row`` (settings changed from the defaults; the first row, empty, is the defaults) the table
gives, per bench_cache seed, the cache ratio and billed-eq per call (with the sliding window's beside
it), and per current_turn window the answers in the next request, those never found and the total
billed-eq. Nothing lost, no request over its window and every planted fact reachable, in every run
(else it stops).

    python bench/bench_cost_tradeoff.py [--row KEY=VALUE[,KEY=VALUE...]]... [--seeds 1,2,3,4,5]
        [--windows 8192,16000,32000]

Writes ``bench/results/cost_tradeoff.md`` (``--out ''``: no file).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
import bench_cache
from report import run_line

from evals import current_turn

RESULTS = Path(__file__).parent / "results" / "cost_tradeoff.md"
TURNS, WINDOW, CT_TURNS, CT_SEEDS = 300, 16_000, 24, (1, 2)
COST_FIRST = "pruning_recent_msg_max_bytes=2000,compact_threshold_ratio=0.5,summary_max_tokens=1500"
"""The cost-first settings (docs/results.md): results sent small, history trimmed early, a shorter summary."""
ROWS = (
    "",
    "pruning_recent_msg_max_bytes=16000",
    "pruning_recent_msg_max_bytes=8000",
    "pruning_recent_msg_max_bytes=4000",
    COST_FIRST,
)


def cache_rows(folder: Path, seeds: list[int], overrides: list[str]) -> dict[int, dict[str, Any]]:
    rows = {}
    for seed in seeds:
        path = bench_cache.transcript_path(folder, TURNS, seed)
        facts = json.loads(bench_cache.agent_transcript.sidecars(path)[0].read_text(encoding="utf-8"))
        rows[seed] = row = bench_cache.run_contextmem(path, facts, WINDOW, overrides)
        if row["facts_reachable"] < len(facts):
            raise SystemExit(f"{overrides}: seed {seed} keeps {row['facts_reachable']} of {len(facts)} facts")
    return rows


def sliding_rows(folder: Path, seeds: list[int], reserve: int) -> dict[int, dict[str, Any]]:
    rows = {}
    for seed in seeds:
        path = bench_cache.transcript_path(folder, TURNS, seed)
        rows[seed] = bench_cache.run_peers(path, [], WINDOW, reserve)[0]
    return rows


def turn_rows(windows: list[int], overrides: list[str]) -> dict[int, dict[str, Any]]:
    rows = {}
    for window in windows:
        per_seed = []
        for seed in CT_SEEDS:
            steps, answers = current_turn.conversation(CT_TURNS, seed)
            per_seed.append(asyncio.run(current_turn.run(window, "fit", steps, answers, overrides)))
        rows[window] = current_turn.merge(per_seed)
    return rows


def markdown(args: argparse.Namespace, seconds: float, table: list[str]) -> str:
    rows = "".join(f" --row '{r}'" for r in args.row)
    lines = [
        "# Reading against paying: the settings through both cost harnesses",
        "",
        run_line(seconds),
        "",
        f"`python bench/bench_cost_tradeoff.py{rows} --seeds {args.seeds} --windows {args.windows}`. "
        f"bench_cache: {TURNS} turns at a {WINDOW:,} window, cache ratio and billed-eq per call "
        "(misses + 0.1 × cached), the sliding window's in brackets. current_turn: answers (of 70) in "
        "the request right after their result, never found, and total billed-eq, read_file calls "
        "included (seeds 1-2). 'defaults': no setting changed.",
        "",
        *table,
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--row", action="append", help="settings changed from the defaults, comma-separated (default: ROWS)"
    )
    parser.add_argument("--seeds", default="1,2,3,4,5")
    parser.add_argument("--windows", default="8192,16000,32000")
    parser.add_argument("--out", default=str(RESULTS), help="the markdown file to write ('' = none)")
    args = parser.parse_args(argv)
    args.row = args.row or list(ROWS)
    seeds = [int(s) for s in args.seeds.split(",")]
    windows = [int(w) for w in args.windows.split(",")]
    started = time.perf_counter()
    head = ["| settings |", "|---|"]
    head[0] += "".join(f" seed {s} |" for s in seeds) + "".join(f" current turn {w:,} |" for w in windows)
    head[1] += "--:|" * (len(seeds) + len(windows))
    body = []
    with tempfile.TemporaryDirectory(prefix="bench-tradeoff-") as tmp:
        sliding: dict[int, dict[str, Any]] = {}
        for row in args.row:
            overrides = [o for o in row.split(",") if o]
            cache = cache_rows(Path(tmp), seeds, overrides)
            sliding = sliding or sliding_rows(Path(tmp), seeds, next(iter(cache.values()))["max_tokens"])
            turns = turn_rows(windows, overrides)
            bad = [r for r in (*cache.values(), *turns.values()) if r.get("lost") or r["over_window"]]
            if bad:
                raise SystemExit(f"{row or 'defaults'}: a run lost messages or went over its window")
            cells = [
                f"{r['cache_ratio']:.1%}, {r['billed_per_call']:,.0f} "
                f"({sliding[s]['cache_ratio']:.1%}, {sliding[s]['billed_per_call']:,.0f})"
                for s, r in cache.items()
            ]
            cells += [
                f"{r['answers_in_request']} answers, {r['answers_not_found']} never, "
                f"{r['billed_equivalent'] / 1e6:.2f} M"
                for r in turns.values()
            ]
            body.append(f"| {row.replace(',', ', ') or 'defaults'} | " + " | ".join(cells) + " |")
            print(f"{row or 'defaults'}: done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    text = markdown(args, time.perf_counter() - started, head + body)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
