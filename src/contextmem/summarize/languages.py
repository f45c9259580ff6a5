"""Which registered language a summary is written in, and the words it is written with.

A language module's :class:`~contextmem.lang.SummaryText` holds a summary's headers, prompt and labels;
:func:`detect_language` picks the language of a conversation by the share of each language's letters
(:attr:`~contextmem.lang.Language.letters`), the first registered language being the default.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..errors import ConfigError
from ..lang import Language, SummaryText, derived
from ..messages import AssistantMessage, Message, UserMessage, text_of

__all__ = ["Lang", "alternatives", "detect_language", "summaries", "summary_languages", "summary_text"]

Lang = str
"""The code of a registered language (``"en"``, ``"zh"``): a conversation's, its summary's, its headers'."""

summary_languages = derived(lambda langs: tuple(lang for lang in langs if lang.summary is not None))
"""The registered languages that summaries can be written in, the default first."""

_LETTERS = derived(
    lambda langs: tuple(
        (lang, re.compile(f"[{lang.letters}]")) for lang in langs if lang.summary is not None and lang.letters
    )
)


def summaries(langs: Sequence[Language]) -> list[tuple[Lang, SummaryText]]:
    """The code and summary texts of each of ``langs`` that has them, in order."""
    return [(lang.code, lang.summary) for lang in langs if lang.summary is not None]


def alternatives(langs: Sequence[Language], name: str) -> str:
    """The regex alternatives of the :class:`~contextmem.lang.SummaryText` field ``name`` of each of
    ``langs`` that has summary texts, joined (``""`` when none has any)."""
    return "|".join(words for _, texts in summaries(langs) if (words := getattr(texts, name)))


def _default() -> Language:
    langs = summary_languages()
    if not langs:
        raise ConfigError(
            "no registered language has summary texts. Fix: register one whose summary is set (as en's is)."
        )
    return langs[0]


def summary_text(lang: Lang) -> SummaryText:
    """The summary texts of the language registered as ``lang`` (the default's when it has none: a
    summary kept while a language was registered outlives it)."""
    for language in summary_languages():
        if language.code == lang:
            assert language.summary is not None
            return language.summary
    summary = _default().summary
    assert summary is not None
    return summary


def detect_language(messages: Sequence[Message], previous: str = "") -> Lang:
    """The language whose letters are at least its :attr:`~contextmem.lang.Language.letter_share` of the
    letters users and the assistant wrote (every summary language's letters counted); else the default.

    Tool results are left out (logs and code are English whatever the conversation's language), and
    so is the previous summary unless there is nothing else to go on. Chinese's share is low because a
    Chinese sentence about code carries many Latin letters (``请修改src/auth.ts`` is 3 CJK : 9 Latin).
    """
    text = (
        "".join(text_of(m.content) for m in messages if isinstance(m, UserMessage | AssistantMessage))
        or previous
    )
    default = _default().code
    counts = [(lang, len(pattern.findall(text))) for lang, pattern in _LETTERS()]
    total = sum(n for _, n in counts)
    if total == 0:
        return default
    for lang, n in counts:
        if lang.code != default and lang.letter_share and n / total >= lang.letter_share:
            return lang.code
    return default
