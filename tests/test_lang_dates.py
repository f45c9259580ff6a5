"""Days a memory query names relative to today (issue 16): conventions, false positives, properties."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextmem.lang.dates import day_mentions, relative_days, written_months
from contextmem.memory.text import MAX_QUERY_DAYS, MAX_QUERY_MONTHS, query_days, query_month_days

WED = date(2026, 3, 18)  # a Wednesday; its ISO week starts on Monday 2026-03-16


def _days(*iso: str) -> frozenset[date]:
    return frozenset(date.fromisoformat(d) for d in iso)


LAST_WEEK = _days(*(f"2026-03-{d:02d}" for d in range(9, 16)))

RESOLVED = [
    ("What did I do yesterday?", _days("2026-03-17")),
    ("What did we talk about last night", _days("2026-03-17")),
    ("the day before yesterday", _days("2026-03-16")),  # not also yesterday
    ("Three days ago", _days("2026-03-15")),
    ("what happened 10 days ago", _days("2026-03-08")),
    ("1 day ago", _days("2026-03-17")),
    ("What did I do last Saturday?", _days("2026-03-14")),
    ("this past Sunday", _days("2026-03-15")),
    ("What did I eat on Monday?", _days("2026-03-16")),
    ("on Wednesday", _days("2026-03-11")),  # strictly before today: a week ago, not today
    ("What did I do last week?", LAST_WEEK),
    ("last weekend", _days("2026-03-14", "2026-03-15")),
    ("What happened on March 14?", _days("2026-03-14")),
    ("the 14th of March", _days("2026-03-14")),
    ("mar. 3rd", _days("2026-03-03")),
    ("Dec 25", _days("2025-12-25")),  # the most recent one on or before today
    ("March 18", _days("2026-03-18")),
    ("May 5, 2024", _days("2024-05-05")),
    ("5 May", _days("2025-05-05")),  # a year given is taken as written
    ("yesterday发生了什么", _days("2026-03-17")),  # no word boundary before CJK
    ("昨天我做了什么", _days("2026-03-17")),
    ("昨晚", _days("2026-03-17")),
    ("前天", _days("2026-03-16")),
    ("大前天", _days("2026-03-15")),
    ("三天前", _days("2026-03-15")),
    ("十二天以前", _days("2026-03-06")),
    ("3日之前", _days("2026-03-15")),
    ("上周六我做了什么？", _days("2026-03-14")),
    ("上星期六", _days("2026-03-14")),
    ("上礼拜六", _days("2026-03-14")),
    ("上个星期天", _days("2026-03-15")),
    ("上上周六", _days("2026-03-07")),
    ("本周一", _days("2026-03-16")),
    ("周一吃了什么", _days("2026-03-16")),
    ("星期三", _days("2026-03-11")),
    ("上周", LAST_WEEK),
    ("上个礼拜", LAST_WEEK),
    ("上周到北京出差", LAST_WEEK),  # 上周 + 到: "went to Beijing last week"
    ("上周末", _days("2026-03-14", "2026-03-15")),
    ("3月14日", _days("2026-03-14")),
    ("三月十四号", _days("2026-03-14")),
    ("十二月二十五日", _days("2025-12-25")),
    ("2024年5月5日", _days("2024-05-05")),
    ("the launch on 5 May 2030, the day after tomorrow", _days("2030-05-05")),  # its year: as written
]


@pytest.mark.parametrize(("query", "expected"), RESOLVED)
def test_relative_days_resolve_against_today(query: str, expected: frozenset[date]) -> None:
    assert relative_days(query, WED) == expected


ORDINARY = [
    "today",  # today's file is undecayed already; "today" usually means "now"
    "今天天气怎么样",
    "What's the weather like today?",
    "may I ask",
    "March on, soldiers",
    "wait a second",
    "I sat on the bench",
    "the meeting is next Friday",
    "tomorrow",  # days after today are a memory note's, not a search's
    "the day after tomorrow",
    "this coming Friday",
    "明天",
    "this Friday",
    "every Monday",
    "Mondays are slow",
    "Monday",  # a bare English weekday: a plan as often as a memory
    "in the last week",  # a rolling window, not the previous calendar week
    "the past week",
    "a week ago",
    "last month",
    "1.5 days ago",
    "5:30 日前",
    "PostgreSQL 16 may break",
    "PostgreSQL 16 日前",
    "二〇二五年三月十四日前",
    "May 5:30",
    "March 1999",
    "服务很周到",
    "上周期的数据",
    "之前天气很好",
    "提前三天前往",
    "下周一开会",
    "下个星期六",
    "每周一例会",
    "周一到周五上班",
    "一周三次",
    "上个月",
    "几天前",
    "两三天前",
    "日前",
    "二〇二五年三月十四日",  # a year we do not read is not replaced by a guess
    "PostgreSQL 16 数据库迁移",
]


@pytest.mark.parametrize("query", ORDINARY)
def test_ordinary_words_name_no_day(query: str) -> None:
    assert relative_days(query, WED) == frozenset()


def test_week_conventions_on_every_day_of_the_week() -> None:
    for offset in range(14):
        today = date(2026, 3, 16) + timedelta(days=offset)
        monday = today - timedelta(days=today.weekday())
        (last_saturday,) = relative_days("last Saturday", today)
        assert last_saturday.weekday() == 5 and 1 <= (today - last_saturday).days <= 7
        assert relative_days("上周六", today) == {monday - timedelta(days=2)}
        week = relative_days("上周", today)
        assert week == relative_days("last week", today)
        assert sorted(week) == [monday - timedelta(days=7 - i) for i in range(7)]
    sunday = date(2026, 3, 22)
    assert relative_days("last Saturday", sunday) == {date(2026, 3, 21)}  # yesterday
    assert relative_days("上周六", sunday) == {date(2026, 3, 14)}  # the previous week's


def test_this_weeks_day_only_once_it_has_passed() -> None:
    assert relative_days("这周五", WED) == frozenset()  # still to come
    assert relative_days("这周五", WED + timedelta(days=3)) == {WED + timedelta(days=2)}
    assert relative_days("本周三", WED) == frozenset()  # today is not resolved


def test_query_days_adds_relative_days_only_with_a_reference_date() -> None:
    query = "What happened last Saturday and on 2026-01-05?"
    assert query_days(query) == _days("2026-01-05")  # as before: no clock, no relative days
    assert query_days(query, WED) == _days("2026-01-05", "2026-03-14")
    assert len(query_days("last week and yesterday and 2026-01-05", WED)) == MAX_QUERY_DAYS


# --- properties -----------------------------------------------------------------------------------

# The phrases of the table that name days by their distance from today (not month days, not this week's).
RELATIVE = [
    q
    for q, _ in RESOLVED
    if not any(ch.isdigit() for ch in q)
    and not any(word in q.lower() for word in ("march", "mar.", "dec", "may", "月", "本周"))
]
_NEUTRAL = st.lists(st.sampled_from(ORDINARY), max_size=4).map(" ".join)
_TODAY = st.dates(min_value=date(1900, 1, 1), max_value=date(2200, 12, 31))


@given(
    st.lists(st.one_of(st.sampled_from([q for q, _ in RESOLVED]), st.text(max_size=40)), max_size=5),
    st.dates(),
)
def test_every_day_is_on_or_before_today_unless_its_year_is_written(parts: list[str], today: date) -> None:
    query = " ".join(parts)
    for day in relative_days(query, today):
        assert day <= today or str(day.year) in query


@given(_NEUTRAL, _TODAY)
def test_text_without_date_words_names_no_day(query: str, today: date) -> None:
    assert relative_days(query, today) == frozenset()


@given(st.sampled_from(RELATIVE), _NEUTRAL, _NEUTRAL, _TODAY, st.integers(-500, 500))
def test_relative_phrases_move_with_today_and_ignore_their_context(
    phrase: str, before: str, after: str, today: date, weeks: int
) -> None:
    days = relative_days(phrase, today)
    assert days  # every relative phrase of the table resolves on any day
    assert relative_days(f"{before} {phrase} {after}", today) == days
    later = today + timedelta(weeks=weeks)
    assert relative_days(phrase, later) == {d + timedelta(weeks=weeks) for d in days}


def test_day_mentions_finds_a_day_as_headers_and_entries_write_it() -> None:
    pattern = day_mentions([date(2024, 3, 14), date(2022, 1, 18)])
    assert pattern is not None
    for text in (
        "### 2024-03-14",
        "- [14 March, 2024] Ingrid",
        "March 14th, 2024",
        "2022年1月18日",
        "on 2022/01/18",
    ):
        assert pattern.search(text), text
    for text in ("114 March 2024", "2024-03-140", "12024-03-14", "14 March 2025", "2024-03-18"):
        assert not pattern.search(text), text
    assert day_mentions([]) is None


@pytest.mark.parametrize(
    ("query", "months"),
    [
        ("What instrument is Tim learning in December 2023?", {(2023, 12)}),
        ("trips in Dec. 2023 and in May, 2024", {(2023, 12), (2024, 5)}),
        ("2023年12月我们去了哪里？", {(2023, 12)}),
        ("二〇二三年 aside, 2023年十二月 and 2024 年 3 月", {(2023, 12), (2024, 3)}),
        # a full date names its day, not its month
        ("What book did Tim finish on 8th December, 2023?", set()),
        ("on December 8, 2023", set()),
        ("2023年12月8日", set()),
        # no month: the verb "may", a month without a year, a five-digit number, a time, month 13
        ("we may 2023 soon", set()),
        ("in December", set()),
        ("December 20234", set()),
        ("May 2023:15", set()),
        ("2023年13月", set()),
    ],
)
def test_written_months_reads_a_month_with_its_year_outside_a_full_date(query: str, months: set) -> None:
    assert written_months(query) == months


def test_a_named_month_is_each_of_its_days_and_months_are_bounded() -> None:
    assert query_month_days("in February 2024") == frozenset(
        date(2024, 2, 1) + timedelta(days=i) for i in range(29)
    )
    assert query_month_days("8 February, 2024") == frozenset()  # a day, read by query_days
    many = " ".join(f"May {year}" for year in range(2009, 1999, -1))
    earliest = {(2000 + i, 5) for i in range(MAX_QUERY_MONTHS)}
    assert {(d.year, d.month) for d in query_month_days(many)} == earliest
