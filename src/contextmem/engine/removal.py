"""Removing the newest live message (an undo), through the plan applier like every removal.

Framework sessions need "pop the newest item" (the OpenAI Agents SDK ``Session.pop_item``). The message
leaves the way every message leaves the context: as a plan (the pure
:func:`~contextmem.compaction.plans.plan_pop`) given to :meth:`PlanApplier.undo
<contextmem.engine.apply.PlanApplier.undo>` — archived first (fsynced dialog archive, then the store),
never summarised, then removed. If the archive cannot be written nothing is removed.

:meth:`ContextEngine.pop_newest <contextmem.engine.core.ContextEngine.pop_newest>` is the public entry;
it hands this module its applier and its session lock, nothing else.
"""

from __future__ import annotations

import asyncio

from ..compaction.plans import plan_pop
from ..errors import ArchiveError
from ..messages import Message
from .apply import PlanApplier

__all__ = ["pop_newest"]

REASON = "pop"
ATTEMPTS = 3


async def pop_newest(applier: PlanApplier, lock: asyncio.Lock) -> Message | None:
    """Remove the newest live message, archived first; return it (``None`` when the history is empty).

    Planned and applied under ``lock`` (the engine's session lock). The returned message is the
    original: if the engine had cut its form (an offloaded tool result), the full message is what was
    archived and what comes back. Durable: the archive line is fsynced and the store marks the message
    archived before it leaves the engine's history. Raises :class:`ArchiveError` (and removes nothing)
    when the archive cannot be written. If another process changes the session meanwhile, the applier
    reloads it and the newest message *then* is popped.

    Immediate: it never waits for a background summary. The model works outside the session lock, and
    a round that folded the popped message is discarded when it finishes (see
    :func:`~contextmem.engine.background.apply_folded`), so the message is never summarised.
    """
    live = applier.session
    for _ in range(ATTEMPTS):
        async with lock:
            planned = live.history
            newest = live.original(len(planned) - 1) if len(planned) else None
            if await applier.undo(plan_pop(planned.messages), REASON):
                return newest
        if live.history is planned:  # not reloaded: the archive refused the message
            raise ArchiveError(
                f"could not archive the newest message of session {live.session_id!r} before "
                "removing it; nothing was removed. Fix: check that the workspace's archive directory "
                "is writable and the disk is not full, then retry."
            )
    raise ArchiveError(
        f"session {live.session_id!r} kept changing under another writer; nothing was removed. "
        "Fix: retry once the other process is idle."
    )
