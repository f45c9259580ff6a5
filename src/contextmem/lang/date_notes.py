"""Pure: a fact written to memory, followed by the days, months and years it names relative to the day
it was said.

Said on "14 March, 2024", "I went to the group yesterday." is written "I went to the group yesterday.
(yesterday: 13 March, 2024)" (:func:`resolved_days`), the day written as the session date is
(:func:`written_like`); "We move next month." is written "We move next month. (next month: April 2024)".
The entry is read long after, when "yesterday" and "next month" say nothing. The day phrases and the days
they name are :mod:`contextmem.lang.dates`'s; the months and years are each language's
:attr:`~contextmem.lang.Language.period_phrases`, written in its ``month_spelling`` and ``year_spelling``.

Only what names one day, month or year for certain is written: not "on Saturday" (the last one, or the
next?), not "last week" (seven days). A note never changes the words said.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import date

from .dates import full_dates, full_days, named_days
from .language import Language, PeriodPhrase
from .registry import derived, languages
from .scripts import CJK_LETTER_RUN as _CJK_LETTER

__all__ = ["resolved_days", "written_like"]

# The kinds of day phrase that name a single day (:data:`contextmem.lang.DAY_KINDS`).
_ONE_DAY = frozenset({"days", "days_ago", "last_weekday", "weekday_of_week", "days_ahead", "next_weekday"})

_PERIODS: Callable[[], tuple[tuple[re.Pattern[str], PeriodPhrase, Language], ...]] = derived(
    lambda langs: tuple(
        (re.compile(phrase.pattern, re.IGNORECASE), phrase, language)
        for language in langs
        for phrase in language.period_phrases
    )
)


def _one_day_phrases(text: str, today: date) -> Iterator[tuple[int, str, date]]:
    """Each phrase of ``text`` that names one day relative to ``today`` for certain, where it starts and
    that day: "yesterday", "three days ago", "last Friday", "tomorrow", 上周六; not weeks and weekends
    (several days), month days (which write their own) nor "on Friday" (either side of today)."""
    for named in named_days(text, today):
        if named.kind in _ONE_DAY and named.certain and len(named.days) == 1:
            yield named.start, named.said, named.days[0]


def _period_phrases(text: str, today: date) -> Iterator[tuple[int, str, str]]:
    """Each phrase of ``text`` that names a month or year relative to ``today``'s, where it starts, and
    that month or year in its language's spelling: "last month" -> "April 2023", 去年 -> "2022年"."""
    for pattern, phrase, language in _PERIODS():
        for found in pattern.finditer(text):
            written = _period(phrase, language, today)
            if written:
                yield found.start(), found.group(), written


def _period(phrase: PeriodPhrase, language: Language, today: date) -> str | None:
    """The month or year ``phrase`` names, said on ``today``, in ``language``'s spelling; ``None`` outside
    years 1..9999, or for a spelling the language's tables cannot fill."""
    if phrase.unit == "year":
        year, month, spelling = today.year + phrase.offset, 0, language.year_spelling
    else:
        year, month = divmod(today.year * 12 + today.month - 1 + phrase.offset, 12)
        month, spelling = month + 1, language.month_spelling
    name = language.months[month - 1][0] if 1 <= month <= len(language.months) else ""
    if not (1 <= year <= 9999 and spelling) or ("{month}" in spelling and not name):
        return None
    return spelling.format(y=year, m=month, month=name)


_YEAR_FIRST = re.compile(
    r"(?P<y>\d{4})(?P<a>\D{1,3}?)(?P<m>\d{1,2})(?P<b>\D{1,3}?)(?P<d>\d{1,2})(?P<tail>\D?)"
)
_DAY_NUMBER = re.compile(r"(?<!\d)(?P<d>\d{1,2})(?P<suffix>st|nd|rd|th)?(?!\d)")


def written_like(day: date, example: str) -> str:
    """``day`` written the way ``example`` writes its one date: ``2023-05-08`` and ``2023/5/8`` (their
    separators and padding), ``2023年5月8日``, ``14 March, 2024``, ``May 8th, 2023``, ``8 Jun 2023`` (month
    names from the language tables, as abbreviated and cased as ``example``'s): the date alone, not what
    surrounds it (the "Tuesday" or "7:48 pm" of ``Tuesday, 6:30 pm on 14 March, 2024`` is not ``day``'s). ISO
    when ``example`` writes no single day, or a form this cannot rewrite: the result is read back, and must
    write ``day``."""
    found = list(full_dates(example))
    if len({was for _, was in found}) != 1:
        return day.isoformat()
    (start, end), was = found[0]
    out = _rewritten(example[start:end], was, day)
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
    """``text``, said on the one day ``written`` writes, followed by what each of its phrases that name one
    day, month or year relative to it names (a day in ``written``'s form), in the order said. Said on "14
    March, 2024", "I went yesterday." becomes "I went yesterday. (yesterday: 13 March, 2024)". Said on
    2023年5月9日, 我上周六去了公园，下个月去上海。 becomes
    我上周六去了公园，下个月去上海。（上周六：2023年5月6日；下个月：2023年6月）.
    A memory entry then answers "when" without its reader counting days; the words said stay as they
    were, side by side (a search for them still finds them). ``text`` as it is when ``written`` writes no
    single day."""
    days = full_days(written)
    if len(days) != 1:
        return text
    today = next(iter(days))
    found = [(start, said, written_like(day, written)) for start, said, day in _one_day_phrases(text, today)]
    found += _period_phrases(text, today)
    named: dict[tuple[str, str], str] = {}  # each phrase once, as it is first written, in the text's order
    for _, said, value in sorted(found):
        named.setdefault((said.lower(), value), said)
    notes = [(said, value) for (_, value), said in named.items()]
    if not notes:
        return text
    if _CJK_LETTER.search(text):  # Chinese writes no spaces, and its own brackets and colon
        return text + "（" + "；".join(f"{said}：{day}" for said, day in notes) + "）"
    return f"{text} (" + "; ".join(f"{said}: {day}" for said, day in notes) + ")"
