"""Removing the newest live message (an undo), through the engine's one removal path.

Framework sessions need "pop the newest item" (the OpenAI Agents SDK ``Session.pop_item``). The message
leaves the way every message leaves the context: as a :class:`~contextmem.compaction.plans.Plan` the
engine applies — archived first (fsynced dialog archive, then the store), never summarised (an undo is
not history worth remembering), then removed. If the archive cannot be written nothing is removed.

:meth:`ContextEngine.pop_newest` is the public entry; this module reaches the engine's plan application
through :func:`_apply_planned` alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..compaction.plans import Plan
from ..errors import ArchiveError
from ..messages import Message

if TYPE_CHECKING:
    from .core import ContextEngine

__all__ = ["pop_newest", "pop_plan"]

REASON = "pop"
ATTEMPTS = 3


def pop_plan(history: Sequence[Message]) -> Plan:
    """Everything but the newest message stays; the newest leaves (an empty plan for an empty history)."""
    n = len(history)
    if n == 0:
        return Plan((), ())
    return Plan(tuple(range(n - 1)), (n - 1,), steps=("pop",))


async def _apply_planned(engine: ContextEngine, make_plan: Callable[[], Plan]) -> bool:
    """Plan under the engine's lock, then apply with the engine's plan application (archive, then
    remove; not summarised) and mark what left as undone, so no background summary folds it in. The
    only place this module touches engine internals.

    False: nothing changed (the archive failed, or another process changed the session since the plan
    was made and the engine reloaded it).
    """
    async with engine._lock:
        plan = make_plan()
        leaving = [engine.seqs[i] for i in plan.drop]
        if not await engine._apply(plan, REASON, summarize=False, keep_open=False):
            return False
        engine._live.undone.update(leaving)
        return True


async def pop_newest(engine: ContextEngine) -> Message | None:
    """Remove the newest live message, archived first; return it (``None`` when the history is empty).

    The returned message is the original: if the engine had cut its form (an offloaded tool result),
    the full message is what was archived and what comes back. Durable: the archive line is fsynced and
    the store marks the message archived before it leaves the engine's history. Raises
    :class:`ArchiveError` (and removes nothing) when the archive cannot be written. If another process
    changes the session meanwhile, the engine reloads it and the newest message *then* is popped.

    Immediate: it never waits for a background summary. The model works outside the session lock, and
    a round that folded the popped message is discarded when it finishes (see
    :func:`~contextmem.engine.background.apply_folded`), so the message is never summarised.
    """
    for _ in range(ATTEMPTS):
        newest: Message | None = None
        planned = engine.history

        def plan() -> Plan:
            nonlocal newest, planned
            planned = engine.history
            history = planned.messages
            if history:
                newest = engine.originals.get(engine.seqs[-1], history[-1])
            return pop_plan(history)

        if await _apply_planned(engine, plan):
            return newest
        if engine.history is planned:  # not reloaded: the archive refused the message
            raise ArchiveError(
                f"could not archive the newest message of session {engine.session_id!r} before "
                "removing it; nothing was removed. Fix: check that the workspace's archive directory "
                "is writable and the disk is not full, then retry."
            )
    raise ArchiveError(
        f"session {engine.session_id!r} kept changing under another writer; nothing was removed. "
        "Fix: retry once the other process is idle."
    )
