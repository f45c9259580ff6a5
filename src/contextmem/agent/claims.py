"""A reply that says it saved something the turn never wrote is marked as not saved.

Small models answer "Remember that my code word is BLUEHERON" with "I've saved BLUEHERON to your long-term
memory" whether or not they called ``memory_write``; the user then believes a fact is kept that is not.
The loop cannot make the model call the tool, but it can refuse to let the claim stand: when a reply
claims a save and no ``memory_write`` call of the turn succeeded, a note in the reply's language says so.
The claims are data: each language's table (:mod:`contextmem.lang`) holds its pattern and its note, read
by :func:`unbacked_save_note`.
"""

from __future__ import annotations

from ..lang import languages
from ..messages import text_of
from .task import TaskMemory

__all__ = ["SAVE_TOOL", "unbacked_save_note"]

SAVE_TOOL = "memory_write"


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
    for language in languages():
        if language.save_claim is not None and language.save_claim.search(reply):
            return language.not_saved_note
    return None
