"""Pure: the calendar days a text names *relative to a day* ("yesterday", "last Saturday"), and dates
written in full.

A query that names a day asks about that day's daily file (:func:`contextmem.memory.text.query_days`,
:mod:`contextmem.memory.ranking`); a fact written to memory is followed by the days it names relative to
the day it was said (:func:`resolved_days`), written as that day is (:func:`written_like`).

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
recent March 14 on or before today; with a year, that day).

Invariants: every day resolved against ``today`` is on or before it (a date written with its year is
taken as written); text without these phrases resolves to nothing — in particular "today" (today's file
is already undecayed, and "today" in a query usually means "now", not a topic), future forms, habits
("every Monday"), vague spans ("the last week", "a week ago", "last month") and ordinary words that share
letters with date words ("may", "march on", "sat"). A phrase is read once: "the day before yesterday" is
today - 2, not also today - 1. Read as a date although it may not be one: "on Sunday" in a question
about a Sunday remembered from long ago (the cost is measured in ``docs/results.md``).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date, timedelta

from .language import DayPhrase, Language
from .registry import derived, languages
from .scripts import CJK_LETTER_RUN as _CJK_LETTER

__all__ = [
    "day_mentions",
    "full_days",
    "relative_days",
    "resolved_days",
    "written_days",
    "written_like",
    "written_months",
]

MAX_DAYS_AGO = 9999  # "N days ago" beyond this (or before year 1) resolves to nothing
_ISO_DAY = re.compile(r"(?<!\d)(\d{4})[-/](\d{1,2})[-/](\d{1,2})(?!\d)")
_ONE_DAY = frozenset({"days", "days_ago", "last_weekday", "weekday_of_week"})  # kinds that name a single day


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
    if 1 <= n <= MAX_DAYS_AGO:
        try:
            yield today - timedelta(days=n)
        except OverflowError:  # before year 1
            return


def _week_of(weeks_back: int, today: date, weekdays: range) -> Iterator[date]:
    """``weekdays`` (0 = Monday) of the ISO week ``weeks_back`` weeks before today's, those before today."""
    for weekday in weekdays:
        back = today.weekday() - weekday + 7 * weeks_back
        if back > 0:
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

    ``days``: ``phrase.days`` before today. ``days_ago``: ``n`` days before today. ``last_weekday``: the
    most recent such weekday strictly before today (1..7 days ago). ``weekday_of_week``: that weekday of
    the ISO week ``week`` weeks before today's, if before today. ``whole_week`` / ``weekend``: the seven
    days / Saturday and Sunday of that week, those before today. ``month_day``: that day of ``year``, or
    the most recent one on or before today."""
    kind = phrase.kind
    if kind == "days":
        return _days_ago(phrase.days, today)
    if kind == "days_ago":
        n = reader.number(values["n"])
        return _days_ago(n, today) if n is not None else iter(())
    if kind == "month_day":
        day = reader.number(values["day"])
        return _month_day(reader.month(values["month"]), day, values.get("year") or None, today)
    weekday = reader.weekdays.get(values.get("weekday", "").lower(), -1)
    if kind == "last_weekday":
        return _days_ago((today.weekday() - weekday - 1) % 7 + 1, today) if weekday >= 0 else iter(())
    weeks_back = reader.weeks_back.get(values["week"].lower(), -1)
    if weeks_back < 0 or (kind == "weekday_of_week" and weekday < 0):  # a word its tables do not hold
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
    days: set[date] = set()
    for _, phrase, values, reader in _phrases(query):
        days.update(_resolve(phrase, reader, values, today))
    return frozenset(days)


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
    """Each month-day phrase of ``text`` that carries its year ("8 May, 2023"): its span and its day."""
    for match, phrase, values, reader in _phrases(text):
        if phrase.kind == "month_day" and values.get("year"):
            yield match.span(), _resolve(phrase, reader, values, date.max)


def full_days(text: str) -> set[date]:
    """The days ``text`` writes in full, with their year, and nothing relative to a today: ISO
    (``2026-01-05``, ``2026/1/5``), the written forms of :func:`written_days` and month-day phrases that
    carry a year ("8 May, 2023", "May 8, 2022"); impossible dates are ignored. What a heading dates its
    section by (:func:`contextmem.memory.text.heading_days`)."""
    return {day for _, day in _full_dates(text)}


def _full_dates(text: str) -> Iterator[tuple[tuple[int, int], date]]:
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
    ``2023-05-08``, ``2023/5/8``, ``2023年5月8日``, ``8 May 2023``, ``May 8, 2023`` (any case, an optional
    comma, abbreviated months). ``None`` for no days. Digits are delimited: ``18 May 2023`` is not
    ``8 May 2023``."""
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


def _one_day_phrases(text: str, today: date) -> Iterator[tuple[str, date]]:
    """Each phrase of ``text`` that names one day relative to ``today``, and that day: "yesterday", "three
    days ago", "last Friday", 上周六; not weeks and weekends (several days) nor month days (which write
    their own)."""
    for match, phrase, values, reader in _phrases(text):
        if phrase.kind in _ONE_DAY:
            days = list(_resolve(phrase, reader, values, today))
            if len(days) == 1:
                yield match.group(), days[0]


_YEAR_FIRST = re.compile(
    r"(?P<y>\d{4})(?P<a>\D{1,3}?)(?P<m>\d{1,2})(?P<b>\D{1,3}?)(?P<d>\d{1,2})(?P<tail>\D?)"
)
_DAY_NUMBER = re.compile(r"(?<!\d)(?P<d>\d{1,2})(?P<suffix>st|nd|rd|th)?(?!\d)")


def written_like(day: date, example: str) -> str:
    """``day`` written the way ``example`` writes its one date: ``2023-05-08`` and ``2023/5/8`` (their
    separators and padding), ``2023年5月8日``, ``8 May, 2023``, ``May 8th, 2023``, ``8 Jun 2023`` (month
    names from the language tables, as abbreviated and cased as ``example``'s), with what surrounds it
    (``7:48 pm on 8 May, 2023``). ISO when ``example`` writes no single day, or a form this cannot rewrite:
    the result is read back, and must write ``day``."""
    found = list(_full_dates(example))
    if len({was for _, was in found}) != 1:
        return day.isoformat()
    (start, end), was = found[0]
    out = example[:start] + _rewritten(example[start:end], was, day) + example[end:]
    return out if full_days(out) == {day} else day.isoformat()


def _rewritten(written: str, was: date, day: date) -> str:
    """``written``, which writes the date ``was`` and nothing else, made to write ``day``."""
    numeric = _YEAR_FIRST.fullmatch(written)
    if numeric:
        # ISO pads the month and day to two digits, and so does a form that pads either ("2023/05/8").
        width = 2 if numeric["a"] == "-" or "0" in (numeric["m"][0], numeric["d"][0]) else 1
        month, number = f"{day.month:0{width}d}", f"{day.day:0{width}d}"
        return f"{day.year}{numeric['a']}{month}{numeric['b']}{number}{numeric['tail']}"
    out = _renamed_month(written.replace(str(was.year), str(day.year), 1), was.month, day.month)
    found = next((n for n in _DAY_NUMBER.finditer(out) if int(n["d"]) == was.day), None)
    if found is None:
        return out
    suffix = _ordinal(day.day) if found["suffix"] else ""
    return f"{out[: found.start()]}{day.day}{suffix}{out[found.end() :]}"


def _ordinal(day: int) -> str:
    return "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")


def _renamed_month(text: str, was: int, now: int) -> str:
    """``text`` with its first name of month ``was`` (any registered language's, any form) written as month
    ``now`` in the same form (full or abbreviated) and case."""
    for language in languages():
        if len(language.months) < max(was, now):
            continue
        for form, name in enumerate(language.months[was - 1]):
            found = re.search(rf"(?<![^\W\d_]){re.escape(name)}(?![^\W\d_])", text, re.IGNORECASE)
            if found is None:
                continue
            names, written = language.months[now - 1], found.group()
            # The same form: the full name for a full one, else an abbreviation as long ("Sep" for "Jun").
            same = names[min(form, len(names) - 1)]
            new = same if form == 0 else next((n for n in names[1:] if len(n) == len(written)), same)
            new = (
                new.lower()
                if written.islower()
                else new.upper()
                if written.isupper() and len(written) > 1
                else new
            )
            return text[: found.start()] + new + text[found.end() :]
    return text


def resolved_days(text: str, written: str) -> str:
    """``text``, said on the one day ``written`` writes, followed by the day each of its phrases that name
    one day relative to it names, in ``written``'s form: said on "8 May, 2023", "I went yesterday." becomes
    "I went yesterday. (yesterday: 7 May, 2023)"; 我上周六去了公园。 said on 2023年5月9日 becomes
    我上周六去了公园。（上周六：2023年5月6日）. A memory entry then answers "when" without its reader counting
    days; the words said stay as they were, side by side (a search for them still finds them). ``text`` as
    it is when ``written`` writes no single day."""
    days = full_days(written)
    if len(days) != 1:
        return text
    named: dict[tuple[str, date], str] = {}  # each phrase once, as it is first written
    for said, day in _one_day_phrases(text, next(iter(days))):
        named.setdefault((said.lower(), day), said)
    notes = [(said, written_like(day, written)) for (_, day), said in named.items()]
    if not notes:
        return text
    if _CJK_LETTER.search(text):  # Chinese writes no spaces, and its own brackets and colon
        return text + "（" + "；".join(f"{said}：{day}" for said, day in notes) + "）"
    return f"{text} (" + "; ".join(f"{said}: {day}" for said, day in notes) + ")"
