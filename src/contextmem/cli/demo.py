"""``contextmem demo`` — what ``make run`` shows: the engine under a real agent loop, offline.

A bundled three-day conversation (English and Chinese, tool calls, one ~100 KB log) is replayed through
the reference agent into a small window. The assistant's side is scripted (:mod:`.demo_script`) — the demo
shows the *engine*: every model request is assembled by ``build``, old tool output is offloaded, turns are
trimmed and archived, summaries are written by the local model in the background (a bounded number of
calls, then the extractive fallback), and what leaves the context lands in daily memory. A new session
then answers questions about the first days through ``memory_search`` — answered by the local model from
the hits — and the run ends with the totals and the proof that no message was lost.

``--fast`` uses no model at all (extractive summaries, extractive answers): what the tests run.
"""

from __future__ import annotations

import asyncio
import json
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ..agent import Agent, Toolbox, memory_tools
from ..agent.replay import count_lost
from ..engine import ContextEngine, EngineEvent
from ..messages import AssistantMessage, Message, UserMessage
from ..settings import Settings
from ..summarize.prompts import section_has_content
from ..testing import ScriptedLLM
from .demo_script import (
    BoundedLLM,
    ScriptedTools,
    load_conversation,
    question_script,
    turn_messages,
    turn_script,
)
from .render import describe_event, gauge

if TYPE_CHECKING:
    from ..runtime import ContextMem

Echo = Callable[[str], None]

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
    echo: Echo = print,
) -> dict[str, int]:
    """Run the demo; returns the totals (``lost`` is 0 unless something is badly wrong)."""
    return asyncio.run(_run(settings or Settings(), fast, llm_summaries, keep, echo))


async def _run(
    settings: Settings, fast: bool, llm_summaries: int, keep: str | None, echo: Echo
) -> dict[str, int]:
    from ..llm.registry import load_llm
    from ..runtime import ContextMem

    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="contextmem-demo-") as tmp:
        root = Path(keep or tmp)
        s = settings
        for key, value in {**DEMO_SETTINGS, "workspace": str(root), "store": ""}.items():
            s = s.with_value(key, value)
        local = None if fast else BoundedLLM(load_llm(s.model), llm_summaries)
        runtime = await ContextMem.open(s, llm=local or ScriptedLLM(), memory=True)
        demo = Demo(runtime, local, echo)
        if local is not None:
            # Load the weights now, in the foreground: llama.cpp silences stdout while it loads (by
            # redirecting the file descriptor), which would swallow lines printed meanwhile.
            loading = time.monotonic()
            await local.inner.complete([UserMessage("Say ok.")], max_tokens=1)
            echo(f"loaded {local.name} in {time.monotonic() - loading:.0f}s")
        echo(f"contextmem demo · workspace {root}")
        echo(
            f"window {s.context_window:,} tokens, output reserve {s.max_tokens}, "
            f"max turns {s.agent_max_context_turns}"
        )
        echo(
            "summaries: "
            + (f"{local.name}, at most {llm_summaries} calls" if local else "extractive (--fast)")
        )
        try:
            sessions = demo.conversation["sessions"]
            for number, session in enumerate(sessions):
                await demo.session(session, fold=number == len(sessions) - 1)
            await demo.questions()
        finally:
            await runtime.close()
        demo.memory_files()
        demo.final_table(time.monotonic() - started)
    return {**{key: demo.totals[key] for key in REPORTED}, "llm_summaries": local.used if local else 0}


class Demo:
    """The demo's state: the runtime, the scripted assistant and tools, and the running totals."""

    def __init__(self, runtime: ContextMem, local: BoundedLLM | None, echo: Echo) -> None:
        self.runtime = runtime
        self.local = local
        self.echo = echo
        self.conversation = load_conversation()
        self.tools = ScriptedTools()
        self.answerer = local.inner if local else None
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
            self.assistant.script = turn_script(turn)
            self.assistant.replies.clear()
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
        agent = await self._agent("thu-questions", fold=True)
        transcript: list[Message] = []
        for number, q in enumerate(self.conversation["questions"], start=1):
            self.assistant.script = question_script(number, q, self.answerer)
            self.assistant.replies.clear()
            self.echo(f"Q: {q['ask']}")
            parts: list[str] = []
            found = False
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
        files = [directory / "MEMORY.md", *sorted((directory / "memory").glob("*.md"))]
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
            ("local-model summary calls", f"{local.used} ({local.seconds:.0f}s)" if local else "0 (--fast)"),
            ("runtime", f"{seconds:.0f}s"),
        ]
        width = max(len(k) for k, _ in rows)
        self.echo("")
        for key, value in rows:
            self.echo(f"{key:<{width}}  {value}")
        self.echo(f"lost: {t['lost']}")
