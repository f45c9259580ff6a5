"""Counting + budget checking per agent turn, contextmem vs langchain-core's trim_messages.

Each "turn" appends one user message and one reply to a history of N messages, then asks: what must be
kept to fit the budget? Both sides use the same real tokenizer (o200k_base) per message. contextmem keeps
counts, prefix sums and turn starts incrementally (CountedHistory); trim_messages re-counts the history on
every call. A third column gives trim_messages a per-message count cache (what a careful user would add),
so the ratio splits into what caching buys (plain / cached) and what the algorithm does beyond it
(cached / contextmem: trim_messages still walks the whole history each call; contextmem keeps prefix
sums and finds the cut by bisection). Times are this process's CPU time (``time.process_time``): on a
shared machine wall time measures the neighbours too. Writes ``bench/results/budget.md``.
Run: python bench/bench_budget.py [--sizes 100,1000,...] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import report
from conversation import conversation

from contextmem.budget import CountedHistory
from contextmem.messages import AssistantMessage, Message, ToolMessage, UserMessage, text_of
from contextmem.tokens import MessageCounter, TiktokenCounter


def to_langchain(msgs: list[Message]):  # type: ignore[no-untyped-def]
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.messages import ToolMessage as LCTool

    out = []
    for m in msgs:
        if isinstance(m, UserMessage):
            out.append(HumanMessage(text_of(m.content)))
        elif isinstance(m, AssistantMessage):
            calls = [{"name": c.name, "args": json.loads(c.arguments), "id": c.id} for c in m.tool_calls]
            out.append(AIMessage(text_of(m.content), tool_calls=calls))
        elif isinstance(m, ToolMessage):
            out.append(LCTool(text_of(m.content), tool_call_id=m.tool_call_id))
    return out


def bench_ours(history: list[Message], extra: list[Message], budget: int) -> float:
    counter = MessageCounter(TiktokenCounter())
    ch = CountedHistory(counter, history)  # warm: the history was counted as it grew
    times = []
    for k in range(0, len(extra), 2):
        t = time.process_time()
        ch.append(extra[k])
        ch.append(extra[k + 1])
        if ch.total > budget:
            cut = ch.fit_cut(budget)
            _kept = ch.messages[cut:]
        times.append(time.process_time() - t)
    return statistics.median(times)


def bench_langchain(
    history: list[Message], extra: list[Message], budget: int, turns: int, *, cached: bool = False
) -> float:
    from langchain_core.messages import trim_messages

    enc = TiktokenCounter()
    seen: dict[int, int] = {}  # id(message) -> its count, when ``cached`` (the messages live all run)

    def one(m):  # type: ignore[no-untyped-def]
        # equal kind: the same real tokenizer, per message, plus the same per-message overhead
        total = 3 + enc.count_text(m.text if isinstance(m.content, str) else str(m.content))
        for c in getattr(m, "tool_calls", []) or []:
            total += (
                3
                + enc.count_text(c["id"])
                + enc.count_text(c["name"])
                + enc.count_text(json.dumps(c["args"]))
            )
        return total

    def count(msgs):  # type: ignore[no-untyped-def]
        if not cached:
            return sum(one(m) for m in msgs)
        total = 0
        for m in msgs:
            if id(m) not in seen:
                seen[id(m)] = one(m)
            total += seen[id(m)]
        return total

    lc = to_langchain(history)
    lc_extra = to_langchain(extra)
    times = []
    for k in range(0, min(len(lc_extra), 2 * turns), 2):
        t = time.process_time()
        lc.append(lc_extra[k])
        lc.append(lc_extra[k + 1])
        trim_messages(lc, max_tokens=budget, token_counter=count, strategy="last", start_on="human")
        times.append(time.process_time() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100,500,1000,2000,5000,10000")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    started = time.perf_counter()
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        msgs = conversation(n + 200)
        history, rest = msgs[:n], msgs[n:]
        # the extra turns: alternate user + reply pairs
        extra: list[Message] = []
        for m in rest:
            if isinstance(m, UserMessage):
                extra += [m, AssistantMessage("ok, done.")]
        extra = extra[:100]
        counter = MessageCounter(TiktokenCounter())
        budget = sum(counter.count_messages(history)) // 2
        ours = bench_ours(history, extra, budget)
        lc_turns = 20 if n <= 2000 else 5
        theirs = bench_langchain(history, extra, budget, lc_turns)
        cached = bench_langchain(history, extra, budget, lc_turns, cached=True)
        rows.append(
            {
                "messages": n,
                "contextmem_ms": ours * 1e3,
                "trim_messages_ms": theirs * 1e3,
                "trim_messages_cached_ms": cached * 1e3,
                "ratio": theirs / ours,
                "caching": theirs / cached,
                "algorithm": cached / ours,
            }
        )
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    table = [
        "| history (messages) | contextmem ms/turn | `trim_messages` ms/turn | ratio "
        "| `trim_messages`, counts cached | of the ratio: caching | of the ratio: the algorithm |",
        "|---:|---:|---:|---:|---:|---:|---:|",
        *(
            f"| {r['messages']:,} | {r['contextmem_ms']:.3f} | {r['trim_messages_ms']:,.1f} "
            f"| {r['ratio']:,.0f}x | {r['trim_messages_cached_ms']:,.2f} | {r['caching']:,.0f}x "
            f"| {r['algorithm']:,.0f}x |"
            for r in rows
        ),
    ]
    print("\n".join(table))
    report.write(
        "budget",
        "Counting + the budget check per agent turn: contextmem vs langchain-core's trim_messages",
        "Each turn appends a user message and a reply and asks what to keep to fit half the history's "
        "tokens; both sides count with o200k_base. Median CPU ms per turn (this process's CPU time: less "
        "swayed than wall time by a shared machine's load). The ratio is the product of the last two "
        "columns: what a per-message count cache gives `trim_messages` (caching), and what is left between "
        "it and contextmem (the algorithm: a walk over the whole history per call against prefix sums and a "
        "bisection).\n\n" + "\n".join(table),
        seconds=time.perf_counter() - started,
    )


if __name__ == "__main__":
    main()
