"""A reply that says it saved something the turn never wrote is marked as not saved.

Small models answer "Remember that my code word is BLUEHERON" with "I've saved BLUEHERON to your long-term
memory" whether or not they called ``memory_write``; the user then believes a fact is kept that is not.
The loop cannot make the model call the tool, but it can refuse to let the claim stand: when a reply
claims a save and no ``memory_write`` call of the turn succeeded, a note in the reply's language says so.
The claims are data: one pattern per language, read by :func:`unbacked_save_note`; adding a language is
adding a row (and its note).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..messages import text_of
from .task import TaskMemory

__all__ = ["NOT_SAVED_NOTES", "SAVE_CLAIMS", "SAVE_TOOL", "unbacked_save_note"]

SAVE_TOOL = "memory_write"

SAVE_CLAIMS: Mapping[str, re.Pattern[str]] = {
    "en": re.compile(
        r"\b(?:saved|stored|recorded|written|wrote|added|noted|committed)\b[^.!?\n]{0,60}"
        r"\b(?:memory|memories)\b"
        r"|\bi(?:'ll|\s+will|\s+shall)\s+(?:always\s+)?remember\b"
        r"|\bi\s+(?:now\s+)?remember\s+that\s+your\b",
        re.IGNORECASE,
    ),
    "zh": re.compile(
        r"(?:已|已经|我会|我将|我已|会|将)(?:经)?(?:帮你|为你|替你|帮您|为您)?"
        r"(?:保存|存储|储存|记录|记下|记住|写入|存入|存好|记好)"
        r"|(?:保存|存储|记录|记|写入|存)(?:到|在|进|入)了?[^。！\n]{0,12}(?:记忆|备忘)"
    ),
}
"""Per language: a reply that claims to have kept something in memory."""

NOT_SAVED_NOTES: Mapping[str, str] = {
    "en": "(not saved: no memory_write call was made)",
    "zh": "（未保存：本轮没有调用 memory_write）",
}


def _saved(task: TaskMemory) -> bool:
    """Whether a ``memory_write`` call of this turn succeeded (a tool failure reads ``error: ...``)."""
    return any(
        result.name == SAVE_TOOL and not text_of(result.content).startswith("error:")
        for step in task.steps
        for result in step.results
    )


def unbacked_save_note(reply: str, task: TaskMemory) -> str | None:
    """The note to append to ``reply`` when it claims a save that no call of ``task`` made, else None."""
    if _saved(task):
        return None
    for lang, claim in SAVE_CLAIMS.items():
        if claim.search(reply):
            return NOT_SAVED_NOTES[lang]
    return None
