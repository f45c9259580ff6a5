"""``contextmem eval compaction TRANSCRIPT --questions QA.jsonl`` — what the compacted view keeps (issue 17).

The transcript (OpenAI-format JSONL) is replayed through a fresh engine with no model, so every
compaction is the extractive one, into a window of ``--context-window`` (default 8,000 tokens, which
leaves a view of at most about 4,000: summary + live history). The view is the next request the model
would be sent; each question's answer is looked for in it (:func:`~contextmem.summarize.recall.kept_answers`)
and, for comparison, in the most recent messages and in every n-th message at the view's token cost.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ..messages import Message, SystemMessage, text_of
from ..settings import Settings
from ..summarize.recall import KeptAnswers, every_nth, kept_answers, most_recent
from .render import table

__all__ = ["CompactionEval", "add_arguments", "evaluate", "load_questions"]

DEFAULT_WINDOW = 8_000


@dataclass(frozen=True, slots=True)
class CompactionEval:
    """Answers kept by the engine's view and by the two baselines at the same token cost."""

    questions: int
    messages: int
    transcript_tokens: int
    view: KeptAnswers
    recent: KeptAnswers
    nth: KeptAnswers
    summary_tokens: int
    lost: int

    def to_dict(self) -> dict[str, object]:
        return {
            **{k: v for k, v in asdict(self).items() if k not in ("view", "recent", "nth")},
            **{name: {**asdict(v), "share": v.share} for name, v in self._rows()},
        }

    def _rows(self) -> list[tuple[str, KeptAnswers]]:
        return [("view", self.view), ("recent", self.recent), ("nth", self.nth)]


def load_questions(path: str | Path) -> list[dict[str, str]]:
    """``{"question": ..., "answer": ...}`` per line; blank lines skipped. Raises ``ValueError`` naming the
    line without a string ``answer``."""
    out = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        item = json.loads(line)
        if not isinstance(item, dict) or not isinstance(item.get("answer"), str):
            raise ValueError(
                f'{path}:{number}: {line[:80]!r} has no string "answer". Fix: one JSON object a line'
            )
        out.append({"question": str(item.get("question", "")), "answer": item["answer"]})
    return out


async def evaluate(
    settings: Settings, transcript: list[Message], answers: list[str], system_prompt: str = ""
) -> CompactionEval:
    """Replay ``transcript`` with no model, then score the next request's view against ``answers``."""
    from ..agent.replay import replay
    from ..engine import ContextEngine
    from ..testing import MemoryStore

    if settings.context_window is None:
        settings = settings.with_value("context_window", DEFAULT_WINDOW)
    with tempfile.TemporaryDirectory(prefix="contextmem-eval-") as tmp:
        settings = settings.with_value("workspace", tmp)
        engine = await ContextEngine.open("eval", store=MemoryStore(), settings=settings, workspace_dir=tmp)
        report = await replay(engine, transcript, system_prompt=system_prompt)
        request = await engine.build(system_prompt)
        await engine.close()
    texts = [text_of(m.content) for m in request.messages]
    if system_prompt and request.messages and isinstance(request.messages[0], SystemMessage):
        texts[0] = texts[0].removeprefix(system_prompt)
    est = request.estimate
    tokens = est.summary + est.history
    counter = engine.counter
    recent_text, recent_tokens = most_recent(transcript, tokens, counter)
    nth_text, nth_tokens = every_nth(transcript, tokens, counter)
    return CompactionEval(
        questions=len(answers),
        messages=len(transcript),
        transcript_tokens=sum(counter.count_text(text_of(m.content)) for m in transcript),
        view=kept_answers("\n".join(texts), answers, tokens),
        recent=kept_answers(recent_text, answers, recent_tokens),
        nth=kept_answers(nth_text, answers, nth_tokens),
        summary_tokens=est.summary,
        lost=report.lost,
    )


def cmd_eval(settings: Settings, args: argparse.Namespace) -> int:
    from ..agent.replay import load_transcript

    system, transcript = load_transcript(args.transcript)
    answers = [q["answer"] for q in load_questions(args.questions)]
    result = asyncio.run(evaluate(settings, transcript, answers, system))
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
        return 0
    rows = [
        ("compacted view (summary + live history)", result.view),
        ("most recent messages, same budget", result.recent),
        ("every n-th message, same budget", result.nth),
    ]
    print(
        f"{result.messages} messages, {result.transcript_tokens:,} tokens, {result.questions} questions; "
        f"summary {result.summary_tokens:,} tokens; lost: {result.lost}"
    )
    cells = [(name, f"{k.tokens:,}", f"{k.kept}/{k.total}", f"{k.share:.1%}") for name, k in rows]
    print(table(cells, ("view", "tokens", "answers kept", "share")))
    return 0


def add_arguments(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``eval compaction TRANSCRIPT --questions QA.jsonl [--json]``."""
    ev = sub.add_parser("eval", help="measure what compaction keeps: answers still in the compacted view")
    kinds = ev.add_subparsers(dest="eval_kind", required=True)
    comp = kinds.add_parser("compaction", help="replay a transcript (no model), check answers in the view")
    comp.add_argument("transcript", help="OpenAI-format JSONL transcript")
    comp.add_argument("--questions", required=True, metavar="QA.jsonl", help='{"question", "answer"} a line')
    comp.add_argument(
        "--context-window", type=int, default=argparse.SUPPRESS, help=f"default {DEFAULT_WINDOW:,}"
    )
    comp.add_argument("--json", action="store_true")
    comp.set_defaults(func=cmd_eval)
