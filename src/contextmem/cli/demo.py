"""``contextmem demo`` — what ``make run`` shows: the engine under a real agent loop, offline.

A bundled three-day conversation (English and Chinese, tool calls, one ~100 KB log) is replayed through
the reference agent into a small window. The assistant's side is scripted (:mod:`.demo_script`) — the demo
shows the *engine*: every model request is assembled by ``build``, old tool output is offloaded, turns are
trimmed and archived, summaries are written as the settings say (the extractive summary with the local
model, unless ``summary_local_model`` is on: then a bounded number of model calls, then the extractive
fallback), and what leaves the context lands in daily memory. A new session then answers questions about
the first days through ``memory_search`` — answered by the local model from the hits — and the run ends
with the totals and the proof that no message was lost.

The model is loaded only when it is first needed: for the questions, unless it writes summaries. So the
sessions run while ``make run`` is still installing the local model's runtime in the background
(``runtime_status``: a JSON file the installer keeps, :func:`wait_for_runtime`). No step is silent for
more than :data:`TICK` seconds: waiting for the install, loading the model and every model call print
progress lines.

``--fast`` uses no model at all (extractive summaries, extractive answers): what the tests run.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import re
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..agent import Agent, Toolbox, memory_tools
from ..engine import ContextEngine, EngineEvent
from ..eval.replay import count_lost
from ..llm.base import LLM
from ..messages import AssistantMessage, Message, UserMessage
from ..settings import Settings
from ..summarize.prompts import section_has_content
from ..testing import ScriptedLLM
from ..workspace import CORE_FILE, DAILY_DIR
from .demo_script import (
    BoundedLLM,
    ScriptedTools,
    load_conversation,
    question_script,
    turn_messages,
    turn_script,
)
from .render import describe_event, gauge
from .state import open_runtime

if TYPE_CHECKING:
    from ..runtime import ContextMem

__all__ = [
    "DEMO_SETTINGS",
    "REPORTED",
    "TICK",
    "Demo",
    "Echo",
    "ModelLoader",
    "Total",
    "run",
    "say",
    "telling_lines",
    "ticking",
    "wait_for_runtime",
]

Echo = Callable[[str], None]
TICK = 10.0
"""Most seconds the demo stays silent: a progress line follows while it waits on a model or an install."""

# A small window so that trimming, offloading and summaries all happen within a few turns.
DEMO_SETTINGS: dict[str, Any] = {
    "context_window": 6000,
    "max_tokens": 800,
    "agent_max_context_turns": 6,
    "summary_max_tokens": 800,
    "summary_chunk_tokens": 1500,
    "summary_timeout_seconds": 600.0,
    "pruning_old_msg_max_bytes": 2000,
    "pruning_recent_msg_max_bytes": 12000,
}

_SUMMARY_LINES = 14
"""How many lines of a session's final summary the demo prints."""


def telling_lines(summary: str) -> list[str]:
    """The lines of the sections of ``summary`` that say something: a "(none)" section is left out."""
    blocks = re.split(r"(?m)^(?=#+ )", summary.strip())
    lines: list[str] = []
    for block in blocks:
        header, _, body = block.partition("\n")
        if header.startswith("#") and not section_has_content(body):
            continue
        lines += [line for line in block.splitlines() if line.strip()]
    return lines


# --- the run ------------------------------------------------------------------------------------


Total = Literal[
    "turns", "calls", "sent", "full", "offloads", "compactions", "folded", "lost", "archived", "live"
]
"""The running totals the demo keeps (a tally by name: a missing one counts 0)."""

REPORTED: tuple[Total, ...] = (
    "turns",
    "calls",
    "sent",
    "full",
    "offloads",
    "compactions",
    "archived",
    "lost",
)
"""The totals :func:`run` returns, beside ``llm_summaries``; ``folded`` and ``live`` are only shown."""


def run(
    settings: Settings | None = None,
    *,
    fast: bool = False,
    llm_summaries: int = 2,
    keep: str | None = None,
    echo: Echo | None = None,
    runtime_status: Path | None = None,
) -> dict[str, int]:
    """Run the demo; returns the totals (``lost`` is 0 unless something is badly wrong).

    ``runtime_status``: the local model's runtime is being installed meanwhile; wait for that file to
    say so (:func:`wait_for_runtime`) before loading the model. ``llm_summaries`` bounds the model's
    summary calls when it writes summaries (``summary_local_model``, or a hosted model).
    """
    return asyncio.run(
        _run(
            settings or Settings(),
            fast=fast,
            llm_summaries=llm_summaries,
            keep=keep,
            echo=echo or say,
            runtime_status=runtime_status,
        )
    )


def say(line: str) -> None:
    """The demo's default output: flushed at once, so progress shows also through a pipe."""
    print(line, flush=True)


async def _run(
    settings: Settings,
    *,
    fast: bool,
    llm_summaries: int,
    keep: str | None,
    echo: Echo,
    runtime_status: Path | None,
) -> dict[str, int]:
    from ..llm.registry import writes_summaries

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="contextmem-demo-") as tmp:
        root = Path(keep or tmp)
        s = settings
        for key, value in {**DEMO_SETTINGS, "workspace": str(root), "store": ""}.items():
            s = s.with_value(key, value)
        model = None if fast else ModelLoader(s, echo, runtime_status)
        local = None
        if model is not None and writes_summaries(s, s.model):  # needed from the first turn
            inner = await model.get()
            local = BoundedLLM(inner, llm_summaries) if inner is not None else None
        async with open_runtime(s, llm=local or ScriptedLLM(), memory=True) as runtime:
            demo = Demo(runtime, local, echo, model)
            echo(f"contextmem demo · workspace {root}")
            echo(
                f"window {s.context_window:,} tokens, output reserve {s.max_tokens}, "
                f"max turns {s.agent_max_context_turns}"
            )
            if local is not None:
                echo(f"summaries: {local.name}, at most {llm_summaries} calls, then extractive")
            elif fast:
                echo("summaries: extractive (--fast); answers: extractive")
            else:
                echo(
                    f"summaries: extractive (set summary_local_model to have {s.model!r} write them); "
                    f"answers: {s.model!r}, loaded when the questions start"
                )
            sessions = demo.conversation["sessions"]
            for number, session in enumerate(sessions):
                await demo.session(session, fold=number == len(sessions) - 1)
            await demo.questions()
        demo.memory_files()
        demo.final_table(time.monotonic() - started)
    failed = model is not None and model.failed
    return {
        **{key: demo.totals[key] for key in REPORTED},
        "llm_summaries": local.used if local else 0,
        "model_failed": int(failed),
    }


@contextlib.asynccontextmanager
async def ticking(echo: Echo, what: str, every: float = TICK) -> AsyncIterator[None]:
    """Print ``… what (Ns)`` every ``every`` seconds until the block ends (nothing if it ends sooner)."""
    started = time.monotonic()

    async def tick() -> None:
        while True:
            await asyncio.sleep(every)
            echo(f"   … {what} ({time.monotonic() - started:.0f}s)")

    task = asyncio.create_task(tick())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _status(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):  # not written yet, or caught mid-write
        return {}
    return data if isinstance(data, dict) else {}


async def wait_for_runtime(status: Path, echo: Echo, *, every: float = TICK, poll: float = 0.5) -> bool:
    """Wait until the installer keeping ``status`` says it is done; ``True`` if it succeeded.

    ``status`` is JSON: ``{"state": "installing", "log": PATH, "started": EPOCH}`` while it runs, then
    ``{"state": "done", "exit": CODE, ...}``. A line is printed every ``every`` seconds meanwhile.
    """
    waited = time.monotonic()
    shown = -every
    state = _status(status)
    while state.get("state") != "done":
        if time.monotonic() - waited >= shown + every:
            shown = time.monotonic() - waited
            minutes, seconds = divmod(int(time.time() - float(state.get("started", time.time()))), 60)
            echo(
                f"   … the local model is still installing in the background ({minutes}m{seconds:02d}s so "
                f"far; log {state.get('log', status)})"
            )
        await asyncio.sleep(poll)
        state = _status(status)
    importlib.invalidate_caches()  # the install added packages after this process started
    if state.get("exit") != 0:
        echo(
            f"the local model's runtime failed to install (exit {state.get('exit')!r}); "
            f"see {state.get('log', status)}. Answering extractively."
        )
        return False
    echo(f"the local model's runtime is installed (waited {time.monotonic() - waited:.0f}s)")
    return True


class ModelLoader:
    """The demo's model, loaded once, when first needed, with progress lines: after the runtime's
    background install (if one is running), then resolving (assembling and verifying a packaged model's
    file), then loading the weights. ``failed`` when the install or the load failed; the demo then answers
    extractively, says so, and ``contextmem demo`` exits non-zero."""

    def __init__(self, settings: Settings, echo: Echo, runtime_status: Path | None) -> None:
        self.settings = settings  # its model, and the base_url and key variable a remote model is reached by
        self.spec = settings.model
        self.echo = echo
        self.runtime_status = runtime_status
        self.failed = False
        self._llm: LLM | None = None
        self._tried = False

    async def get(self) -> LLM | None:
        if self._tried:
            return self._llm
        self._tried = True
        if self.runtime_status is not None and not await wait_for_runtime(self.runtime_status, self.echo):
            self.failed = True
            return None
        from ..errors import ContextmemError
        from ..llm.registry import llm_from_settings

        started = time.monotonic()
        self.echo(f"loading {self.spec!r} (a packaged model's file is assembled and verified once)")
        try:
            async with ticking(self.echo, f"loading {self.spec!r}"):
                loaded = await asyncio.to_thread(llm_from_settings, self.settings)
                if loaded is None:  # model "none": nothing to load
                    return None
                llm = loaded
                # Load the weights now: llama.cpp silences stdout while it loads (by redirecting the file
                # descriptor), which would swallow the lines of a model call printed meanwhile.
                await llm.complete([UserMessage("Say ok.")], max_tokens=1)
        except ContextmemError as exc:
            self.failed = True
            self.echo(f"could not load {self.spec!r}: {exc}. Answering extractively.")
            return None
        self.echo(f"loaded {llm.name} in {time.monotonic() - started:.0f}s")
        self._llm = llm
        return llm


class Demo:
    """The demo's state: the runtime, the scripted assistant and tools, and the running totals."""

    def __init__(
        self, runtime: ContextMem, local: BoundedLLM | None, echo: Echo, model: ModelLoader | None = None
    ) -> None:
        self.runtime = runtime
        self.local = local
        self.echo = echo
        self.model = model
        self.conversation = load_conversation()
        self.tools = ScriptedTools()
        self.assistant = ScriptedLLM(name="scripted-assistant")
        names = sorted(
            {st["tool"] for se in self.conversation["sessions"] for t in se["turns"] for st in t["steps"]}
        )
        recorded = [self.tools.tool(n) for n in names if not n.startswith("memory_")]
        self.box = Toolbox([*memory_tools(runtime.tools), *recorded])
        self.totals: Counter[Total] = Counter()
        self.notices: list[str] = []

    async def _agent(self, session_id: str, *, fold: bool) -> Agent:
        engine = await self.runtime.session(session_id)
        engine.settings = engine.settings.with_value("fold_task_memory", fold)
        if self.local is None:
            engine.summarizer = None
        engine.subscribe(self._notice)
        return Agent(engine, self.assistant, self.box, self.conversation["system"])

    async def session(self, session: dict[str, Any], *, fold: bool) -> None:
        """Replay one session's turns through the agent, one gauge line per turn."""
        folding = "on" if fold else "off"
        self.echo(f"\n== session {session['id']}: {session['title']} (task folding {folding})")
        agent = await self._agent(session["id"], fold=fold)
        engine, transcript = agent.engine, []
        full = engine.counter.count_text(agent.system_prompt) + engine.counter.count_tools(agent.tool_specs)
        for index, turn in enumerate(session["turns"], start=1):
            self.tools.load(turn["steps"])
            self.assistant.script = turn_script(turn, index)
            self.assistant.replies.clear()
            async with ticking(self.echo, f"turn {index} in progress"):
                result = await agent.ask(turn["user"])
            messages = turn_messages(turn["user"], self.assistant.replies, result.task.steps)
            transcript.extend(messages)
            counts = engine.counter.count_messages(messages)
            at_calls = [i for i, m in enumerate(messages) if isinstance(m, AssistantMessage)]
            for request, at in zip(result.requests, at_calls, strict=True):
                self.totals["sent"] += request.estimate.prompt
                self.totals["full"] += full + sum(counts[:at])
            full += sum(counts)
            self.totals["turns"] += 1
            self.totals["calls"] += len(result.requests)
            est = max(result.requests, key=lambda r: r.estimate.prompt).estimate
            values = [est.system, est.summary, est.history, est.tool_defs, est.max_tokens, max(est.free, 0)]
            self.echo(
                f"turn {index:>2} {gauge(values, 30)} "
                f"{est.prompt + est.max_tokens:>5,}/{est.context_window:,}"
                f"  summary {est.summary:>4} history {est.history:>5}  {turn['user'][:40]}"
            )
            self._show_notices()
        await self._finish(engine, transcript)

    async def questions(self) -> None:
        """A new session asks about the first days: memory_search, then an answer from the hits."""
        self.echo("\n== a new session asks about earlier days (memory_search → answer)")
        answerer = await self.model.get() if self.model else None
        answering = f"{answerer.name} is answering" if answerer else "answering"
        agent = await self._agent("thu-questions", fold=True)
        transcript: list[Message] = []
        for number, q in enumerate(self.conversation["questions"], start=1):
            self.assistant.script = question_script(number, q, answerer)
            self.assistant.replies.clear()
            self.echo(f"Q: {q['ask']}")
            parts: list[str] = []
            found = False
            async with ticking(self.echo, answering):
                async for event in agent.run(q["ask"]):
                    if event.kind == "tool_result":
                        hits = json.loads(event.text) if event.text.startswith("[") else []
                        found = any(q["expect"] in str(h["snippet"]) for h in hits)
                        where = ", ".join(f"{h['path']}:{h['start_line']}-{h['end_line']}" for h in hits)
                        self.echo(f"   memory_search → {where or 'no hits'}")
                    elif event.kind == "text":
                        parts.append(event.text)
                    elif event.result is not None:
                        steps = event.result.task.steps
                        transcript.extend(turn_messages(q["ask"], self.assistant.replies, steps))
                        self.totals["calls"] += len(event.result.requests)
            answer = " ".join("".join(parts).split())
            mark = "✓" if q["expect"] in answer else ("~" if found else "✗")
            note = "" if found else ", not in the hits"
            self.echo(f"A: {answer}  [{mark} expected {q['expect']!r}{note}]")
            self._show_notices()
        self.totals["turns"] += len(self.conversation["questions"])
        await self._finish(agent.engine, transcript)

    async def _finish(self, engine: ContextEngine, transcript: list[Message]) -> None:
        """Wait for the background summary, then prove the session lost nothing."""
        waited = time.monotonic()
        async with ticking(self.echo, "waiting for the background summary"):
            await engine.wait_idle()
        await self.runtime.flush()
        self._show_notices()
        if engine.summary is not None:
            source = "local model" if engine.summary.source == "llm" else "extractive"
            self.echo(f"   summary ({source}; ready {time.monotonic() - waited:.0f}s after the last turn):")
            shown = telling_lines(engine.summary.text)
            for line in shown[:_SUMMARY_LINES]:
                self.echo(f"   │ {line[:100]}")
            if len(shown) > _SUMMARY_LINES:
                self.echo(f"   │ … {len(shown) - _SUMMARY_LINES} more lines")
        lost = await count_lost(engine, transcript)
        report = await engine.verify()
        self.totals["lost"] += lost
        self.totals["archived"] += report.archived
        self.totals["live"] += report.live
        self.echo(
            f"   check: {report.appended} messages = {report.live} live + {report.archived} archived;"
            f" lost {lost}"
        )
        self.memory_files(brief=True)

    def _notice(self, event: EngineEvent) -> None:
        d, t = event.data, self.totals
        if event.kind == "offload":
            t["offloads"] += 1
        elif event.kind == "compaction_finished" and d.get("archived"):
            if d.get("reason") == "fold_task":
                t["folded"] += int(d["archived"])
            else:
                t["compactions"] += 1
        notice = describe_event(event)
        if notice:
            self.notices.append(notice)

    def _show_notices(self) -> None:
        for notice in self.notices:
            self.echo(f"         ↳ {notice}")
        self.notices.clear()

    def memory_files(self, *, brief: bool = False) -> None:
        directory = self.runtime.workspace.dir
        files = [directory / CORE_FILE, *sorted((directory / DAILY_DIR).glob("*.md"))]
        shown = [
            (p.relative_to(directory), p.read_text(encoding="utf-8").count("\n")) for p in files if p.exists()
        ]
        text = ", ".join(f"{path} ({lines} lines)" for path, lines in shown) or "none yet"
        self.echo(f"   memory files: {text}" if brief else f"\nmemory files written: {text}")

    def final_table(self, seconds: float) -> None:
        t, local = self.totals, self.local
        rows = [
            ("turns (incl. questions)", f"{t['turns']}"),
            ("model calls", f"{t['calls']}"),
            ("tokens sent", f"{t['sent']:,}"),
            ("tokens with full history", f"{t['full']:,} ({t['full'] / max(t['sent'], 1):.1f}x more)"),
            ("tool results offloaded", f"{t['offloads']}"),
            ("compactions", f"{t['compactions']}"),
            ("task-step messages folded", f"{t['folded']}"),
            ("messages archived / live", f"{t['archived']} / {t['live']}"),
            ("model summary calls", f"{local.used} ({local.seconds:.0f}s)" if local else "0 (extractive)"),
            ("runtime", f"{seconds:.0f}s"),
        ]
        width = max(len(k) for k, _ in rows)
        self.echo("")
        for key, value in rows:
            self.echo(f"{key:<{width}}  {value}")
        self.echo(f"lost: {t['lost']}")
