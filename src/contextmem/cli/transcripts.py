"""Commands over a transcript file: ``replay`` (what the engine does with it, turn by turn) and ``count``
(its tokens against the configured window). Each reads the file, calls the library and prints."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile

from ..budget import fit_window, turn_starts
from ..jsonl import messages_from_jsonl
from ..settings import Settings
from ..tokens import MessageCounter, get_counter
from . import state
from .render import gauge, shown, table, use_color

__all__ = ["cmd_count", "cmd_replay", "reserve_line"]


def cmd_replay(settings: Settings, args: argparse.Namespace) -> int:
    return asyncio.run(_replay(settings, args))


async def _replay(settings: Settings, args: argparse.Namespace) -> int:
    """Replay a transcript into a fresh session (a temporary workspace unless --workspace is given)."""
    from ..eval.prompt_cache import CACHE_READ_PRICE, WireRequest
    from ..eval.replay import TurnReport, load_tools, load_transcript, replay

    system, transcript = load_transcript(args.transcript, max_bytes=settings.max_message_bytes)
    tools = load_tools(args.tools) if args.tools else []
    dump = open(args.dump_requests, "w", encoding="utf-8") if args.dump_requests else None  # noqa: SIM115

    def write_request(call: int, turn: int, request: WireRequest) -> None:
        if dump is not None:
            line = {"call": call, "turn": turn, **request.to_json()}
            dump.write(json.dumps(line, ensure_ascii=False) + "\n")

    with tempfile.TemporaryDirectory(prefix="contextmem-replay-") as tmp:
        if args.workspace is None:
            settings = settings.with_value("workspace", tmp)
        async with state.open_runtime(settings) as runtime:  # no model: what the engine alone sends
            engine = await runtime.session(args.session)
            color = use_color(sys.stdout)

            def show(t: TurnReport) -> None:
                if t.turn == 1:  # the replay started: say what the output reserve takes from the window
                    print(
                        reserve_line(engine.window.context_window, engine.window.max_tokens), file=sys.stderr
                    )
                if args.json:
                    return
                values = [t.system, t.summary, t.history, t.tool_defs, t.max_tokens]
                bar = gauge([*values, max(engine.window.context_window - sum(values), 0)], 30, color)
                print(
                    f"turn {t.turn:>4} {bar} prompt {t.prompt:>7,} "
                    f"(system {t.system:,} summary {t.summary:,} "
                    f"history {t.history:,} tools {t.tool_defs:,}) · sent {t.sent:,} vs full {t.full:,}"
                    + (f" · compactions {t.compactions}" if t.compactions else "")
                    + (f" · offloads {t.offloads}" if t.offloads else "")
                    + (f" · archived {t.archived}" if t.archived else "")
                    + (f" · cache {t.cache.cache_ratio:.0%}" if t.cache.calls else "")
                    + "".join(f" · break {r} {n}" for r, n in t.cache.breaks.items())
                )

            try:
                report = await replay(
                    engine,
                    transcript,
                    system_prompt=system,
                    tools=tools,
                    on_turn=show,
                    on_request=write_request,
                )
            finally:
                if dump is not None:
                    dump.close()
    if args.json:
        print(json.dumps(report.to_dict(), ensure_ascii=False))
    else:
        cache = report.cache
        rows = [
            ("window / output reserve", f"{report.context_window:,} / {report.max_tokens:,}"),
            ("turns / messages", f"{len(report.turns)} / {report.messages}"),
            ("tokens sent vs full history", f"{report.total('sent'):,} vs {report.total('full'):,}"),
            ("compactions / offloads", f"{report.total('compactions')} / {report.total('offloads')}"),
            ("messages archived / live", f"{report.archived_total} / {report.live}"),
            ("model calls / append-only", f"{cache.calls} / {cache.appended}"),
            (
                "prefix shared (cache ratio)",
                f"{cache.shared:,} of {cache.prompt:,} ({cache.cache_ratio:.1%})",
            ),
            (
                "billed-equivalent per call",
                f"{cache.billed_per_call:,.0f} (cache reads at {CACHE_READ_PRICE}x)",
            ),
            ("prefix breaks (by reason)", ", ".join(f"{r} {n}" for r, n in cache.breaks.items()) or "none"),
        ]
        print(table(rows, ("replay", "")))
        print(f"lost: {report.lost}")
    return 0 if report.lost == 0 else 1


def cmd_count(settings: Settings, args: argparse.Namespace) -> int:
    """Count an OpenAI-format transcript (one JSON message per line) against the configured window; a
    message over ``max_message_bytes`` is refused, as ``replay`` and ``ContextEngine.add`` refuse it."""
    messages = messages_from_jsonl(args.transcript, max_bytes=settings.max_message_bytes)
    counter = MessageCounter(get_counter(settings.tokenizer), image_tokens=settings.image_tokens)
    counts = counter.count_messages(messages)
    window = fit_window(settings).window  # no model loaded: the settings and the model table decide
    by_role = {
        role: sum(c for m, c in zip(messages, counts, strict=True) if m.kind == role)
        for role in ("system", "user", "assistant", "tool")
    }
    turns = len(turn_starts(messages))
    if args.json:
        report = {
            "messages": len(messages),
            "turns": turns,
            "tokens": sum(counts),
            "by_role": by_role,
            "context_window": window.context_window,
            "max_tokens": window.max_tokens,
            "tokenizer": counter.name,
        }
        print(json.dumps(report, ensure_ascii=False))
        return 0
    rows = [
        ("messages / turns", f"{len(messages):,} / {turns:,}"),
        ("tokens", f"{sum(counts):,}"),
        *((f"  {role}", f"{n:,}") for role, n in by_role.items()),
        ("window / output reserve", f"{window.context_window:,} / {window.max_tokens:,}"),
        ("tokenizer", counter.name),
    ]
    print(table(rows, (shown(str(args.transcript)[:60]), "")))
    return 0


def reserve_line(context_window: int, max_tokens: int) -> str:
    """What a replay takes from the window before any message: said, not silently taken."""
    return (
        f"window {context_window:,} tokens: reserving {max_tokens:,} for output (max_tokens), "
        f"{context_window - max_tokens:,} for input (--max-tokens N changes the split)"
    )
