"""When it happened: whether a query asks when, and which chunks say when. Pure.

A question that asks when ("When did Ingrid go to the pottery class?", 她什么时候去的) is answered by a
text that says when ("I went to a pottery class yesterday", "last summer", 上周六): a date, a partial one,
a year or a word of time (:func:`contextmem.lang.calendar.says_when`, read once when a chunk is indexed);
a daily file's chunk says when by its file's name. Memory search lifts those chunks a little
(``time_weight``, :func:`.ranking.combine`), as it lifts what a named speaker said. The words are the
languages' tables; nothing here names one.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..lang.calendar import WHEN_QUESTION

__all__ = ["asks_when", "timed_chunks"]


def asks_when(query: str) -> bool:
    """Whether ``query`` asks when (:attr:`contextmem.lang.Language.when_questions`)."""
    return WHEN_QUESTION.search(query) is not None


def timed_chunks(saying: Mapping[int, bool], query: str) -> frozenset[int]:
    """The chunks (id -> whether it says when: its text, :func:`~contextmem.lang.calendar.says_when`, or
    its daily file's name, stored when it was indexed) that say when, for a ``query`` that asks when;
    none for any other query, and none when every chunk says when (then it singles nothing out).

    Invariant: the result is a proper subset of ``saying``'s keys, or empty."""
    if not asks_when(query):
        return frozenset()
    picked = frozenset(cid for cid, says in saying.items() if says)
    return picked if len(picked) < len(saying) else frozenset()
