"""What the current turn's tool results need: cut rules compared by window.

A tool-heavy agent session (file reads, logs, JSON, test output, Chinese prose: results of 5-60 KB, some
steps with two results, some turns with three steps; generators of ``evals/datasets/agent_transcript.py``) is
replayed through the engine (:func:`contextmem.eval.replay.replay`: one ``build`` before each assistant
message, no LLM, so summaries are extractive) at several windows, once per cut rule:

* **share** (main before this change): every result, the current turn's too, at most
  ``min(pruning_recent_msg_max_bytes, tool_result_budget_share x 3 bytes x history budget)``;
* **fit** (now): the current turn's results at most ``pruning_recent_msg_max_bytes`` or what the window
  can hold after the fixed parts and the turn's other messages, whichever is smaller
  (:func:`contextmem.compaction.offload.current_turn_caps`); past results as under **share**;
* **fit-half**: as **fit**, with half the room (``FIT_MARGIN`` 0.45 instead of 0.9);
* **fit-past-uncapped**: as **fit**, and past results without the budget share (only 50,000 bytes /
  20,000 chars for the newest two, 3,000 bytes for older ones).

Every result of 5 KB or more has an answer-bearing line (``ANSWER-<n>: ...``) at 2%, 25%, 50%, 75% or
98% of its text. Reported per window and rule: calls; cache ratio (prefix shared with the previous
request / prompt tokens, :mod:`contextmem.eval.prompt_cache`); prompt tokens sent over all calls and
their billed-equivalent (misses + 0.1 x cached); of the answers, how many are in the very next request
(the one that reads the result), how many only in the offloaded file (``read_file`` away: one more call
at least) or nowhere; how many results of 5 KB+ that request keeps whole, and the median bytes it keeps;
emergency cuts (the newest turn alone over budget) and requests over the window (prompt + reserve >
window; must be 0). Writes ``evals/results/current_turn.json`` and prints a markdown table.

    python -m evals.current_turn [--turns 24] [--seeds 1,2] [--windows 8192,16000,32000,50000,128000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.bench_cache import with_settings
from bench.report import stamp
from contextmem.compaction import offload
from contextmem.engine import ContextEngine, EngineEvent, Request
from contextmem.eval.prompt_cache import CallCache, WireRequest, compare, tally, wire_request
from contextmem.eval.replay import load_tools
from contextmem.messages import (
    AssistantMessage,
    Message,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
    text_of,
)
from contextmem.settings import Settings
from contextmem.testing import InMemorySessionStore
from evals.datasets import agent_transcript as at

RESULTS = Path(__file__).parent / "results" / "current_turn.json"
POSITIONS = (0.02, 0.25, 0.5, 0.75, 0.98)
BIG = 5_000  # a result this large carries an answer line
KINDS: list[tuple[str, Callable[[random.Random, int, str], str]]] = [
    ("read_file", at.code_output),
    ("query_db", at.json_output),
    ("grep", at.log_output),
    ("run_tests", at.test_output),
    ("web_fetch", at.chinese_prose),
]


@dataclass(frozen=True, slots=True)
class Answer:
    call_id: str  # the result that holds it; the request right after that result must carry it
    needle: str
    position: float
    size: int  # bytes of the whole result


def _result(r: random.Random, n: int, tool: str, body: Callable[..., str], size: int) -> tuple[str, str]:
    """A result of about ``size`` bytes and its answer line's needle (empty for a small result)."""
    text = body(r, size, r.choice(at.MODULES))
    if len(text.encode()) < BIG:
        return text, ""
    needle = f"ANSWER-{n}: {tool} checksum {r.getrandbits(48):012x}"
    lines = text.split("\n")
    at_line = min(int(len(lines) * POSITIONS[n % len(POSITIONS)]), len(lines))
    lines[at_line:at_line] = [needle]
    return "\n".join(lines), needle


def conversation(turns: int, seed: int) -> tuple[list[list[Message]], list[Answer]]:
    """A deterministic tool-heavy session: each turn a question, 1 step (some 2 or 3), 1 result per step
    (some 2), results 5-60 KB (a fifth of them 0.2-3 KB), then a reply. Returns the messages as the agent
    adds them (a user message; an assistant message with its results; a reply) and the answers."""
    r = random.Random(seed)
    steps: list[list[Message]] = []
    answers: list[Answer] = []
    n = 0
    for turn in range(1, turns + 1):
        ask = r.choice(at.EN_ASKS if turn % 3 else at.ZH_ASKS).format(mod=r.choice(at.MODULES))
        steps.append([UserMessage(f"{ask} (#{turn})")])
        for _ in range(r.choices([1, 2, 3], weights=[70, 20, 10])[0]):
            calls, results = [], []
            for _ in range(2 if r.random() < 0.2 else 1):
                n += 1
                tool, body = r.choice(KINDS)
                size = r.randint(200, 3_000) if r.random() < 0.2 else r.randint(5_000, 60_000)
                text, needle = _result(r, n, tool, body, size)
                call = ToolCall(f"call_{seed}_{n}", tool, json.dumps({"n": n}))
                calls.append(call)
                results.append(ToolMessage(call.id, text, name=tool))
                if needle:
                    answers.append(Answer(call.id, needle, POSITIONS[n % len(POSITIONS)], len(text.encode())))
            thought = r.choice(["Let me check.", None, "先看一下。"])
            steps.append([AssistantMessage(thought, tool_calls=tuple(calls)), *results])
        reply = r.choice(at.EN_REPLIES).format(mod=r.choice(at.MODULES))
        steps.append([AssistantMessage(f"{reply} (#{turn})")])
    return steps, answers


# --- the rules -----------------------------------------------------------------------------------

_past_cap = offload.past_cap


def _share_caps(
    history: Sequence[Message],
    counts: Sequence[int],
    start: int,
    budget: int,
    settings: Settings,
    *,
    unseen: int | None = None,
    cut_read: bool = False,
) -> dict[int, int]:
    cap = min(settings.pruning_recent_msg_max_bytes, _past_cap(budget, settings))
    return {i: cap for i in range(start, len(history)) if isinstance(history[i], ToolMessage)}


RULES: dict[str, dict[str, Any]] = {
    "share": {"current_turn_caps": _share_caps},
    "fit": {},
    "fit-half": {"FIT_MARGIN": 0.45},
    "fit-past-uncapped": {"past_cap": lambda budget, settings: 1 << 62},
}


@contextmanager
def rule(name: str) -> Iterator[None]:
    patches = RULES[name]
    saved = {k: getattr(offload, k) for k in patches}
    for k, v in patches.items():
        setattr(offload, k, v)
    try:
        yield
    finally:
        for k, v in saved.items():
            setattr(offload, k, v)


# --- one run -------------------------------------------------------------------------------------


def settings_for(window: int, overrides: Sequence[str] = ()) -> Settings:
    """The default settings at ``window`` (``overrides``: ``KEY=VALUE`` changes, checked as ``config set``
    checks them); 8,192 is the local model's window and reply (1,024) as
    :func:`contextmem.budget.fit_window` fits them."""
    extra: dict[str, Any] = {"max_tokens": 1024} if window <= 8192 else {}
    settings = Settings(context_window=window, agent_max_context_tokens=max(window, 50_000), **extra)
    return with_settings(settings, overrides)


MAX_READS = 30
_NOTICE = re.compile(r"\n\n\[\.\.\. \d+ of \d+ characters omitted\. The full output is saved at (\S+) ")


def _tool_texts(request: Request) -> dict[str, str]:
    return {m.tool_call_id: text_of(m.content) for m in request.messages if isinstance(m, ToolMessage)}


class Run:
    """One session under one rule and window: the agent's calls, and its reads of offloaded results."""

    def __init__(self, engine: ContextEngine, files: Path, tools: Sequence[ToolSpec]) -> None:
        self.engine, self.files, self.tools = engine, files, tools
        self.previous: WireRequest | None = None
        self.calls: list[CallCache] = []

    async def call(self) -> Request:
        request = await self.engine.build(at.SYSTEM_PROMPT, self.tools)
        wire = wire_request(request.messages, request.tools, self.engine.counter)
        self.calls.append(compare(self.previous, wire))
        self.previous = wire
        return request

    async def read_until(self, answer: Answer, cut: str) -> tuple[int, bool]:
        """What an agent does when the answer is not in what it was shown: ``read_file`` the offloaded
        text from the end of the head it saw, 200 lines at a time; a chunk that comes back cut too
        shows how many lines fit, and the next read asks for that many. Returns (reads, found)."""
        notice = _NOTICE.search(cut)
        if notice is None:
            return 0, False
        lines = (self.files / notice.group(1)).read_text(encoding="utf-8").split("\n")
        pointer, limit = cut[: notice.start()].count("\n"), 200
        for k in range(1, MAX_READS + 1):
            chunk = "\n".join(lines[pointer : pointer + limit])
            call = ToolCall(f"read_{answer.call_id}_{k}", "read_file", json.dumps({"offset": pointer + 1}))
            await self.engine.add(
                AssistantMessage(None, tool_calls=(call,)), ToolMessage(call.id, chunk, name="read_file")
            )
            shown = _tool_texts(await self.call()).get(call.id, "")
            if answer.needle in shown:
                return k, True
            cut_again = _NOTICE.search(shown)
            if cut_again is None:
                pointer += limit
            else:
                seen = shown[: cut_again.start()].count("\n")
                pointer, limit = pointer + max(seen, 1), max(5, seen)
            if pointer >= len(lines):
                return k, False
        return MAX_READS, False


async def run(
    window: int,
    rule_name: str,
    steps: list[list[Message]],
    answers: list[Answer],
    overrides: Sequence[str] = (),
) -> dict[str, Any]:
    tools = load_tools(_tools_file())
    by_call = {a.call_id: a for a in answers}
    shown: dict[str, tuple[int, int]] = {}  # call id -> (bytes kept in the request that reads it, reads)
    direct = found_later = 0
    emergencies = 0

    def listen(event: EngineEvent) -> None:
        nonlocal emergencies
        emergencies += (
            event.kind == "compaction_started" and event.data.get("reason") == "proactive_emergency"
        )

    with tempfile.TemporaryDirectory(prefix="bench-turn-") as tmp, rule(rule_name):
        engine = await ContextEngine.open(
            "s", store=InMemorySessionStore(), settings=settings_for(window, overrides), workspace_dir=tmp
        )
        engine.subscribe(listen)
        agent = Run(engine, Path(tmp), tools)
        waiting: list[Answer] = []  # answers in the results just added
        for k, step in enumerate(steps):
            if isinstance(step[0], UserMessage) and k:
                await engine.end_turn()
            if isinstance(step[0], AssistantMessage):
                texts = _tool_texts(await agent.call())
                for a in waiting:
                    text = texts.get(a.call_id, "")
                    kept = len(text.encode())
                    if a.needle in text:
                        direct += 1
                        shown[a.call_id] = (kept, 0)
                        continue
                    reads, found = await agent.read_until(a, text)
                    reads = max(reads, 1)  # a failed search still made one call (or found no file)
                    found_later += found
                    shown[a.call_id] = (kept, reads)
            await engine.add(*step)
            waiting = [
                by_call[m.tool_call_id]
                for m in step
                if isinstance(m, ToolMessage) and m.tool_call_id in by_call
            ]
        await engine.end_turn()
        await engine.wait_idle()
        reserve = engine.window.max_tokens
        await engine.close()
    t = tally(agent.calls)
    reads = sum(r for _, r in shown.values())
    return {
        "window": window,
        "reserve": reserve,
        "rule": rule_name,
        "calls": t.calls,
        "read_file_calls": reads,
        "cache_ratio": round(t.cache_ratio, 4),
        "prompt_tokens_sent": t.prompt,
        "billed_equivalent": round(t.billed),
        "answers": len(answers),
        "answers_in_request": direct,
        "answers_after_read_file": found_later,
        "answers_not_found": len(answers) - direct - found_later,
        "answers_in_request_by_position": {
            str(p): sum(a.position == p and shown.get(a.call_id, (0, 1))[1] == 0 for a in answers)
            for p in POSITIONS
        },
        "kept_bytes": [shown.get(a.call_id, (0, 0))[0] for a in answers],
        "result_bytes": [a.size for a in answers],
        "emergencies": emergencies,
        "over_window": sum(c.prompt + reserve > window for c in agent.calls),
    }


_TOOLS_DIR = tempfile.mkdtemp(prefix="bench-turn-tools-")


def _tools_file() -> Path:
    path = Path(_TOOLS_DIR) / "tools.json"
    if not path.exists():
        defs = [at.tool_definition(name, f"the {name} tool", n="a number") for name, _ in KINDS]
        path.write_text(json.dumps(defs), encoding="utf-8")
    return path


def markdown(rows: list[dict[str, Any]]) -> str:
    out = [
        "| window (reserve) | rule | calls (read_file) | cache ratio | prompt tokens sent | billed-eq "
        "| answers in the next request | after read_file | not found | kept whole | median bytes kept "
        "| emergencies | over window |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        out.append(
            f"| {r['window']:,} ({r['reserve']:,}) | {r['rule']} | {r['calls']} ({r['read_file_calls']}) | "
            f"{r['cache_ratio']:.1%} | {r['prompt_tokens_sent']:,} | {r['billed_equivalent']:,} | "
            f"{r['answers_in_request']}/{r['answers']} | {r['answers_after_read_file']} | "
            f"{r['answers_not_found']} | {r['results_kept_whole']} | "
            f"{r['median_kept_bytes']:,} of {r['median_result_bytes']:,} | "
            f"{r['emergencies']} | {r['over_window']} |"
        )
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=24)
    parser.add_argument("--seeds", default="1,2")
    parser.add_argument("--windows", default="8192,16000,32000,50000,128000")
    parser.add_argument("--rules", default=",".join(RULES))
    parser.add_argument("--out", default=str(RESULTS), help="the JSON file to write ('' = none)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a setting changed from its default"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for window in (int(w) for w in args.windows.split(",")):
        for name in args.rules.split(","):
            per_seed = []
            for seed in (int(s) for s in args.seeds.split(",")):
                steps, answers = conversation(args.turns, seed)
                per_seed.append(asyncio.run(run(window, name, steps, answers, args.set)))
            rows.append(merge(per_seed))
            print(f"{window} {name}: done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    doc = {**stamp(time.perf_counter() - started), "turns": args.turns, "seeds": args.seeds, "rows": rows}
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(markdown(rows))
    return 0


def merge(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Seeds summed (ratios weighted by prompt tokens, the median of medians)."""
    first = rows[0]
    sent = sum(r["prompt_tokens_sent"] for r in rows)
    merged = {k: first[k] for k in ("window", "reserve", "rule")}
    for k in (
        "calls",
        "read_file_calls",
        "prompt_tokens_sent",
        "billed_equivalent",
        "answers",
        "answers_in_request",
        "answers_after_read_file",
        "answers_not_found",
        "emergencies",
        "over_window",
    ):
        merged[k] = sum(r[k] for r in rows)
    merged["cache_ratio"] = round(sum(r["cache_ratio"] * r["prompt_tokens_sent"] for r in rows) / sent, 4)
    merged["mean_prompt"] = round(sent / merged["calls"])
    merged["answers_in_request_by_position"] = {
        p: sum(r["answers_in_request_by_position"][p] for r in rows)
        for p in first["answers_in_request_by_position"]
    }
    kept = [k for r in rows for k in r["kept_bytes"]]
    whole = sum(k >= b for r in rows for k, b in zip(r["kept_bytes"], r["result_bytes"], strict=True))
    merged["results_kept_whole"] = whole
    merged["median_kept_bytes"] = int(statistics.median(kept)) if kept else 0
    merged["median_result_bytes"] = int(statistics.median(b for r in rows for b in r["result_bytes"]))
    return merged


if __name__ == "__main__":
    raise SystemExit(main())
