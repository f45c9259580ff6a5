"""What a tool result says, for the compactor (:mod:`.facts`): its outcome lines, verbatim.

A log dump of fifty error lines is evidence, not fifty outcomes, and a listing's last row is no outcome
at all: the reply says what the result showed, and the archive keeps the result whole.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise

from .cues import ERROR, NOTED, PROGRESS

__all__ = ["TOOL_ERROR_LINES", "TOOL_SHORT_LINES", "tool_outcome"]

TOOL_ERROR_LINES = 2  # of one tool result; the archive has the rest
TOOL_SHORT_LINES = 3  # a tool result this short is its own outcome; a longer one's last line must say so
_SHAPE = re.compile(r"\b(?=[0-9a-f]*\d)[0-9a-f]+\b|\d+")  # a line's shape: its numbers and hex ids masked


def _tool_section(line: str, errors: Sequence[str]) -> str:
    return "context" if ERROR.search(line) or any(e in line for e in errors) else "progress"


def tool_outcome(text: str, errors: Sequence[str]) -> list[tuple[str, str]]:
    """A tool result's outcome, verbatim, with its section: the lines it marks as notes (``# NOTE: ...``,
    ``注意：...``), and its last :data:`TOOL_ERROR_LINES` error lines of different shapes (numbers and hex
    ids aside), else its last line if the result is short or the line says what was done ("12 passed").
    A listing's last row ("performance_schema") is no outcome, and fifty error lines are not fifty."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    notes = [line for line in lines if NOTED.search(line)]
    rest = [line for line in lines if line not in notes]
    by_shape: dict[str, str] = {}  # the last line of each shape, in the order of those last lines
    for line in (line for line in rest if _tool_section(line, errors) == "context"):
        shape = _SHAPE.sub("#", line)
        by_shape.pop(shape, None)
        by_shape[shape] = line
    # A line cut short (at a result's head or tail) has a prefix of a shape: it sorts right before it.
    ordered = sorted(by_shape)
    cut = {shape for shape, after in pairwise(ordered) if after.startswith(shape)}
    hits = [line for shape, line in by_shape.items() if shape not in cut][-TOOL_ERROR_LINES:]
    last = rest[-1:] if len(rest) <= TOOL_SHORT_LINES or (rest and PROGRESS.search(rest[-1])) else []
    return [(note.lstrip("#/*>- ").strip(), "context") for note in notes] + [
        (line, _tool_section(line, errors)) for line in (hits or last)
    ]
