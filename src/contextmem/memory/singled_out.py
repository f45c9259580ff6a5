"""The candidates each ranking rule singles out, read from their stored rows (pure; no I/O).

A search reads its candidates' rows (:class:`.index_options.StoredChunk`) once; the rules of
:func:`.ranking.combine` then need, from those rows, the chunks that write a day the query names, that a
speaker it names said, that say when for a query that asks when, and each note's file. Every rule reads
what was stored when the chunk was indexed, never its text again, except a named day's written forms.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from datetime import date
from typing import NotRequired, TypedDict

from ..workspace import memory_kind
from .index_options import StoredChunk
from .speakers import speaking_chunks
from .when import timed_chunks

__all__ = ["Cues", "row_cues"]


class Cues(TypedDict):
    """The part of :class:`.ranking.Ranking` read from the candidates' rows."""

    naming_chunks: Collection[int]
    speaking_chunks: NotRequired[Collection[int]]
    timed_chunks: NotRequired[Collection[int]]
    files: NotRequired[Mapping[int, str]]


def row_cues(
    rows: Mapping[int, StoredChunk],
    query: str,
    *,
    named: Collection[date],
    mentions: re.Pattern[str] | None,
    speakers: bool,
    when: bool,
    files: bool,
) -> Cues:
    """What :func:`.ranking.combine` singles out among ``rows`` (chunk id -> row) for ``query``:

    - ``naming_chunks``: the chunks under a heading that writes one of the ``named`` days, or whose text
      writes one (``mentions``, :func:`contextmem.lang.dates.day_mentions`);
    - with ``speakers``, ``speaking_chunks`` (:func:`.speakers.speaking_chunks`);
    - with ``when``, ``timed_chunks`` (:func:`.when.timed_chunks`): a daily file's chunk is dated by its
      file's name, so it says when;
    - with ``files``, each note's chunk's file (a daily file's or ``MEMORY.md``'s entries were written at
      different moments and stand alone).

    A rule turned off (its weight 0) costs nothing here.
    """
    cues = Cues(
        naming_chunks={
            cid
            for cid, row in rows.items()
            if row.heading_day in named or (mentions is not None and mentions.search(row.text))
        }
    )
    if speakers:
        cues["speaking_chunks"] = speaking_chunks({cid: row.speakers for cid, row in rows.items()}, query)
    if when:
        cues["timed_chunks"] = timed_chunks(
            {cid: row.says_when or row.day is not None for cid, row in rows.items()}, query
        )
    if files:
        cues["files"] = {cid: row.path for cid, row in rows.items() if memory_kind(row.path) == "note"}
    return cues
