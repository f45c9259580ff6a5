"""What a compacted view keeps: answers still present, and the baselines to beat at the same cost.

Pure functions over texts and messages. A question is *kept* when its answer string is in the view,
case-insensitively, with whitespace normalised (so a line break in the summary does not hide an answer).
The baselines spend the same token budget as the view on the raw transcript: the most recent messages,
and every n-th message (n as small as the budget allows, the newest message always included).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..messages import Message, text_of
from ..summarize.ledger import TextCounter

__all__ = ["KeptAnswers", "every_nth", "found_answers", "kept_answers", "most_recent", "normalise"]


def normalise(text: str) -> str:
    """Lower case, every run of whitespace one space."""
    return " ".join(text.lower().split())


@dataclass(frozen=True, slots=True)
class KeptAnswers:
    """How many of ``total`` answers a view keeps, and the view's tokens."""

    kept: int
    total: int
    tokens: int

    @property
    def share(self) -> float:
        return self.kept / self.total if self.total else 0.0


def kept_answers(view: str, answers: Sequence[str], tokens: int) -> KeptAnswers:
    """How many ``answers`` occur in ``view`` (see the module docstring); empty answers never count."""
    text = normalise(view)
    kept = sum(1 for a in answers if normalise(a) and normalise(a) in text)
    return KeptAnswers(kept, len(answers), tokens)


def found_answers(view: str, found: Sequence[str], answers: Sequence[str], tokens: int) -> KeptAnswers:
    """How many ``answers`` occur in ``view`` or in what was found for their own question (``found[i]``
    for ``answers[i]``: e.g. the memory search hits for the i-th question)."""
    text = normalise(view)
    kept = sum(
        1
        for a, extra in zip(answers, found, strict=True)
        if (needle := normalise(a)) and (needle in text or needle in normalise(extra))
    )
    return KeptAnswers(kept, len(answers), tokens)


def _texts(messages: Sequence[Message]) -> list[str]:
    return [text_of(m.content) for m in messages]


def most_recent(messages: Sequence[Message], budget: int, counter: TextCounter) -> tuple[str, int]:
    """The newest messages whose texts fit ``budget`` tokens together: (their text, their tokens)."""
    kept: list[str] = []
    spent = 0
    for text in reversed(_texts(messages)):
        cost = counter.count_text(text)
        if spent + cost > budget:
            break
        kept.insert(0, text)
        spent += cost
    return "\n".join(kept), spent


def every_nth(messages: Sequence[Message], budget: int, counter: TextCounter) -> tuple[str, int]:
    """Every n-th message, counted back from the newest, for the smallest n whose pick fits ``budget``:
    (their text, their tokens). With nothing that fits, ``("", 0)``."""
    texts = _texts(messages)
    costs = [counter.count_text(t) for t in texts]
    for n in range(1, len(texts) + 1):
        picked = range(len(texts) - 1, -1, -n)
        spent = sum(costs[i] for i in picked)
        if spent <= budget:
            return "\n".join(texts[i] for i in sorted(picked)), spent
    return "", 0
