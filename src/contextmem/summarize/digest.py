"""The memory entry a compaction writes (M2): the summary's facts as dated, attributed bullets.

Pure: :func:`fact_digest` reads a six-section summary (as :mod:`.facts` writes it) back into facts and lays
them out a session at a time, so a markdown index chunks the entry by session date.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from itertools import pairwise

from ..lang.date_notes import resolved_days
from .facts import facts_from_summary, session_date
from .languages import Lang, summary_text
from .prompts import SECTION_KEYS

__all__ = ["fact_digest"]


def _chronological(runs: Iterable[Sequence[str]]) -> list[str]:
    """Every date of ``runs`` (each in the order its facts were said, as a section lists them) in an
    order that keeps every run's: a date goes first once no run has another before it; ties, and dates
    said again after others (no order fits every run), by first appearance."""
    seen = list(dict.fromkeys(d for run in runs for d in run))
    before = {d: set[str]() for d in seen}
    for run in runs:
        for earlier, later in pairwise(dict.fromkeys(run)):
            before[later].add(earlier)
    ordered: list[str] = []
    while seen:
        ready = next((d for d in seen if not before[d] & set(seen)), seen[0])
        ordered.append(ready)
        seen.remove(ready)
    return ordered


def fact_digest(summary: str, lang: Lang, *, previous: str | None = None) -> str:
    """The facts of ``summary`` (six sections, as :func:`compact_facts` writes them) as a memory entry
    (M2): a bullet per fact that stands alone, its session date and speaker written on it —
    ``- [2022-01-18] Bart: I got a gold-plated pocket watch.`` — under a ``### date`` heading per
    session date, sessions in the order they were held (undated facts first, under their section's
    title), so a markdown index chunks it a session at a time. No section headers, no ``(none)``, no
    identifier block: short chunks like those outranked the bullet holding the answer
    (``evals/results/compaction_facts.md``). A fact that names a day, month or year relative to its
    session date is followed by it (:func:`contextmem.lang.date_notes.resolved_days`):
    ``- [14 March, 2024] Ingrid: I went to the group yesterday. (yesterday: 13 March, 2024)``. The entry is
    read long after, when "yesterday" says nothing.

    Facts said before the first session header of ``summary`` took place on the session date that
    ``previous`` (the summary before them) ends on. Pure; ``""`` when ``summary`` holds no fact.
    Invariant: every fact :func:`facts_from_summary` reads in ``summary`` is a bullet of the digest.
    """
    start = session_date(facts_from_summary(previous, lang)) if previous else None
    facts = [(f, f.date or start) for f in facts_from_summary(summary, lang)]
    titles = summary_text(lang).sections
    bullets: dict[str, list[str]] = {}  # heading -> bullets, in the summary's order
    for fact, when in facts:
        said = resolved_days(fact.text, when) if when else fact.text
        line = "- " + replace(fact, date=when, text=said).item()
        bullets.setdefault(when or titles[fact.section], []).append(line)
    runs = [[when for f, when in facts if when and f.section == key] for key in SECTION_KEYS]
    headings = [h for h in bullets if h in titles.values()] + _chronological(runs)
    return "\n\n".join(f"### {heading}\n" + "\n".join(bullets[heading]) for heading in headings)
