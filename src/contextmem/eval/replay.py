"""Replay a recorded conversation through the engine, exactly as an agent would have sent it.

Every assistant message in the transcript marks one model call: before it, the engine builds the request
(offloading, trimming and summarising as needed) and the request's regions are measured; then the
assistant message and its tool results are appended. After each turn ``end_turn`` runs, as in the agent.

Every call's request is also compared with the previous one, as it is sent, for the prompt cache
(:mod:`.cache`): shared prefix tokens, append-only or why the prefix broke, billed-equivalent
tokens; per turn (``TurnReport.cache``) and in total (``ReplayReport.cache``). ``on_request`` sees each
request as sent, e.g. to dump it (``contextmem replay --dump-requests``).

At the end :func:`count_lost` compares the transcript, message by message, with what the session still
holds plus what the dialog archive holds: the proof that nothing was lost.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

from ..budget import turn_starts
from ..engine import ContextEngine, EngineEvent
from ..errors import MessageFormatError, UsageError, one_line
from ..jsonl import messages_from_jsonl
from ..llm.base import ToolSpec
from ..messages import AssistantMessage, Message, SystemMessage, text_of
from .prompt_cache import CacheTally, CallCache, WireRequest, canonical, compare, tally, wire_request

__all__ = ["ReplayReport", "TurnReport", "count_lost", "load_tools", "load_transcript", "replay"]


@dataclass(frozen=True, slots=True)
class TurnReport:
    """One turn of a replay. Token regions are those of the turn's largest request."""

    turn: int
    messages: int
    calls: int
    system: int
    summary: int
    history: int
    tool_defs: int
    max_tokens: int
    prompt: int
    sent: int  # prompt tokens over all of this turn's calls
    full: int  # what the same calls would have cost sending the whole transcript so far
    compactions: int
    offloads: int
    archived: int  # messages that left the context during this turn
    within_budget: bool
    cache: CacheTally = field(default_factory=CacheTally)  # this turn's calls against their predecessors


@dataclass(slots=True)
class ReplayReport:
    context_window: int
    max_tokens: int
    turns: list[TurnReport] = field(default_factory=list)
    messages: int = 0
    lost: int = 0
    live: int = 0
    archived_total: int = 0
    calls: list[CallCache] = field(default_factory=list)  # every call's cache figures, in order

    @property
    def cache(self) -> CacheTally:
        return tally(self.calls)

    def total(self, name: Literal["sent", "full", "compactions", "offloads"]) -> int:
        """One of the turns' counts, summed over the replay."""
        return sum(getattr(t, name) for t in self.turns)

    def to_dict(self) -> dict[str, Any]:
        return {
            "context_window": self.context_window,
            "max_tokens": self.max_tokens,
            "messages": self.messages,
            "turns": [{**asdict(t), "cache": t.cache.to_dict()} for t in self.turns],
            "totals": {
                "turns": len(self.turns),
                "compactions": self.total("compactions"),
                "offloads": self.total("offloads"),
                "archived": self.archived_total,
                "live": self.live,
                "tokens_sent": self.total("sent"),
                "tokens_full_history": self.total("full"),
            },
            "cache": self.cache.to_dict(),
            "calls": [{"prompt": c.prompt, "shared": c.shared, "kind": c.kind} for c in self.calls],
            "lost": self.lost,
        }


def load_transcript(path: str | Path, *, max_bytes: int | None = None) -> tuple[str, list[Message]]:
    """An OpenAI-format JSONL transcript (``-``: stdin): (system prompt, the other messages).

    Read by :func:`~contextmem.jsonl.messages_from_jsonl`: blank lines are skipped, a BOM is fine, and a
    line that cannot be read or stored (or, given ``max_bytes``, is over it) raises
    :class:`~contextmem.errors.JsonlLineError` naming it.
    """
    messages = messages_from_jsonl(path, what="transcript", max_bytes=max_bytes)
    system = "\n\n".join(text_of(m.content) for m in messages if isinstance(m, SystemMessage))
    return system, [m for m in messages if not isinstance(m, SystemMessage)]


def load_tools(path: str | Path) -> list[ToolSpec]:
    """Tool definitions (a JSON list, each in a form :meth:`ToolSpec.of` reads: OpenAI or Anthropic) as
    specs. A file that is not UTF-8 JSON holding a list, or a bad entry, is a :class:`MessageFormatError`
    naming the file (and the line and column, or the entry)."""
    name = one_line(str(path), 200)  # a file name is the user's text too: shown printable
    fix = 'give a JSON list of tool definitions: [{"type": "function", "function": {"name": ...}}, ...]'
    try:
        tools = json.loads(Path(path).read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise MessageFormatError(name, f"is not UTF-8 text (byte {exc.start})", fix) from None
    except json.JSONDecodeError as exc:
        at = f"{name}:{exc.lineno}:{exc.colno}"
        raise MessageFormatError(at, f"is not JSON ({exc.msg})", fix) from None
    except RecursionError:
        raise MessageFormatError(name, "is JSON nested too deeply to read", fix) from None
    if not isinstance(tools, list):
        kind = {dict: "an object", str: "a string", bool: "true or false", type(None): "null"}.get(
            type(tools), "a number"
        )
        raise MessageFormatError(name, f"holds {kind}, not a list of tool definitions", fix)
    return [ToolSpec.of(tool, f"{name}: tools[{i}]") for i, tool in enumerate(tools)]


def _groups(turn: Sequence[Message]) -> list[list[Message]]:
    """A turn as appended: the leading user part, then each assistant message with its tool results."""
    out: list[list[Message]] = []
    for m in turn:
        if isinstance(m, AssistantMessage) or not out:
            out.append([m])
        else:
            out[-1].append(m)
    return out


async def replay(
    engine: ContextEngine,
    transcript: Sequence[Message],
    *,
    system_prompt: str = "",
    tools: Sequence[ToolSpec] = (),
    on_turn: Callable[[TurnReport], None] | None = None,
    on_request: Callable[[int, int, WireRequest], None] | None = None,
) -> ReplayReport:
    """Replay ``transcript`` into ``engine`` (a new, empty session); see the module docstring.
    ``on_request(call, turn, request)`` (both numbered from 1) runs for each request before it is used."""
    if engine.history.messages or (await engine.verify()).appended:
        raise UsageError(f"session {engine.session_id!r} is not empty. Fix: replay into a new session id")
    counts: dict[str, int] = {"offload": 0, "compaction": 0, "archived": 0}

    def listen(event: EngineEvent) -> None:
        if event.kind == "offload":
            counts["offload"] += 1
        elif event.kind == "compaction_finished" and event.data.get("archived"):
            counts["compaction"] += 1
            counts["archived"] += int(event.data["archived"])

    engine.subscribe(listen)
    report = ReplayReport(engine.window.context_window, engine.window.max_tokens)
    starts = [*turn_starts(transcript), len(transcript)]
    if starts[0] != 0:
        starts.insert(0, 0)
    fixed = engine.counter.count_text(system_prompt) + engine.counter.count_tools(tools)
    full_so_far = fixed
    previous: WireRequest | None = None
    for number, (a, b) in enumerate(pairwise(starts), start=1):
        before = dict(counts)
        biggest = None
        sent = full = calls = 0
        turn_calls: list[CallCache] = []
        for group in _groups(transcript[a:b]):
            if isinstance(group[0], AssistantMessage):
                request = await engine.build(system_prompt, tools)
                est = request.estimate
                calls += 1
                wire = wire_request(request.messages, request.tools, engine.counter)
                if on_request is not None:
                    on_request(len(report.calls) + 1, number, wire)
                turn_calls.append(compare(previous, wire))
                report.calls.append(turn_calls[-1])
                previous = wire
                sent += est.prompt
                full += full_so_far
                if biggest is None or est.prompt > biggest.prompt:
                    biggest = est
            await engine.add(*group)
            full_so_far += sum(engine.counter.count_messages(group))
        await engine.end_turn()
        est = biggest or engine.estimate(system_prompt, tools)
        turn = TurnReport(
            turn=number,
            messages=b - a,
            calls=calls,
            system=est.system,
            summary=est.summary,
            history=est.history,
            tool_defs=est.tool_defs,
            max_tokens=est.max_tokens,
            prompt=est.prompt,
            sent=sent,
            full=full,
            compactions=counts["compaction"] - before["compaction"],
            offloads=counts["offload"] - before["offload"],
            archived=counts["archived"] - before["archived"],
            within_budget=est.prompt + est.max_tokens <= est.context_window,
            cache=tally(turn_calls),
        )
        report.turns.append(turn)
        if on_turn is not None:
            on_turn(turn)
    await engine.wait_idle()
    report.messages = len(transcript)
    report.lost = await count_lost(engine, transcript)
    report.live = len(engine.history)
    report.archived_total = (await engine.verify()).archived
    return report


async def count_lost(engine: ContextEngine, transcript: Iterable[Message], first_seq: int = 1) -> int:
    """Transcript messages found neither live in the session nor in the archive (in their original form:
    the dialog files, or a shared store's own rows), plus any the engine's own
    :meth:`~ContextEngine.verify` reports missing."""
    store = engine.store
    kept = await store.messages(engine.namespace, engine.session_id, state="all" if store.shared else "live")
    found = (
        {} if store.shared else {a.seq: canonical(a.message) for a in engine.archive.read(engine.session_id)}
    )
    found.update((s.seq, canonical(s.message)) for s in kept)
    lost = {seq for seq, m in enumerate(transcript, start=first_seq) if found.get(seq) != canonical(m)}
    lost.update((await engine.verify()).missing)
    return len(lost)
