"""Language data as data: one module per language of tables, read by the shared algorithms.

``en`` and ``zh`` each hold one :class:`Language` (cue words, stop words, words that are capitalised but
not names, calendar names, date forms, claim patterns); :mod:`.scripts` holds the one definition of the
CJK scripts. The summariser (:mod:`contextmem.summarize.cues`, :mod:`~contextmem.summarize.salience`)
and the save-claim check (:mod:`contextmem.agent.claims`) iterate over the registry; adding a language is
one module whose :class:`Language` is passed to :func:`register` (the built-in ones are listed in
:mod:`.registry`). So does the date reader of memory search (:mod:`contextmem.lang.dates`): each
language's relative-day phrases ("last Saturday", 上周六), number words and written dates are its tables.
A summary language also has its letters (how a conversation in it is recognised) and a
:class:`SummaryText`: the summariser writes its section titles, prompt and ledger labels.
"""

from __future__ import annotations

from .language import CUE_KINDS, DAY_KINDS, DayPhrase, Language, SummaryText
from .registry import TablePattern, alternatives, derived, is_question, languages, register, unregister

__all__ = [
    "CUE_KINDS",
    "DAY_KINDS",
    "DayPhrase",
    "Language",
    "SummaryText",
    "TablePattern",
    "alternatives",
    "derived",
    "is_question",
    "languages",
    "register",
    "unregister",
]
