"""Looking at a session without changing it: ``/context`` stats, and the proof that nothing was lost."""

from __future__ import annotations

from ..archive import ArchiveProblem, DialogArchive
from ..budget import RequestEstimate, turn_starts
from ..llm.base import CallTotals
from ..messages import text_of
from ..summarize import Summarizer
from .session import LiveSession
from .types import ContextStats, VerifyReport

__all__ = ["context_stats", "verify_session"]


def context_stats(
    live: LiveSession,
    estimate: RequestEstimate,
    archive_error: str | None = None,
    writer: Summarizer | None = None,
) -> ContextStats:
    """What ``/context`` shows; ``writer`` (the session's summariser, ``None``: extractive summaries only)
    says which model writes the summaries and the calls it made."""
    msgs = live.history.messages
    roles: dict[str, int] = {}
    for m in msgs:
        roles[m.kind] = roles.get(m.kind, 0) + 1
    return ContextStats(
        messages=len(msgs),
        turns=len(turn_starts(msgs)),
        by_role=roles,
        characters=sum(len(text_of(m.content)) for m in msgs),
        estimate=estimate,
        archived=live.next_seq - 1 - len(msgs),
        summary_source=live.summary.source if live.summary else None,
        usage=live.usage,
        archive_error=archive_error,
        summary_calls=CallTotals() if writer is None else writer.model_calls,
        summary_model=None if writer is None else writer.llm.name,
    )


async def verify_session(live: LiveSession, archive: DialogArchive | None) -> VerifyReport:
    """Every appended message is live, or archived *and* in the archive (C4): the dialog files, or
    with ``archive=None`` (a store every host shares) the store's rows, which hold every original. A seq
    the store no longer has (a gap below its newest) is missing too."""
    every = await live.store.messages(live.namespace, live.session_id)
    archived = [s for s in every if s.state == "archived"]
    present = {s.seq for s in every}
    gaps = tuple(seq for seq in range(1, max(present, default=0) + 1) if seq not in present)
    if archive is None:
        return VerifyReport(len(every), len(every) - len(archived), len(archived), gaps)
    corrupt: list[ArchiveProblem] = []
    in_files = {a.seq for a in archive.read(live.session_id, report=corrupt)}
    missing = tuple(sorted(gaps + tuple(s.seq for s in archived if s.seq not in in_files)))
    return VerifyReport(
        len(every),
        len(every) - len(archived),
        len(archived),
        missing,
        corrupt=tuple(corrupt),
        quarantined=tuple(archive.quarantined()),
    )
