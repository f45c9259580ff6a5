"""Commands over stored state: ``memory index|search|eval``, ``sessions list|show|export|cleanup``,
``config``.

Each gets its parts from :func:`open_runtime` — :meth:`ContextMem.open`, as every adapter does, with no
model — so a command reads the store and the memory index the agent uses (the index in PostgreSQL when
the store is), and prints.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from datetime import datetime
from typing import TYPE_CHECKING

from ..dsn import printable_store_url
from ..engine.types import summary_from_json
from ..errors import ConfigError, MessageStateError
from ..formats.openai import to_openai
from ..llm.registry import NO_MODEL
from ..safefs import write_atomic_path
from ..settings import Settings
from ..store.base import SessionStore
from . import memory_eval
from .config import (
    config_path,
    save_setting,
    setting_rows,
    setting_values,
    unset_message,
    unset_setting,
)
from .render import ProgressBar, hits_table, json_line, shown, table

if TYPE_CHECKING:
    from ..llm.base import LLM
    from ..memory import MemoryIndex
    from ..memory.working_copy import Reconciled, WorkingCopy
    from ..runtime import ContextMem

__all__ = [
    "config_command",
    "memory_eval_command",
    "memory_export",
    "memory_index",
    "memory_pull",
    "memory_push",
    "memory_search",
    "sessions_cleanup",
    "sessions_export",
    "sessions_list",
    "sessions_show",
]


def _when(ts: float) -> str:
    return datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


@contextlib.asynccontextmanager
async def open_runtime(
    settings: Settings,
    *,
    llm: LLM | str | None = NO_MODEL,
    embedder: str | None = None,
    memory: bool = False,
) -> AsyncIterator[ContextMem]:
    """The command line's parts, from :meth:`ContextMem.open`: no model unless ``llm`` names or is one
    (``None``: the configured model), the memory index only if ``memory``. Closed on exit."""
    from ..runtime import ContextMem

    runtime = await ContextMem.open(settings, llm=llm, embedder=embedder or None, memory=memory)
    try:
        yield runtime
    finally:
        await runtime.close()


def _index(runtime: ContextMem) -> MemoryIndex:
    assert runtime.memory is not None  # opened with memory=True
    return runtime.memory


async def memory_index(settings: Settings, args: argparse.Namespace) -> int:
    async with open_runtime(settings, embedder=args.embedder, memory=True) as runtime:
        index = _index(runtime)
        bar = ProgressBar("embedding")
        report = index.sync(progress=bar)
        bar.close()
        stats = index.stats()
    print(
        f"indexed {shown(index.workspace.dir)}: {len(report.added)} added, {len(report.updated)} updated, "
        f"{len(report.removed)} removed, {report.chunks_embedded} chunks embedded; "
        + ", ".join(f"{k} {v}" for k, v in stats.items())
    )
    if report.skipped:
        print(f"skipped (links are never followed): {shown(', '.join(report.skipped))}")
    return 0


async def memory_search(settings: Settings, args: argparse.Namespace) -> int:
    if (args.query is None) == (args.batch is None):
        raise ConfigError(
            "memory search takes a QUERY or --batch FILE.jsonl, not both or neither. "
            'Fix: contextmem memory search "deploy window"'
        )
    async with open_runtime(settings, embedder=args.embedder, memory=True) as runtime:
        index = _index(runtime)
        if args.batch is not None:
            return memory_eval.search_batch(index, args)
        bar = ProgressBar("indexing new or changed memory")  # silent when nothing changed
        index.sync(progress=bar)
        bar.close()
        hits = index.search(args.query, args.k, mode=args.mode, sync=False)
    if args.json:
        print(json_line([memory_eval.hit_record(h) for h in hits]))
    else:
        print(hits_table(hits))
    return 0


def _working_copy(runtime: ContextMem) -> WorkingCopy:
    copy: WorkingCopy | None = getattr(runtime.memory, "working_copy", None)
    if copy is None:
        raise ConfigError(
            "memory push, pull and export move memory between this workspace and a shared store, and the "
            f"store is {printable_store_url(runtime.settings.store_url)!r}. "
            "Fix: set store = postgresql://… (contextmem config set store …) on every host first"
        )
    return copy


def _moved(done: Reconciled) -> str:
    return f"{len(done.pushed)} written back, {len(done.merged)} merged, {len(done.pulled)} pulled" + (
        f"; skipped (links are never followed): {shown(', '.join(done.skipped))}" if done.skipped else ""
    )


async def memory_push(settings: Settings, args: argparse.Namespace) -> int:
    """The workspace's memory files into the shared store (the migration, and any hand edit since)."""
    async with open_runtime(settings, embedder=args.embedder, memory=True) as runtime:
        done = _working_copy(runtime).sync()
    print(f"memory of {shown(settings.namespace)}: {_moved(done)}")
    for problem in done.conflicts:
        print(f"error: {shown(problem)}", file=sys.stderr)
    return 1 if done.conflicts else 0


async def memory_pull(settings: Settings, args: argparse.Namespace) -> int:
    """The shared documents into the workspace's files; ``--overwrite`` takes the shared version of a
    document whose edit here was refused."""
    async with open_runtime(settings, embedder=args.embedder, memory=True) as runtime:
        done = _working_copy(runtime).sync(overwrite=args.overwrite)
    print(f"memory of {shown(settings.namespace)}: {_moved(done)}")
    for problem in done.conflicts:
        print(f"error: {shown(problem)}", file=sys.stderr)
    return 1 if done.conflicts else 0


async def memory_export(settings: Settings, args: argparse.Namespace) -> int:
    """Every shared document of the namespace as a file under ``args.directory`` (its own tree)."""
    from ..safefs import Confined

    async with open_runtime(settings, embedder=args.embedder, memory=True) as runtime:
        docs = _working_copy(runtime).docs
        out = Confined(args.directory)
        count = 0
        for path, state in sorted(docs.states().items()):
            doc = None if state.deleted else docs.get(path)
            if doc is not None and not doc.deleted:
                out.write_atomic(path, doc.content)
                count += 1
    print(f"exported {count} memory document(s) of {shown(settings.namespace)} to {shown(out.root)}")
    return 0


async def memory_eval_command(settings: Settings, args: argparse.Namespace) -> int:
    """Score search on a labelled set (:mod:`.memory_eval`)."""
    async with open_runtime(settings, embedder=args.embedder, memory=True) as runtime:
        return memory_eval.run_eval(_index(runtime), args)


async def sessions_list(settings: Settings, args: argparse.Namespace) -> int:
    async with open_runtime(settings) as runtime:
        infos = await runtime.store.list_sessions(settings.namespace)
    if args.json:
        keys = ("session_id", "live_count", "archived_count", "created_at", "updated_at")
        print(json_line([{k: getattr(i, k) for k in keys} for i in infos]))
        return 0
    rows = [
        (shown(i.session_id), i.live_count, i.archived_count, _when(i.created_at), _when(i.updated_at))
        for i in infos
    ]
    print(table(rows, ("session", "live", "archived", "created", "updated")) if rows else "no sessions")
    return 0


async def _require(store: SessionStore, namespace: str, session_id: str) -> None:
    if session_id not in {i.session_id for i in await store.list_sessions(namespace)}:
        raise MessageStateError(
            f"no session {session_id!r} in namespace {namespace!r}. Fix: see `contextmem sessions list`"
        )


async def sessions_show(settings: Settings, args: argparse.Namespace) -> int:
    async with open_runtime(settings) as runtime:
        store = runtime.store
        await _require(store, settings.namespace, args.session)
        state = await store.open_session(settings.namespace, args.session)
        archived = await store.messages(settings.namespace, args.session, state="archived")
    summary = summary_from_json(state.summary)
    live = state.live[-args.last :] if args.last else state.live
    if args.json:
        document = {
            "session_id": args.session,
            "live_count": len(state.live),
            "archived_count": len(archived),
            "summary": {"source": summary.source, "text": summary.render()} if summary else None,
            "messages": [{"seq": m.seq, **to_openai(m.message)} for m in live],
        }
        print(json_line(document))
        return 0
    print(f"session {shown(args.session)}: {len(state.live)} live, {len(archived)} archived messages")
    summary_text = shown(summary.render(), lines=True) if summary else ""
    print(f"summary ({summary.source}):\n{summary_text}" if summary else "summary: none")
    for stored in live:
        print(f"{stored.seq:>5} {json_line(to_openai(stored.message))[:200]}")
    return 0


async def sessions_export(settings: Settings, args: argparse.Namespace) -> int:
    """Every message, archived ones included, in original form: an OpenAI JSONL transcript."""
    async with open_runtime(settings) as runtime:
        await _require(runtime.store, settings.namespace, args.session)
        messages = await runtime.store.messages(settings.namespace, args.session, state=args.state)
    lines = "".join(json.dumps(to_openai(s.message), ensure_ascii=False) + "\n" for s in messages)
    if args.output:
        write_atomic_path(args.output, lines.encode("utf-8"))  # private: it holds the raw conversation
        print(f"exported {len(messages)} messages to {shown(args.output)}", file=sys.stderr)
    else:
        sys.stdout.write(lines)
    return 0


async def sessions_cleanup(settings: Settings, args: argparse.Namespace) -> int:
    """Idle sessions of ``--namespace`` only; ``--all-namespaces`` (an operator's choice) of every tenant."""
    days = args.days if args.days is not None else settings.session_retention_days
    namespace = None if args.all_namespaces else settings.namespace
    where = "in every namespace" if namespace is None else f"in namespace {namespace!r}"
    if days == 0 and not args.yes and not _confirm(f"--days 0 removes every session {where}"):
        return 1
    async with open_runtime(settings) as runtime:
        gone = await runtime.store.cleanup_idle(days * 86400, namespace=namespace)
    print(f"removed {len(gone)} sessions idle over {days} days {where} (their dialog archives stay)")
    if namespace is None:
        touched = sorted({ns for ns, _ in gone})
        print(f"namespaces touched: {shown(', '.join(touched)) if touched else 'none'}")
    for ns, session_id in gone:
        print(f"  {shown(f'{ns}/{session_id}')}")
    return 0


def _confirm(question: str) -> bool:
    """y/N on a terminal; with no terminal to ask, a refusal (a ConfigError naming ``--yes``)."""
    if not sys.stdin.isatty():
        raise ConfigError(f"{question}: that needs a yes, and there is no terminal to ask. Fix: add --yes")
    answer = input(f"{question} (their archives stay). Go on? [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        print("nothing removed", file=sys.stderr)
        return False
    return True


def config_command(settings: Settings, args: argparse.Namespace) -> int:
    path = config_path(args)
    if args.action == "path":
        print(path)
    elif args.action == "get":
        print(json.dumps(settings.shown()[args.key], ensure_ascii=False))
    elif args.action == "set":
        updated = save_setting(path, args.key, args.value)
        value = json.dumps(updated.shown()[args.key], ensure_ascii=False)
        print(f"{args.key} = {value} (saved to {path})")
    elif args.action == "unset":
        print(unset_message(args.key, unset_setting(path, args.key), path, settings))
    elif args.json:
        print(json.dumps(setting_values(settings), ensure_ascii=False))
    else:
        print(table(setting_rows(settings), ("key", "value", "source")))
    return 0
