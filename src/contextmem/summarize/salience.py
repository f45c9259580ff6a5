"""What makes a sentence worth keeping: the things people later ask about.

Pure functions over text, in every registered language: the words and patterns are the language tables'
(:mod:`contextmem.lang`, joined in :mod:`.cues`), the amounts are :class:`Weights`. A message is split
into sentences; each sentence is lightly compressed (leading interjections and laughter stripped, and
later clauses that say nothing the rest of the conversation does not — never reworded) and scored by the
kinds of content questions ask for: names (capitalised words that are not sentence furniture, quoted
titles, 《书名》), numbers, dates, identifiers (``OPS-4791``), preferences ("I like / my favourite", 喜欢),
commitments and plans ("I will", "next week", 打算, 计划), decisions, outcomes and errors, what someone
marks as worth remembering ("for the record", ``NOTE:``, 顺便记一下), and words that are rare in the
conversation (chit-chat repeats itself; a fact names something once). The section a sentence belongs in
(Goal, Constraints, Progress, Key decisions, Next steps, Critical context) is picked by cue words.

Also here: who said a message (a ``Name:`` prefix, as multi-party transcripts write it) and which date a
session is on (a short header line holding a full date), so facts can be attributed and anchored.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from ..lang import is_question
from ..lang.scripts import HAN_RUN
from .cues import (
    ADVICE,
    CLAUSE_END,
    CLAUSE_STOPS,
    COMMAND,
    CONSTRAINT,
    DATE,
    DECISION,
    ERROR,
    EVENT,
    FILLER_HEAD,
    HEADER_WORDS,
    LAUGHTER,
    NOT_NAMES,
    NOTED,
    NUMBER,
    PARTIAL_DATE,
    PLAN,
    PREFERENCE,
    PROGRESS,
    QUOTED,
    REQUEST,
    SENTENCE_END,
    SENTENCE_MARKS,
    SPEAKER,
    STOP_WORDS,
)

__all__ = [
    "WEIGHTS",
    "Weights",
    "compress",
    "content_tokens",
    "header_date",
    "names_something",
    "only_instructs",
    "rarity",
    "salience",
    "section_of",
    "sentences",
    "speaker_prefix",
    "speakers_of",
    "trim_clauses",
]


# An identifier inside a sentence: letters and digits joined by - _ / . or : (kestrel-4, OPS-4791,
# ff_split_refunds_v6, s3://pay-audit-274); a plain word or number is not one.
_IDENTIFIER = re.compile(
    r"(?<![\w/.:-])(?=[\w/.:-]*\d)(?=[\w/.:-]*[A-Za-z]{2})[A-Za-z0-9]+(?:[-_/.:]+[A-Za-z0-9]+)+"
)
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*|\d+")
_EMOJI = re.compile(r"[\U0001F300-\U0001FAFF\u2600-\u27BF]+|:\)|:\(|:D|;\)")


def speaker_prefix(text: str, speakers: Collection[str] | None = None) -> tuple[str | None, str]:
    """``("Ingrid", rest)`` when ``text`` starts with a ``Ingrid: `` prefix (and ``Ingrid`` is one
    of ``speakers``, when given), else ``(None, text)``."""
    m = SPEAKER.match(text)
    if m is None or m["who"] in NOT_NAMES() or (speakers is not None and m["who"] not in speakers):
        return None, text
    return m["who"], text[m.end() :]


def speakers_of(texts: Iterable[str]) -> frozenset[str]:
    """The names that prefix at least two of ``texts``: speakers, not a ``Fixed:`` or ``Note:`` label."""
    counts = Counter(who for who, _ in map(speaker_prefix, texts) if who is not None)
    return frozenset(who for who, n in counts.items() if n >= 2)


_LABEL = re.compile(r"^[^\s:：\[]{1,20}[:：]\s*")


def header_date(line: str) -> str | None:
    """The date of a session header line (``[Session 3 · 14 March 2024]``, ``2023-05-08 10:00``,
    ``DATE: 10:15 am on 14 March, 2024``, ``2023年5月8日``): a short line holding a full date and no word but
    header words (session, date, day, time, ...) and numbers."""
    stripped = _LABEL.sub("", line.strip(), count=1)  # "A: [Session 4 · …]", "DATE: …"
    if len(stripped) > 80:
        return None
    m = DATE.search(stripped)
    if m is None:
        return None
    header_words = HEADER_WORDS()
    rest = [
        w
        for w in _WORD.findall(stripped[: m.start()] + stripped[m.end() :])
        if w.lower() not in header_words and not w.isdigit()
    ]
    return m.group(0) if not rest else None  # "The release train leaves on 2026-12-03" is a fact


def compress(sentence: str) -> str:
    """``sentence`` without leading interjections, laughter or emoji; the words that are kept are the
    sentence's own, in its order."""
    text = _EMOJI.sub("", sentence)
    text = LAUGHTER.sub("", text)
    for _ in range(3):  # "Oh, guess what? ...": one lead-in after another
        text, n = FILLER_HEAD.subn("", text.strip(" \t\n,，~"))
        if not n:
            break
    text = text.strip(" ,，~")
    if text and text[0].islower() and sentence[:1].isupper():
        text = text[0].upper() + text[1:]
    return text


def names_something(text: str, *, first_word: bool = True) -> bool:
    """Whether ``text`` names something a question could ask for: a name, number, date or day, quoted title
    or identifier. ``first_word=False``: a capitalised first word is not taken for a name (every English
    sentence has one; so "Priya owns the rollback" names nothing that way)."""
    if not first_word:
        text = _FIRST_WORD.sub("", text, count=1)
    return bool(
        _names(text)
        or NUMBER.search(text)
        or DATE.search(text)
        or PARTIAL_DATE.search(text)
        or QUOTED.search(text)
        or _IDENTIFIER.search(text)
    )


_FIRST_WORD = re.compile(r"^[^\w]*[A-Z][\w'’-]*")


def trim_clauses(sentence: str, rare: dict[str, float]) -> str:
    """``sentence`` without the later clauses that say nothing the rest of the conversation does not
    (", and I felt very happy", "，感到非常开心", ", wish me luck"): every content word of such a clause
    occurs in another sentence of ``rare``'s corpus (:func:`rarity`), and it names nothing — no name,
    number, date or day, quoted title or identifier. The first clause always stays; what is kept is the
    sentence's own text, in its order, and it ends the way the sentence did."""
    cuts = [0, *(m.end() for m in CLAUSE_END.finditer(sentence)), len(sentence)]
    clauses = [sentence[a:b] for a, b in itertools.pairwise(cuts) if a < b]
    kept = clauses[:1] + [
        c
        for c in clauses[1:]
        if names_something(c)
        or any(rare.get(t, 1.0) >= 1.0 for t in content_tokens(c))  # a word no other sentence uses
    ]
    if len(kept) == len(clauses):
        return sentence
    text = "".join(kept).rstrip()
    stops = CLAUSE_STOPS()
    if text[-1] in stops:
        end = sentence.rstrip()[-1]
        text = text[:-1] + (end if end in SENTENCE_MARKS() else stops[text[-1]])
    return text


def sentences(text: str) -> list[str]:
    """The sentences of ``text``, line by line, bullets and markdown marks stripped."""
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.strip().lstrip("-*•>#").strip()
        if line:
            out.extend(s.strip() for s in SENTENCE_END.split(line) if s.strip())
    return out


def content_tokens(text: str) -> list[str]:
    """Lower-cased content words (English, stop words dropped) and character bigrams (Chinese)."""
    words = [w.lower().strip("'’") for w in _WORD.findall(text)]
    stop = STOP_WORDS()
    tokens = [w for w in words if (len(w) > 2 and w not in stop) or w.isdigit()]
    for run in HAN_RUN.findall(text):
        tokens.extend(run[i : i + 2] for i in range(max(1, len(run) - 1)))
    return tokens


def rarity(corpus: Iterable[str]) -> dict[str, float]:
    """Per content token, how rare it is across ``corpus`` (sentences): ``1 / sqrt(document frequency)``."""
    df: Counter[str] = Counter()
    for text in corpus:
        df.update(set(content_tokens(text)))
    return {token: 1 / math.sqrt(n) for token, n in df.items()}


def _names(text: str) -> int:
    """Capitalised words that are not sentence furniture (``Ingrid``, ``NATO``, ``Lisbon``)."""
    not_names = NOT_NAMES()
    return sum(1 for w in _WORD.findall(text) if w[0].isupper() and len(w) > 1 and w not in not_names)


@dataclass(frozen=True, slots=True)
class Weights:
    """What each kind of content adds to (or takes from) a sentence's salience. A change is validated on
    held-out sets it was not tuned on (CONTRIBUTING.md, "Changing a heuristic")."""

    rarity_power: float = 0.8
    """The summed rarity of the content words is raised to this power: many everyday words do not add
    up to one rare one."""
    name: float = 1.5
    """Per capitalised word that is not sentence furniture (``Ingrid``, ``Lisbon``), up to :attr:`names`."""
    names: int = 3
    quoted: float = 1.5
    """Per quoted title (《书名》, "Becoming"), up to :attr:`quotes`."""
    quotes: int = 2
    number: float = 1.0
    """Per number, in digits or words (三个), up to :attr:`numbers`."""
    numbers: int = 3
    date: float = 2.0
    """A full date (``14 March 2024``, 2023年5月8日)."""
    partial_date: float = 1.0
    """A month, weekday, day of the month or relative day (``Friday``, 去年)."""
    preference: float = 2.0
    """A preference ("I love", 喜欢): later questions ask what someone likes."""
    plan: float = 1.5
    """A plan or commitment ("next week", 打算)."""
    decision: float = 1.5
    """A decision ("we decided", 决定)."""
    event: float = 3.0
    """An event told in the first person (:data:`EVENT`), as much as a mark that something is worth
    remembering: later questions ask what people did. At 1.0 such a sentence, made of everyday words
    (happy, park, friends), lost to remarks and advice holding a rare or capitalised word
    (``bench/results/compaction_facts.md``)."""
    error: float = 2.0
    """An error or failure (:data:`ERROR`)."""
    noted: float = 3.0
    """A mark that something is worth remembering (:data:`NOTED`)."""
    identifier: float = 1.5
    """Per identifier written in the sentence (``OPS-4791``), up to :attr:`identifiers`."""
    identifiers: int = 2
    known_identifier: float = 2.0
    """Per identifier of the ledger the sentence holds, up to :attr:`known_identifiers`."""
    known_identifiers: int = 3
    question: float = 0.5
    """A question counts this share: its answer is the fact."""
    advice: float = 0.5
    """Advice to the listener (:data:`ADVICE`) counts this share."""
    few_tokens: int = 3
    """A sentence with fewer content tokens than this counts :attr:`short` of its score."""
    short: float = 0.5


WEIGHTS = Weights()


def salience(
    sentence: str, rare: dict[str, float], *, identifiers: Sequence[str] = (), weights: Weights = WEIGHTS
) -> float:
    """How likely a later question asks for what ``sentence`` says (0 for chit-chat; higher is better).

    The sum of: names and quoted titles, numbers, dates, a preference, a plan or commitment, a decision,
    an event told in the first person, an error, a mark that it is worth remembering ("for the record",
    ``NOTE:``, 记一下), identifiers written in it (``kestrel-4``) and the ledger's ``identifiers`` it
    holds, and the rarity of its content words (``rare``, from :func:`rarity`; numbers count as numbers
    only); a question, advice to the listener (:data:`ADVICE`) or a sentence with almost no content counts
    for less. Each amount is one of ``weights`` (:class:`Weights`).
    """
    w = weights
    tokens = content_tokens(sentence)
    if not tokens:
        return 0.0
    # Numbers count once, as numbers, not again as rare words: a log line's ids and timestamps are all
    # rare, and would outscore every sentence a person wrote.
    score = math.fsum(rare.get(t, 1.0) for t in set(tokens) if not t.isdigit()) ** w.rarity_power
    score += w.name * min(w.names, _names(sentence)) + w.quoted * min(w.quotes, len(QUOTED.findall(sentence)))
    score += w.number * min(w.numbers, len(NUMBER.findall(sentence)))
    score += w.date * bool(DATE.search(sentence)) + w.partial_date * bool(PARTIAL_DATE.search(sentence))
    score += w.preference * bool(PREFERENCE.search(sentence)) + w.plan * bool(PLAN.search(sentence))
    score += w.decision * bool(DECISION.search(sentence)) + w.event * bool(EVENT.search(sentence))
    score += w.error * bool(ERROR.search(sentence)) + w.noted * bool(NOTED.search(sentence))
    score += w.identifier * min(w.identifiers, len(_IDENTIFIER.findall(sentence)))
    score += w.known_identifier * min(w.known_identifiers, sum(1 for i in identifiers if i in sentence))
    if is_question(sentence):
        score *= w.question
    if ADVICE.search(sentence):
        score *= w.advice
    if len(tokens) < w.few_tokens:
        score *= w.short
    return float(score)


def only_instructs(sentence: str) -> bool:
    """Whether a user's sentence only tells the agent what to do ("Check the dry-run output.",
    看一下部署配置里的资源限制, 请记下来) and names nothing: what it asked for is in the reply,
    so the summary keeps the reply's facts, not the asking. (A question stays until it is answered:
    ``facts._answered``.)"""
    return bool(REQUEST.search(sentence) or COMMAND.search(sentence)) and not names_something(
        sentence, first_word=False
    )


def section_of(sentence: str, *, from_user: bool) -> str:
    """The summary section a sentence belongs in, by cue words; facts without a cue are context."""
    if ERROR.search(sentence):
        return "context"
    rules = (
        [("constraints", CONSTRAINT), ("decisions", DECISION), ("next", PLAN)]
        if from_user
        else [("decisions", DECISION), ("next", PLAN), ("progress", PROGRESS)]
    )
    for key, pattern in rules:
        if pattern.search(sentence):
            return key
    return "context"
