"""What a compacted view keeps: answers still present, and the baselines to beat at the same cost.

Pure functions over texts and messages. A question is *kept* when its answer string is in the view,
case-insensitively, with whitespace normalised (so a line break in the summary does not hide an answer).
With ``partial``, as LoCoMo scores answers, punctuation does not count either, an answer is matched as
whole words, and an answer of several parts ("Paris, Rome and Oslo") earns the share of its parts found
(:func:`answer_credit`).
The baselines spend the same token budget as the view on the raw transcript: the most recent messages,
and every n-th message (n as small as the budget allows, the newest message always included).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..messages import Message, text_of
from ..summarize.ledger import TextCounter

__all__ = [
    "KeptAnswers",
    "answer_credit",
    "answer_parts",
    "every_nth",
    "found_answers",
    "kept_answers",
    "most_recent",
    "normalise",
    "words",
]

_PUNCTUATION = re.compile(r"[^\w\s]|_")
_PART_BREAK = re.compile(r"[,;，；、]|\band\b", re.IGNORECASE)


def normalise(text: str) -> str:
    """Lower case, every run of whitespace one space."""
    return " ".join(text.lower().split())


def words(text: str) -> str:
    """Lower case, punctuation as space, every run of whitespace one space, a space at each end (so a
    phrase is found as whole words: ``f" {phrase} " in words(text)``)."""
    return f" {' '.join(_PUNCTUATION.sub(' ', text.lower()).split())} "


def answer_parts(answer: str) -> list[str]:
    """The parts of an answer, split at commas, semicolons and the word "and", each as :func:`words`
    writes it (stripped); parts with no word left out: ``"Paris, Rome, and Oslo"`` -> paris, rome, oslo."""
    return [p for part in _PART_BREAK.split(answer) if (p := words(part).strip())]


def answer_credit(texts: Sequence[str], answer: str) -> float:
    """The share of ``answer``'s parts (:func:`answer_parts`) found, as whole words, in any of ``texts``
    (each already passed through :func:`words`); 0.0 for an answer with no words."""
    parts = answer_parts(answer)
    found = sum(1 for p in parts if any(f" {p} " in text for text in texts))
    return found / len(parts) if parts else 0.0


@dataclass(frozen=True, slots=True)
class KeptAnswers:
    """How many of ``total`` answers a view keeps (with partial credit, a sum of shares), the view's
    tokens, and each answer's own credit, in order."""

    kept: float
    total: int
    tokens: int
    credits: tuple[float, ...] = field(default=(), repr=False)

    @property
    def share(self) -> float:
        return self.kept / self.total if self.total else 0.0


def _tally(credits: list[float] | list[int], tokens: int) -> KeptAnswers:
    return KeptAnswers(sum(credits), len(credits), tokens, tuple(credits))


def kept_answers(view: str, answers: Sequence[str], tokens: int, *, partial: bool = False) -> KeptAnswers:
    """How many ``answers`` occur in ``view`` (see the module docstring); empty answers never count."""
    if partial:
        text = words(view)
        return _tally([answer_credit((text,), a) for a in answers], tokens)
    norm = normalise(view)
    return _tally([int(bool(normalise(a)) and normalise(a) in norm) for a in answers], tokens)


def found_answers(
    view: str, found: Sequence[str], answers: Sequence[str], tokens: int, *, partial: bool = False
) -> KeptAnswers:
    """How many ``answers`` occur in ``view`` or in what was found for their own question (``found[i]``
    for ``answers[i]``: e.g. the memory search hits for the i-th question)."""
    pairs = zip(answers, found, strict=True)
    if partial:
        text = words(view)
        return _tally([answer_credit((text, words(extra)), a) for a, extra in pairs], tokens)
    norm = normalise(view)
    return _tally(
        [int(bool(n := normalise(a)) and (n in norm or n in normalise(extra))) for a, extra in pairs], tokens
    )


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
