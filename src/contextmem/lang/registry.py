"""The languages the algorithms read, and the patterns derived from their tables.

A language is registered once (:func:`register`); the summariser and the save-claim check iterate over
:func:`languages`. What an algorithm derives from the tables (a compiled pattern, a
set of stop words) is built through :func:`derived` or :class:`TablePattern`, so it is rebuilt when a
language is registered or removed, never edited by hand in the algorithm.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TypeVar

from ..errors import ConfigError
from . import en, zh
from .language import Language

__all__ = ["TablePattern", "alternatives", "derived", "languages", "register", "unregister"]

T = TypeVar("T")


class _Registry:
    """The registered languages, and a count of changes that tells derived values to rebuild."""

    def __init__(self, *builtin: Language) -> None:
        self.languages = builtin
        self.version = 0

    def replace(self, languages: tuple[Language, ...]) -> None:
        self.languages = languages
        self.version += 1


_REGISTRY = _Registry(en.ENGLISH, zh.CHINESE)


def languages() -> tuple[Language, ...]:
    """The registered languages, in registration order (English, Chinese, then any added)."""
    return _REGISTRY.languages


def register(language: Language) -> None:
    """Add ``language``: every algorithm reads its tables from now on."""
    if any(known.code == language.code for known in _REGISTRY.languages):
        raise ConfigError(f"language {language.code!r} is already registered. Fix: unregister it first.")
    _REGISTRY.replace((*_REGISTRY.languages, language))


def unregister(code: str) -> None:
    """Remove the language registered as ``code``."""
    if not any(known.code == code for known in _REGISTRY.languages):
        raise ConfigError(f"language {code!r} is not registered. Fix: pass a code of languages().")
    _REGISTRY.replace(tuple(known for known in _REGISTRY.languages if known.code != code))


def derived(build: Callable[[tuple[Language, ...]], T]) -> Callable[[], T]:
    """A function returning ``build(languages())``, computed once per set of registered languages."""
    seen = -1
    value: T | None = None

    def get() -> T:
        nonlocal seen, value
        if seen != _REGISTRY.version or value is None:
            value, seen = build(_REGISTRY.languages), _REGISTRY.version
        return value

    return get


def alternatives(
    pick: Callable[[Language], Iterable[str]], *shared: str
) -> Callable[[Sequence[Language]], str]:
    """A pattern builder: ``shared`` alternatives (any language), then each language's ``pick``; with no
    alternative at all, a pattern that matches nothing (an empty one would match everywhere)."""
    return lambda langs: "|".join([*shared, *(p for lang in langs for p in pick(lang) if p)]) or "(?!)"


_QUESTION_MARKS = derived(lambda langs: tuple(lang.question_mark for lang in langs if lang.question_mark))


def is_question(text: str) -> bool:
    """Whether ``text`` ends with a question mark of a registered language (``?``, ``？``)."""
    return text.rstrip().endswith(_QUESTION_MARKS())


class TablePattern:
    """A regex built from the registered languages' tables: ``build(languages())`` compiled with
    ``flags``, rebuilt when a language is registered. Offers the ``re.Pattern`` methods the algorithms
    use."""

    __slots__ = ("_get", "build")

    def __init__(self, build: Callable[[tuple[Language, ...]], str], flags: int = 0) -> None:
        self.build = build
        """The regex source over the given languages (for a pattern that embeds this one)."""
        self._get = derived(lambda langs: re.compile(build(langs), flags))

    @property
    def compiled(self) -> re.Pattern[str]:
        return self._get()

    @property
    def pattern(self) -> str:
        return self._get().pattern

    def search(self, text: str) -> re.Match[str] | None:
        return self._get().search(text)

    def match(self, text: str) -> re.Match[str] | None:
        return self._get().match(text)

    def findall(self, text: str) -> list[str]:
        return self._get().findall(text)

    def finditer(self, text: str) -> Iterator[re.Match[str]]:
        return self._get().finditer(text)

    def split(self, text: str) -> list[str]:
        return self._get().split(text)

    def sub(self, repl: str, text: str, count: int = 0) -> str:
        return self._get().sub(repl, text, count=count)

    def subn(self, repl: str, text: str, count: int = 0) -> tuple[str, int]:
        return self._get().subn(repl, text, count=count)
