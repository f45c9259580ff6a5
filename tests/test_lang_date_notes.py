"""A fact written to memory with the days it names relative to its session (``lang.date_notes``)."""

from __future__ import annotations

import re
from datetime import date, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextmem.lang.date_notes import resolved_days, written_like

_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
           "November", "December"]  # fmt: skip
FORMS = {
    "iso": lambda d: d.isoformat(),
    "slashes": lambda d: f"{d.year}/{d.month}/{d.day}",
    "chinese": lambda d: f"{d.year}年{d.month}月{d.day}日",
    "day month": lambda d: f"{d.day} {_MONTHS[d.month - 1]}, {d.year}",
    "month day": lambda d: f"{_MONTHS[d.month - 1]} {d.day}, {d.year}",
    "abbreviated, in a session header": lambda d: f"7:48 pm on {d.day} {_MONTHS[d.month - 1][:3]} {d.year}",
}
_DAYS = st.dates(date(1900, 1, 1), date(2100, 12, 31))


@pytest.mark.parametrize("form", FORMS)
@given(was=_DAYS, day=_DAYS)
def test_a_day_is_written_the_way_the_example_writes_its_date(form: str, was: date, day: date) -> None:
    expected = FORMS[form](day).removeprefix("7:48 pm on ")  # the date alone: the time is not the day's
    if form.startswith("abbreviated") and was.month == 5:  # "May" is its full name: so is the one written
        expected = expected.replace(f" {_MONTHS[day.month - 1][:3]} ", f" {_MONTHS[day.month - 1]} ")
    assert written_like(day, FORMS[form](was)) == expected


def test_an_ordinal_day_keeps_an_ordinal_and_a_form_it_cannot_read_is_iso() -> None:
    assert written_like(date(2023, 5, 2), "May 8th, 2023") == "May 2nd, 2023"
    assert written_like(date(2023, 5, 13), "8th May 2023") == "13th May 2023"
    assert written_like(date(2023, 5, 2), "sometime in spring") == "2023-05-02"
    assert written_like(date(2023, 5, 2), "2023-05-08 and 2023-05-09") == "2023-05-02"  # two dates: which?
    assert written_like(date(2023, 5, 10), "Tuesday, 9 May, 2023") == "10 May, 2023"  # not a Tuesday


RESOLVED_IN_TEXT = [
    ("I went to the pottery class yesterday.", "14 March, 2024",
     "I went to the pottery class yesterday. (yesterday: 13 March, 2024)"),
    ("Three days ago I ran, and last Friday I swam.", "2023-05-08",
     "Three days ago I ran, and last Friday I swam. (Three days ago: 2023-05-05; last Friday: 2023-05-05)"),
    ("我昨天去了公园，上周六见了朋友。", "2023年5月8日",
     "我昨天去了公园，上周六见了朋友。（昨天：2023年5月7日；上周六：2023年5月6日）"),
    ("Yesterday, and yesterday again.", "2023-05-08",
     "Yesterday, and yesterday again. (Yesterday: 2023-05-07)"),
    ("Last week was busy, last weekend too, and today is quiet.", "2023-05-08",
     "Last week was busy, last weekend too, and today is quiet."),  # several days, or none: as written
    ("I went yesterday.", "some day", "I went yesterday."),  # no date to count from
    # After the day it was said: a plan is read long after too.
    ("I fly tomorrow, and next Saturday I am back.", "Tuesday, 9 May, 2023",
     "I fly tomorrow, and next Saturday I am back. (tomorrow: 10 May, 2023; next Saturday: 13 May, 2023)"),
    ("明天去上海，下周六回来。", "2023年5月9日",
     "明天去上海，下周六回来。（明天：2023年5月10日；下周六：2023年5月20日）"),
    # Either side of the day, by tense alone: left as written.
    ("See you on Saturday!", "2023-05-09", "See you on Saturday!"),
    ("周六我们去爬山吧。", "2023年5月9日", "周六我们去爬山吧。"),
    # The month or the year before or after the one it was said in, in the phrase's language.
    ("I started a job last month, and we move next month.", "4:21 pm on 16 July, 2023",
     "I started a job last month, and we move next month. (last month: June 2023; next month: August 2023)"),
    ("Last year was hard.", "2024-01-03", "Last year was hard. (Last year: 2023)"),
    ("Next month I retire.", "2023-12-20", "Next month I retire. (Next month: January 2024)"),
    ("我上个月去了北京，前年也去过，明年还想去。", "2023年5月9日",
     "我上个月去了北京，前年也去过，明年还想去。（上个月：2023年4月；前年：2021年；明年：2024年）"),
    # A rolling window, or no month at all: as written.
    ("Over the last month, and the past year, I ran; in the next month I rest.", "2023-05-09",
     "Over the last month, and the past year, I ran; in the next month I rest."),
    ("以前年轻的时候，我们马上月底就登上月球。", "2023年5月9日", "以前年轻的时候，我们马上月底就登上月球。"),
    ("明日香是明日之星。", "2023年5月9日", "明日香是明日之星。"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "written", "expected"), RESOLVED_IN_TEXT)
def test_a_day_said_relative_to_the_date_is_written_after_the_phrase(
    text: str, written: str, expected: str
) -> None:
    assert resolved_days(text, written) == expected


@given(
    words=st.lists(
        st.sampled_from(
            ["yesterday", "tomorrow", "I", "ran", "last", "next", "Friday", "3", "days", "ago", "meh"]
        )
    ),
    was=_DAYS,
)
def test_the_words_said_are_never_changed(words: list[str], was: date) -> None:
    text = " ".join(words)
    shown = resolved_days(text, was.isoformat())
    assert shown.startswith(text)
    named = set(re.findall(r"yesterday|tomorrow|last Friday|next Friday|(?<!\d)3 days ago", text))
    assert shown == text if not named else shown.count(": ") == len(named) and shown.endswith(")")


@given(said=st.dates(date(1900, 2, 1), date(2100, 11, 30)))
def test_a_month_or_year_before_or_after_is_the_calendar_one(said: date) -> None:
    """Against the calendar: the last day of the month before the 1st, the first of the month after the
    last; the year's number plus or minus one."""
    before = said.replace(day=1) - timedelta(days=1)
    after = said.replace(day=28) + timedelta(days=4)
    text = "Last month, last year, next month and next year."
    shown = resolved_days(text, f"{said.day} {_MONTHS[said.month - 1]}, {said.year}")
    assert shown == (
        f"{text} (Last month: {_MONTHS[before.month - 1]} {before.year}; last year: {said.year - 1}; "
        f"next month: {_MONTHS[after.month - 1]} {after.year}; next year: {said.year + 1})"
    )
    chinese = resolved_days("上个月和去年，下个月和明年", f"{said.year}年{said.month}月{said.day}日")
    assert chinese.endswith(
        f"（上个月：{before.year}年{before.month}月；去年：{said.year - 1}年；"
        f"下个月：{after.year}年{after.month}月；明年：{said.year + 1}年）"
    )


@given(said=st.dates(date(1900, 1, 1), date(2100, 12, 24)), weekday=st.integers(0, 6))
def test_a_day_after_is_the_first_such_day_after_it(said: date, weekday: int) -> None:
    name = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"][weekday]
    shown = resolved_days(f"Tomorrow, and next {name}.", said.isoformat())
    ahead = next(
        said + timedelta(days=n) for n in range(1, 8) if (said + timedelta(days=n)).weekday() == weekday
    )
    assert shown.endswith(f"(Tomorrow: {said + timedelta(days=1)}; next {name}: {ahead})")
    next_week = said + timedelta(days=7 - said.weekday() + weekday)  # that day of the next ISO week
    zh_day = "一二三四五六日"[weekday]
    assert resolved_days(f"下周{zh_day}见", said.isoformat()).endswith(f"（下周{zh_day}：{next_week}）")
