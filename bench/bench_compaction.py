"""Compaction planning cost, and tokens sent per turn, on long agent histories.

1. Planning: contextmem's plans (offload + budget trim + summarise split) on histories of 1k / 10k / 50k
   messages, vs a QwenPaw-style split reimplemented from its documentation: walk back from the tail
   adding messages while the kept part fits the reserve, re-counting the kept part and re-checking its
   tool-call alignment at every step (quadratic in the kept messages).
2. Tokens sent: a long transcript replayed through the engine (extractive summaries, no model): tokens
   sent per turn vs sending the whole history every turn.

Planning times are this process's CPU time (``time.process_time``). Writes ``bench/results/compaction.md``.
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
import report
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
    t = time.process_time()
    starts = turn_starts(history)
    plan_offload(history, starts[-1], settings, lambda i: offload_path("s", i, ""))
    plan_budget_trim(history, counts, window // 2)
    plan_summarize(history, counts, window=window, compact_ratio=0.8, reserve_ratio=0.1, message_threshold=50)
    return time.process_time() - t


def qwenpaw_style(history: list[Message], counter: MessageCounter, reserve: int) -> float:
    """From the docs: keep from the tail backwards up to ``reserve`` tokens, never splitting a
    user/assistant pair or a tool_use/tool_result pair — validity re-checked on the whole kept part."""
    t = time.process_time()
    keep_from = len(history)
    for i in range(len(history) - 1, -1, -1):
        kept = history[i:]
        tokens = sum(counter.counter.count_text(str(m.content)) for m in kept)  # re-count every step
        if tokens > reserve:
            break
        if isinstance(history[i], UserMessage) and not orphan_tool_messages(kept):  # is_valid()
            keep_from = i
    _ = history[:keep_from], history[keep_from:]
    return time.process_time() - t


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
    started = time.perf_counter()
    counter = MessageCounter(TiktokenCounter())
    settings = Settings()
    table = ["| history (messages) | contextmem ms | QwenPaw-style ms | ratio |", "|---:|---:|---:|---:|"]
    for n in [int(s) for s in args.sizes.split(",")]:
        history = conversation(n)[:n]
        counts = counter.count_messages(history)
        window = sum(counts)  # history at 100% of the window: every plan has work to do
        mine = statistics.median(ours(history, counts, settings, window) for _ in range(5))
        if n <= 10_000:
            counter.count_messages(history)
            theirs = qwenpaw_style(history, counter, reserve=int(window * 0.1))
            table.append(f"| {n:,} | {mine * 1e3:.2f} | {theirs * 1e3:,.0f} | {theirs / mine:,.0f}x |")
        else:
            table.append(f"| {n:,} | {mine * 1e3:.2f} | quadratic, not run | |")
        print(table[-1], flush=True)
    mean_sent, mean_full, lost = asyncio.run(tokens_sent(args.turns))
    sent = (
        f"Tokens per request over {args.turns} turns (window 50,000, extractive summaries): sent "
        f"{mean_sent:,.0f} on average vs the full history's {mean_full:,.0f} "
        f"({mean_full / mean_sent:.1f}x fewer), lost: {lost}."
    )
    print(sent)
    report.write(
        "compaction",
        "Compaction planning cost, and tokens sent per turn",
        "Planning: offload + budget trim + summary split on a history at 100% of its window, median of 5, "
        "CPU time of this process, against a QwenPaw-style split (walks back from the tail re-counting "
        "the kept part).\n\n" + "\n".join(table) + "\n\n" + sent,
        seconds=time.perf_counter() - started,
    )


if __name__ == "__main__":
    main()
