"""Chunking (line anchoring) and keyword tokens for English and Chinese."""

from __future__ import annotations

from datetime import date

from hypothesis import given
from hypothesis import strategies as st

from contextmem.memory.text import (
    chunk_markdown,
    heading_days,
    index_chunks,
    keyword_tokens,
    query_days,
)

_LINE = st.one_of(
    st.just(""),
    st.just("# Heading"),
    st.text(alphabet=st.sampled_from("ab 数据库\t-#"), max_size=60),
    st.text(max_size=300),
)


@given(st.lists(_LINE, max_size=40), st.integers(min_value=20, max_value=400))
def test_chunks_are_exact_ordered_line_ranges(lines: list[str], max_chars: int) -> None:
    text = "\n".join(lines)
    real_lines = text.splitlines()
    chunks = chunk_markdown(text, max_chars=max_chars)
    previous_end = 0
    for chunk in chunks:
        assert chunk.start_line > previous_end
        assert chunk.end_line >= chunk.start_line
        assert chunk.text == "\n".join(real_lines[chunk.start_line - 1 : chunk.end_line])
        assert chunk.text.strip()
        if "\n" in chunk.text:
            assert len(chunk.text) <= max_chars
        previous_end = chunk.end_line
    covered = {n for c in chunks for n in range(c.start_line, c.end_line + 1)}
    for number, line in enumerate(real_lines, start=1):
        if line.strip():
            assert number in covered


def test_headings_start_chunks_and_small_paragraphs_merge() -> None:
    text = "# Facts\nlikes tea\n\nlives in Paris\n# Plans\nlaunch in March"
    chunks = chunk_markdown(text)
    assert [(c.start_line, c.end_line) for c in chunks] == [(1, 4), (5, 6)]


def test_chinese_is_split_into_bigrams_and_english_lowercased() -> None:
    assert keyword_tokens("数据库迁移 PostgreSQL it's") == [
        "数据",
        "据库",
        "库迁",
        "迁移",
        "postgresql",
        "it's",
    ]
    assert keyword_tokens("好") == ["好"]


def test_jieba_mode_segments_words() -> None:
    tokens = keyword_tokens("我们讨论了数据库迁移", "jieba")
    assert "数据库" in tokens
    assert "迁移" in tokens


def test_a_heading_dates_every_line_under_it() -> None:
    text = (
        "# Session 3, 6:30 pm on 14 March, 2024\n### Ann\nHi\n## Notes\nx\n# Plain\ny\n### 2024年3月15日\n- z"
    )
    day, next_day = date(2024, 3, 14), date(2024, 3, 15)
    assert heading_days(text) == [day, day, day, day, day, None, None, next_day, next_day]
    # nothing relative dates a heading, nor one that writes two days
    assert heading_days("## Yesterday\nx\n## May 8\nw\n## 2023-05-08 to 2023-05-09\ny") == [None] * 6
    # a chunk carries the day of its first line: a later chunk of the same section too
    section = "### 2023-05-08\n" + "\n\n".join(f"- fact {i} " + "word " * 40 for i in range(6))
    chunks = index_chunks(section, max_chars=300)
    assert len(chunks) > 1 and {c.heading_day for c in chunks} == {date(2023, 5, 8)}


_PIECES = ["#", " ", "\n", "\r\n", "2023-05-08", "x", "14 March 2024", "May", "\u2028"]


@given(st.lists(st.one_of(st.sampled_from(_PIECES), st.text(max_size=5)), max_size=30).map("".join))
def test_heading_days_has_a_day_for_every_line(text: str) -> None:
    assert len(heading_days(text)) == len(text.splitlines())


def test_query_days_reads_iso_and_chinese_dates() -> None:
    assert query_days("What happened to Bart on 2022-06-12?") == {date(2022, 6, 12)}
    assert query_days("2022-06-12那天Bart经历了什么？") == {date(2022, 6, 12)}  # no word boundary before CJK
    assert query_days("2026/1/5 and 2026年1月6日") == {date(2026, 1, 5), date(2026, 1, 6)}
    assert query_days("build 12022-01-01, 2026-02-30, version 1.2.3, port 5433") == frozenset()
    assert len(query_days(" ".join(f"2026-01-{d:02d}" for d in range(1, 31)))) == 8  # bounded
