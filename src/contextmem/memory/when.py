"""When it happened: whether a query asks when, and which chunks say when. Pure.

A question that asks when ("When did Caroline go to the support group?", 她什么时候去的) is answered by a
text that says when ("I went to a support group yesterday", "last summer", 上周六): a date, a partial one,
a year or a word of time (:data:`contextmem.lang.calendar.SAYS_WHEN`); a daily file's chunk says when
by its file's name. Memory search lifts those chunks a
little (``time_weight``, :func:`.ranking.combine`), as it lifts what a named speaker said. The words are
the languages' tables; nothing here names one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from ..lang.calendar import SAYS_WHEN, WHEN_QUESTION

__all__ = ["asks_when", "timed_chunks"]


def asks_when(query: str) -> bool:
    """Whether ``query`` asks when (:attr:`contextmem.lang.Language.when_questions`)."""
    return WHEN_QUESTION.search(query) is not None


def timed_chunks(texts: Mapping[int, str], query: str, dated: Collection[int] = ()) -> frozenset[int]:
    """The chunks (id -> text) that say when, for a ``query`` that asks when: those whose text says it,
    and the ``dated`` ones (a daily file's: its name is the day). None for any other query, and none
    when every chunk says when (then it singles nothing out).

    Invariant: the result is a proper subset of ``texts``' keys, or empty."""
    if not asks_when(query):
        return frozenset()
    picked = frozenset(cid for cid, text in texts.items() if cid in dated or SAYS_WHEN.search(text))
    return picked if len(picked) < len(texts) else frozenset()
