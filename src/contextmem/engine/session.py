"""What the engine holds of one session: the live history with its counts, and what goes with it.

:class:`LiveSession` mirrors the store. Only :meth:`LiveSession.load` (from the store) and the plan
application in :mod:`contextmem.engine.apply` (after the store confirmed) change which messages are
live; an offloaded tool result changes form in place (:meth:`LiveSession.replace_at`).
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Mapping

from ..budget import CountedHistory
from ..messages import Message, ToolMessage
from ..offloop import off_loop, texts_bytes
from ..store.base import SessionState, SessionStore
from ..summarize import Summary
from ..tokens import Calibration, MessageCounter
from .types import UsageTotals, summary_from_json
from .writer import View

__all__ = ["LiveSession"]

CounterKey = tuple[str, int]  # the tokenizer's name and the tokens of an image: what a count depends on
_COUNTS: dict[int, tuple[weakref.ref[SessionState], CounterKey, tuple[int, ...]]] = {}
"""The counts of the live messages of loaded states, by the state's ``id``, for as long as the state
lives: a store hands an unchanged session back as the same state (``SessionStore.open_session``), and the
next engine loading it takes its counts instead of going over its texts again (three 9 MB results: 27 MB
to hash to find their counts by digest). Entries leave with their state (a weak reference's callback)."""


def _known_counts(state: SessionState, key: CounterKey) -> tuple[int, ...] | None:
    found = _COUNTS.get(id(state))
    if found is None or found[0]() is not state or found[1] != key:
        return None
    return found[2]


def _keep_counts(state: SessionState, key: CounterKey, counts: tuple[int, ...]) -> None:
    at = id(state)
    _COUNTS[at] = (weakref.ref(state, lambda _: _COUNTS.pop(at, None)), key, counts)


class LiveSession:
    """One session's live state. ``seqs[i]`` is the store's id of ``history.messages[i]``.

    ``originals`` maps the seq of a live message whose form was cut (an offloaded tool result) to its
    original, which the archive already holds. ``base`` is the last LLM-folded summary; ``pending`` the
    messages that left the context since, summarised only extractively so far. ``own`` are the seqs this
    engine appended (its own open tool calls are never waited for). ``undone`` are the seqs that left by
    an undo or a clear (never to be summarised): a background summary that folded one is discarded.
    ``usage`` totals the session's model calls; it is saved with the metadata at its next write.
    """

    def __init__(self, store: SessionStore, namespace: str, session_id: str, counter: MessageCounter) -> None:
        self.store = store
        self.namespace = namespace
        self.session_id = session_id
        self.counter = counter
        self.history = CountedHistory(counter)
        self.seqs: list[int] = []
        self.originals: dict[int, Message] = {}
        self.summary: Summary | None = None
        self.base: Summary | None = None
        self.pending: list[Message] = []
        self.calibration = Calibration()
        self.next_seq = 1
        self.own: set[int] = set()
        self.undone: set[int] = set()
        self.usage = UsageTotals()
        self.created: dict[int, float] = {}  # seq -> when the store took it, for messages loaded from it
        self.closures: set[int] = set()  # seqs the store marked as lease closures (as of the last load)

    async def load(self, state: SessionState | None = None) -> None:
        """Take the store's state (``state`` if just read, else read now)."""
        state = state or await self.store.open_session(self.namespace, self.session_id)
        messages = [s.message for s in state.live]
        key = (self.counter.name, self.counter.image_tokens)
        known = _known_counts(state, key)
        if known is not None:  # the same message objects: their hashes are cached, a lookup is cheap
            self.counter.remember(zip(messages, known, strict=True))
            self.history = CountedHistory(self.counter, messages)  # lookups only: no text to go over
        else:
            self.history = await self._counted(messages)
        _keep_counts(state, key, tuple(self.history.counts))
        self.seqs = [s.seq for s in state.live]
        self.created = {s.seq: s.created_at for s in state.live}
        self.closures = {s.seq for s in state.live if s.lease_closure}
        self.next_seq = state.next_seq
        self.own.intersection_update(self.seqs)
        self.summary = self.base = summary_from_json(state.summary)
        meta = json.loads(state.meta) if state.meta else {}
        floor = meta.get("floor")  # an overflow's proof outlives the process (Calibration.at_least)
        calibration = Calibration(meta.get("ratio", 1.0), meta.get("samples", 0))
        self.calibration = calibration if floor is None else calibration.at_least(floor)
        stored = UsageTotals(*meta.get("usage", ()))
        if stored.calls >= self.usage.calls:  # a reload must not drop calls counted since the last write
            self.usage = stored
        cut = set(meta.get("cut", ()))
        self.originals = {}
        if cut:
            live = await self.store.messages(self.namespace, self.session_id, state="live")
            self.originals = {s.seq: s.message for s in live if s.seq in cut}

    async def _counted(self, messages: list[Message]) -> CountedHistory:
        """``messages`` with their counts, counted in a worker thread when their text is large
        (:func:`~contextmem.offloop.off_loop`): a stored session of big tool results is loaded by every
        process that opens it (an MCP server's ``context_stats``), with no count of them cached yet."""
        return await off_loop(texts_bytes(messages), CountedHistory, self.counter, messages)

    def created_at(self, seq: int) -> float | None:
        """When the store took live message ``seq`` (as of the last load; ``None``: not loaded since)."""
        return self.created.get(seq)

    def closed_calls(self) -> set[str]:
        """The call ids of the live results the store marked as lease closures (as of the last load)."""
        return {
            m.tool_call_id
            for m, seq in zip(self.history.messages, self.seqs, strict=True)
            if seq in self.closures and isinstance(m, ToolMessage)
        }

    def meta(self, *, cut: Mapping[int, Message] | None = None) -> str:
        """The session's metadata as the store keeps it: calibration, which live messages were cut (those of
        ``originals``, or of ``cut`` when given), and the usage totals as ``[calls, prompt_tokens,
        cached_tokens, sent_tokens, expected_cached_tokens]`` (older metadata has the first three)."""
        usage = self.usage
        return json.dumps(
            {
                "ratio": self.calibration.ratio,
                "samples": self.calibration.samples,
                "floor": self.calibration.low,
                "cut": sorted(self.originals if cut is None else cut),
                "usage": [
                    usage.calls,
                    usage.prompt_tokens,
                    usage.cached_tokens,
                    usage.sent_tokens,
                    usage.expected_cached_tokens,
                ],
            }
        )

    def tail_view(self) -> View:
        """The newest turn, its seqs and the next seq: what an append is validated against."""
        starts = self.history.starts
        first = starts[-1] if starts else 0
        return self.history.messages[first:], self.seqs[first:], self.next_seq

    def appended(self, messages: list[Message], seqs: list[int]) -> None:
        self.history.extend(messages)
        self.seqs.extend(seqs)
        self.own.update(seqs)
        self.next_seq = seqs[-1] + 1

    def replace_at(self, index: int, message: Message) -> None:
        msgs = list(self.history.messages)
        msgs[index] = message
        self.history = CountedHistory(self.counter, msgs)

    def original(self, index: int) -> Message:
        """The message at ``index`` as it was appended (its cut form's original, if it was cut)."""
        return self.originals.get(self.seqs[index], self.history.messages[index])
