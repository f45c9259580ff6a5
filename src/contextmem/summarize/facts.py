"""The extractive compactor (C8): a summary made of facts, not pasted lines.

Pure and deterministic. Messages are split into sentences, lightly compressed (:func:`~.salience.compress`)
and scored by :func:`~.salience.salience`; each becomes a :class:`Fact` with its section, its speaker (a
``Name:`` prefix or the message's ``name``) and the date of the session it was said in (the latest
session header seen, :func:`~.salience.header_date`). A tool result gives its outcome instead, verbatim
and labelled with the tool (``run_tests → 3 failed``, :func:`~.tool_outcome.tool_outcome`); such a line
counts :data:`TOOL_WEIGHT` of what a person said, in every re-compression (the label says where it came
from), and an assistant's sentence that names nothing counts
:data:`ASSISTANT_WEIGHT`. A user's instruction that names nothing is no fact (the reply holds what it
found, :func:`~.salience.only_instructs`). The previous summary's items come back as facts too, older
than every new one. Then:

1. **De-duplicated**: a fact whose content another, newer fact already states (its content tokens all
   in the other's) is dropped; what it said survives in the newer one. So is a question answered right
   after it: the answer is the fact.
   A new sentence then loses the later clauses that say only what the rest of the compaction says too
   and name nothing (", and I felt very happy", "，感到非常开心": :func:`~.salience.trim_clauses`): the
   room they took holds other facts.
2. **Selected** within the token budget by salience per (discounted, :data:`LENGTH_DISCOUNT`) token,
   after a reserve: the new facts' best fill at least :data:`NEW_SHARE` of the budget first, so the
   newest facts survive re-compression.
   What does not fit is dropped whole, least salient first — never cut in the middle, never the newest
   for being new.
3. **Rendered** in the six sections, chronologically within each, consecutive facts of one session and
   speaker merged into one bullet: ``- [14 March 2024] Ingrid: fact. fact.``

Invariants (tested as properties): the rendered text never exceeds the budget; every section header is
there, in the conversation's language; with any room at all, the most salient new fact is kept.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import NotRequired, TypedDict, Unpack

from ..lang import TablePattern, derived, is_question
from ..lang.scripts import HAN_CHAR
from ..messages import AssistantMessage, Message, ToolMessage, UserMessage, text_of
from ..redaction import redact_secrets
from .cues import NOTED, REQUEST, SPEAKER_NAME
from .languages import Lang, summaries, summary_text
from .ledger import Ledger, TextCounter
from .prompts import SECTION_KEYS, format_sections, parse_sections, without_labels
from .salience import (
    compress,
    content_tokens,
    header_date,
    names_something,
    only_instructs,
    rarity,
    salience,
    section_of,
    sentences,
    speaker_prefix,
    speakers_of,
    trim_clauses,
)
from .tool_outcome import tool_outcome

__all__ = [
    "NEW_SHARE",
    "Fact",
    "compact_facts",
    "facts_from_messages",
    "facts_from_summary",
    "fresh_draft",
    "merge_facts",
    "session_date",
    "voiced",
]

NEW_SHARE = 0.05
"""Share of the budget the new messages' most salient facts may always take, whatever the old ones score
(~140 tokens of a 2,800-token summary). A quarter kept 0.5-3.7 points fewer answers on each of the four
dev sets; a tenth kept 0-2.2 fewer than a twentieth on those four (level on one) and 0.5-2.0 fewer on a
third draw of both sets built only to settle this (``evals/results/compaction_facts.md``)."""
MIN_DUPLICATE_TOKENS = 4
ANSWERED, ANSWER_WITHIN = 0.6, 3  # a question is answered by a statement holding this share of its words
ITEM_CHARS = 280  # one fact at most; the archive has the rest
RELATED_DF = 3
"""A previous fact is shown to the model beside the new ones when it shares a content word with them that
at most this many facts use: a name, a place, a number — not "work" or "today"."""
LENGTH_DISCOUNT = 0.5
"""A fact's value is its salience per ``tokens ** LENGTH_DISCOUNT`` (0.3 was no better once lead-ins were
stripped: ``evals/results/compaction_facts.md``)."""
MIN_SALIENCE = 1.0  # below this a sentence is chit-chat, kept only if nothing else needs the room
TOOL_WEIGHT = 0.5
"""What a tool printed counts this much of what a person said: it can be read again (the archive, the
offloaded result, running the tool again); what the user said exists only in the conversation. A line the
tool marks as a note (``# NOTE: ...``) counts in full."""
ASSISTANT_WEIGHT = 0.5
"""What an assistant's sentence that names nothing (no name, number, date, title or identifier:
:func:`~.salience.names_something`) counts of a person's: its commentary and advice ("Progress is often
silent", "Drawing is a skill anyone can learn") are made from what was said, or from general knowledge,
and later questions ask what the user said and what was decided. An assistant's sentence that names
something counts in full, and so does every party of a transcript whose turns carry ``Name:`` prefixes
(two people, not a user and an assistant). On five MADial draws 0.5 kept 0.2-2.4 points more answers
(chosen on the first three; synthetic sets, whose speakers are named, unchanged); lower weights kept
more still, which these dev sets reward by construction (every answer is in a user's line): not a reason
to go lower."""
TOOL_ARROW = " → "  # ``run_tests → FAILED test_login``: a tool's line, in the summary as in the facts
_TOOL_LINE = re.compile(rf"^[\w.:-]{{1,64}}{TOOL_ARROW}")
TOOL = "\0tool"  # the speaker of a tool result's outcome line while facts are built: kept as written
_NONE_ITEMS = derived(
    lambda langs: frozenset({"-", "…"}).union(*(texts.none_items for _, texts in summaries(langs)))
)
"""Items that say nothing: a dash, an ellipsis, each summary language's none items."""
# A fact's date as Fact.item writes it: a session date always holds a digit, so a bracketed word that
# starts a fact ("[REDACTED] is the token") is its text, not its date.
_ITEM_HEAD = re.compile(r"^\[(?=[^\]\n]{4,40}\])(?P<date>[^\]\n\d]*\d[^\]\n]*)\]\s*")
_MARKS = derived(lambda langs: "".join(lang.sentence_marks for lang in langs))
"""Every language's sentence marks."""
# Where a merged bullet names the next speaker: after a sentence's end, ``Name: `` (see :func:`_render`).
_SPEAKER_TURN = TablePattern(
    lambda langs: (
        rf"(?<=[{re.escape(''.join(lang.sentence_marks for lang in langs))}])\s*"
        rf"(?=(?:{SPEAKER_NAME.build(langs)})[:：])"
    )
)


@dataclass(frozen=True, slots=True)
class Fact:
    """One sentence worth keeping: where it goes, who said it, on which session date, how salient it is,
    and when it was said (``order``: larger is newer; the previous summary's facts are negative)."""

    text: str
    section: str
    score: float
    order: int
    speaker: str | None = None
    date: str | None = None
    new: bool = True
    otherwise: str = "context"  # a Goal candidate's section when it is not kept as a goal
    assistant: bool = False  # said by an assistant: known for new facts, and through ``Sizing.voiced``

    def item(self) -> str:
        """The fact as a summary item that stands alone: ``[14 March 2024] Ingrid: text``."""
        return (
            (f"[{self.date}] " if self.date else "")
            + (f"{self.speaker}: " if self.speaker else "")
            + self.text
        )


def _cap(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= ITEM_CHARS else text[: ITEM_CHARS - 1].rstrip() + "…"


def facts_from_messages(
    messages: Sequence[Message],
    ledger: Ledger,
    known: Iterable[str],
    *,
    start: int = 0,
    date: str | None = None,
    speakers: Collection[str] = (),
) -> list[Fact]:
    """Every sentence of ``messages`` as an (unscored) fact, secrets redacted first; ``start`` numbers
    the first one's ``order``. Session headers set the date of what follows and are not facts; ``date``
    is the session date the messages begin in (the previous batch's last). A ``Name:`` prefix names the
    speaker when the name prefixes two messages here or is one of ``speakers`` (known from before).

    Goal candidates are the user's requests and the first sentence of the first user message that is
    more than a greeting, unless it is a question (dropped once answered, :func:`_answered`) or has a
    section of its own (a decision, a constraint, ...)."""
    errors = [e.value for e in ledger if e.kind == "error"]
    known = frozenset(known)
    # text, section, speaker, date, otherwise, said by an (unnamed) assistant
    raw: list[tuple[str, str, str | None, str | None, str, bool]] = []
    texts = [redact_secrets(text_of(m.content), known) for m in messages]
    names = speakers_of(t for m, t in zip(messages, texts, strict=True) if not isinstance(m, ToolMessage))
    names |= frozenset(speakers)
    tools = {c.id: c.name for m in messages if isinstance(m, AssistantMessage) for c in m.tool_calls}
    first_user = True
    for m, text in zip(messages, texts, strict=True):
        if isinstance(m, ToolMessage):
            label = f"{m.name or tools.get(m.tool_call_id) or 'tool'}{TOOL_ARROW}"
            raw.extend(
                (label + line, section, TOOL, date, "context", False)
                for line, section in tool_outcome(text, errors)
            )
            continue
        who, said_text = speaker_prefix(text, names)
        voice = isinstance(m, AssistantMessage) and who is None  # not a named party of a transcript
        who = who or m.name
        from_user = isinstance(m, UserMessage)
        said: list[str] = []
        for line in said_text.splitlines():
            stamp = header_date(line)
            if stamp is not None:
                date = stamp
            elif line.strip():
                said.extend(sentences(line))
        said = [s for s in said if compress(s)]  # "Morning!" says nothing
        for n, s in enumerate(said):
            if any(e in s for e in errors):
                section = "context"
            else:
                section = section_of(s, from_user=from_user or not isinstance(m, AssistantMessage))
            asks = REQUEST.search(s) is not None
            plain = section == "context" and not is_question(s)  # not a decision, ...
            goal = from_user and (asks or (first_user and n == 0 and plain)) and (not asks or _says_what(s))
            if from_user and not goal and section == "context" and only_instructs(s):
                continue
            raw.append((s, "goal" if goal else section, who, date, section, voice))
        first_user = first_user and not (from_user and said)
    facts = []
    for i, (s, section, who, when, otherwise, role) in enumerate(raw):
        text = _cap(s if who is TOOL else compress(s))
        if text and text.lower() not in _NONE_ITEMS():
            speaker = None if who is TOOL else who
            facts.append(
                Fact(text, section, 0.0, start + i, speaker, when, otherwise=otherwise, assistant=role)
            )
    return facts


def voiced(messages: Sequence[Message], ledger: Ledger, known: Iterable[str]) -> frozenset[str]:
    """The texts of the facts of ``messages`` an assistant said (see :data:`ASSISTANT_WEIGHT`), for
    :data:`Sizing` ``voiced``."""
    return frozenset(f.text for f in facts_from_messages(messages, ledger, known) if f.assistant)


def _says_what(request: str) -> bool:
    """Whether a request names what it asks for ("Please restart cart-api", 帮我看看事件), not only that
    it asks (请记下来, "Please find out why"): two content words besides the request's own, or four
    Chinese characters."""
    rest = REQUEST.sub(" ", request)
    chinese = len(HAN_CHAR.findall(rest))
    return chinese >= 4 if chinese else len(content_tokens(rest)) >= 2


def facts_from_summary(previous: str, lang: Lang) -> list[Fact]:
    """A previous summary's items as facts (older than any new one), bullets split back into sentences:
    ``[date] Speaker: a. b.`` gives two facts with that date and speaker (a name that prefixes two parts
    of the summary). Free text with no sections is kept as Progress."""
    preamble, sections = parse_sections(previous)
    items: list[tuple[str, str]] = []
    if preamble:
        earlier = summary_text(lang).earlier
        items += [("progress", earlier + s) for s in sentences(preamble)]
    for key, body in sections.items():
        for line in body.splitlines():
            item = without_labels(" ".join(line.strip().lstrip("-*•").split()))
            if item and item.lower() not in _NONE_ITEMS():
                items.append((key, item))
    parts = [
        (key, head["date"] if head else None, part)
        for key, item in items
        for head in [_ITEM_HEAD.match(item)]
        for body in [item[head.end() :] if head else item]
        for part in ([body] if _TOOL_LINE.match(body) else _SPEAKER_TURN.split(body))
    ]
    speakers = speakers_of(part for _, _, part in parts)
    facts: list[Fact] = []
    for key, date, part in parts:
        if _TOOL_LINE.match(part):  # a tool's line has a bullet of its own and comes back whole
            facts.append(Fact(part, key, 0.0, 0, None, date, new=False))
            continue
        who, said = speaker_prefix(part, speakers)
        facts.extend(Fact(s, key, 0.0, 0, who, date, new=False) for s in sentences(said) or [said])
    return [replace(f, order=i - len(facts)) for i, f in enumerate(facts)]


def _weight(fact: Fact) -> float:
    """:data:`ASSISTANT_WEIGHT` for an assistant's sentence that names nothing, :data:`TOOL_WEIGHT` for a
    tool's line (new, or back from the previous summary), else 1."""
    if fact.assistant and not names_something(fact.text, first_word=False):
        return ASSISTANT_WEIGHT
    return TOOL_WEIGHT if _TOOL_LINE.match(fact.text) and not NOTED.search(fact.text) else 1.0


def _answered(question: Fact, tokens: frozenset[str], answer: Fact, answer_tokens: frozenset[str]) -> bool:
    """``answer``, a statement among the :data:`ANSWER_WITHIN` facts after ``question``, holds at least
    :data:`ANSWERED` of its content tokens: "Who owns rollback if the cutover goes wrong?" then "Priya
    owns rollback; the cutover window is Tuesday". The answer is the fact; the question adds nothing."""
    return (
        is_question(question.text)
        and not is_question(answer.text)
        and 0 < answer.order - question.order <= ANSWER_WITHIN
        and len(tokens & answer_tokens) >= max(2, ANSWERED * len(tokens))
    )


def _home(fact: Fact) -> str:
    """The section a fact belongs to by its content: a goal candidate's ``otherwise``."""
    return fact.otherwise if fact.section == "goal" and fact.new else fact.section


def _dedupe(facts: list[Fact]) -> list[Fact]:
    """Drop each fact whose content a newer fact in its section states too: the same text, or all its
    content tokens (at least :data:`MIN_DUPLICATE_TOKENS` of them: a short error line stays verbatim);
    and each question answered right after it (:func:`_answered`)."""
    kept: list[Fact] = []
    seen: list[tuple[frozenset[str], Fact]] = []
    for fact in sorted(facts, key=lambda f: -f.order):  # newest first: it is the one that stays
        tokens = frozenset(content_tokens(fact.text))
        duplicate = any(
            fact.text == other.text
            or (
                len(tokens) >= MIN_DUPLICATE_TOKENS and tokens <= other_tokens and _home(fact) == _home(other)
            )
            or _answered(fact, tokens, other, other_tokens)
            for other_tokens, other in seen
        )
        if not duplicate:
            kept.append(fact)
            seen.append((tokens, fact))
    return sorted(kept, key=lambda f: f.order)


def _render(facts: Sequence[Fact], lang: Lang) -> str:
    """The six sections; within each, facts in order, a run of one session date in one bullet, the
    speaker named where it changes: ``- [14 March 2024] Ingrid: a. b. Tomas: c.`` Another speaker's fact
    joins a bullet only after a sentence mark, where :data:`_SPEAKER_TURN` splits it back: after ``a``
    (a photo turn, chat without punctuation) it opens a bullet of its own."""
    by_section: dict[str, list[str]] = {k: [] for k in SECTION_KEYS}
    joiner = summary_text(lang).joiner
    for key in SECTION_KEYS:
        bullets = by_section[key]
        run: tuple[str | None, str | None] | None = None  # (date, speaker) of the open bullet
        for fact in sorted((f for f in facts if f.section == key), key=lambda f: f.order):
            who = f"{fact.speaker}: " if fact.speaker else ""
            tool = _TOOL_LINE.match(fact.text) is not None
            if (
                run is not None
                and not tool
                and fact.date is not None
                and fact.date == run[0]
                and (fact.speaker == run[1] or bullets[-1][-1:] in _MARKS())
            ):
                bullets[-1] += joiner + (who if fact.speaker != run[1] else "") + fact.text
            else:
                bullets.append(fact.item())
            run = None if tool else (fact.date, fact.speaker)  # a tool's line is a bullet of its own
    return format_sections(by_section, lang)


def _select(facts: list[Fact], budget: int, counter: TextCounter, lang: Lang) -> list[Fact]:
    """The facts to keep within ``budget`` (see the module docstring, step 2)."""

    def cost(fact: Fact) -> int:
        return counter.count_text(fact.text) + 2

    def value(fact: Fact) -> float:
        return float(fact.score / max(1, costs[id(fact)]) ** LENGTH_DISCOUNT)

    costs = {id(f): cost(f) for f in facts}
    # Goal: the oldest (what the conversation set out to do) and the most salient new one.
    goals = sorted((f for f in facts if f.section == "goal"), key=lambda f: f.order)
    fresh = [f for f in goals if f.new]
    keep_goal = {id(f) for f in goals[:1]}
    keep_goal |= {id(max(fresh, key=lambda f: (f.score, f.order)))} if fresh else set()
    ranked = sorted(facts, key=lambda f: (-value(f), -f.order))
    ranked = [
        f if f.section != "goal" or id(f) in keep_goal else replace(f, section=f.otherwise) for f in ranked
    ]
    costs.update((id(f), cost(f)) for f in ranked if id(f) not in costs)
    room = budget - counter.count_text(format_sections({}, lang))
    chosen: dict[int, Fact] = {}
    spent = 0
    for fact in (f for f in goals if id(f) in keep_goal):  # what the conversation is for comes first
        if spent + costs[id(fact)] <= room:
            chosen[id(fact)] = fact
            spent += costs[id(fact)]
    reserve = spent + int(room * NEW_SHARE)
    for fact in (f for f in ranked if f.new and id(f) not in chosen):  # the reserve: the newest facts
        if spent + costs[id(fact)] > reserve:
            break
        chosen[id(fact)] = fact
        spent += costs[id(fact)]
    reserved = set(chosen)
    for fact in ranked:
        if id(fact) in chosen:
            continue
        if fact.score < MIN_SALIENCE and spent > room // 2:
            continue
        if spent + costs[id(fact)] <= room:
            chosen[id(fact)] = fact
            spent += costs[id(fact)]
    kept = sorted(chosen.values(), key=lambda f: f.order)
    # The estimate ignores the shared heads of merged bullets; drop the least salient until it fits.
    # The goals and the reserve go last.
    by_value = sorted(kept, key=lambda f: (id(f) in reserved, value(f), f.order))
    while kept and counter.count_text(_render(kept, lang)) > budget:
        over = counter.count_text(_render(kept, lang)) - budget
        drop: set[int] = set()
        freed = 0
        while by_value and freed < over:
            victim = by_value.pop(0)
            drop.add(id(victim))
            freed += costs[id(victim)]
        kept = [f for f in kept if id(f) not in drop]
    return kept


class Sizing(TypedDict):
    """What a compaction is fitted to: the identifier ledger, the output language, the token budget and
    the counter that measures it."""

    ledger: Ledger
    lang: Lang
    budget: int
    counter: TextCounter
    voiced: NotRequired[frozenset[str]]
    """Sentences an assistant said that facts parsed back from text should count as such
    (:data:`ASSISTANT_WEIGHT`, :func:`voiced`): a model's reply is merged as text, which records no role."""


def compact_facts(
    messages: Sequence[Message], *, previous: str | None, known: Iterable[str], **sizing: Unpack[Sizing]
) -> str:
    """The six-section summary of ``previous`` + ``messages`` in at most ``budget`` tokens (``""`` when
    not even the headers fit). ``previous`` must already be redacted; ``known`` are the secret values to
    scrub from ``messages``."""
    return _fit(*_old_and_new(messages, previous, known, sizing), **sizing)


def _old_and_new(
    messages: Sequence[Message], previous: str | None, known: Iterable[str], sizing: Sizing
) -> tuple[list[Fact], list[Fact]]:
    """The previous summary's facts, and the messages' dated and attributed as the summary left off."""
    old = facts_from_summary(previous, sizing["lang"]) if previous else []
    speakers = {f.speaker for f in old if f.speaker}
    new = facts_from_messages(messages, sizing["ledger"], known, date=session_date(old), speakers=speakers)
    return old, new


def fresh_draft(
    messages: Sequence[Message], *, previous: str | None, known: Iterable[str], **sizing: Unpack[Sizing]
) -> tuple[str, str]:
    """``(draft, rest)`` for a model that sees only what is new. ``draft``: the six-section summary, in
    ``budget``, of the new messages' facts and of the previous summary's facts they may make stale — those
    sharing a content word with them that few other facts use (:data:`RELATED_DF`): "Ingrid lives in
    Paris" beside "Ingrid moved to Berlin". ``rest``: every fact the draft does not show (the other
    previous facts, and those it had no room for), rendered, to merge back without the model
    (:func:`merge_facts`). ``previous`` must already be redacted."""
    old, new = _old_and_new(messages, previous, known, sizing)
    words = {id(f): set(content_tokens(f.text)) for f in old + new}
    df = Counter(t for f in old + new for t in words[id(f)])
    said = {t for f in new for t in words[id(f)] if df[t] <= RELATED_DF}
    related = [f for f in old if said & words[id(f)]]
    new = _dedupe(new)
    shown = _choose(related, new, **sizing)
    drawn = {f.order for f in shown}  # unique: the previous facts' are negative, the new ones' not
    rest = [f for f in old + new if f.order not in drawn]
    return _render(shown, sizing["lang"]), _render(rest, sizing["lang"]) if rest else ""


def merge_facts(previous: str | None, newer: str, **sizing: Unpack[Sizing]) -> str:
    """The six-section summary of ``previous`` and ``newer`` — a summary of only what was said since —
    in at most ``budget`` tokens: ``newer``'s facts are the new ones (the reserve is theirs, and they
    replace the older facts they restate), selected with the previous summary's as :func:`compact_facts`
    does. So a model that summarised only the new messages never copies the previous summary, and the
    merged summary keeps its whole budget. Both texts must already be redacted."""
    old = facts_from_summary(previous, sizing["lang"]) if previous else []
    new = [replace(f, order=i, new=True) for i, f in enumerate(facts_from_summary(newer, sizing["lang"]))]
    return _fit(old, new, **sizing)


def _choose(old: list[Fact], new: list[Fact], **sizing: Unpack[Sizing]) -> list[Fact]:
    """Steps 1 and 2 of the module docstring over ``old`` (previous summary) and ``new`` facts."""
    voiced_texts = sizing.get("voiced", frozenset())
    pool = [replace(f, assistant=True) if f.text in voiced_texts else f for f in _dedupe(old + new)]
    rare = rarity(f.text for f in pool)
    # A new sentence's later clauses that add nothing go (the previous summary's were trimmed already).
    pool = [
        replace(f, text=trim_clauses(f.text, rare)) if f.new and not _TOOL_LINE.match(f.text) else f
        for f in pool
    ]
    identifiers = [e.value for e in sizing["ledger"]]
    scored = [replace(f, score=salience(f.text, rare, identifiers=identifiers) * _weight(f)) for f in pool]
    return _select(scored, sizing["budget"], sizing["counter"], sizing["lang"])


def _fit(old: list[Fact], new: list[Fact], **sizing: Unpack[Sizing]) -> str:
    """Steps 1-3 of the module docstring: the rendered summary, ``""`` when not even the headers fit."""
    text = _render(_choose(old, new, **sizing), sizing["lang"])
    return text if sizing["counter"].count_text(text) <= sizing["budget"] else ""


def session_date(facts: Sequence[Fact]) -> str | None:
    """The date of the session the conversation was in when ``facts`` were summarised: the newest dated
    fact's (what follows them, until a session header, was said on that date too)."""
    dated = [f for f in facts if f.date]
    return max(dated, key=lambda f: f.order).date if dated else None
