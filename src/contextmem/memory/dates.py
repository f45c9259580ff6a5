"""Pure: the calendar days a memory query names *relative to today* ("yesterday", "last Saturday", "上周六").

A query that names a day asks about that day's daily file (:func:`.text.query_days`, :mod:`.ranking`).
ISO dates carry their own year; the forms here need the search's reference date ``today`` (the index's
clock, :class:`.indexing.BaseMemoryIndex`; injectable for tests and evaluation). :func:`relative_days`
is a pure function of ``(query, today)``: no clock, no I/O.

What resolves, and the conventions (weeks are ISO weeks, Monday to Sunday, in both languages):

=============================================  =========================================================
``yesterday``, ``last night``, 昨天/昨日/昨晚   today - 1
``the day before yesterday``, 前天              today - 2
大前天                                          today - 3
``3 days ago``, ``three days ago``, 三天前      today - 3 (1..9999 days; 三天以前 / 3日之前 too)
``last Saturday``, ``this past Saturday``,      the most recent Saturday strictly before today (1..7
``on Saturday``, bare 周六/星期六/礼拜六         days ago: on a Sunday, "last Saturday" is yesterday)
上周六 / 上星期六 / 上礼拜六 / 上个周六          the Saturday of the previous ISO week (1..13 days ago);
                                                上上周六 the week before; 这周六/本周六 this week's,
                                                only if it is before today
``last week``, 上周 / 上星期 / 上个礼拜 / 上上周  the seven days of the previous ISO week (a range)
``last weekend``, 上周末                        Saturday and Sunday of the previous ISO week
``March 14``, ``14th of March``, 3月14日,        the most recent March 14 on or before today; with a
三月十四号                                      year (``March 14, 2026``, 2026年3月14日) that day
=============================================  =========================================================

Invariants: every day resolved against ``today`` is on or before it (a date written with its year is
taken as written); text without these phrases resolves to nothing — in particular "today"/今天 (today's
file is already undecayed, and "today" in a query usually means "now", not a topic), future forms (``next
Friday``, 下周一, ``this Friday``), habits (``every Monday``, ``Mondays``, 每周一, 周一到周五, 一周三次),
bare English weekdays without ``on``/``last``, vague spans (``the last week`` = a rolling window, ``a week
ago``, ``last month``, 上个月, 几天前, 两三天前, 日前) and ordinary words that share letters or characters
with date words (``may`` — the month only as ``May`` —, ``march on``, ``second``, ``sat``, 周到, 周期,
之前天气, 提前三天前往). A phrase is read once: ``the day before yesterday`` is today - 2, not also
today - 1. Read as a date although it may not be one: 上周到北京 ("went to Beijing last week", rather
than 送上周到的服务), and ``on Sunday`` / 周日 in a question about a Sunday remembered from long ago (the
cost is measured in ``docs/results.md``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta

from ..lang import en, zh

__all__ = ["day_mentions", "relative_days"]

MAX_DAYS_AGO = 9999  # "N days ago" beyond this (or before year 1) resolves to nothing

# The names are the language tables' (:mod:`contextmem.lang`); the phrase forms below are each language's
# grammar of a relative day.
_EN_WEEKDAYS = tuple(names[0].lower() for names in en.WEEKDAYS)
_ZH_WEEKDAYS = {name: weekday for weekday, names in enumerate(zh.WEEKDAYS) for name in names}
_EN_NUMBERS = en.NUMBERS
_ZH_DIGITS = zh.DIGITS
_MONTHS = {name.lower(): number for number, names in enumerate(en.MONTHS, start=1) for name in names}

# English words are delimited by "not a letter" rather than \b: a CJK character is a \w, and mixed
# queries ("yesterday发生了什么") are common.
_NOT_LETTER_BEFORE, _NOT_LETTER_AFTER = r"(?<![A-Za-z])", r"(?![A-Za-z])"
_EN_WEEKDAY = "(" + "|".join(_EN_WEEKDAYS) + ")"
# "May" only capitalised: "PostgreSQL 16 may break" is the verb.
_WORD_MONTHS = {name.lower(): name for name in en.WORD_MONTHS}
_EN_MONTH = (
    "("
    + "|".join(
        f"(?-i:{_WORD_MONTHS[m]})" if m in _WORD_MONTHS else m for m in sorted(_MONTHS, key=len, reverse=True)
    )
    + r")\.?"
)
_EN_DAY_OF_MONTH = r"(\d{1,2})(?:st|nd|rd|th)?"
_ZH_NUMBER = f"[{zh.NUMERALS}]{{1,3}}"
_ZH_WEEK = "(?:周|星期|礼拜)"
_ZH_WEEKDAY = "([" + "".join(_ZH_WEEKDAYS) + "])"
_ZH_NUMERAL_BEFORE = rf"(?<![{zh.NUMERALS}几\d:.])"  # "一周三次" is "three times a week"


@dataclass(frozen=True, slots=True)
class _Form:
    """One kind of phrase: its text (groups are its values) and how it resolves against ``today``."""

    first: str  # the characters it can start with (a regex class body, any case): see _PHRASE_RE
    pattern: str
    resolve: Callable[[tuple[str, ...], date], Iterator[date]]
    before: str = ""  # lookarounds of the context, outside the phrase itself
    after: str = ""


def _days_ago(n: int, today: date) -> Iterator[date]:
    if 1 <= n <= MAX_DAYS_AGO:
        try:
            yield today - timedelta(days=n)
        except OverflowError:  # before year 1
            return


def _fixed(n: int) -> Callable[[tuple[str, ...], date], Iterator[date]]:
    return lambda _groups, today: _days_ago(n, today)


def _number(text: str) -> int | None:
    """``"12"``, ``"three"``, ``"三"``, ``"十二"``, ``"二十一"`` -> the number; anything else (``"两三"``:
    "two or three") -> ``None``."""
    if text.isdigit():
        return int(text)
    if text.lower() in _EN_NUMBERS:
        return _EN_NUMBERS.index(text.lower()) + 1
    tens, ten, units = text.partition("十")
    if not ten:
        return _ZH_DIGITS.get(text) if len(text) == 1 else None
    high = _ZH_DIGITS.get(tens, 0) if tens else 1
    low = _ZH_DIGITS.get(units, 0) if units else 0
    if (tens and not high) or (units and not low) or tens == "两" or units == "两":
        return None
    return 10 * high + low


def _n_days_ago(groups: tuple[str, ...], today: date) -> Iterator[date]:
    n = _number(groups[0])
    return _days_ago(n, today) if n is not None else iter(())


def _weekday(text: str) -> int:
    return _ZH_WEEKDAYS[text] if text in _ZH_WEEKDAYS else _EN_WEEKDAYS.index(text.lower())


def _last_weekday(groups: tuple[str, ...], today: date) -> Iterator[date]:
    """The most recent such weekday strictly before ``today`` (1..7 days ago)."""
    return _days_ago((today.weekday() - _weekday(groups[-1]) - 1) % 7 + 1, today)


_WEEKS_BACK = {"上上": 2, "上": 1, "这": 0, "本": 0, "last": 1}


def _week_of(weeks_back: int, today: date, weekdays: range) -> Iterator[date]:
    """``weekdays`` (0 = Monday) of the ISO week ``weeks_back`` weeks before today's, those before today."""
    for weekday in weekdays:
        back = today.weekday() - weekday + 7 * weeks_back
        if back > 0:
            yield from _days_ago(back, today)


def _weekday_of_week(groups: tuple[str, ...], today: date) -> Iterator[date]:
    weekday = _weekday(groups[1])
    return _week_of(_WEEKS_BACK[groups[0]], today, range(weekday, weekday + 1))


def _whole_week(groups: tuple[str, ...], today: date) -> Iterator[date]:
    return _week_of(_WEEKS_BACK[groups[0].lower()], today, range(7))


def _weekend(groups: tuple[str, ...], today: date) -> Iterator[date]:
    return _week_of(_WEEKS_BACK[groups[0].lower()], today, range(5, 7))


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


def _en_month_first(groups: tuple[str, ...], today: date) -> Iterator[date]:
    month, day, year = groups
    return _month_day(_MONTHS[month.lower()], int(day), year or None, today)


def _en_day_first(groups: tuple[str, ...], today: date) -> Iterator[date]:
    day, month, year = groups
    return _month_day(_MONTHS[month.lower()], int(day), year or None, today)


def _zh_month_day(groups: tuple[str, ...], today: date) -> Iterator[date]:
    year, month, day = groups
    return _month_day(_number(month), _number(day), year or None, today)


_EN, _ZH = _NOT_LETTER_BEFORE, ""
# Order matters where two forms can start at the same place: the longer phrase first.
_FORMS: tuple[_Form, ...] = (
    _Form(r"t", r"the\s+day\s+before\s+yesterday", _fixed(2), _EN, _NOT_LETTER_AFTER),
    _Form(r"yl", "|".join(w.replace(" ", r"\s+") for w in en.YESTERDAY), _fixed(1), _EN, _NOT_LETTER_AFTER),
    _Form(
        r"\dotfsen",
        rf"(\d{{1,4}}|{'|'.join(_EN_NUMBERS)})\s+days?\s+ago",
        _n_days_ago,
        r"(?<![\w.])",
        _NOT_LETTER_AFTER,
    ),
    _Form(r"lto", rf"(?:last|this\s+past|on)\s+{_EN_WEEKDAY}", _last_weekday, _EN, _NOT_LETTER_AFTER),
    _Form(r"l", r"(last)\s+weekend", _weekend, _EN, _NOT_LETTER_AFTER),
    _Form(r"l", r"(last)\s+week", _whole_week, r"(?<![A-Za-z])(?<!the\s)(?<!past\s)", _NOT_LETTER_AFTER),
    _Form(
        r"jfmasond",
        rf"{_EN_MONTH}\s+{_EN_DAY_OF_MONTH}(?:,?\s+(\d{{4}}))?",
        _en_month_first,
        _EN,
        r"(?![\d:.]*\d)(?![A-Za-z])",
    ),
    _Form(
        r"\d",
        rf"{_EN_DAY_OF_MONTH}\s+(?:of\s+)?{_EN_MONTH}(?:,?\s+(\d{{4}}))?",
        _en_day_first,
        r"(?<![\w.:])",
        r"(?!\d)(?![A-Za-z])",
    ),
    _Form(r"大", "大前天", _fixed(3), _ZH),
    _Form(r"昨", "|".join(zh.YESTERDAY), _fixed(1), _ZH),
    # 之前天气 ("the weather before"), 提前天数: 前 belongs to the word before it, 天 to the one after.
    _Form(
        "前",
        "前天",
        _fixed(2),
        "(?<![之以提目眼面空从事生当跟门年月日周往向超史])",
        "(?![气空然下才使堂真地生文性赋])",
    ),
    _Form(
        r"\d一二两三四五六七八九十",
        rf"(\d{{1,4}}|{_ZH_NUMBER})[天日][以之]?前",
        _n_days_ago,
        rf"(?<!月){_ZH_NUMERAL_BEFORE}",  # 三月十四日前: "before 14 March", not 14 days ago
        "(?![往进来去面后端台途景排列])",
    ),
    _Form(r"上这本", rf"(上上|上|这|本)(?:个)?{_ZH_WEEK}{_ZH_WEEKDAY}", _weekday_of_week, _ZH, "(?![到至])"),
    _Form(r"上", "(上上|上)(?:个)?周末", _weekend, _ZH),
    _Form(r"上", rf"(上上|上)(?:个)?{_ZH_WEEK}", _whole_week, _ZH, "(?![期围边长游转报刊堂])"),
    _Form(
        r"周星礼",
        rf"{_ZH_WEEK}{_ZH_WEEKDAY}",
        _last_weekday,
        rf"(?<![上下每这本个到至]){_ZH_NUMERAL_BEFORE}",
        "(?![到至~\\-—])",
    ),
    _Form(
        r"\d一二两三四五六七八九十",
        rf"(?:(\d{{4}})\s*年\s*)?(\d{{1,2}}|{_ZH_NUMBER})\s*月\s*(\d{{1,2}}|{_ZH_NUMBER})\s*[日号]",
        _zh_month_day,
        r"(?<![\d年])",  # 二〇二六年三月十四日: a year this does not read is not guessed
    ),
)
_FORM_RES = tuple(re.compile(form.pattern, re.IGNORECASE) for form in _FORMS)
# One pass over the query; the leading class skips, in one test, every position no phrase can start at
# (3x faster on a 2,000-character query: ~1 ms instead of ~3).
_PHRASE_RE = re.compile(
    f"(?=[{''.join(form.first for form in _FORMS)}])(?:"
    + "|".join(f"(?P<f{i}>{form.before}(?:{form.pattern}){form.after})" for i, form in enumerate(_FORMS))
    + ")",
    re.IGNORECASE,
)


def relative_days(query: str, today: date) -> frozenset[date]:
    """The days ``query`` names relative to ``today`` (the table in the module docstring), read left to
    right, each phrase once. Linear in ``len(query)``; callers bound the query (:func:`.text.bound_query`)
    and the number of days they use (:data:`.text.MAX_QUERY_DAYS`)."""
    days: set[date] = set()
    for match in _PHRASE_RE.finditer(query):
        index = int((match.lastgroup or "f0")[1:])
        phrase = _FORM_RES[index].fullmatch(match.group())
        if phrase is not None:
            days.update(_FORMS[index].resolve(phrase.groups(default=""), today))
    return frozenset(days)


_MONTH_NAMES = tuple(names[0].lower() for names in en.MONTHS)


def day_mentions(days: Iterable[date]) -> re.Pattern[str] | None:
    """A pattern that finds ``days`` written in a text, as session headers and memory entries write them:
    ``2023-05-08``, ``2023/5/8``, ``2023年5月8日``, ``8 May 2023``, ``May 8, 2023`` (any case, an optional
    comma, abbreviated months). ``None`` for no days. Digits are delimited: ``18 May 2023`` is not
    ``8 May 2023``."""
    spellings: list[str] = []
    for day in sorted(set(days)):
        full = _MONTH_NAMES[day.month - 1]
        month = f"(?:{full}|{full[:3]}\\.?)" if len(full) > 3 else full
        y, m, d = day.year, day.month, day.day
        spellings += [
            rf"{y}-0?{m}-0?{d}",
            rf"{y}/0?{m}/0?{d}",
            rf"{y}年0?{m}月0?{d}[日号]",
            rf"{d}(?:st|nd|rd|th)? {month},? {y}",
            rf"{month} {d}(?:st|nd|rd|th)?,? {y}",
        ]
    if not spellings:
        return None
    return re.compile(r"(?i)(?<!\d)(?:" + "|".join(spellings) + r")(?!\d)")
