"""Language data as data: one module per language of tables, read by the shared algorithms.

``en`` and ``zh`` each hold one :class:`Language` (cue words, stop words, words that are capitalised but
not names, calendar names, date forms, claim patterns); :mod:`.scripts` holds the one definition of the
CJK scripts. The summariser (:mod:`contextmem.summarize.cues`, :mod:`~contextmem.summarize.salience`)
and the save-claim check (:mod:`contextmem.agent.claims`) iterate over the registry; adding a language is
one module whose :class:`Language` is passed to :func:`register` (the built-in ones are listed in
:mod:`.registry`). The date reader of memory search (:mod:`contextmem.memory.dates`) takes its names from
``en`` and ``zh``; its phrase forms ("last Saturday", 上周六) are each language's grammar, written there.
"""

from __future__ import annotations

from .language import CUE_KINDS, Language, SummaryText
from .registry import TablePattern, derived, languages, register, unregister

__all__ = [
    "CUE_KINDS",
    "Language",
    "SummaryText",
    "TablePattern",
    "derived",
    "languages",
    "register",
    "unregister",
]
