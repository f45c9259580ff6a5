"""``contextmem`` — the command line. No logic lives here: each command calls the library and prints."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ..budget import resolve_window, turn_starts
from ..errors import ContextmemError
from ..formats.openai import messages_from_openai
from ..settings import Settings
from ..tokens import MessageCounter, get_counter


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {k: v for k, v in {"model": args.model, "context_window": args.context_window}.items() if v}
    return Settings.load(args.config, **overrides)


def cmd_demo(args: argparse.Namespace) -> int:
    from ..demo import run

    run(_settings(args), turns=args.turns)
    return 0


def cmd_count(args: argparse.Namespace) -> int:
    """Count an OpenAI-format transcript (one JSON message per line) against the configured window."""
    settings = _settings(args)
    lines = Path(args.transcript).read_text(encoding="utf-8").splitlines()
    messages = messages_from_openai(json.loads(line) for line in lines if line.strip())
    counter = MessageCounter(get_counter(settings.tokenizer), image_tokens=settings.image_tokens)
    counts = counter.count_messages(messages)
    window = resolve_window(
        model=settings.model,
        context_window=settings.context_window,
        max_tokens=settings.max_tokens,
        cap=settings.agent_max_context_tokens,
    )
    report = {
        "messages": len(messages),
        "turns": len(turn_starts(messages)),
        "tokens": sum(counts),
        "by_role": {
            role: sum(c for m, c in zip(messages, counts, strict=True) if m.kind == role)
            for role in ("system", "user", "assistant", "tool")
        },
        "context_window": window.context_window,
        "max_tokens": window.max_tokens,
        "tokenizer": counter.name,
    }
    if args.json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        for key, value in report.items():
            print(f"{key:>15}: {value}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="contextmem", description="Context and memory engine for LLM agents."
    )
    parser.add_argument("--config", help="settings file (JSON or TOML)")
    parser.add_argument("--model", help="'local', a .gguf path, openai:MODEL or anthropic:MODEL")
    parser.add_argument("--context-window", type=int, help="override the model's context window")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="replay a long bilingual agent conversation offline")
    demo.add_argument("--turns", type=int, default=300)
    demo.set_defaults(func=cmd_demo)

    count = sub.add_parser("count", help="count tokens of an OpenAI-format JSONL transcript")
    count.add_argument("transcript")
    count.add_argument("--json", action="store_true")
    count.set_defaults(func=cmd_count)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except ContextmemError as exc:
        print(f"contextmem: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"contextmem: {exc.strerror or exc}: {exc.filename or ''}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
