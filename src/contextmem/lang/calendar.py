"""Patterns of when, built from the registered languages' calendar tables: dates, partial dates, the
words that say when without a date, and the questions that ask when.

The summariser scores a sentence that writes a date (:mod:`contextmem.summarize.salience`); memory search
lifts the chunks that say when for a question that asks when (:mod:`contextmem.memory.when`). Like every
:class:`~.registry.TablePattern`, each is rebuilt when a language is registered.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .language import Language
from .registry import TablePattern, alternatives, derived

__all__ = ["DATE", "PARTIAL_DATE", "WHEN_QUESTION", "says_when"]


def _names_of(table: tuple[tuple[str, ...], ...]) -> str:
    """Regex alternatives of the names of a calendar table, longest first."""
    return "|".join(sorted((name for names in table for name in names), key=len, reverse=True))


def _dates(lang: Language) -> list[str]:
    """A language's full dates: ``8 May 2023`` and ``May 8, 2023`` when it writes month names between
    spaces, and its own forms."""
    spaced = []
    if lang.whole_words and lang.months:
        months = _names_of(lang.months)
        spaced = [
            rf"\b\d{{1,2}}(?:st|nd|rd|th)? (?:{months}),? \d{{4}}\b",
            rf"\b(?:{months}) \d{{1,2}}(?:st|nd|rd|th)?,? \d{{4}}\b",
        ]
    return [*spaced, *lang.dates]


def _partial_dates(lang: Language) -> list[str]:
    """A language's partial dates: a month or weekday name as a word (when it writes spaces), and its own
    forms."""
    names = [_names_of(lang.months), "|".join(n for names in lang.weekdays for n in names)]
    spaced = [rf"\b(?:{'|'.join(n for n in names if n)})\b"] if lang.whole_words and any(names) else []
    return [*spaced, *lang.partial_dates]


_ISO_DATE = r"\b\d{4}[-/.]\d{1,2}[-/.]\d{1,2}(?:[ T]\d{1,2}:\d{2})?\b"

DATE = TablePattern(alternatives(_dates, _ISO_DATE))
"""A full date: ISO (``2023-05-08 10:00``), or as a language writes one (``8 May 2023``, 2023年5月8日)."""
PARTIAL_DATE = TablePattern(alternatives(_partial_dates))
"""A date without its year, or a relative one: a month or weekday name (``May``, ``Friday``), ``3rd``,
上周三, 去年."""
WHEN_QUESTION = TablePattern(alternatives(lambda lang: lang.when_questions), re.IGNORECASE)
"""A question that asks when ("When did…", "What year…", "How long ago…", 什么时候, 哪天); each language's
alternatives anchor themselves."""


@dataclass(frozen=True, slots=True)
class _When:
    """What says when, by the languages' tables: the calendar names (as written) and time words
    (lower-cased) of the languages that write spaces between words, and for each other language, its
    letters and the pattern of its dates and time phrases."""

    names: frozenset[str]
    words: frozenset[str]
    phrases: tuple[tuple[re.Pattern[str], re.Pattern[str]], ...]


def _when(langs: tuple[Language, ...]) -> _When:
    spaced = [lang for lang in langs if lang.whole_words]
    names = {
        name for lang in spaced for table in (lang.months, lang.weekdays) for names in table for name in names
    }
    phrases = tuple(
        (re.compile(f"[{lang.letters}]"), re.compile("|".join(parts)))
        for lang in langs
        if not lang.whole_words and lang.letters
        if (parts := [*lang.dates, *lang.partial_dates, *lang.time_phrases])
    )
    return _When(frozenset(names), frozenset().union(*(lang.time_words for lang in spaced)), phrases)


_WHEN = derived(_when)
_TOKEN = re.compile(r"\w+")
_YEAR = re.compile(r"(?<!\d)(?:19|20)\d\d(?!\d)")


def says_when(text: str) -> bool:
    """Whether ``text`` says when: a month or weekday name (as the tables write it: "May", not "may"), a
    year (1900–2099, so an ISO date too), a word of time ("yesterday", "three weeks ago", "last summer"),
    or a language's own dates and time phrases (昨天, 三年前, 2023年5月8日). Words are looked up, not
    scanned for; memory reads it once for each chunk it indexes (:mod:`contextmem.memory.when`)."""
    when = _WHEN()
    tokens = _TOKEN.findall(text)
    if not when.names.isdisjoint(tokens) or not when.words.isdisjoint(t.lower() for t in tokens):
        return True
    if _YEAR.search(text):
        return True
    return any(letters.search(text) and pattern.search(text) for letters, pattern in when.phrases)
