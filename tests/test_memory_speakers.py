"""Who said it: the names memory text attributes its lines to, and the ones a query names."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from contextmem.memory.speakers import (
    MAX_NAME_CHARS,
    join_speakers,
    named_speakers,
    speakers,
    speaking_chunks,
    split_speakers,
    without_names,
)
from contextmem.memory.text import index_chunks


def test_name_headings_and_name_lines_are_speakers() -> None:
    assert speakers("# Session 1, 14 March 2024\n\n### Ingrid\nHi Tom! Long time no see!") == {"ingrid"}
    digest = "### 2022-01-18\n- [2022-01-18] Bart: I got a gold-plated pocket watch.\n- **Lisa**: nice"
    assert speakers(digest) == {"bart", "lisa"}
    assert speakers("user: where is the key?\nassistant: under the mat") == {"user", "assistant"}
    assert speakers("### 小明\n我明天去北京。\n小红：一路顺风") == {"小明", "小红"}
    assert speakers("### Mary Ann O'Neil\nhello\nJ. K. Rowling: hi\nJean-Luc: bonjour") == {
        "mary ann o'neil",
        "j. k. rowling",
        "jean-luc",
    }


def test_dates_numbers_and_sentences_are_not_speakers() -> None:
    assert speakers("### 2022-01-18\n## 09:30\n### Session 2, 7 May\nA plain line with no colon.") == set()
    assert speakers("The plan we agreed on yesterday after a long talk with everyone there: go") == set()
    assert speakers("Room 101: booked") == set()
    assert speakers("²:\n### Ann²\n① Bo: hi\n- [x] Room ③: booked") == set()  # digits beyond 0-9 too


@given(st.text(max_size=300))
def test_a_speaker_is_a_short_name_without_digits_and_is_stored_as_it_was_found(text: str) -> None:
    for name in speakers(text):
        assert 0 < len(name) <= MAX_NAME_CHARS
        assert not any(c.isdigit() for c in name)
        assert name == name.casefold()
    assert split_speakers(join_speakers(speakers(text))) == speakers(text)


def test_a_long_line_costs_only_its_head() -> None:
    # a search reads every candidate's speakers: a megabyte line must not be scanned to its end
    assert speakers("Ann" + " word" * 200_000 + ": hi") == set()
    assert speakers("Ann: " + "word " * 200_000) == {"ann"}


def test_indexed_chunks_carry_their_speakers() -> None:
    chunks = index_chunks("### Ann\nHi Bob!\n\n### Bob\nHello.\n\n- [2023-05-08] Cy: bye\n", max_chars=20)
    assert [c.speakers for c in chunks] == [{"ann"}, {"bob"}, {"cy"}]


def test_a_query_names_a_speaker_as_a_whole_word() -> None:
    known = {"ingrid", "tom", "小明"}
    assert named_speakers("What did Ingrid's uncle give her?", known) == {"ingrid"}
    assert named_speakers("When did INGRID go?", known) == {"ingrid"}
    assert named_speakers("What does Tomas paint?", known) == set()  # "Tom" is not a word of it
    assert named_speakers("小明什么时候去北京？", known) == {"小明"}  # no spaces: a substring


def test_only_a_query_that_singles_someone_out_picks_chunks() -> None:
    labels = {1: {"ann"}, 2: {"bob"}, 3: set(), 4: {"ann", "bob"}}
    assert speaking_chunks(labels, "What did Bob bake?") == {2, 4}
    assert speaking_chunks(labels, "What did Ann tell Bob?") == {1, 2, 4}  # not the unattributed note
    assert speaking_chunks(labels, "What was baked?") == set()
    talk = {1: {"ann"}, 2: {"bob"}, 3: {"ann"}}
    assert speaking_chunks(talk, "What did Ann tell Bob?") == set()  # both sides: nobody singled out


@given(st.dictionaries(st.integers(), st.sets(st.sampled_from(["ann", "bob", "cy"]))), st.text(max_size=40))
def test_speaking_chunks_never_picks_every_chunk(labels: dict[int, set[str]], query: str) -> None:
    picked = speaking_chunks(labels, query)
    assert picked <= labels.keys() and (not picked or len(picked) < len(labels))


def test_a_query_without_the_names_it_says() -> None:
    assert without_names("What books has Tim read? Ask tim, not Timothy.", {"tim"}) == (
        "What books has read? Ask , not Timothy."
    )
    assert without_names("Did Mary Ann meet Ann?", {"ann", "mary ann"}) == "Did meet ?"
    assert without_names("佳琪的小狗叫什么名字？", {"佳琪"}) == "的小狗叫什么名字？"
    assert without_names("Where did Strauß go?", {"strauss"}) == "where did go?"  # folds where case does not
    assert without_names("What did Bob say?", set()) == "What did Bob say?"


_NAMES = st.sampled_from(["tim", "ann", "mary ann", "jean-luc", "小明", "strauss", "i"])


_QUERIES = st.lists(st.one_of(_NAMES, st.text(max_size=12)), max_size=8).map(" ".join)


@given(_QUERIES, st.sets(_NAMES, max_size=3))
def test_the_query_without_the_names_names_none_of_them(query: str, names: set[str]) -> None:
    out = without_names(query, names)
    assert not named_speakers(out, names)
    if not named_speakers(query, names):  # nothing to cut: the query as asked, but for its spacing
        assert out == re.sub(r"[ \t]{2,}", " ", query).strip()
