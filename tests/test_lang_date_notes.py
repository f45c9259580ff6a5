"""A fact written to memory with the days it names relative to its session (``lang.date_notes``)."""

from __future__ import annotations

import re
from datetime import date

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
    expected = FORMS[form](day)
    if form.startswith("abbreviated") and was.month == 5:  # "May" is its full name: so is the one written
        expected = expected.replace(f" {_MONTHS[day.month - 1][:3]} ", f" {_MONTHS[day.month - 1]} ")
    assert written_like(day, FORMS[form](was)) == expected


def test_an_ordinal_day_keeps_an_ordinal_and_a_form_it_cannot_read_is_iso() -> None:
    assert written_like(date(2023, 5, 2), "May 8th, 2023") == "May 2nd, 2023"
    assert written_like(date(2023, 5, 13), "8th May 2023") == "13th May 2023"
    assert written_like(date(2023, 5, 2), "sometime in spring") == "2023-05-02"
    assert written_like(date(2023, 5, 2), "2023-05-08 and 2023-05-09") == "2023-05-02"  # two dates: which?


RESOLVED_IN_TEXT = [
    ("I went to the support group yesterday.", "8 May, 2023",
     "I went to the support group yesterday. (yesterday: 7 May, 2023)"),
    ("Three days ago I ran, and last Friday I swam.", "2023-05-08",
     "Three days ago I ran, and last Friday I swam. (Three days ago: 2023-05-05; last Friday: 2023-05-05)"),
    ("我昨天去了公园，上周六见了朋友。", "2023年5月8日",
     "我昨天去了公园，上周六见了朋友。（昨天：2023年5月7日；上周六：2023年5月6日）"),
    ("Yesterday, and yesterday again.", "2023-05-08",
     "Yesterday, and yesterday again. (Yesterday: 2023-05-07)"),
    ("Last week was busy, last weekend too, and today is quiet.", "2023-05-08",
     "Last week was busy, last weekend too, and today is quiet."),  # several days, or none: as written
    ("I went yesterday.", "some day", "I went yesterday."),  # no date to count from
]  # fmt: skip


@pytest.mark.parametrize(("text", "written", "expected"), RESOLVED_IN_TEXT)
def test_a_day_said_relative_to_the_date_is_written_after_the_phrase(
    text: str, written: str, expected: str
) -> None:
    assert resolved_days(text, written) == expected


@given(
    words=st.lists(st.sampled_from(["yesterday", "I", "ran", "last", "Friday", "3", "days", "ago", "meh"])),
    was=_DAYS,
)
def test_the_words_said_are_never_changed(words: list[str], was: date) -> None:
    text = " ".join(words)
    shown = resolved_days(text, was.isoformat())
    assert shown.startswith(text)
    named = set(re.findall(r"yesterday|last Friday|(?<!\d)3 days ago", text))
    assert shown == text if not named else shown.count(": ") == len(named) and shown.endswith(")")
