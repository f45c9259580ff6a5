"""When it happened: the questions that ask when, and the chunks that say when (memory.when)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextmem.lang.calendar import SAYS_WHEN
from contextmem.memory.when import asks_when, timed_chunks


@pytest.mark.parametrize(
    "query",
    [
        "When did Caroline go to the LGBTQ support group?",
        "  when is the launch",
        "What year did John move to Seattle?",
        "Which month was the concert in?",
        "In which year did they meet?",
        "How long ago was Melanie's trip?",
        "Since when has he played guitar?",
        "卡罗琳什么时候去的支持小组？",
        "他们哪天见面？",
        "会议是几号？",
    ],
)
def test_a_question_that_asks_when(query: str) -> None:
    assert asks_when(query)


@pytest.mark.parametrize(
    "query",
    [
        "What did Caroline do when she felt lonely?",  # "when" inside: a conjunction
        "Whenever I call, who answers?",
        "What is John's favourite day of the week?",
        "Where did they meet?",
        "他们在哪里见面？",
        "",
    ],
)
def test_a_question_that_does_not_ask_when(query: str) -> None:
    assert not asks_when(query)


@pytest.mark.parametrize(
    "text",
    [
        "I went to a support group yesterday.",
        "We moved here three years ago.",
        "Last summer we went surfing.",
        "The gig is on Friday.",
        "Back in May it rained.",
        "She was born in 1994.",
        "See you on 8 May 2023.",
        "Deploy by 2023-05-08 10:00.",
        "我昨天去了北京。",
        "三年前我们搬家了。",
        "上周六我们去爬山。",
        "星期三见。",
        "最近很忙。",
    ],
)
def test_a_text_that_says_when(text: str) -> None:
    assert SAYS_WHEN.search(text)


@pytest.mark.parametrize(
    "text",
    [
        "What a great day!",
        "Have a good time.",
        "PostgreSQL 16 may break the build.",  # "may" the verb, not the month
        "Port 8080 is open.",
        "我很好，谢谢。",
    ],
)
def test_a_text_that_does_not_say_when(text: str) -> None:
    assert not SAYS_WHEN.search(text)


def test_the_chunks_that_say_when_are_picked_for_a_when_question_only() -> None:
    texts = {1: "We went hiking last weekend.", 2: "Hiking is the best.", 3: "我昨天去爬山了。"}
    assert timed_chunks(texts, "When did they go hiking?") == {1, 3}
    assert timed_chunks(texts, "Who likes hiking?") == frozenset()
    # every chunk says when: nothing is singled out
    assert timed_chunks({1: texts[1], 3: texts[3]}, "When did they go hiking?") == frozenset()
    # a daily file's chunk is dated by its file: with those, nothing is singled out either
    assert timed_chunks(texts, "When did they go hiking?", dated={2}) == frozenset()
    assert timed_chunks({**texts, 4: "Fun!"}, "When did they go hiking?", dated={2}) == {1, 2, 3}


@given(
    st.dictionaries(st.integers(0, 50), st.text(max_size=60), max_size=12),
    st.text(max_size=60),
    st.sets(st.integers(0, 50)),
)
def test_the_timed_chunks_are_a_proper_subset_or_none(
    texts: dict[int, str], query: str, dated: set[int]
) -> None:
    picked = timed_chunks(texts, query, dated)
    assert picked <= texts.keys()
    assert not picked or len(picked) < len(texts)
    assert not picked or asks_when(query)
