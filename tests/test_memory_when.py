"""When it happened: the questions that ask when, and the chunks that say when (memory.when)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextmem.lang.calendar import says_when
from contextmem.memory.text import index_chunks
from contextmem.memory.when import asks_when, timed_chunks

ASKS_WHEN = [
    "When did Ingrid go to the pottery class?",
    "  when is the launch",
    "What year did John move to Seattle?",
    "Which month was the concert in?",
    "In which year did they meet?",
    "How long ago was Tomas's trip?",
    "Since when has he played guitar?",
    "卡罗琳什么时候去的支持小组？",
    "他们哪天见面？",
    "会议是几号？",
]
ASKS_SOMETHING_ELSE = [
    "What did Ingrid do when she felt tired?",  # "when" inside: a conjunction
    "Whenever I call, who answers?",
    "What is John's favourite day of the week?",
    "Where did they meet?",
    "他们在哪里见面？",
    "",
]
SAYS_WHEN = [
    "I went to a pottery class yesterday.",
    "We moved here three years ago.",
    "Last summer we went surfing.",
    "The gig is on Friday.",
    "Back in May it rained.",
    "She was born in 1994.",
    "See you on 14 March 2024.",
    "Deploy by 2023-05-08 10:00.",
    "我昨天去了北京。",
    "三年前我们搬家了。",
    "上周六我们去爬山。",
    "星期三见。",
    "最近很忙。",
]
SAYS_NOTHING_OF_WHEN = [
    "What a great day!",
    "Have a good time.",
    "PostgreSQL 16 may break the build.",  # "may" the verb, not the month
    "Port 8080 is open.",
    "我很好，谢谢。",
]


@pytest.mark.parametrize(
    ("query", "asks"), [(q, True) for q in ASKS_WHEN] + [(q, False) for q in ASKS_SOMETHING_ELSE]
)
def test_which_questions_ask_when(query: str, asks: bool) -> None:
    assert asks_when(query) is asks


@pytest.mark.parametrize(
    ("text", "says"), [(t, True) for t in SAYS_WHEN] + [(t, False) for t in SAYS_NOTHING_OF_WHEN]
)
def test_which_texts_say_when(text: str, says: bool) -> None:
    assert says_when(text) is says


def test_the_chunks_that_say_when_are_picked_for_a_when_question_only() -> None:
    saying = {1: True, 2: False, 3: True}
    assert timed_chunks(saying, "When did they go hiking?") == {1, 3}
    assert timed_chunks(saying, "Who likes hiking?") == frozenset()
    # every chunk says when: nothing is singled out
    assert timed_chunks({1: True, 3: True}, "When did they go hiking?") == frozenset()


@given(st.dictionaries(st.integers(0, 50), st.booleans(), max_size=12), st.text(max_size=60))
def test_the_timed_chunks_are_a_proper_subset_or_none(saying: dict[int, bool], query: str) -> None:
    picked = timed_chunks(saying, query)
    assert picked <= {cid for cid, says in saying.items() if says}
    assert not picked or len(picked) < len(saying)
    assert not picked or asks_when(query)


def test_a_chunk_records_whether_it_says_when_when_it_is_indexed() -> None:
    text = "# Talk\n\nWe went hiking last weekend.\n\n# More\n\nHiking is the best.\n\n"
    text += "# 中文\n\n我昨天去爬山了。\n"
    assert [c.says_when for c in index_chunks(text, max_chars=40)] == [True, False, True]


def test_a_long_run_of_digits_beside_a_han_letter_is_read_once() -> None:
    # A number is read from its start only and is six characters at most: tried again from each of a
    # million digits, the pattern took hours (12,000 digits took 1.5 s), and indexing such a file stalled.
    hostile = "中" + "1" * 1_000_000
    assert not says_when(hostile) and says_when(hostile + " 三年前")
    assert [c.says_when for c in index_chunks(hostile + "\n")] == [False]
