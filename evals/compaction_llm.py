"""Compaction with the local model: answers kept in the view, and what each summary call costs.

The same measure as ``evals/compaction_facts.py`` (``contextmem eval compaction``): each conversation is
replayed through the real engine into a ``--context-window`` (default 8,000) window, then every question's
answer is looked for in the next request's view (summary + live history). Here the engine has a model:
each summary the background rounds fold is the model's correction of the draft of what is new, merged
with the rest of the previous summary (:mod:`contextmem.summarize.summarizer`); ``none`` is the
extractive path alone, the baseline. The summary is sized alike for every row (``--summary-tokens``,
default 2,867: what the engine gives a summary at the local model's 8,192-token window), so only the
writer differs.

Per model and conversation: answers kept, the view's tokens, the summary calls, seconds per call and in
all, how many calls left the draft (timeout, junk, a copy of the previous summary) and how many draft facts
with exact values the model dropped and got back. The model is slow on 2 cores (a call is a chunk of new
messages and their draft, and up to 1.25 x a third of the text budget of reply): keep the conversations
few, or short
(``--tokens N`` replays each conversation's first N tokens and asks only the questions answered there).

Run: python -m evals.compaction_llm [--models none,local:qwen2.5-coder-0.5b,local]
     [--conversations madial/en_madial_user1,madial/zh_madial_user1,synthetic/en_friends_11]
     [--tokens 12000] [--timeout 600] [--json results.json]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.report import stamp
from contextmem.eval.compaction import CompactionEval, evaluate, load_questions
from contextmem.eval.recall import normalise
from contextmem.eval.replay import load_transcript
from contextmem.messages import Message, text_of
from contextmem.settings import Settings
from contextmem.tokens import get_counter
from evals.datasets import compaction_sets

DEFAULT_CONVERSATIONS = "madial/en_madial_user1,madial/zh_madial_user1,synthetic/en_friends_11"


@dataclass
class Calls:
    """What the model calls cost and what the summariser made of them (from its log)."""

    seconds: list[float] = field(default_factory=list)
    drafts: int = 0  # calls whose reply was not used: the draft stood
    restored: int = 0  # draft facts with exact values the model dropped and the summariser kept

    @property
    def total(self) -> float:
        return sum(self.seconds)


class _Tally(logging.Handler):
    def __init__(self, calls: Calls) -> None:
        super().__init__(logging.INFO)
        self.calls = calls

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("summary model gave nothing usable"):
            self.calls.drafts += 1
        elif message.startswith("the summary model dropped"):
            self.calls.restored += int(message.split()[4])


@contextlib.contextmanager
def model_in_eval(llm: Any, calls: Calls) -> Iterator[None]:
    """Every call of ``llm`` timed, and the summariser's fallbacks tallied, for the bench's duration.

    Calls are timed around ``complete``, so the time a call queues behind another (there are no replies
    in a replay) is in it too.
    """
    complete = llm.complete

    async def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await complete(*args, **kwargs)
        finally:
            calls.seconds.append(time.perf_counter() - started)
            print(f"  call {len(calls.seconds)}: {calls.seconds[-1]:.0f} s", file=sys.stderr, flush=True)

    llm.complete = timed
    tally = _Tally(calls)
    logger = logging.getLogger("contextmem.summarize.summarizer")
    logger.addHandler(tally)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        llm.complete = complete
        logger.removeHandler(tally)


def prefix(path: Path, tokens: int | None) -> tuple[str, list[Message], list[str]]:
    """The conversation's first ``tokens`` tokens of messages (whole ones; all with ``None``) and the
    answers that occur in them."""
    system, transcript = load_transcript(path)
    answers = [q["answer"] for q in load_questions(path.with_suffix(".qa.jsonl"))]
    if tokens is None:
        return system, transcript, answers
    counter = get_counter("auto")
    kept: list[Message] = []
    for message in transcript:
        tokens -= counter.count_text(text_of(message.content))
        if tokens < 0:
            break
        kept.append(message)
    text = normalise("\n".join(text_of(m.content) for m in kept))
    return system, kept, [a for a in answers if normalise(a) in text]


async def run_one(
    settings: Settings, path: Path, llm: Any | None, tokens: int | None
) -> tuple[CompactionEval, Calls, float]:
    system, transcript, answers = prefix(path, tokens)
    calls = Calls()
    started = time.perf_counter()
    with model_in_eval(llm, calls) if llm is not None else contextlib.nullcontext():
        result = await evaluate(settings, transcript, answers, system, llm=llm)
    return result, calls, time.perf_counter() - started


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="none,local:qwen2.5-coder-0.5b,local")
    ap.add_argument("--conversations", default=DEFAULT_CONVERSATIONS)
    ap.add_argument("--context-window", type=int, default=8000)
    ap.add_argument("--summary-tokens", type=int, default=2867)
    ap.add_argument("--timeout", type=float, default=600.0, help="summary_timeout_seconds")
    ap.add_argument("--tokens", type=int, help="replay only each conversation's first TOKENS tokens")
    ap.add_argument("--json", help="write the figures here")
    args = ap.parse_args()
    settings = Settings(
        context_window=args.context_window,
        summary_max_tokens=args.summary_tokens,
        summary_timeout_seconds=args.timeout,
    )
    data = compaction_sets()
    rows: list[dict[str, object]] = []
    print(
        "| model | conversation | answers kept | view tokens | summary calls | s/call | drafts kept | "
        "facts put back | total s |"
    )
    print("|---|---|--:|--:|--:|--:|--:|--:|--:|")
    for spec in args.models.split(","):
        llm = None
        if spec != "none":
            from contextmem.llm.local import LocalLLM

            llm = LocalLLM(spec, n_threads=2)
        kept = total = calls_n = 0
        seconds = 0.0
        for name in args.conversations.split(","):
            result, calls, wall = asyncio.run(run_one(settings, data / f"{name}.jsonl", llm, args.tokens))
            v = result.view
            kept, total, calls_n, seconds = (
                kept + v.kept,
                total + v.total,
                calls_n + len(calls.seconds),
                seconds + calls.total,
            )
            per_call = f"{calls.total / len(calls.seconds):.1f}" if calls.seconds else "-"
            print(
                f"| {spec} | {name} | {v.kept}/{v.total} {v.share:.1%} | {v.tokens:,} | "
                f"{len(calls.seconds)} | {per_call} | {calls.drafts} | {calls.restored} | {wall:.0f} |",
                flush=True,
            )
            rows.append(
                {
                    "model": spec,
                    "conversation": name,
                    **result.to_dict(),
                    "call_seconds": calls.seconds,
                    "drafts": calls.drafts,
                    "restored": calls.restored,
                    "wall": wall,
                }
            )
        per_call = f"{seconds / calls_n:.1f}" if calls_n else "-"
        print(
            f"| {spec} | **pooled** | **{kept}/{total} {kept / max(1, total):.1%}** | | {calls_n} | "
            f"{per_call} | | | {seconds:.0f} |",
            flush=True,
        )
    if args.json:
        doc = {**stamp(), "rows": rows}  # when, on what, at which revision, by which command
        Path(args.json).write_text(json.dumps(doc, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
