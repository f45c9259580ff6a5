"""The extractive fallback (C8): a structured summary built without a model, deterministically.

Used when the model fails, times out or returns junk, and whenever no model is configured. It selects
*facts*, not lines (:mod:`.facts`): sentences scored by what people later ask about
(:mod:`.salience`), de-duplicated, attributed and dated, placed in the six sections the model writes,
and fitted to the budget by dropping the least salient whole facts — the newest keep a reserved share.
Identifiers are not repeated here: the ledger keeps them verbatim.

Nothing is written unredacted: every message text and the previous summary pass
:func:`~contextmem.redaction.redact_secrets`, with the secret values found anywhere in them scrubbed
everywhere (``known``), before a single fact is picked.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Unpack

from ..messages import Message
from ..redaction import redact_secrets
from .facts import Sizing, compact_facts
from .ledger import TextCounter, secrets_in

__all__ = ["extractive_summary", "truncate_to_tokens"]


ELLIPSIS = "…"


def truncate_to_tokens(text: str, budget: int, counter: TextCounter) -> str:
    """The longest prefix of ``text`` (plus ``…`` when cut) that costs at most ``budget`` tokens."""
    if counter.count_text(text) <= budget:
        return text
    if budget <= 0:
        return ""
    lo, hi = 0, len(text)  # lo always fits (an empty prefix costs nothing)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count_text(text[:mid].rstrip() + ELLIPSIS) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo].rstrip() + ELLIPSIS if lo else ""


def extractive_summary(
    messages: Sequence[Message],
    *,
    previous: str | None,
    known: Iterable[str] | None = None,
    **sizing: Unpack[Sizing],
) -> str:
    """A six-section summary of ``previous`` + ``messages`` within ``budget`` tokens, headers in ``lang``.

    The previous summary's items are facts like the new ones, only older: they stay while they are
    salient enough for the budget. Secrets are redacted first; ``known`` are the secret values already
    found in ``messages`` and ``previous`` (found here when not given).
    """
    if known is None:
        known = secrets_in(messages, previous or "")
    known = frozenset(known)
    old = redact_secrets(previous, known) if previous else None
    text = compact_facts(messages, previous=old, known=known, **sizing)
    return truncate_to_tokens(text, sizing["budget"], sizing["counter"])
