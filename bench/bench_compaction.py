"""Compaction planning cost, and tokens sent per turn, on long agent histories.

1. Planning: contextmem's plans (offload + budget trim + summarise split) on histories of 1k / 10k / 50k
   messages, vs a QwenPaw-style split reimplemented from its documentation: walk back from the tail
   adding messages while the kept part fits the reserve, re-counting the kept part and re-checking its
   tool-call alignment at every step (quadratic in the kept messages).
2. Tokens sent: a long transcript replayed through the engine (extractive summaries, no model): tokens
   sent per turn vs sending the whole history every turn.

Run: python bench/bench_compaction.py [--sizes 1000,10000,50000] [--turns 1500]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from conversation import conversation

from contextmem.budget import Window, turn_starts
from contextmem.compaction.offload import offload_path, plan_offload
from contextmem.compaction.plans import plan_budget_trim, plan_summarize
from contextmem.engine import ContextEngine
from contextmem.messages import Message, UserMessage, orphan_tool_messages
from contextmem.settings import Settings
from contextmem.testing import InMemorySessionStore
from contextmem.tokens import MessageCounter, TiktokenCounter


def ours(history: list[Message], counts: list[int], settings: Settings, window: int) -> float:
    t = time.perf_counter()
    starts = turn_starts(history)
    plan_offload(history, starts[-1], settings, lambda i: offload_path("s", i, ""))
    plan_budget_trim(history, counts, window // 2)
    plan_summarize(history, counts, window=window, compact_ratio=0.8, reserve_ratio=0.1, message_threshold=50)
    return time.perf_counter() - t


def qwenpaw_style(history: list[Message], counter: MessageCounter, reserve: int) -> float:
    """From the docs: keep from the tail backwards up to ``reserve`` tokens, never splitting a
    user/assistant pair or a tool_use/tool_result pair — validity re-checked on the whole kept part."""
    t = time.perf_counter()
    keep_from = len(history)
    for i in range(len(history) - 1, -1, -1):
        kept = history[i:]
        tokens = sum(counter.counter.count_text(str(m.content)) for m in kept)  # re-count every step
        if tokens > reserve:
            break
        if isinstance(history[i], UserMessage) and not orphan_tool_messages(kept):  # is_valid()
            keep_from = i
    _ = history[:keep_from], history[keep_from:]
    return time.perf_counter() - t


async def tokens_sent(turns: int) -> tuple[float, float, int]:
    msgs = conversation(turns * 3)
    with tempfile.TemporaryDirectory() as tmp:
        engine = await ContextEngine.open(
            "bench",
            store=InMemorySessionStore(),
            settings=Settings(),
            workspace_dir=tmp,
            window=Window(50_000, 4_096),
        )
        sent, full, running = [], [], 0
        counter = engine.counter
        for m in msgs:
            running += counter.count_message(m)
            await engine.add(m)
            if isinstance(m, UserMessage):
                req = await engine.build("You are a helpful agent.")
                sent.append(req.estimate.prompt)
                full.append(running)
                await engine.end_turn()
        report = await engine.verify()
        return statistics.mean(sent), statistics.mean(full), report.lost


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,50000")
    ap.add_argument("--turns", type=int, default=1500)
    args = ap.parse_args()
    counter = MessageCounter(TiktokenCounter())
    settings = Settings()
    print(f"{'messages':>9} {'contextmem plan ms':>19} {'QwenPaw-style split ms':>23} {'ratio':>8}")
    for n in [int(s) for s in args.sizes.split(",")]:
        history = conversation(n)[:n]
        counts = counter.count_messages(history)
        window = sum(counts)  # history at 100% of the window: every plan has work to do
        mine = statistics.median(ours(history, counts, settings, window) for _ in range(5))
        if n <= 10_000:
            counter.count_messages(history)
            theirs = qwenpaw_style(history, counter, reserve=int(window * 0.1))
            print(f"{n:>9} {mine * 1e3:>19.2f} {theirs * 1e3:>23.0f} {theirs / mine:>7.0f}x")
        else:
            print(f"{n:>9} {mine * 1e3:>19.2f} {'(skipped: quadratic)':>23} {'':>8}")
    mean_sent, mean_full, lost = asyncio.run(tokens_sent(args.turns))
    print(
        f"\ntokens per request over {args.turns} turns: sent {mean_sent:,.0f} on average vs full history "
        f"{mean_full:,.0f} ({mean_full / mean_sent:.1f}x less), lost: {lost}"
    )


if __name__ == "__main__":
    main()
