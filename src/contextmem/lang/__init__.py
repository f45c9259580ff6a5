"""Language data as data: one module per language of tables, read by the shared algorithms.

``en`` and ``zh`` each hold one :class:`Language` (cue words, stop words, words that are capitalised but
not names, calendar names, date forms, claim patterns); :mod:`.scripts` holds the one definition of the
CJK scripts. The summariser (:mod:`contextmem.summarize.salience`), the date reader
(:mod:`contextmem.memory.dates`) and the save-claim check (:mod:`contextmem.agent.claims`) iterate over
the registry; adding a language is one module whose :class:`Language` is passed to :func:`register`
(the built-in ones are listed in :mod:`.registry`).
"""

from __future__ import annotations

from .language import CUE_KINDS, Language
from .registry import TablePattern, derived, languages, register, unregister

__all__ = [
    "CUE_KINDS",
    "Language",
    "TablePattern",
    "derived",
    "languages",
    "register",
    "unregister",
]
