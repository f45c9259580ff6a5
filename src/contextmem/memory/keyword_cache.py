"""The SQLite index's keyword postings in memory: FTS5's own BM25, scored over arrays.

FTS5 answers an OR query by walking every posting list of every query word and scoring each row that holds
any of them through its row-by-row ranking callback. On conversation text, where "what", "did" and a
speaker's name are in most chunks, that is ~130 ms at 100k chunks. The same postings held as arrays are
gathered and summed into one dense score array in a few milliseconds.

**The scores are FTS5's.** :meth:`KeywordCache.top` computes ``bm25()`` as ``fts5_aux.c`` does: each
quoted query word is a phrase of the tokens the FTS5 tokenizer makes of it; IDF ``log((N - n + 0.5) /
(n + 0.5))`` per phrase (``n`` rows holding it), clamped to ``1e-6`` when not positive; ``k1`` 1.2, ``b``
0.75; the document length in tokens; the terms summed in query order, in the same floating-point
operations. The tokens come from FTS5 itself (:class:`FtsTokenizer`: the same tokenizer in a scratch
in-memory table), so the porter stemmer and Unicode rules are never written again here. A test holds the
scores equal to FTS5's on random corpora.

**Refreshed like the vector cache** (:mod:`.vector_cache`): chunk ids are never reused, so new chunks are
tokenized into a second, small segment; deleted chunks are masked; everything is rebuilt into one segment
when the small one reaches an eighth of the rows or a quarter of the rows are dead.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

__all__ = ["FtsTokenizer", "KeywordCache"]

K1 = 1.2  # FTS5's bm25() constants
B = 0.75
_NONE = -1  # a stream position between two documents: no phrase spans it
_SEPARATOR = "\x01"  # a word no FTS5 document holds (they are words of letters and digits)
_MERGE_AT = 8  # the new segment is merged in once it holds 1/8 of the rows
_COMPACT_AT = 4  # rebuilt without dead rows once they are 1/4


class FtsTokenizer:
    """Words to the token ids FTS5 indexes them as, through ``tokenize`` in a scratch in-memory table.

    The documents the index stores are words joined by spaces (:func:`.text.fts_document`), and the
    tokenizer splits on spaces, so a document's tokens are its words' tokens in order. Each distinct
    word of the indexed documents is tokenized once and remembered; query words are tokenized without
    being remembered (a query's words are bounded, the vocabulary of queries is not).
    """

    def __init__(self, tokenize: str) -> None:
        self._db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA temp_store=MEMORY")  # no temporary file, anywhere
        self._db.execute(f"CREATE VIRTUAL TABLE w USING fts5(word, tokenize='{tokenize}')")
        self._db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(w, instance)")
        # FTS5 cuts a token of thousands of characters at a byte limit, inside a 4-byte character at times:
        # terms are read as bytes and decoded losslessly, never a decode error on every later search.
        self._db.text_factory = bytes
        self.ids: dict[str, int] = {}  # token -> id
        # Indexed word i's token ids are flat[start[i]:start[i + 1]]; word 0 is the document separator.
        self._words: dict[str, int] = {_SEPARATOR: 0}
        self._flat: list[int] = [_NONE]
        self._start: list[int] = [0, 1]

    def close(self) -> None:
        self._db.close()

    @property
    def known_words(self) -> int:
        """How many distinct words of indexed documents are remembered."""
        return len(self._words) - 1

    def _tokenize(self, words: Sequence[str]) -> list[list[str]]:
        out: list[list[tuple[int, str]]] = [[] for _ in words]
        try:
            self._db.executemany("INSERT INTO w(rowid, word) VALUES (?, ?)", enumerate(words))
            for term, doc, offset in self._db.execute("SELECT term, doc, offset FROM v"):
                out[doc].append((offset, term.decode("utf-8", "surrogateescape")))
        finally:  # the scratch table is empty again whatever happened: one failure spoils no later call
            self._db.execute("DELETE FROM w")
        return [[term for _, term in sorted(found)] for found in out]

    def stream(self, documents: Sequence[str]) -> tuple[NDArray[np.int32], NDArray[np.int64]]:
        """The token ids of ``documents``, each followed by :data:`_NONE`, and each one's length in tokens."""
        if not documents:
            return np.zeros(0, np.int32), np.zeros(0, np.int64)
        words = f" {_SEPARATOR} ".join(documents).split()
        words.append(_SEPARATOR)
        new = list(set(words).difference(self._words))
        for word, terms in zip(new, self._tokenize(new) if new else [], strict=True):
            self._words[word] = len(self._start) - 1
            self._flat.extend(self.ids.setdefault(t, len(self.ids)) for t in terms)
            self._start.append(len(self._flat))
        index = np.fromiter(map(self._words.__getitem__, words), dtype=np.int64, count=len(words))
        start = np.asarray(self._start, dtype=np.int64)
        first, size = start[index], start[index + 1] - start[index]
        # Each word's tokens, in order: flat[first + 0 .. first + size - 1] for each word.
        ends = np.cumsum(size)
        offsets = np.arange(int(ends[-1]), dtype=np.int64) - np.repeat(ends - size, size)
        stream = np.asarray(self._flat, dtype=np.int32)[np.repeat(first, size) + offsets]
        breaks = np.flatnonzero(stream == _NONE)
        return stream, np.diff(breaks, prepend=-1) - 1

    def phrases(self, words: Sequence[str]) -> list[tuple[int, ...] | None]:
        """Each query word as the token ids of its phrase; ``None`` when a token was never indexed (the
        phrase matches nothing) or the word has no token."""
        known = [self._words.get(w) or None for w in words]  # word 0, the separator, is not a word
        unknown = [w for w, at in zip(words, known, strict=True) if at is None]
        fresh = iter(self._tokenize(unknown) if unknown else [])
        out: list[tuple[int, ...] | None] = []
        for at in known:
            if at is not None:
                span: tuple[int, ...] | None = tuple(self._flat[self._start[at] : self._start[at + 1]])
            else:
                ids = [self.ids.get(t) for t in next(fresh)]
                span = tuple(i for i in ids if i is not None) if None not in ids else None
            out.append(span or None)
        return out


@dataclass(frozen=True, slots=True)
class _Segment:
    """The postings of consecutive rows ``first``.. (``len(starts)`` of them).

    ``stream`` holds their token ids, each document followed by :data:`_NONE`, and ``starts`` where each
    begins. Token ``t``'s positions in the stream are ``positions[at[t]:at[t + 1]]`` (ascending), and its
    rows and counts ``rows[post[t]:post[t + 1]]``, ``counts[…]`` (rows ascending).
    """

    first: int
    stream: NDArray[np.int32]
    starts: NDArray[np.int64]
    at: NDArray[np.int64]
    positions: NDArray[np.int32]
    post: NDArray[np.int64]
    rows: NDArray[np.int32]
    counts: NDArray[np.int32]

    @classmethod
    def build(cls, first: int, stream: NDArray[np.int32], lengths: NDArray[np.int64]) -> _Segment:
        starts = (np.cumsum(lengths + 1) - (lengths + 1)).astype(np.int64)
        real = np.flatnonzero(stream != _NONE).astype(np.int32)
        tokens = stream[real]
        order = np.argsort(tokens, kind="stable")  # by token, then by position
        positions = real[order]
        by_token = tokens[order]
        size = int(tokens.max()) + 1 if tokens.size else 0
        at = np.concatenate([[0], np.cumsum(np.bincount(tokens, minlength=size))]).astype(np.int64)
        row_of = np.repeat(np.arange(first, first + lengths.size, dtype=np.int32), lengths + 1)
        rows_in = row_of[positions]
        if positions.size:
            change = np.flatnonzero((np.diff(by_token) != 0) | (np.diff(rows_in) != 0)) + 1
            bounds = np.concatenate([[0], change, [positions.size]])
        else:
            bounds = np.zeros(1, dtype=np.int64)
        counts = np.diff(bounds).astype(np.int32)
        rows = rows_in[bounds[:-1]]
        post = np.concatenate([[0], np.cumsum(np.bincount(by_token[bounds[:-1]], minlength=size))])
        return cls(first, stream, starts, at, positions, post.astype(np.int64), rows, counts)

    def phrase_hits(self, phrase: tuple[int, ...]) -> tuple[NDArray[np.integer], NDArray[np.integer]]:
        """The rows holding ``phrase`` (two tokens or more: "ingrid's") and how many times each does."""
        if phrase[0] >= self.at.size - 1:
            return np.zeros(0, np.int32), np.zeros(0, np.int32)
        found = self.positions[self.at[phrase[0]] : self.at[phrase[0] + 1]]
        for step, token in enumerate(phrase[1:], start=1):
            found = found[found + step < self.stream.size]
            found = found[self.stream[found + step] == token]
        rows = np.searchsorted(self.starts, found, side="right") - 1 + self.first
        return np.unique(rows, return_counts=True)


@dataclass(frozen=True, slots=True)
class KeywordCache:
    """Row ``i`` is chunk ``ids[i]``: its length in tokens and whether it is ``live`` (not deleted)."""

    generation: int
    ids: NDArray[np.int64]  # ascending chunk ids
    lengths: NDArray[np.int64]
    live: NDArray[np.bool_]
    segments: tuple[_Segment, ...]  # one, or the rebuilt one and the newest rows
    tokenizer: FtsTokenizer  # what made the documents' token ids (and makes a query's)
    # Derived once per cache, since the average length only moves with the rows: how many rows are live and
    # each row's length term ``k1 * (1 - b + b * D / avgdl)``. A token's postings' term frequency part
    # ``f * (k1 + 1) / (f + that)`` (a search multiplies it by the IDF and adds) is worked out when a
    # search first asks for the token, and kept: a refresh after an append then costs nothing per posting.
    count: int = field(init=False)
    norms: NDArray[np.float64] = field(init=False)
    _weights: dict[tuple[int, int], NDArray[np.float64]] = field(init=False)  # (segment, token) ->

    def __post_init__(self) -> None:
        count = int(self.live.sum())
        avgdl = float(self.lengths[self.live].sum()) / count if count else 1.0
        object.__setattr__(self, "count", count)
        object.__setattr__(self, "norms", K1 * (1 - B + B * self.lengths.astype(np.float64) / avgdl))
        object.__setattr__(self, "_weights", {})

    @classmethod
    def load(
        cls, generation: int, ids: Sequence[int], documents: Sequence[str], tokenizer: FtsTokenizer
    ) -> KeywordCache:
        """A cache of the FTS5 documents ``documents`` of chunks ``ids`` (ascending)."""
        stream, lengths = tokenizer.stream(documents)
        chunk_ids = np.asarray(ids, np.int64)
        return cls(
            generation,
            chunk_ids,
            lengths,
            np.ones(chunk_ids.size, bool),
            (_Segment.build(0, stream, lengths),),
            tokenizer,
        )

    @property
    def last_id(self) -> int:
        return int(self.ids[-1]) if self.ids.size else -1

    def refreshed(
        self, generation: int, gone: NDArray[np.int64], new_ids: Sequence[int], documents: Sequence[str]
    ) -> KeywordCache:
        """This cache after chunks ``new_ids`` (above :attr:`last_id`) were added and chunks ``gone``
        deleted (ids it does not hold are ignored): the new rows go to the small segment, rebuilt with
        them; everything is rebuilt into one segment when that one holds an eighth of the rows, or without
        the dead rows when they are a quarter."""
        added, added_lengths = self.tokenizer.stream(documents)
        alive = np.concatenate([self.live & ~np.isin(self.ids, gone), np.ones(len(new_ids), bool)])
        ids = np.concatenate([self.ids, np.asarray(new_ids, dtype=np.int64)])
        lengths = np.concatenate([self.lengths, added_lengths])
        streams = [segment.stream for segment in self.segments] + [added]
        base, split = self.segments[0], self.segments[0].starts.size
        if _COMPACT_AT * int(ids.size - alive.sum()) > ids.size:
            stream = np.concatenate(streams)[np.repeat(alive, lengths + 1)]
            ids, lengths, alive = ids[alive], lengths[alive], alive[alive]
            segments: tuple[_Segment, ...] = (_Segment.build(0, stream, lengths),)
        elif _MERGE_AT * (ids.size - split) > ids.size:
            segments = (_Segment.build(0, np.concatenate(streams), lengths),)
        elif split == ids.size:
            segments = (base,)
        else:  # the base segment is kept as it is; the rows after it are built again, with the new ones
            segments = (base, _Segment.build(split, np.concatenate(streams[1:]), lengths[split:]))
        return KeywordCache(generation, ids, lengths, alive, segments, self.tokenizer)

    def top(self, phrases: Sequence[tuple[int, ...] | None], limit: int) -> dict[int, float]:
        """The ``limit`` best live chunks for the OR of ``phrases``: chunk id -> FTS5's ``-bm25()``."""
        if not self.count or limit <= 0:
            return {}
        dead = self.count < self.ids.size
        scores = np.zeros(self.ids.size)
        for phrase in phrases:
            if phrase is None:
                continue
            rows, weights = self._hits(phrase)
            if dead:
                keep = self.live[rows]
                rows, weights = rows[keep], weights[keep]
            if not rows.size:
                continue
            idf = math.log((self.count - rows.size + 0.5) / (rows.size + 0.5))
            scores[rows] += (idf if idf > 0.0 else 1e-6) * weights
        matched = np.flatnonzero(scores > 0)
        if matched.size > limit:
            matched = matched[np.argpartition(-scores[matched], limit - 1)[:limit]]
        return dict(zip(self.ids[matched].tolist(), scores[matched].tolist(), strict=True))

    def _tf(self, rows: NDArray[np.integer], counts: NDArray[np.integer]) -> NDArray[np.float64]:
        """The term frequency part of BM25 for ``counts`` hits in ``rows``."""
        weights: NDArray[np.float64] = (counts * (K1 + 1.0)) / (counts + self.norms[rows])
        return weights

    def _hits(self, phrase: tuple[int, ...]) -> tuple[NDArray[np.integer], NDArray[np.float64]]:
        """The rows holding ``phrase`` and the term frequency part of its BM25 term in each."""
        parts: list[tuple[NDArray[np.integer], NDArray[np.float64]]] = []
        for at, segment in enumerate(self.segments):
            if len(phrase) == 1 and phrase[0] < segment.at.size - 1:
                lo, hi = segment.post[phrase[0]], segment.post[phrase[0] + 1]
                rows = segment.rows[lo:hi]
                weights = self._weights.get((at, phrase[0]))
                if weights is None:
                    weights = self._weights[at, phrase[0]] = self._tf(rows, segment.counts[lo:hi])
                parts.append((rows, weights))
            elif len(phrase) > 1:
                found, counts = segment.phrase_hits(phrase)
                parts.append((found, self._tf(found, counts)))
        if len(parts) == 1:
            return parts[0]
        return (
            np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int32),
            np.concatenate([p[1] for p in parts]) if parts else np.zeros(0),
        )
