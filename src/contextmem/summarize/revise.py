"""What the model's reply is worth (C8): cleaned, checked, and reconciled with the draft.

The model is shown an extractive draft — of the new messages' facts and the previous facts they may make
stale (:func:`~.facts.fresh_draft`), or the whole summary to reshape on ``/compact`` — and asked to
correct it (:func:`~.prompts.summary_prompt`). Its reply is trusted for what it changes — items it drops
as stale, merges, shortens or adds — but it can neither lose facts wholesale nor stand in for the draft
with the previous summary:

1. **Cleaned**: a chatty preface, a code fence or a closing line is stripped; secrets are redacted,
   including every secret value found in the input, wherever the model repeats it.
2. **Rejected** (the draft stands): empty, chatty with no sections, a template echoed back unfilled, or a
   copy of the previous summary — most of its items repeat the previous summary's and it keeps fewer than
   half of the facts the draft took from the new messages (:func:`copies_previous`).
3. **Reconciled** with the draft: a section the reply lacks (small models drop the last one, or run out of
   tokens) is the draft's. A draft fact the reply neither kept nor replaced — fewer than :data:`COVERED` of
   its content words are anywhere in the reply — comes back when it carries what a question asks for
   verbatim: a number or date, an identifier of the ledger, a quoted title (:func:`carries_exact`); and
   every one comes back when the reply dropped most of the draft's facts in the sections it wrote
   (:data:`KEPT`): that is a summary of its own, not a correction. A draft fact whose words are mostly
   in the reply was kept, merged or corrected ("budget 500 EUR" → "budget 700 EUR": the stale value
   goes); one with no such mark, dropped from a reply that kept most of the draft, was judged by the
   model (stale, chit-chat) and stays out.
   With a ``/compact`` instruction the reply is taken as written: the user asked for a different summary.
4. **Fitted**: a result over its budget is re-compressed without another model call, by
   :func:`~.facts.compact_facts` over it — the least salient whole facts go, the model's or the draft's,
   never the middle of one. (Keeping the model's items first and filling the room with the draft kept
   fewer answers: evals/results/local_llm.md.)
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Unpack

from ..lang import TablePattern
from ..redaction import redact_secrets
from .cues import QUOTED
from .facts import Fact, Sizing, compact_facts, facts_from_summary
from .languages import alternatives
from .prompts import (
    SECTION_KEYS,
    complete_sections,
    format_sections,
    items_of,
    parse_sections,
    section_has_content,
    unflatten,
)
from .salience import content_tokens

__all__ = ["COVERED", "Revision", "carries_exact", "clean_reply", "copies_previous", "revise"]

COVERED = 0.5
"""A draft fact is in the reply when this share of its content words is (kept, reworded or corrected)."""
REPEATED = 0.8
"""A reply item repeats the previous summary when this share of its content words is in one of its items."""
KEPT = 0.5
"""A reply that keeps less than this share of the draft's facts (in the sections it wrote) wrote a summary
of its own instead of correcting the draft: the 1.5B and 0.5B models summarised the new messages alone in
six to eight items, keeping 2 of 41 answers the draft held 25 of. Such a reply is no judgement of what is
stale: every draft fact it dropped comes back, and its own items compete with them for the budget
(evals/results/local_llm.md: answers kept then match or beat the draft's; rejecting it outright tied or
lost one)."""


_FENCE_OPEN = re.compile(r"^\s*```[A-Za-z]*\s*$")
# A chatty opening or closing line, in any summary language ("(?!)", which never matches, when none has one).
_CHATTY = TablePattern(lambda langs: r"(?i)^\W*(?:" + (alternatives(langs, "chatty") or "(?!)") + ")")
_CLOSER = TablePattern(lambda langs: r"(?i)^\W*(?:" + (alternatives(langs, "closer") or "(?!)") + ")")
_DIGIT = re.compile(r"\d")


def clean_reply(reply: str, secrets: Iterable[str]) -> str:
    """Strip whatever precedes the first section ("Sure! Here is…", a title, a fence), a closing fence
    or chatty last line, and redact secrets — including ``secrets`` known from the input."""
    text = reply.strip()
    preamble, sections = parse_sections(text)
    if sections and preamble:
        text = text[len(preamble) :].strip()
    lines = text.splitlines()
    while lines and (_CLOSER.search(lines[-1]) or lines[-1].strip() == "```"):
        lines.pop()
    if lines and _FENCE_OPEN.match(lines[0]):
        lines.pop(0)
    text = "\n".join(lines).strip()
    if not parse_sections(text)[1]:  # the flat list it was shown, written back corrected
        text = unflatten(text) or text
    return redact_secrets(text, secrets)


def carries_exact(text: str, identifiers: Collection[str]) -> bool:
    """Whether ``text`` holds what only its own words can answer: a digit (numbers, dates, versions), a
    quoted title, or one of the ledger's ``identifiers``."""
    return bool(_DIGIT.search(text) or QUOTED.search(text)) or any(i in text for i in identifiers)


def _share(tokens: Collection[str], pool: Collection[str]) -> float:
    return sum(t in pool for t in tokens) / len(tokens) if tokens else 1.0


def copies_previous(reply: str, previous: str, draft_facts: Iterable[Fact]) -> bool:
    """Whether ``reply`` is the previous summary again: :data:`REPEATED` of its items are (nearly) items
    of ``previous``, and it keeps fewer than half of the facts the draft took from the new messages."""
    _, old = parse_sections(previous)
    old_items = [frozenset(content_tokens(item)) for body in old.values() for item in items_of(body)]
    _, new = parse_sections(reply)
    items = [item for body in new.values() for item in items_of(body)]
    if not items or not old_items:
        return False
    repeated = sum(
        any(_share(tokens, o) >= REPEATED for o in old_items)
        for tokens in (frozenset(content_tokens(item)) for item in items)
    )
    if repeated < REPEATED * len(items):
        return False
    old_tokens = frozenset().union(*old_items)
    fresh = [t for t in (content_tokens(f.item()) for f in draft_facts) if _share(t, old_tokens) < COVERED]
    reply_tokens = frozenset(content_tokens(reply))
    return bool(fresh) and sum(_share(t, reply_tokens) >= COVERED for t in fresh) * 2 < len(fresh)


@dataclass(frozen=True, slots=True)
class Revision:
    """The reconciled summary (``None`` when the reply was rejected), why it was rejected, and how many
    draft facts were put back (:func:`revise`, step 3)."""

    text: str | None
    problem: str = ""
    restored: int = 0
    rewrote: bool = False  # the reply kept less than KEPT of the draft: every fact it dropped came back


def revise(
    reply: str,
    draft: str,
    *,
    previous: str | None,
    known: Collection[str],
    instruction: bool = False,
    **sizing: Unpack[Sizing],
) -> Revision:
    """The model's ``reply`` to the ``draft`` prompt, checked and reconciled (see the module docstring).

    ``previous`` is the previous summary's text; ``known``, the secret values in the input; with
    ``instruction`` (a ``/compact`` instruction was given) the reply is taken as written. ``sizing``: the
    draft's ledger, language, budget and counter.
    """
    lang = sizing["lang"]
    text = clean_reply(reply, known)
    if not text.strip():
        return Revision(None, "empty reply")
    _, sections = parse_sections(text)
    if not sections:
        kind = "chatty reply" if _CHATTY.search(text) else "no sections in the reply"
        return Revision(None, f"{kind}: {text[:60]!r}")
    if not any(section_has_content(body) for body in sections.values()):
        return Revision(None, "template echoed back with nothing filled in")
    draft_facts = facts_from_summary(draft, lang) if draft else []
    if previous and copies_previous(text, previous, draft_facts):
        return Revision(None, "reply repeats the previous summary")
    if instruction:
        return Revision(_fit(complete_sections(text, lang), known, **sizing))
    _, from_draft = parse_sections(draft)
    items = {
        key: items_of(sections[key]) if key in sections else items_of(from_draft.get(key, ""))
        for key in SECTION_KEYS
    }
    reply_tokens = frozenset(content_tokens(text))
    written = [f for f in draft_facts if f.section in sections]  # the rest keep the draft's section
    dropped = [f for f in written if _share(content_tokens(f.item()), reply_tokens) < COVERED]
    rewrote = len(dropped) > (1 - KEPT) * len(written)
    identifiers = sizing["ledger"].values
    restored = [f for f in dropped if rewrote or carries_exact(f.text, identifiers)]
    for fact in restored:
        items[fact.section].append(fact.item())
    # headers in the conversation's language, whichever the reply used
    merged = format_sections(items, lang)
    return Revision(_fit(merged, known, **sizing), restored=len(restored), rewrote=rewrote)


def _fit(text: str, known: Collection[str], **sizing: Unpack[Sizing]) -> str:
    """``text`` when it fits the budget, else its most salient facts that do."""
    if sizing["counter"].count_text(text) <= sizing["budget"]:
        return text
    return compact_facts([], previous=text, known=known, **sizing)
