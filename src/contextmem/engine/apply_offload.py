"""Applying an offload plan (C5): an old tool result's full text to ``tool_results/``, a head +
tail in the context.

The plan comes from the pure :func:`contextmem.compaction.offload.plan_offload`; this applies it in the
fixed order: the full text written and the original archived, the path recorded in the store, *then* the
cut form stored and swapped in. Nothing leaves the context here, so it is not a removal: the original
stays one ``read_file`` away. With a store every host shares (``store.shared``) no file is written: the
store keeps the original, and ``read_file`` of the path reads it there (:meth:`SessionStore.offloaded`),
from whichever host asks.
"""

from __future__ import annotations

from ..archive import DialogArchive
from ..compaction.offload import head_tail, offload_path, plan_offload
from ..errors import ArchiveError, MessageStateError
from ..messages import Message, ToolMessage, text_of
from ..offloop import off_loop
from ..safefs import Confined
from ..settings import Settings
from .apply import PlanApplier
from .files import write_offload

__all__ = ["offload_results"]


async def offload_results(
    applier: PlanApplier,
    settings: Settings,
    files: Confined,
    budget: int,
    *,
    after_seq: int = 0,
    sent_seq: int | None = None,
) -> None:
    """Cut the tool results :func:`plan_offload` picks among the messages with a seq of at least
    ``after_seq`` (0: all of them, older ones due for a tighter cut too), sized by the history ``budget``
    (tokens): the current turn's results to what it can hold, others to a share of it. Messages with a
    seq of at least ``sent_seq`` (``None``: all) were in no request yet: the model has not read them,
    and the current turn's others are the first to shrink
    (:func:`~contextmem.compaction.offload.current_turn_caps`). An archive failure is recorded on
    ``applier`` and that result stays whole; a result another process archived meanwhile reloads."""
    live, archive = applier.session, applier.archive
    msgs = live.history.messages
    starts = live.history.starts
    current = starts[-1] if starts else 0
    ns, sid = live.namespace, live.session_id

    def path_of(i: int) -> str:
        return offload_path(ns, sid, live.seqs[i], getattr(msgs[i], "tool_call_id", ""))

    def first_from(seq_from: int) -> int:
        return next((i for i, seq in enumerate(live.seqs) if seq >= seq_from), len(msgs))

    first_new = first_from(after_seq)
    unseen = None if sent_seq is None else first_from(sent_seq)
    counts = live.history.counts
    plan = plan_offload(
        msgs,
        current,
        settings,
        path_of,
        budget=budget,
        counts=counts,
        first_new=first_new,
        unseen=unseen,
        cut_read=after_seq == 0,  # the prefix breaks anyway: read results go along
    )
    for action in plan:
        seq = live.seqs[action.index]
        original = live.original(action.index)
        assert isinstance(original, ToolMessage)
        full = text_of(original.content)
        if seq not in live.originals:  # the first cut; a tighter one later keeps the same path
            try:
                if archive is not None:  # else the shared store is the archive
                    item, path = (seq, original), action.path
                    await off_loop(len(full), _save, files, archive, path, full, session=sid, item=item)
                    applier.archive_error = None
            except ArchiveError as exc:
                applier.archive_failed(exc, "offload_failed", seq=seq, path=action.path)
                continue
            await live.store.record_offload(ns, sid, seq, action.path)  # read_file finds it from any host
        cut = ToolMessage(
            original.tool_call_id, head_tail(full, action.limit, action.path), name=original.name
        )
        try:
            await live.store.replace(ns, sid, seq, cut)
        except MessageStateError:  # another process archived it meanwhile: take its state
            await live.load()
            return
        live.originals[seq] = original
        live.replace_at(action.index, cut)
        await live.store.set_meta(ns, sid, meta=live.meta())
        applier.emit("offload", seq=seq, path=action.path, chars=len(full), kept=len(text_of(cut.content)))


def _save(
    files: Confined, archive: DialogArchive, path: str, full: str, *, session: str, item: tuple[int, Message]
) -> None:
    """The full text to ``tool_results/``, then the original (``(seq, message)``) to the archive."""
    write_offload(files, path, full)
    archive.append(session, [item], "offload")
