"""Pure hybrid ranking (M4): no I/O, no clock — the caller passes scores, ages and ``now``.

Every component is min-max normalised over the candidate set (the union of the vector and keyword top
lists), so ``vector_weight``/``keyword_weight`` mean what they say whatever the model's cosine range or
the query's BM25 scale (e5 cosines all sit in 0.7–0.9; raw cosines drowned the keyword part and cost
8 points of recall@5 on MADial-Bench). A third component, the embedder's learned sparse terms
(:mod:`.sparse`, ``sparse_weight``), re-scores the same candidates when the embedder has a sparse
head. Daily files then decay with a half-life; core memory does not. Only a daily score's recency
share decays (``decay_floor``, default 0.8 in the index): under the bare exponential a year-old exact
answer kept 2**-12 of its score and any recent near-miss outranked it.

A query that names a calendar day (``named_days``, :func:`.text.query_days`: ``2026-03-14``, or one
relative to the search's ``today`` such as "last Saturday" or 上周六; each day of a month it writes with
its year, :func:`.text.query_month_days`) asks about that day: its
daily file's chunks do not decay and rank before every other chunk (by their own score among
themselves), and so do chunks that write that day (``naming_chunks``: a memory entry's ``### 2022-01-18``
session, a core-memory line "release on 8 May 2026") or sit under a heading that does (a transcript's
``# Session 3, 14 March, 2024``: the turn that answers rarely writes the date). Recency must not bury the
very day the user asked about.

A chunk is read in its context (``neighbour_weight``, :func:`in_context_vector_scores` and
:func:`in_context_keyword_scores`): its vector is blended with the vectors of the chunks just before and
after it in the same file, and its keyword score gains a share of theirs. A turn of a conversation ("Yes,
every weekend!") rarely names what it is about; the turn before it does. The shorter the chunk, the more
it borrows (:func:`context_weight`): a full chunk carries its own context. A daily file's chunks borrow
nothing (:class:`.indexing.BaseMemoryIndex` gives them weight 0): its entries stand alone.

Who said it counts a little (``speaker_weight``, ``speaking_chunks``): when a query names one of the
speakers its candidates carry (:mod:`.speakers`), the chunks that speaker said gain a fixed component.
It stays small because a question can name the wrong person, or ask about what was said *to* them.
So does a chunk that says when, for a question that asks when (``time_weight``, ``timed_chunks``,
:mod:`.when`): "When did Ingrid go to the pottery class?" is answered by "I went … yesterday".

A note's chunk is read in its file too (``file_weight``, :func:`in_file_scores`): after fusion its score
rises toward the best candidate's of the same file. The session that answers a question holds more than
its best turn, and its other turns rarely repeat the question's words.

The reply to a question follows it (:func:`follow_questions`): a question found by its words is often
answered by a turn that repeats none of them, so the chunk after one of the best candidates that ends with
a question is placed right after it.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date
from typing import NotRequired, TypedDict, Unpack

import numpy as np
from numpy.typing import NDArray

__all__ = [
    "REPLY_AFTER",
    "Candidate",
    "Neighbours",
    "Ranking",
    "combine",
    "context_ids",
    "context_weight",
    "decay_factor",
    "follow_questions",
    "fuse",
    "in_context_keyword_scores",
    "in_context_vector_scores",
    "in_file_scores",
    "mmr",
    "passes_min_score",
    "read_in_context",
    "top_k_indices",
]


@dataclass(frozen=True, slots=True)
class Candidate:
    """One chunk's raw evidence. ``keyword`` is BM25 (higher is better; ``None`` = no keyword match);
    ``sparse`` the sparse-term dot product (``None``: not scored)."""

    chunk_id: int
    vector: float | None
    keyword: float | None
    day: date | None = None  # set for daily files only: they decay
    score: float = 0.0
    vector_norm: float = 0.0
    keyword_norm: float = 0.0
    sparse: float | None = None
    sparse_norm: float = 0.0


_TIE = 1e-6  # relative: scores are float32 products, equal texts differ by their rounding (~1e-7)


def _minmax(values: Sequence[float | None]) -> list[float]:
    """Each value scaled to [0, 1] between the smallest and largest (``None``: 0). Values that differ by no
    more than float32 rounding are a tie, all 1: stretching 1e-7 to the whole range would rank by noise."""
    present = [v for v in values if v is not None]
    if not present:
        return [0.0] * len(values)
    low, high = min(present), max(present)
    span = high - low
    out = []
    for v in values:
        if v is None:
            out.append(0.0)
        elif span <= _TIE * max(1.0, abs(high)):
            out.append(1.0)
        else:
            out.append((v - low) / span)
    return out


def in_file_scores(scores: Sequence[float], files: Sequence[str | None], weight: float) -> list[float]:
    """Each score read in its file: ``(1 - weight) * score + weight * best``, where ``best`` is the best
    score among the candidates of the same file (``files[i]``; ``None``: a chunk read alone, unchanged).

    A session that answers a question holds more than the turn that says it best: its other turns rarely
    repeat the question's words ("Which fantasy novels does Tim enjoy writing about?" / "Harry Potter and
    Game of Thrones are amazing"), but its best turn does. A file's best keeps its score, and its other
    chunks come closer to it.

    Invariants: ``score <= result <= best``; ``weight == 0`` or ``files[i] is None`` leaves ``scores[i]``;
    the order of a file's chunks among themselves does not change; scores in [0, 1] stay in [0, 1].
    """
    best: dict[str, float] = {}
    for score, file in zip(scores, files, strict=True):
        if file is not None and score > best.get(file, -math.inf):
            best[file] = score
    return [
        score if file is None else (1.0 - weight) * score + weight * best[file]
        for score, file in zip(scores, files, strict=True)
    ]


def decay_factor(day: date | None, today: date, half_life_days: float, floor: float = 0.0) -> float:
    """``floor + (1 - floor) * 0.5 ** (age / half_life)`` for a daily file's day; 1.0 for undated (core)
    memory or the future. Invariant: ``floor <= factor <= 1``, non-increasing in age; ``floor=0`` is the
    plain exponential, whose factor for a year-old day (2**-12) lets any recent sliver of similarity
    outrank the exact answer."""
    if day is None:
        return 1.0
    age = (today - day).days
    return 1.0 if age <= 0 else floor + (1.0 - floor) * math.pow(0.5, age / half_life_days)


class Ranking(TypedDict):
    """How candidates are scored: the weights, the day decay is measured from, its half-life, and the
    days a query names: their daily files' chunks, and ``naming_chunks`` (chunks whose text writes one
    of those days, such as a session heading in a memory entry), are not decayed and come first."""

    vector_weight: float
    keyword_weight: float
    sparse_weight: NotRequired[float]  # of the sparse-term component; default 0 (not used)
    today: date
    half_life_days: float
    decay_floor: NotRequired[float]  # the share of a score decay never takes; default 0
    named_days: NotRequired[Collection[date]]
    naming_chunks: NotRequired[Collection[int]]
    speaker_weight: NotRequired[float]  # of the speaker component; default 0 (not used)
    speaking_chunks: NotRequired[Collection[int]]
    time_weight: NotRequired[float]  # of the when component; default 0 (not used)
    timed_chunks: NotRequired[Collection[int]]
    file_weight: NotRequired[float]  # the share of a score its file's best gives; default 0 (not used)
    files: NotRequired[Mapping[int, str]]  # chunk id -> its file, for the chunks read in their file


def combine(candidates: Sequence[Candidate], **ranking: Unpack[Ranking]) -> list[Candidate]:
    """Score candidates, best first: ``(vw * vec + kw * keyword + sw * sparse + pw * said + tw * timed) /
    (vw + kw + sw + pw + tw)``, times the decay; chunks of ``named_days`` undecayed and first (see the
    module docstring). ``said`` is 1 for ``speaking_chunks`` and 0 for the rest, ``timed`` likewise for
    ``timed_chunks``; ``pw`` (``speaker_weight``) counts only when ``speaking_chunks`` is not empty, and
    ``tw`` (``time_weight``) only when ``timed_chunks`` is not, so a query that names no speaker and asks
    no "when" is scored as without them.

    Weights are divided by their sum so scores stay in [0, 1] and ``min_score`` keeps its meaning.
    A mode that uses one component is the same call with the other weights at 0. Last, each chunk of
    ``files`` is read in its file (:func:`in_file_scores`, ``file_weight``).
    """
    vector_weight, keyword_weight = ranking["vector_weight"], ranking["keyword_weight"]
    sparse_weight = ranking.get("sparse_weight", 0.0)
    today, half_life_days = ranking["today"], ranking["half_life_days"]
    floor = ranking.get("decay_floor", 0.0)
    named_days = ranking.get("named_days", frozenset())
    naming = ranking.get("naming_chunks", frozenset())
    speaking = ranking.get("speaking_chunks", frozenset())
    speaker_weight = ranking.get("speaker_weight", 0.0) if speaking else 0.0
    timed = ranking.get("timed_chunks", frozenset())
    time_weight = ranking.get("time_weight", 0.0) if timed else 0.0
    total = vector_weight + keyword_weight + sparse_weight + speaker_weight + time_weight
    if total <= 0:
        vector_weight, keyword_weight, sparse_weight, total = 1.0, 0.0, 0.0, 1.0
    vec = _minmax([c.vector for c in candidates])
    kw = _minmax([c.keyword for c in candidates])
    sp = _minmax([c.sparse for c in candidates])
    scores = []
    for cand, v, k, s in zip(candidates, vec, kw, sp, strict=True):
        cues = (speaker_weight if cand.chunk_id in speaking else 0.0) + (
            time_weight if cand.chunk_id in timed else 0.0
        )
        base = (vector_weight * v + keyword_weight * k + sparse_weight * s + cues) / total
        named = cand.day in named_days or cand.chunk_id in naming
        scores.append(base if named else base * decay_factor(cand.day, today, half_life_days, floor))
    file_weight, files = ranking.get("file_weight", 0.0), ranking.get("files", {})
    if file_weight > 0 and files:
        scores = in_file_scores(scores, [files.get(c.chunk_id) for c in candidates], file_weight)
    # Built directly: ``dataclasses.replace`` costs ~10 us a call, 1 ms a search of 100 candidates.
    scored = [
        Candidate(
            cand.chunk_id,
            cand.vector,
            cand.keyword,
            cand.day,
            score=score,
            vector_norm=v,
            keyword_norm=k,
            sparse=cand.sparse,
            sparse_norm=s,
        )
        for cand, score, v, k, s in zip(candidates, scores, vec, kw, sp, strict=True)
    ]
    scored.sort(key=lambda c: (c.day not in named_days and c.chunk_id not in naming, -c.score, c.chunk_id))
    return scored


def fuse(
    days: Mapping[int, date | None],
    vector: Mapping[int, float],
    keyword: Mapping[int, float],
    *,
    min_score: float,
    sparse: Mapping[int, float] | None = None,
    **ranking: Unpack[Ranking],
) -> list[Candidate]:
    """The candidates (chunk id -> day, for daily files) ranked by :func:`combine`, those below
    ``min_score`` (see :func:`passes_min_score`) left out."""
    sparse = sparse or {}
    ranked = combine(
        [
            Candidate(cid, vector.get(cid), keyword.get(cid), day, sparse=sparse.get(cid))
            for cid, day in days.items()
        ],
        **ranking,
    )
    return [c for c in ranked if passes_min_score(c, min_score)]


Neighbours = Mapping[int, tuple[int | None, int | None]]
"""Chunk id -> the ids of the chunks just before and after it in its file (``None`` at either end)."""


def in_context_vector_scores(
    query: NDArray[np.float32],
    own: NDArray[np.float32],
    around: NDArray[np.float32],
    weights: NDArray[np.float32],
) -> NDArray[np.float32]:
    """Each chunk's cosine with ``query`` when read in context: the cosine of ``own[i] + weights[i] *
    around[i]``, where ``around[i]`` is the sum of its neighbours' vectors (zero where it has none).

    Invariant: where ``weights[i] == 0`` or chunk ``i`` has no neighbours, the plain cosine ``own[i] @
    query`` (rows unit-length).
    """
    blend = own + weights.astype(np.float32)[:, None] * around
    norms = np.linalg.norm(blend, axis=1)
    norms[norms == 0] = 1.0
    return np.asarray((blend @ query) / norms, dtype=np.float32)


def _around(neighbours: Neighbours) -> list[int]:
    return sorted({n for pair in neighbours.values() for n in pair if n is not None})


def context_ids(borrowers: Sequence[int], neighbours: Neighbours) -> list[int]:
    """The chunks whose vectors :func:`read_in_context` reads: the borrowers, then every neighbour once."""
    return [*borrowers, *_around(neighbours)]


def read_in_context(
    query: NDArray[np.float32],
    borrowers: Sequence[int],
    neighbours: Neighbours,
    weights: Mapping[int, float],
    matrix: NDArray[np.float32],
) -> dict[int, float]:
    """The vector score of each of ``borrowers`` read with its neighbours in its file
    (:func:`in_context_vector_scores`): ``matrix`` holds the stored vectors of
    :func:`context_ids` ``(borrowers, neighbours)``, one row each, in order."""
    around_ids = _around(neighbours)
    row_of = {cid: i for i, cid in enumerate(around_ids, start=len(borrowers))}
    none = matrix.shape[0]  # a zero row stands for "no neighbour on this side"
    matrix = np.vstack([matrix, np.zeros((1, matrix.shape[1]), dtype=matrix.dtype)])
    sides = np.array(
        [
            [none if n is None else row_of.get(n, none) for n in neighbours.get(cid, (None, None))]
            for cid in borrowers
        ],
        dtype=np.intp,
    ).reshape(len(borrowers), 2)
    around = matrix[sides[:, 0]] + matrix[sides[:, 1]]
    row_weights = np.fromiter((weights[cid] for cid in borrowers), np.float32, count=len(borrowers))
    scores = in_context_vector_scores(query, matrix[: len(borrowers)], around, row_weights)
    return dict(zip(borrowers, scores.tolist(), strict=True))


def in_context_keyword_scores(
    scores: Mapping[int, float], neighbours: Neighbours, weights: Mapping[int, float]
) -> dict[int, float]:
    """``scores``, each chunk of ``neighbours`` plus ``weights[chunk]`` times its neighbours' (a neighbour
    outside ``scores`` adds 0). A chunk of ``neighbours`` with no score of its own gets one when a neighbour
    matched.

    Invariant: where a chunk's weight is 0, or it is not in ``neighbours``, its score is its own (absent
    when it has none).
    """
    out = dict(scores)
    for cid, pair in neighbours.items():
        own = scores.get(cid)
        weight = weights.get(cid, 0.0)
        borrowed = sum(scores.get(n, 0.0) for n in pair if n is not None)
        if own is not None or (weight > 0 and borrowed > 0):
            out[cid] = (own or 0.0) + weight * borrowed
    return out


def context_weight(chars: int, chunk_chars: int, weight: float) -> float:
    """How much a chunk of ``chars`` characters borrows from its neighbours: ``weight`` for an empty one,
    falling linearly to 0 for a chunk of ``chunk_chars`` or more. A short chunk (one turn of a
    conversation) lacks its context; a full one carries its own, and its neighbours are often about
    something else.

    Invariant: ``0 <= context_weight(...) <= weight``, non-increasing in ``chars``.
    """
    return weight * max(0.0, 1.0 - chars / chunk_chars) if chunk_chars > 0 else 0.0


def passes_min_score(candidate: Candidate, min_score: float) -> bool:
    """Keep a hit whose score, *or* whose own keyword evidence, reaches ``min_score``.

    A chunk that matches the query's words but not its meaning (an exact name, an error code) has a low
    hybrid score; judging it on its keyword part as well keeps such hits from vanishing silently.
    """
    return candidate.score >= min_score or (
        candidate.keyword is not None and candidate.keyword_norm >= min_score
    )


REPLY_AFTER = 5
"""How many of the best candidates have the reply to a question they end with placed after them (tuned
on LoCoMo dev, where the 3, 5 or 10 best read alike)."""


def follow_questions(
    ranked: Sequence[Candidate], replies: Mapping[int, int], first: int = REPLY_AFTER
) -> list[Candidate]:
    """``ranked`` with the reply to each question among its ``first`` candidates placed right after it, at
    the question's score. ``replies`` maps a question's chunk id to its reply's (the next chunk of its
    file): a question found by its words is often answered by a turn that repeats none of them ("Where
    will you shoot it?" / "In Miami, on the beach").

    Invariants: every candidate of ``ranked`` stays, and those not moved up as a reply keep their order;
    each chunk appears once; the reply to one of the ``first`` candidates comes before the candidate
    ranked next after it, unless that one moved up as a reply itself (a reply already placed stays where
    it was).
    """
    by_id = {c.chunk_id: c for c in ranked}
    out: list[Candidate] = []
    placed: set[int] = set()
    for i, cand in enumerate(ranked):
        if cand.chunk_id not in placed:  # else it was placed as a reply
            out.append(cand)
            placed.add(cand.chunk_id)
        reply = replies.get(cand.chunk_id) if i < first else None
        if reply is not None and reply not in placed:
            old = by_id.get(reply, Candidate(reply, None, None))
            out.append(replace(old, score=cand.score))
            placed.add(reply)
    return out


def mmr(
    ranked: Sequence[Candidate],
    vectors: NDArray[np.float32],
    k: int,
    lambda_: float = 0.7,
) -> list[Candidate]:
    """Maximal marginal relevance: trade score for diversity. ``vectors[i]`` belongs to ``ranked[i]``.

    Each pick maximises ``lambda_ * score - (1 - lambda_) * (its largest cosine with a chunk already
    picked)`` among the candidates left (the first: the best score); ties go to the earlier candidate.
    Invariant: the picks are ``min(k, len(ranked))`` distinct candidates of ``ranked``. Vectorised: one
    pass over the candidates per pick (a Python loop over pairs cost 16 ms for 25 of 100).
    """
    if len(ranked) <= 1 or k <= 1:
        return list(ranked[:k])
    sims = vectors @ vectors.T
    relevance = lambda_ * np.fromiter((c.score for c in ranked), np.float64, count=len(ranked))
    redundancy = np.zeros(len(ranked))  # no pick yet: nothing is redundant
    taken = np.zeros(len(ranked), dtype=bool)
    chosen: list[int] = []
    for _ in range(min(k, len(ranked))):
        value = np.where(taken, -np.inf, relevance - (1 - lambda_) * redundancy)
        best = int(np.argmax(value))
        chosen.append(best)
        taken[best] = True
        redundancy = sims[best] if len(chosen) == 1 else np.maximum(redundancy, sims[best])
    return [ranked[i] for i in chosen]


def top_k_indices(scores: NDArray[np.float32], k: int) -> NDArray[np.intp]:
    """Indices of the ``k`` largest ``scores``, best first (argpartition: O(n), not a full sort)."""
    if k <= 0 or scores.size == 0:
        return np.zeros(0, dtype=np.intp)
    if k >= scores.size:
        return np.argsort(-scores, kind="stable")
    part = np.argpartition(scores, scores.size - k)[scores.size - k :]  # no negated copy of ``scores``
    return part[np.argsort(-scores[part], kind="stable")]
