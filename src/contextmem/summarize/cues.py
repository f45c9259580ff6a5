"""The summariser's cue patterns and word sets, built from the registered languages' tables.

Each pattern here joins every language's alternatives from :mod:`contextmem.lang` (English cue words as
whole words, Chinese ones anywhere) and is rebuilt when a language is registered; nothing here names a
word of any language. :mod:`.salience` scores with them, :mod:`.facts` and :mod:`.tool_outcome` read a
few.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..lang import Language, TablePattern, alternatives, derived
from ..lang.calendar import DATE, PARTIAL_DATE

__all__ = [
    "ADVICE",
    "CLAUSE_END",
    "CLAUSE_STOPS",
    "COMMAND",
    "CONSTRAINT",
    "DATE",
    "DECISION",
    "ERROR",
    "EVENT",
    "FILLER_HEAD",
    "HEADER_WORDS",
    "LAUGHTER",
    "NOTED",
    "NOT_NAMES",
    "NUMBER",
    "PARTIAL_DATE",
    "PLAN",
    "PREFERENCE",
    "PROGRESS",
    "QUOTED",
    "REQUEST",
    "SENTENCE_END",
    "SENTENCE_MARKS",
    "SPEAKER",
    "SPEAKER_NAME",
    "STOP_WORDS",
    "cue",
]


def _cue(kind: str, langs: Sequence[Language]) -> str:
    """The regex of one kind of cue over ``langs``: the alternatives of a language that writes spaces
    between words as whole words, the others' anywhere; case-insensitive."""
    parts = [
        rf"(?<![A-Za-z])(?:{lang.cues[kind]})(?![A-Za-z])" if lang.whole_words else lang.cues[kind]
        for lang in langs
        if lang.cues.get(kind)
    ]
    return "(?i)" + "|".join(parts) if parts else "(?!)"


def cue(kind: str) -> TablePattern:
    """The pattern of one kind of cue (:data:`~contextmem.lang.CUE_KINDS`), over every registered
    language's table."""
    return TablePattern(lambda langs: _cue(kind, langs))


CONSTRAINT = cue("constraint")
PROGRESS = cue("progress")
DECISION = cue("decision")
PLAN = cue("plan")
PREFERENCE = cue("preference")
ERROR = cue("error")
NOTED = cue("noted")
"""Someone marks what follows as worth remembering: "For the record: ...", "NOTE:", 顺便记一下."""
REQUEST = cue("request")
COMMAND = cue("command")
"""A sentence that opens with an instruction to the agent: "Check the dry-run output.", "Try again.",
看一下部署配置 — the verb, then what it acts on; not "Fix is deployed", "Update: …", 确认了, 总结：…"""
EVENT = cue("event")
"""An event told in the first person: "I went to a pottery class", "my sister adopted a cat",
我们参加了运动会, 我和爸爸去游泳 (the language tables say how each language tells one)."""
ADVICE = cue("advice")
"""Advice to the listener ("you could try ...", 你可以试着): what a later question asks about is what
people did and said of themselves, rarely the advice they got."""


NUMBER = TablePattern(alternatives(lambda lang: (lang.numbers,), r"\d+(?:[.,:]\d+)*%?"))
QUOTED = TablePattern(alternatives(lambda lang: (lang.quotes,), r"“[^”]{1,40}”", r"\"[^\"]{2,40}\""))
# The word sets are functions: each call returns the union over the languages registered at the time.
NOT_NAMES = derived(lambda langs: frozenset().union(*(lang.not_names for lang in langs)))
STOP_WORDS = derived(lambda langs: frozenset().union(*(lang.stop_words for lang in langs)))
SENTENCE_MARKS = derived(lambda langs: "".join(lang.sentence_marks for lang in langs))
CLAUSE_STOPS = derived(lambda langs: {mark: lang.full_stop for lang in langs for mark in lang.clause_marks})
"""Per clause mark (``,``, ``，``), the full stop of its language."""
HEADER_WORDS = derived(lambda langs: frozenset().union(*(lang.header_words for lang in langs)))
FILLER_HEAD = TablePattern(alternatives(lambda lang: lang.fillers), re.I)
LAUGHTER = TablePattern(alternatives(lambda lang: (lang.laughter,)), re.I)
SENTENCE_END = TablePattern(alternatives(lambda lang: (lang.sentence_end,)))
SPEAKER_NAME = TablePattern(alternatives(lambda lang: (lang.speaker_name,)))
"""A speaker's name before ``:`` ("Ingrid", "Dr. Mei Lin", 王磊), as each language writes one."""
SPEAKER = TablePattern(lambda langs: rf"^\s*(?P<who>{SPEAKER_NAME.build(langs)})[:：][ \t]*")


CLAUSE_END = TablePattern(alternatives(lambda lang: (lang.clause_end,)))
