"""Ranking that reflects what was said (issue 16): no heading-only hits, snippets at the matching lines."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextmem.memory import HashEmbedder, SqliteMemoryIndex
from contextmem.memory.embedders import EmbedKind, Vectors, normalise
from contextmem.memory.ranking import (
    REPLY_AFTER,
    Candidate,
    combine,
    context_weight,
    decay_factor,
    follow_questions,
    in_context_keyword_scores,
    in_context_vector_scores,
    in_file_scores,
    mmr,
)
from contextmem.memory.text import Chunk, best_snippet, chunk_markdown, index_chunks, query_terms
from contextmem.workspace import Workspace

QUERY = "Who is my manager?"


class ShortTextBiasEmbedder:
    """Like e5: a short heading sits closer to a short question than the sentence that answers it."""

    name = "short-bias-3"
    dim = 3

    def __init__(self) -> None:
        self.vectors = {
            QUERY: [1.0, 0.0, 0.0],
            "# Core memory": [0.95, 0.31, 0.0],
            "My manager is Dana Liu": [0.8, 0.0, 0.6],
        }

    def embed(self, texts: Sequence[str], kind: EmbedKind) -> Vectors:
        rows = [self.vectors.get(t, [0.0, 0.0, 1.0]) for t in texts]
        return normalise(np.asarray(rows, dtype=np.float32))


def test_an_empty_heading_never_outranks_an_old_answer(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    ws.ensure()
    ws.core_file.write_text("# Core memory\n")
    (ws.daily_dir / "2026-01-05.md").write_text("My manager is Dana Liu\n")
    index = SqliteMemoryIndex(ws, ShortTextBiasEmbedder(), today=lambda: date(2026, 3, 6))  # 60 days on
    hits = index.search(QUERY, 5)
    assert [(h.path, h.start_line) for h in hits] == [("memory/2026-01-05.md", 1)]
    assert hits[0].score > 0
    assert index.stats() == {"files": 2, "chunks": 1} and index.check().ok


def test_a_heading_without_body_joins_the_next_section() -> None:
    text = "# Core memory\n\n## People\n- Dana Liu is my manager\n# Empty at the end\n"
    assert [(c.start_line, c.end_line) for c in chunk_markdown(text)] == [(1, 4), (5, 5)]
    assert [(c.start_line, c.end_line) for c in index_chunks(text)] == [(1, 4)]  # no body: not indexed
    assert index_chunks("# A\n---\n- \n") == []


def test_the_snippet_shows_the_lines_that_match() -> None:
    lines = [f"- routine note {i} about lunch and weather" for i in range(30)]
    lines[21] = "- 订单服务内存上限调到 1536Mi"
    lines[24] = "- the billing database moved to port 5433"
    chunk = Chunk(11, 40, "\n".join(lines))
    english = best_snippet(chunk, query_terms("billing database port"), 120)
    assert english.text.startswith("- the billing database moved to port 5433")
    assert english.start_line == 35 and len(english.text) <= 120
    assert english.text == "\n".join(lines[24 : english.end_line - 10])
    chinese = best_snippet(chunk, query_terms("内存上限是多少"), 40)
    assert (chinese.start_line, chinese.end_line, chinese.text) == (32, 32, lines[21])
    unmatched = best_snippet(Chunk(1, 3, "## 10:00\n\nsomething else"), query_terms("zebra"), 100)
    assert unmatched.start_line == 1 and unmatched.text.startswith("## 10:00")
    long_line = best_snippet(Chunk(5, 5, "x" * 50), [], 10)
    assert long_line.text == "x" * 9 + "…" and (long_line.start_line, long_line.end_line) == (5, 5)


@given(
    st.lists(st.text(alphabet="ab 内存\t#-", max_size=40), min_size=1, max_size=8),
    st.lists(st.sampled_from(["a", "b", "ab", "内存"]), max_size=3),
    st.integers(min_value=0, max_value=20),
)
def test_a_chunk_that_fits_is_shown_whole(lines: list[str], terms: list[str], room: int) -> None:
    text = "\n".join(lines)
    snippet = best_snippet(Chunk(7, 7 + len(lines) - 1, text), terms, len(text) + room)
    assert (snippet.start_line, snippet.end_line, snippet.text) == (7, 7 + len(lines) - 1, text)


def test_search_hits_carry_the_snippet_lines(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    ws.ensure()
    body = [f"- routine note {i} about lunch and weather" for i in range(20)]
    body[15] = "- Priya owns the rollback of the billing cutover"
    ws.core_file.write_text("# Notes\n" + "\n".join(body) + "\n")
    index = SqliteMemoryIndex(ws, HashEmbedder(64), snippet_chars=200)
    hit = index.search("who owns the rollback", 1)[0]
    assert (hit.path, hit.start_line, hit.end_line) == ("MEMORY.md", 1, 21)
    assert hit.snippet.startswith("- Priya owns the rollback") and hit.snippet_start_line == 17
    assert hit.snippet_end_line is not None and hit.snippet_end_line >= 17


def test_a_day_the_query_names_is_not_decayed_and_ranks_first() -> None:
    asked = date(2025, 1, 1)  # 424 days before today: decayed to ~0.00006 of its score
    candidates = [
        Candidate(1, 0.9, 5.0, date(2026, 2, 28)),
        Candidate(2, 0.5, None, asked),
        Candidate(3, 0.3, 3.0, None),
        Candidate(4, 0.1, 1.0, None),
    ]
    options: dict[str, Any] = {
        "vector_weight": 0.7,
        "keyword_weight": 0.3,
        "today": date(2026, 3, 1),
        "half_life_days": 30.0,
    }
    assert [c.chunk_id for c in combine(candidates, **options)] == [1, 3, 2, 4]
    ranked = combine(candidates, **options, named_days={asked})
    assert [c.chunk_id for c in ranked] == [2, 1, 3, 4]
    assert ranked[0].score == pytest.approx(0.7 * 0.5)  # its own evidence (vector min-max 0.5), undecayed
    # A chunk that writes the day (a memory entry's session heading) ranks with the day's own file.
    ranked = combine(candidates, **options, named_days={asked}, naming_chunks={4})
    assert [c.chunk_id for c in ranked] == [2, 4, 1, 3]


def test_a_chunk_said_by_the_speaker_the_query_names_gains_the_speaker_weight() -> None:
    candidates = [Candidate(1, 0.90, 2.0), Candidate(2, 0.89, 2.0), Candidate(3, 0.10, None)]
    options: dict[str, Any] = {"vector_weight": 0.7, "keyword_weight": 0.3, "today": date(2026, 3, 1)}
    options["half_life_days"] = 30.0
    plain = combine(candidates, **options)
    assert [c.chunk_id for c in plain] == [1, 2, 3]
    # nobody singled out: the weight is not in the sum, every score is as without it
    unnamed = combine(candidates, **options, speaker_weight=0.05)
    assert [c.score for c in unnamed] == [c.score for c in plain]
    said = combine(candidates, **options, speaker_weight=0.05, speaking_chunks={2})
    assert [c.chunk_id for c in said] == [2, 1, 3]
    by_id = {c.chunk_id: c.score for c in said}
    vector_norm = (0.89 - 0.10) / (0.90 - 0.10)  # min-max; the keyword part is a tie: 1 for both
    assert by_id[2] == pytest.approx((0.7 * vector_norm + 0.3 * 1 + 0.05) / 1.05)
    assert by_id[1] == pytest.approx(1.0 / 1.05) and 0 <= min(by_id.values()) <= max(by_id.values()) <= 1


def test_a_chunk_that_says_when_gains_the_time_weight_and_adds_to_the_speaker_weight() -> None:
    candidates = [Candidate(1, 0.90, 2.0), Candidate(2, 0.89, 2.0), Candidate(3, 0.10, None)]
    options: dict[str, Any] = {"vector_weight": 0.7, "keyword_weight": 0.3, "today": date(2026, 3, 1)}
    options["half_life_days"] = 30.0
    plain = combine(candidates, **options)
    # no chunk singled out: the weight is not in the sum, every score is as without it
    untimed = combine(candidates, **options, time_weight=0.1)
    assert [c.score for c in untimed] == [c.score for c in plain]
    timed = combine(candidates, **options, time_weight=0.1, timed_chunks={2})
    assert [c.chunk_id for c in timed] == [2, 1, 3]
    vector_norm = (0.89 - 0.10) / (0.90 - 0.10)
    assert timed[0].score == pytest.approx((0.7 * vector_norm + 0.3 + 0.1) / 1.1)
    # both cues: their weights add up, and the scores stay in [0, 1]
    both = combine(
        candidates, **options, time_weight=0.1, timed_chunks={2}, speaker_weight=0.05, speaking_chunks={2, 3}
    )
    by_id = {c.chunk_id: c.score for c in both}
    assert by_id[2] == pytest.approx((0.7 * vector_norm + 0.3 + 0.15) / 1.15)
    assert by_id[1] == pytest.approx(1.0 / 1.15) and 0 <= min(by_id.values()) <= max(by_id.values()) <= 1


@given(
    st.lists(st.tuples(st.floats(0, 1), st.sampled_from([None, "a.md", "b.md", "c.md"])), max_size=30),
    st.sampled_from([0.0, 0.3, 0.5, 1.0]),
)
def test_a_score_read_in_its_file_rises_toward_the_files_best_and_no_further(
    scored: list[tuple[float, str | None]], weight: float
) -> None:
    scores, files = [s for s, _ in scored], [f for _, f in scored]
    lifted = in_file_scores(scores, files, weight)
    best = {f: max(s for s, g in scored if g == f) for f in set(files) - {None}}
    for own, file, new in zip(scores, files, lifted, strict=True):
        if file is None or weight == 0:
            assert new == own
        else:
            assert own - 1e-12 <= new <= best[file] + 1e-12 and 0 <= new <= 1
            assert new == pytest.approx((1 - weight) * own + weight * best[file])
    for i, j in ((i, j) for i in range(len(scored)) for j in range(len(scored))):
        if files[i] is not None and files[i] == files[j] and scores[i] < scores[j]:
            assert lifted[i] <= lifted[j]  # a file's own order holds


def test_combine_reads_a_chunk_in_its_file_after_fusion_and_leaves_the_rest() -> None:
    # chunk 2 is the weaker turn of the session that holds the best one; chunk 3 stands alone
    candidates = [
        Candidate(1, 0.9, None),
        Candidate(2, 0.5, None),
        Candidate(3, 0.55, None),
        Candidate(4, 0.1, None),
    ]
    options: dict[str, Any] = {"vector_weight": 1.0, "keyword_weight": 0.0, "today": date(2026, 3, 1)}
    options["half_life_days"] = 30.0
    plain = combine(candidates, **options)
    assert [c.chunk_id for c in plain] == [1, 3, 2, 4]
    files = {1: "talk.md", 2: "talk.md", 3: "other.md", 4: "other.md"}
    read = combine(candidates, **options, file_weight=0.3, files=files)
    assert [c.chunk_id for c in read] == [1, 2, 3, 4]
    by_id, own = {c.chunk_id: c.score for c in read}, {c.chunk_id: c.score for c in plain}
    assert by_id[2] == pytest.approx(0.7 * own[2] + 0.3 * own[1])
    assert (
        by_id[4] == pytest.approx(0.7 * own[4] + 0.3 * own[3]) and by_id[1] == own[1] and by_id[3] == own[3]
    )
    assert combine(candidates, **options, file_weight=0.3) == plain  # no files: every chunk alone


@given(
    st.lists(st.floats(0, 1), min_size=1, max_size=30),
    st.integers(1, 12),
    st.sampled_from([0.0, 0.3, 0.7, 1.0]),
    st.integers(0, 2**32 - 1),
)
def test_each_mmr_pick_is_the_best_trade_of_score_for_novelty(
    scores: list[float], k: int, lambda_: float, seed: int
) -> None:
    vectors = normalise(np.random.default_rng(seed).normal(size=(len(scores), 8)).astype(np.float32))
    ranked = [Candidate(i, None, None, score=s) for i, s in enumerate(scores)]
    picks = [c.chunk_id for c in mmr(ranked, vectors, k, lambda_)]
    assert len(picks) == len(set(picks)) == min(k, len(scores))
    if k == 1 or len(scores) == 1:
        return
    for n, pick in enumerate(picks):

        def value(i: int, before: list[int] = picks[:n]) -> float:
            redundancy = max((float(vectors[i] @ vectors[j]) for j in before), default=0.0)
            return lambda_ * scores[i] - (1 - lambda_) * redundancy

        left = [i for i in range(len(scores)) if i not in picks[:n]]
        assert value(pick) >= max(value(i) for i in left) - 1e-6


def test_scores_apart_by_float32_rounding_are_a_tie() -> None:
    """One text in three files scores 1.0 and 0.99999994 (float32 rounding): min-max must not stretch
    that to the whole range; a real gap (0.999 against 1.0) still orders them."""
    options: dict[str, Any] = {"vector_weight": 1.0, "keyword_weight": 0.0, "today": date(2026, 3, 1)}
    options["half_life_days"] = 30.0
    rounded = [Candidate(1, 1.0, None), Candidate(2, 0.99999994, None), Candidate(3, 0.99999994, None)]
    assert [c.vector_norm for c in combine(rounded, **options)] == [1.0, 1.0, 1.0]
    apart = [Candidate(1, 1.0, None), Candidate(2, 0.999, None)]
    assert [c.vector_norm for c in combine(apart, **options)] == [1.0, 0.0]


def test_a_floored_decay_keeps_recency_a_tie_breaker() -> None:
    """A year-old exact answer against yesterday's near-miss: plain 30-day decay (2**-12.2 at 365 days)
    buries the answer; with a floor of 0.8 recency moves a score by at most a fifth, so the answer wins
    and recency still orders two equally good hits."""
    today = date(2026, 3, 1)
    answer = Candidate(1, 0.9, 6.0, date(2025, 3, 1))  # 365 days old, best on both retrievers
    near_miss = Candidate(2, 0.6, 2.0, date(2026, 2, 28))
    unrelated = Candidate(3, 0.1, None, date(2026, 2, 28))
    same_old, same_new = Candidate(4, 0.6, 2.0, date(2025, 9, 1)), Candidate(5, 0.6, 2.0, date(2026, 2, 1))
    options: dict[str, Any] = {
        "vector_weight": 0.7,
        "keyword_weight": 0.3,
        "today": today,
        "half_life_days": 30.0,
    }
    pool = [answer, near_miss, unrelated, same_old, same_new]
    assert [c.chunk_id for c in combine(pool, **options)][:2] == [2, 5]
    floored = combine(pool, **options, decay_floor=0.8)
    assert [c.chunk_id for c in floored] == [1, 2, 5, 4, 3]
    assert floored[0].score == pytest.approx(1.0 * (0.8 + 0.2 * 0.5 ** (365 / 30)))


@given(
    age=st.integers(-400, 20_000),
    later=st.integers(0, 5_000),
    half_life=st.floats(0.5, 3_650),
    floor=st.floats(0.0, 0.99),
)
def test_decay_stays_between_its_floor_and_one_and_never_grows_with_age(
    age: int, later: int, half_life: float, floor: float
) -> None:
    today = date(2040, 1, 1)
    day = date.fromordinal(today.toordinal() - age)
    older = date.fromordinal(day.toordinal() - later)
    factor = decay_factor(day, today, half_life, floor)
    assert floor <= factor <= 1.0
    assert decay_factor(older, today, half_life, floor) <= factor
    assert decay_factor(None, today, half_life, floor) == 1.0  # core memory never decays
    if age <= 0:
        assert factor == 1.0


def test_a_fact_under_the_session_the_question_names_is_the_top_hit(tmp_path: Path) -> None:
    """Issue 17: a compaction's memory entry holds many sessions; "what happened on 2022-01-18?" must
    find the one under that session's heading, not the day's newest or shortest chunk."""
    ws = Workspace(tmp_path)
    ws.ensure()

    def session(day: int, fact: str) -> str:
        filler = "\n".join(
            f"- [2022-01-{day:02d}] Bart: note {i} on what happened to Bart, says Bart." for i in range(12)
        )
        return f"### 2022-01-{day:02d}\n- [2022-01-{day:02d}] Bart: {fact}\n{filler}"

    sessions = [session(d, "we talked about lunch.") for d in range(1, 28)]
    sessions[17] = "### 2022-01-18\n- [2022-01-18] Bart: I got a gold-plated pocket watch from my uncle."
    ws.daily_file(date(2026, 3, 1)).write_text("\n\n".join(sessions) + "\n")
    index = SqliteMemoryIndex(ws, HashEmbedder(64), today=lambda: date(2026, 3, 1))
    hits = index.search("What happened to Bart on 2022-01-18?", 3)
    assert "pocket watch" in hits[0].snippet
    index.close()


def test_in_context_vector_scores_blend_a_chunk_with_its_neighbours() -> None:
    own = np.eye(3, dtype=np.float32)  # three chunks, each along its own axis
    around = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], dtype=np.float32)  # 0 - 1 - 2 in one file
    query = np.array([1, 0, 0], dtype=np.float32)
    half = np.full(3, 0.5, dtype=np.float32)
    plain = in_context_vector_scores(query, own, np.zeros_like(own), half)
    assert plain.tolist() == [1.0, 0.0, 0.0]  # no neighbours: the plain cosine
    assert in_context_vector_scores(query, own, around, np.zeros(3, dtype=np.float32)).tolist() == [1, 0, 0]
    read = in_context_vector_scores(query, own, around, half)
    # chunk 1 sits next to chunk 0, which is what the query is about: cos((0.5, 1, 0.5), (1, 0, 0))
    assert read[1] == pytest.approx(0.5 / np.sqrt(1.5))
    assert read[0] == pytest.approx(1 / np.sqrt(1.25)) and read[2] == 0.0


def test_in_context_keyword_scores_lend_a_share_to_the_neighbours() -> None:
    neighbours = {1: (None, 2), 2: (1, 3), 3: (2, None), 9: (None, None)}
    none, half = dict.fromkeys(neighbours, 0.0), dict.fromkeys(neighbours, 0.5)
    assert in_context_keyword_scores({1: 4.0, 9: 1.0}, neighbours, none) == {1: 4.0, 9: 1.0}
    assert in_context_keyword_scores({1: 4.0, 3: 2.0, 9: 1.0}, neighbours, half) == {
        1: 4.0,
        2: 3.0,  # borrows half of both neighbours'
        3: 2.0,
        9: 1.0,
    }
    assert in_context_keyword_scores({7: 5.0}, neighbours, half) == {7: 5.0}  # not a borrower: its own
    assert in_context_keyword_scores({1: 4.0}, neighbours, {**half, 2: 0.25})[2] == 1.0  # its own weight


def test_a_short_chunk_borrows_more_context_than_a_full_one() -> None:
    assert context_weight(0, 1200, 0.5) == 0.5
    assert context_weight(300, 1200, 0.5) == pytest.approx(0.375)
    assert context_weight(1200, 1200, 0.5) == context_weight(5000, 1200, 0.5) == 0.0
    assert context_weight(100, 1200, 0.0) == 0.0


def _ranked(ids: Sequence[int]) -> list[Candidate]:
    return [Candidate(cid, 0.5, None, score=1.0 - i / 100) for i, cid in enumerate(ids)]


def test_the_reply_to_a_question_among_the_best_follows_it_at_its_score() -> None:
    ranked = _ranked([10, 20, 30, 40])
    out = follow_questions(ranked, {20: 21, 30: 40})  # 21 not a candidate; 40 ranked below its question
    assert [c.chunk_id for c in out] == [10, 20, 21, 30, 40]
    assert out[2].score == out[1].score and out[2].vector is None  # the reply: its question's score
    assert out[4].score == out[3].score and out[4].vector == 0.5  # a candidate keeps its own evidence
    # a reply ranked before its question stays there; a question below the first few leads nowhere
    assert [c.chunk_id for c in follow_questions(ranked, {30: 10})] == [10, 20, 30, 40]
    # a reply that was placed is not placed twice, and its own reply follows the chain
    assert [c.chunk_id for c in follow_questions(ranked, {10: 30, 30: 31})] == [10, 30, 20, 31, 40]
    far = _ranked(range(1, REPLY_AFTER + 2))
    assert follow_questions(far, {REPLY_AFTER + 1: 99}) == far


@given(
    st.lists(st.integers(0, 30), unique=True, max_size=12),
    st.dictionaries(st.integers(0, 30), st.integers(0, 40), max_size=8),
)
def test_following_questions_keeps_every_candidate_in_order_once(ids: list[int], replies: dict) -> None:
    ranked = _ranked(ids)
    out = [c.chunk_id for c in follow_questions(ranked, replies)]
    assert len(out) == len(set(out)) and set(ids) <= set(out)
    moved = {replies[cid] for cid in ids[:REPLY_AFTER] if cid in replies}
    assert [c for c in out if c in ids and c not in moved] == [c for c in ids if c not in moved]  # in order
    for i, cid in enumerate(ids[:REPLY_AFTER]):
        reply = replies.get(cid)
        if reply is not None and i + 1 < len(ids) and ids[i + 1] not in moved:
            assert out.index(reply) < out.index(ids[i + 1])  # before the candidate ranked next
