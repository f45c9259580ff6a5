"""What every memory index takes besides its storage (ranking, chunking and the clock, from
:class:`~contextmem.settings.Settings` or by hand), and the chunk record its storage hands back to the
shared algorithm of :mod:`.indexing`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any, TypedDict

import numpy as np
from numpy.typing import NDArray

from ..errors import ConfigError
from .text import CjkMode

__all__ = [
    "IndexOptions",
    "StoredChunk",
    "Vector",
    "check_ranking",
    "settings_options",
]

Vector = NDArray[np.float32]


@dataclass(frozen=True, slots=True)
class StoredChunk:
    id: int
    path: str
    start_line: int
    end_line: int
    text: str
    day: date | None  # daily files only
    heading_day: date | None = None  # the day its headings write (text.heading_days)
    speakers: frozenset[str] = frozenset()  # who speaks in it (speakers.speakers)
    says_when: bool = False  # whether its text says when (lang.calendar.says_when)


class IndexOptions(TypedDict, total=False):
    """What every index takes besides its storage: ranking, chunking and the clock."""

    vector_weight: float  # default 0.7
    keyword_weight: float  # default 0.3
    sparse_weight: float  # the embedder's sparse head, in hybrid and vector modes; default 0.3 (0: off)
    neighbour_weight: float  # how much a chunk's neighbours in its file count; default 0.5 (0: off)
    speaker_weight: float  # of a chunk said by the speaker the query names; default 0.05 (0: off)
    time_weight: float  # of a chunk that says when, for a query that asks when; default 0.1 (0: off)
    file_weight: float  # the share of a note's chunk's score its file's best gives; default 0.3 (0: off)
    unnamed_weight: float  # the share of a query's encoding without the speakers it names; 0.3 (0: off)
    half_life_days: float  # of daily files' decay; default 30
    decay_floor: float  # the share of a daily score decay never takes; default 0.8 (0: plain decay)
    cjk: CjkMode  # how CJK runs become keywords; default "bigram"
    chunk_chars: int  # default 1200
    snippet_chars: int  # default 700
    today: Callable[[], date]  # default date.today


def settings_options(settings: Any) -> dict[str, Any]:
    """The ranking options every index takes from :class:`~contextmem.settings.Settings`."""
    return {
        "vector_weight": settings.vector_weight,
        "keyword_weight": settings.keyword_weight,
        "sparse_weight": settings.sparse_weight,
        "neighbour_weight": settings.neighbour_weight,
        "speaker_weight": settings.speaker_weight,
        "time_weight": settings.time_weight,
        "file_weight": settings.file_weight,
        "unnamed_weight": settings.unnamed_weight,
        "half_life_days": settings.daily_half_life_days,
        "decay_floor": settings.daily_decay_floor,
    }


def check_ranking(
    *,
    vector_weight: float,
    keyword_weight: float,
    sparse_weight: float,
    neighbour_weight: float,
    speaker_weight: float,
    time_weight: float,
    file_weight: float,
    unnamed_weight: float,
    decay_floor: float,
) -> None:
    """The ranking options' rules (:class:`IndexOptions`): no weight below 0, vector and keyword not both
    0, a file weight and an unnamed weight in [0, 1], and a decay floor in [0, 1).
    Raises :class:`~contextmem.errors.ConfigError`."""
    if vector_weight < 0 or keyword_weight < 0 or vector_weight + keyword_weight <= 0:
        raise ConfigError(
            f"vector_weight={vector_weight!r} and keyword_weight={keyword_weight!r} must be >= 0 and not "
            "both 0. Fix: e.g. 0.7 and 0.3"
        )
    for name, value, default in (
        ("sparse_weight", sparse_weight, 0.3),
        ("neighbour_weight", neighbour_weight, 0.5),
        ("speaker_weight", speaker_weight, 0.05),
        ("time_weight", time_weight, 0.1),
    ):
        if value < 0:
            raise ConfigError(f"{name}={value!r} must be >= 0. Fix: e.g. {default}, or 0 to turn it off")
    for name, value in (("file_weight", file_weight), ("unnamed_weight", unnamed_weight)):
        if not 0 <= value <= 1:
            raise ConfigError(f"{name}={value!r} must be in [0, 1]. Fix: e.g. 0.3, or 0 to turn it off")
    if not 0 <= decay_floor < 1:
        raise ConfigError(
            f"decay_floor={decay_floor!r} must be in [0, 1). Fix: e.g. 0.8, or 0 for plain decay"
        )
