"""Pure: the calendar days a text names *relative to a day* ("yesterday", "last Saturday"), and dates
written in full.

A query that names a day asks about that day's daily file (:func:`contextmem.memory.text.query_days`,
:mod:`contextmem.memory.ranking`); a fact written to memory is followed by the days it names relative to
the day it was said (:mod:`contextmem.lang.date_notes`).

ISO dates carry their own year; the phrases need a reference day ``today``: a search's is the index's
clock (:class:`contextmem.memory.indexing.BaseMemoryIndex`, injectable for tests and evaluation), a fact's
the day it was said. Every function here is pure: no clock, no I/O.

The phrases are the registered languages' (:attr:`contextmem.lang.Language.day_phrases`: each language
module lists what it reads, and what it leaves alone); this module only resolves them, by kind
(:func:`_resolve`; weeks are ISO weeks, Monday to Sunday, in every language): ``days`` (yesterday: today
- 1), ``days_ago`` ("3 days ago", 1..9999 days), ``last_weekday`` ("last Saturday": the most recent
Saturday strictly before today, so on a Sunday it is yesterday), ``weekday_of_week`` (the Saturday of
the previous ISO week, or of the week before, or of this week if it is before today), ``whole_week`` and
``weekend`` (the seven days, or Saturday and Sunday, of such a week), ``month_day`` ("March 14": the most
recent March 14 on or before today; with a year, that day). Days after today, which only a memory note
reads (:func:`named_days`): ``days_ahead`` ("tomorrow"), ``next_weekday`` ("next Saturday": the first
Saturday strictly after today) and ``weekday_of_week`` of a week after today's (下周六).

Invariants: every day :func:`relative_days` resolves against ``today`` is on or before it (a date written
with its year is taken as written); text without these phrases resolves to nothing — in particular
"today" (today's file is already undecayed, and "today" in a query usually means "now", not a topic),
future forms, habits ("every Monday"), vague spans ("the last week", "a week ago", "last month") and
ordinary words that share letters with date words ("may", "march on", "sat"). A phrase is read once: "the
day before yesterday" is today - 2, not also today - 1. Read as a date although it may not be one: "on
Sunday" in a question about a Sunday remembered from long ago (the cost is measured in
``docs/results.md``).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date, timedelta

from .language import DayPhrase, Language
from .registry import derived

__all__ = [
    "NamedDays",
    "day_mentions",
    "full_dates",
    "full_days",
    "named_days",
    "relative_days",
    "written_days",
    "written_months",
]

MAX_DAYS_AGO = 9999  # "N days ago" beyond this (or before year 1) resolves to nothing
_ISO_DAY = re.compile(r"(?<!\d)(\d{4})[-/](\d{1,2})[-/](\d{1,2})(?!\d)")


@dataclass(frozen=True, slots=True)
class _Reader:
    """What one language's phrases read their values with (its tables, as lookups)."""

    numbers: Mapping[str, int]
    tens_word: str
    tens_digits: Mapping[str, int]
    weekdays: Mapping[str, int]
    months: Mapping[str, int]
    weeks_back: Mapping[str, int]

    @classmethod
    def of(cls, language: Language) -> _Reader:
        return cls(
            numbers=language.number_words,
            tens_word=language.tens_word,
            tens_digits=language.tens_digits,
            weekdays={n.lower(): day for day, names in enumerate(language.weekdays) for n in names},
            months={n.lower(): month for month, names in enumerate(language.months, start=1) for n in names},
            weeks_back=language.weeks_back,
        )

    def number(self, text: str) -> int | None:
        """``"12"``, ``"three"``, ``"三"``, ``"十二"``, ``"二十一"`` -> the number; anything else (``"两三"``:
        "two or three") -> ``None``."""
        if text.isdigit():
            return int(text)
        value = self.numbers.get(text.lower())
        if value is not None or not self.tens_word:
            return value
        tens, ten, units = text.partition(self.tens_word)
        if not ten:
            return None
        high = self.tens_digits.get(tens) if tens else 1
        low = self.tens_digits.get(units) if units else 0
        return None if high is None or low is None else 10 * high + low

    def month(self, text: str) -> int | None:
        return self.months.get(text.lower()) or self.number(text)


def _days_ago(n: int, today: date) -> Iterator[date]:
    """``n`` days before today (after it for a negative ``n``); nothing beyond :data:`MAX_DAYS_AGO` or the
    calendar."""
    if n and abs(n) <= MAX_DAYS_AGO:
        try:
            yield today - timedelta(days=n)
        except OverflowError:  # before year 1 or after 9999
            return


def _week_of(weeks_back: int, today: date, weekdays: range) -> Iterator[date]:
    """``weekdays`` (0 = Monday) of the ISO week ``weeks_back`` weeks before today's, those before today;
    of a week after today's (``weeks_back`` < 0), all of them."""
    for weekday in weekdays:
        back = today.weekday() - weekday + 7 * weeks_back
        if back > 0 or weeks_back < 0:
            yield from _days_ago(back, today)


def _month_day(month: int | None, day: int | None, year: str | None, today: date) -> Iterator[date]:
    """That day of ``year``; without a year, the most recent such day on or before ``today`` (a 29
    February up to eight years back)."""
    if month is None or day is None or not (1 <= month <= 12 and 1 <= day <= 31):
        return
    years = [int(year)] if year else range(today.year, max(today.year - 8, 0), -1)
    for candidate in years:
        try:
            found = date(candidate, month, day)
        except ValueError:
            continue
        if year or found <= today:
            yield found
            return


def _resolve(phrase: DayPhrase, reader: _Reader, values: dict[str, str], today: date) -> Iterator[date]:
    """The days a phrase of kind ``phrase.kind`` names (:data:`contextmem.lang.language.DAY_KINDS`):

    ``days``: ``phrase.days`` before today. ``days_ago``: ``n`` days before today (1..9999).
    ``last_weekday``: the most recent such weekday strictly before today (1..7 days ago).
    ``weekday_of_week``: that weekday of the ISO week ``week`` weeks before today's, if before today (of
    a week after today's: that day). ``whole_week`` / ``weekend``: the seven days / Saturday and Sunday of
    that week, those before today. ``month_day``: that day of ``year``, or the most recent one on or
    before today. ``days_ahead``: ``phrase.days`` after today. ``next_weekday``: the first such weekday
    strictly after today (1..7 days ahead)."""
    kind = phrase.kind
    if kind == "days":
        return _days_ago(phrase.days, today)
    if kind == "days_ahead":
        return _days_ago(-phrase.days, today)
    if kind == "days_ago":
        n = reader.number(values["n"])
        return _days_ago(n, today) if n is not None and n > 0 else iter(())
    if kind == "month_day":
        day = reader.number(values["day"])
        return _month_day(reader.month(values["month"]), day, values.get("year") or None, today)
    weekday = reader.weekdays.get(values.get("weekday", "").lower(), -1)
    if weekday >= 0 and kind == "last_weekday":
        return _days_ago((today.weekday() - weekday - 1) % 7 + 1, today)
    if weekday >= 0 and kind == "next_weekday":
        return _days_ago(-((weekday - today.weekday() - 1) % 7 + 1), today)
    if kind in ("last_weekday", "next_weekday"):  # a weekday its tables do not hold
        return iter(())
    weeks_back = reader.weeks_back.get(values["week"].lower())
    if weeks_back is None or (kind == "weekday_of_week" and weekday < 0):  # a word its tables do not hold
        return iter(())
    if kind == "weekday_of_week":
        return _week_of(weeks_back, today, range(weekday, weekday + 1))
    return _week_of(weeks_back, today, range(5, 7) if kind == "weekend" else range(7))


@dataclass(frozen=True, slots=True)
class _Grammar:
    """The registered languages' day phrases, each with its language's reader, and one scanner."""

    phrases: tuple[tuple[DayPhrase, re.Pattern[str], _Reader], ...]
    scanner: re.Pattern[str] | None
    written: tuple[tuple[re.Pattern[str], _Reader], ...]
    months: tuple[tuple[re.Pattern[str], _Reader], ...]
    spellings: tuple[tuple[str, tuple[tuple[str, ...], ...]], ...]


_NAMED_GROUP = re.compile(r"\(\?P<\w+>")


def _grammar(languages: tuple[Language, ...]) -> _Grammar:
    phrases = tuple(
        (phrase, re.compile(phrase.pattern, re.IGNORECASE), _Reader.of(language))
        for language in languages
        for phrase in language.day_phrases
    )
    # One pass over the query; the leading class skips, in one test, every position no phrase can start
    # at (3x faster on a 2,000-character query: ~1 ms instead of ~3). Inside it a phrase's groups are
    # unnamed (two phrases may name theirs alike); each phrase found is read again with its own pattern.
    scanner = None
    if phrases:
        scanner = re.compile(
            f"(?=[{''.join(phrase.first for phrase, _, _ in phrases)}])(?:"
            + "|".join(
                f"(?P<f{i}>{phrase.before}(?:{_NAMED_GROUP.sub('(', phrase.pattern)}){phrase.after})"
                for i, (phrase, _, _) in enumerate(phrases)
            )
            + ")",
            re.IGNORECASE,
        )
    written = tuple(
        (re.compile(pattern), _Reader.of(language))
        for language in languages
        for pattern in language.written_dates
    )
    months = tuple(
        (re.compile(pattern, re.IGNORECASE), _Reader.of(language))
        for language in languages
        for pattern in language.written_months
    )
    spellings = tuple(
        (spelling, language.months) for language in languages for spelling in language.date_spellings
    )
    return _Grammar(phrases, scanner, written, months, spellings)


_GRAMMAR: Callable[[], _Grammar] = derived(_grammar)


def relative_days(query: str, today: date) -> frozenset[date]:
    """The days ``query`` names relative to ``today`` (the table in the module docstring), read left to
    right, each phrase once. Linear in ``len(query)``; callers bound the query
    (:func:`contextmem.memory.text.bound_query`) and the number of days they use
    (:data:`contextmem.memory.text.MAX_QUERY_DAYS`)."""
    # Days after today are a memory note's (:mod:`.date_notes`): a search asks about what was said. A
    # date written with its year is taken as written.
    return frozenset(
        day
        for named in named_days(query, today)
        for day in named.days
        if day <= today or named.kind == "month_day"
    )


@dataclass(frozen=True, slots=True)
class NamedDays:
    """One phrase of a text that names days relative to a day: where it starts, as said, its kind, the days
    it names, and whether they are certain (:attr:`contextmem.lang.DayPhrase.certain`)."""

    start: int
    said: str
    kind: str
    days: tuple[date, ...]
    certain: bool


def named_days(text: str, today: date) -> Iterator[NamedDays]:
    """Each phrase of ``text`` naming days relative to ``today`` (the table in the module docstring), left
    to right, each once, with the days it names (none for a day its tables do not hold)."""
    for match, phrase, values, reader in _phrases(text):
        days = tuple(_resolve(phrase, reader, values, today))
        yield NamedDays(match.start(), match.group(), phrase.kind, days, phrase.certain)


def _phrases(text: str) -> Iterator[tuple[re.Match[str], DayPhrase, dict[str, str], _Reader]]:
    """Each day phrase of ``text``, left to right, each once: its match, its kind, its values and its
    language's reader."""
    grammar = _GRAMMAR()
    if grammar.scanner is None:
        return
    for match in grammar.scanner.finditer(text):
        phrase, pattern, reader = grammar.phrases[int((match.lastgroup or "f0")[1:])]
        found = pattern.fullmatch(match.group())
        if found is not None:
            yield match, phrase, found.groupdict(default=""), reader


def written_days(query: str) -> set[date]:
    """The days ``query`` writes with their year in a registered language's form (2026年1月5日);
    impossible dates are ignored."""
    return {day for _, day in _written(query)}


def _written(text: str) -> Iterator[tuple[tuple[int, int], date]]:
    """Each date ``text`` writes in a language's written form: its span and its day."""
    for pattern, reader in _GRAMMAR().written:
        for found in pattern.finditer(text):
            month, day = reader.month(found["month"]), reader.number(found["day"])
            if month is None or day is None:
                continue
            try:
                yield found.span(), date(int(found["year"]), month, day)
            except ValueError:
                continue


def _with_year(text: str) -> Iterator[tuple[tuple[int, int], Iterator[date]]]:
    """Each month-day phrase of ``text`` that carries its year ("14 March, 2024"): its span and its day."""
    for match, phrase, values, reader in _phrases(text):
        if phrase.kind == "month_day" and values.get("year"):
            yield match.span(), _resolve(phrase, reader, values, date.max)


def full_days(text: str) -> set[date]:
    """The days ``text`` writes in full, with their year, and nothing relative to a today: ISO
    (``2026-01-05``, ``2026/1/5``), the written forms of :func:`written_days` and month-day phrases that
    carry a year ("14 March, 2024", "May 8, 2022"); impossible dates are ignored. What a heading dates its
    section by (:func:`contextmem.memory.text.heading_days`)."""
    return {day for _, day in full_dates(text)}


def full_dates(text: str) -> Iterator[tuple[tuple[int, int], date]]:
    """Each date :func:`full_days` reads in ``text``: its span and its day."""
    yield from _written(text)
    for span, found in _with_year(text):
        yield from ((span, day) for day in found)
    for match in _ISO_DAY.finditer(text):
        with contextlib.suppress(ValueError):
            yield match.span(), date(*(int(part) for part in match.groups()))


def written_months(text: str) -> set[tuple[int, int]]:
    """The ``(year, month)`` of each month ``text`` writes with its year ("December 2023", 2023年12月:
    :attr:`contextmem.lang.Language.written_months`), except inside a full date ("8 December, 2023" names
    a day, not its month); months outside 1..12 are ignored."""
    matches = [(found, reader) for pattern, reader in _GRAMMAR().months for found in pattern.finditer(text)]
    if not matches:  # most queries: the full dates are not read a second time (query_days read them)
        return set()
    taken = [span for span, _ in _written(text)] + [span for span, _ in _with_year(text)]
    months: set[tuple[int, int]] = set()
    for found, reader in matches:
        start, end = found.span()
        if not any(start < stop and begin < end for begin, stop in taken):
            month = reader.month(found["month"])
            if month is not None and 1 <= month <= 12 and int(found["year"]) >= 1:
                months.add((int(found["year"]), month))
    return months


def day_mentions(days: Iterable[date]) -> re.Pattern[str] | None:
    """A pattern that finds ``days`` written in a text, as session headers and memory entries write them:
    ``2023-05-08``, ``2023/5/8``, ``2023年5月8日``, ``14 March 2024``, ``May 8, 2023`` (any case, an optional
    comma, abbreviated months). ``None`` for no days. Digits are delimited: ``114 March 2024`` is not
    ``14 March 2024``."""
    spellings: list[str] = []
    forms = _GRAMMAR().spellings
    for day in sorted(set(days)):
        y, m, d = day.year, day.month, day.day
        spellings += [rf"{y}-0?{m}-0?{d}", rf"{y}/0?{m}/0?{d}"]
        for spelling, months in forms:
            if "{month}" in spelling and len(months) < m:
                continue
            full = months[m - 1][0].lower() if len(months) >= m else ""
            month = f"(?:{re.escape(full)}|{re.escape(full[:3])}\\.?)" if len(full) > 3 else re.escape(full)
            spellings.append(
                spelling.replace("{y}", str(y))
                .replace("{m}", str(m))
                .replace("{d}", str(d))
                .replace("{month}", month)
            )
    if not spellings:
        return None
    return re.compile(r"(?i)(?<!\d)(?:" + "|".join(spellings) + r")(?!\d)")
