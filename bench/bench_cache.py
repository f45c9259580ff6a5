"""Prompt-cache stability: how much of each request is a prefix of the previous one.

For each seed, a long agent transcript (``evals/datasets/agent_transcript.py``: tool calls, outputs up to
200 KB, English and Chinese, ~20 facts planted in the first 30 turns) is replayed through three
strategies, and every request is compared with the previous one as it is sent
(:mod:`contextmem.eval.prompt_cache`: tool definitions, then OpenAI-form messages, message granularity;
tokens of the o200k counter):

* **contextmem**: a ``ContextMem`` session with default settings at the window, replayed as
  ``contextmem replay`` replays it (:func:`contextmem.eval.replay.replay`; a fresh workspace and SQLite
  store; no LLM, so summaries are extractive);
* **trim_messages**: a sliding window, langchain-core's real ``trim_messages`` (``strategy="last"``,
  ``start_on="human"``, system kept) with the same counter and the same history budget
  (window - output reserve - tool definitions - reply priming);
* **full history**: every message, never compacted.

Reported per strategy: calls, mean prompt tokens, first-sent tokens per call (no cache serves them),
cache ratio (shared prefix / prompt tokens),
billed-equivalent per call (misses + 0.1 x hits), breaks (the share of calls whose request is not the
previous one plus new messages, and their reasons), requests over the window
(prompt + output reserve > window), and facts: in the final request's context for all; for contextmem also
reachable anywhere it keeps them (final request incl. summary, dialog archive, offloaded tool results,
memory files) and ``lost``. Writes ``bench/results/cache.md`` (date, machine load).

    python bench/bench_cache.py [--turns 300] [--seeds 1,2] [--window 16000] [--transcripts DIR] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from bench_budget import to_langchain
from report import run_line

from contextmem import ContextMem, Settings
from contextmem.errors import ConfigError
from contextmem.eval.prompt_cache import CallCache, WireRequest, compare, tally, wire_request
from contextmem.eval.replay import ReplayReport, load_tools, load_transcript, replay
from contextmem.messages import AssistantMessage, Message, SystemMessage, ToolSpec
from contextmem.tokens import MessageCounter, get_counter
from contextmem.tokens.counter import REPLY_PRIMING
from evals.datasets import agent_transcript

RESULTS = Path(__file__).parent / "results" / "cache.md"


def transcript_path(folder: Path, turns: int, seed: int) -> Path:
    """The transcript for ``(turns, seed)`` in ``folder``, generated unless it is already there."""
    path = folder / f"agent-{turns}t-seed{seed}.jsonl"
    if not path.exists():
        agent_transcript.write(path, agent_transcript.generate(turns, seed))
    return path


def _request_text(messages: Sequence[dict[str, Any]]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def _workspace_text(root: Path) -> str:
    """Every text file the workspace keeps (dialog archive, offloaded results, memory), SQLite aside."""
    parts = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and ".sqlite" not in p.name and not p.name.endswith(("-wal", "-shm")):
            parts.append(p.read_text(encoding="utf-8", errors="replace"))
    return "\n".join(parts)


def first_sent(requests: Sequence[WireRequest]) -> int:
    """Tokens of messages each request sent for the first time (not in the request before it): what no
    cache can serve, whatever a strategy keeps (a new tool result, a cut form of an older one, a new
    summary)."""
    total, seen = 0, set[str]()
    for request in requests:
        total += sum(t for k, t in zip(request.keys, request.message_tokens, strict=True) if k not in seen)
        seen = set(request.keys)
    return total


def _row(
    name: str,
    calls: list[CallCache],
    window: int,
    reserve: int,
    first: int,
    **extra: Any,
) -> dict[str, Any]:
    t = tally(calls)
    return {
        "strategy": name,
        "calls": t.calls,
        "mean_prompt": t.prompt / t.calls if t.calls else 0.0,
        "first_sent_per_call": first / t.calls if t.calls else 0.0,
        "cache_ratio": t.cache_ratio,
        "billed_per_call": t.billed_per_call,
        "breaks": dict(t.breaks),
        "over_window": sum(c.prompt + reserve > window for c in calls),
        **extra,
    }


def with_settings(settings: Settings, overrides: Sequence[str]) -> Settings:
    """``settings`` with each ``KEY=VALUE`` of ``overrides`` applied, checked as ``config set`` checks it."""
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set {item!r}: not KEY=VALUE. Fix: e.g. --set tokenizer=o200k_base")
        try:
            settings = settings.with_value(key.strip(), value.strip())
        except ConfigError as exc:
            raise SystemExit(f"--set {item!r}: {exc}") from None
    return settings


async def _replay(
    path: Path, window: int, overrides: Sequence[str] = ()
) -> tuple[ReplayReport, str, str, int]:
    """The transcript replayed through ``ContextMem`` (no model: extractive summaries) in a fresh workspace
    with the default settings (``overrides``: ``KEY=VALUE`` changes); the report, the final request's
    text, every text file the workspace kept, and :func:`first_sent`."""
    system, transcript = load_transcript(path)
    tools = load_tools(agent_transcript.sidecars(path)[1])
    requests: list[WireRequest] = []
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as tmp:
        ws = Path(tmp) / "ws"
        settings = with_settings(Settings(workspace=str(ws), model="none", context_window=window), overrides)
        mem = await ContextMem.open(settings, memory=False)
        try:
            engine = await mem.session("replay")
            report = await replay(
                engine,
                transcript,
                system_prompt=system,
                tools=tools,
                on_request=lambda _call, _turn, request: requests.append(request),
            )
        finally:
            await mem.close()
        final = _request_text(requests[-1].to_json()["messages"])
        return report, final, final + "\n" + _workspace_text(ws), first_sent(requests)


def run_contextmem(
    path: Path, facts: list[dict[str, Any]], window: int, overrides: Sequence[str] = ()
) -> dict[str, Any]:
    """The engine's replay of ``path`` (as ``contextmem replay`` runs it); the row plus ``max_tokens``."""
    report, final, kept, first = asyncio.run(_replay(path, window, overrides))
    return _row(
        "contextmem",
        report.calls,
        window,
        report.max_tokens,
        first,
        lost=report.lost,
        facts_context=sum(f["needle"] in final for f in facts),
        facts_reachable=sum(f["needle"] in kept for f in facts),
        max_tokens=report.max_tokens,
    )


def _peer(
    name: str,
    pick: Any,
    system: str,
    transcript: list[Message],
    tools: list[ToolSpec],
    counter: MessageCounter,
    facts: list[dict[str, Any]],
    window: int,
    reserve: int,
) -> dict[str, Any]:
    """A peer strategy: ``pick(i)`` is the history sent before transcript message ``i`` (an assistant
    message); the request is the system prompt plus that history."""
    head = [SystemMessage(system)] if system else []
    previous: WireRequest | None = None
    calls: list[CallCache] = []
    requests: list[WireRequest] = []
    missing_newest = 0
    for i, m in enumerate(transcript):
        if not isinstance(m, AssistantMessage):
            continue
        history = pick(i)
        missing_newest += not history or history[-1] is not transcript[i - 1]
        request = wire_request([*head, *history], tools, counter)
        calls.append(compare(previous, request))
        requests.append(request)
        previous = request
    assert previous is not None
    final = _request_text(previous.to_json()["messages"])
    return _row(
        name,
        calls,
        window,
        reserve,
        first_sent(requests),
        facts_context=sum(f["needle"] in final for f in facts),
        missing_newest=missing_newest,
    )


def run_peers(path: Path, facts: list[dict[str, Any]], window: int, reserve: int) -> list[dict[str, Any]]:
    """The sliding window (langchain-core ``trim_messages``) and the full history on ``path``."""
    from langchain_core.messages import trim_messages

    system, transcript = load_transcript(path)
    tools = load_tools(agent_transcript.sidecars(path)[1])
    counter = MessageCounter(get_counter("auto"))
    tokens = counter.count_messages(transcript)
    budget = window - reserve - counter.count_tools(tools) - REPLY_PRIMING
    budget -= counter.count_messages([SystemMessage(system)])[0] if system else 0
    lc = to_langchain(transcript)
    for k, m in enumerate(lc):
        m.id = str(k)

    def count(msgs: list[Any]) -> int:
        return sum(tokens[int(m.id)] for m in msgs)

    def sliding(i: int) -> list[Message]:
        kept = trim_messages(
            lc[:i], max_tokens=budget, token_counter=count, strategy="last", start_on="human"
        )
        return [transcript[int(m.id)] for m in kept]

    args = (system, transcript, tools, counter, facts, window, reserve)
    return [
        _peer("trim_messages (sliding)", sliding, *args),
        _peer("full history", lambda i: transcript[:i], *args),
    ]


def _breaks(b: dict[str, int], calls: int) -> str:
    """``19.9%: system 81, tool_result_rewritten 13``: the share of calls that break the prefix, by reason."""
    if not b:
        return "none"
    return f"{sum(b.values()) / calls:.1%}: " + ", ".join(f"{k} {v}" for k, v in b.items())


def markdown(rows: list[dict[str, Any]], args: argparse.Namespace, seconds: float, n_facts: int) -> str:
    head = [
        "# Prompt-cache stability",
        "",
        run_line(seconds, args.label),
        "",
        f"`python bench/bench_cache.py --turns {args.turns} --seeds {args.seeds} --window {args.window}"
        + "".join(f" --set {s}" for s in args.set)
        + "`: "
        "generated agent transcripts (evals/datasets/agent_transcript.py), each request compared with the "
        "previous one as sent (tools, then OpenAI-form messages; message granularity; o200k tokens). "
        "Billed-equivalent = misses + 0.1 × prefix hits. First sent = tokens of the messages a request "
        "carries that the request before it did not (new tool results, a cut form, a new summary): no cache "
        "serves them, so billed-eq / call is at least 0.9 × first sent + 0.1 × mean prompt. "
        "Over window = prompt + output reserve > window. "
        f"Facts: of {n_facts} planted in turns 1–30; 'context' = in the final request, 'reachable' adds "
        "the dialog archive, offloaded results and memory files.",
        "",
        "| seed | strategy | calls | mean prompt | first sent / call | cache ratio | billed-eq / call "
        "| calls breaking the prefix | over window | lost | facts context / reachable |",
        "|---|---|--:|--:|--:|--:|--:|---|--:|--:|--:|",
    ]
    body = []
    for r in rows:
        lost = str(r["lost"]) if "lost" in r else "–"
        facts = f"{r['facts_context']} / {r.get('facts_reachable', '–')}"
        over = str(r["over_window"])
        if r.get("missing_newest"):
            over += f" ({r['missing_newest']} without the newest message)"
        body.append(
            f"| {r['seed']} | {r['strategy']} | {r['calls']} | {r['mean_prompt']:,.0f} | "
            f"{r['first_sent_per_call']:,.0f} | "
            f"{r['cache_ratio']:.1%} | {r['billed_per_call']:,.0f} | {_breaks(r['breaks'], r['calls'])} | "
            f"{over} | {lost} | {facts} |"
        )
    return "\n".join(head + body) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--seeds", default="1,2", help="comma-separated transcript seeds (default 1,2)")
    parser.add_argument("--window", type=int, default=16_000)
    parser.add_argument("--transcripts", help="folder for the transcripts (default: a temporary one)")
    parser.add_argument("--out", default=str(RESULTS), help="the markdown file to write ('' = none)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead")
    parser.add_argument("--label", help="what engine was measured (default: the git commit)")
    parser.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="a setting changed from its default"
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    n_facts = 0
    with tempfile.TemporaryDirectory(prefix="bench-cache-t-") as tmp:
        folder = Path(args.transcripts or tmp)
        for seed in (int(s) for s in args.seeds.split(",")):
            path = transcript_path(folder, args.turns, seed)
            facts = json.loads(agent_transcript.sidecars(path)[0].read_text(encoding="utf-8"))
            n_facts = len(facts)
            ours = run_contextmem(path, facts, args.window, args.set)
            peers = run_peers(path, facts, args.window, ours.pop("max_tokens"))
            rows += [{"seed": seed, **r} for r in (ours, *peers)]
            print(f"seed {seed}: done ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    text = markdown(rows, args, time.perf_counter() - started, n_facts)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
    print(json.dumps(rows, ensure_ascii=False, indent=1) if args.json else text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
