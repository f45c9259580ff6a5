"""What one language module provides: a :class:`Language`, its tables, read by the shared algorithms.

Every field is data: words, or regex alternatives, never code. A table a language has no use for stays
empty (Chinese has no stop words: its text is read as character bigrams; English has no counter words).
A language summaries are written in also holds its letters (the share of them in a conversation tells
its language) and a :class:`SummaryText`: the headers, prompt and labels of a summary in it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

__all__ = ["CUE_KINDS", "DAY_KINDS", "DayPhrase", "Language", "PeriodPhrase", "SummaryText"]

CUE_KINDS = (
    "constraint",
    "progress",
    "decision",
    "plan",
    "preference",
    "error",
    "noted",
    "request",
    "command",
    "event",
    "advice",
)
"""The kinds of cue the summariser reads (:mod:`contextmem.summarize.salience` says what each means)."""

DAY_KINDS = (
    "days",
    "days_ago",
    "last_weekday",
    "weekday_of_week",
    "whole_week",
    "weekend",
    "month_day",
    "days_ahead",
    "next_weekday",
)
"""How a :class:`DayPhrase` resolves against today (:mod:`contextmem.lang.dates` says what each means).
The named groups each kind reads: ``days_ago`` ``n``; ``last_weekday`` and ``next_weekday`` ``weekday``;
``weekday_of_week`` ``week`` and ``weekday``; ``whole_week`` and ``weekend`` ``week``; ``month_day``
``month``, ``day`` and an optional ``year``."""


@dataclass(frozen=True, slots=True)
class DayPhrase:
    """One kind of phrase naming a day relative to today ("last Saturday", 上周六): its regex (matched
    case-insensitively; named groups are its values, :data:`DAY_KINDS`) and its context."""

    pattern: str
    kind: str
    """One of :data:`DAY_KINDS`."""
    first: str
    """The characters the phrase can start with (a regex class body, any case)."""
    before: str = ""
    """Lookbehinds of the context before the phrase (not part of it)."""
    after: str = ""
    """Lookaheads of the context after the phrase."""
    days: int = 0
    """For ``days``: how many days before today the phrase names; for ``days_ahead``, after it."""
    certain: bool = True
    """``False``: the phrase may name a day on either side of today ("on Saturday", a bare 周六). Memory
    search reads it as the most recent such day; a memory note leaves it alone."""


@dataclass(frozen=True, slots=True)
class PeriodPhrase:
    """A phrase naming the calendar month or year before or after the one a text was said in ("last
    month", 去年): its regex (matched case-insensitively, with its context as lookarounds), its ``unit``
    (``"month"`` or ``"year"``) and how many units after that one it names (negative: before)."""

    pattern: str
    unit: str
    offset: int


@dataclass(frozen=True, slots=True)
class Language:
    """One language's tables. Regex fields hold alternatives, joined with the other languages' by the
    algorithms; a language that writes spaces between words sets ``whole_words``, so its cues match as
    whole words (of Latin letters) and case-insensitively, as English does."""

    code: str
    cues: Mapping[str, str] = field(default_factory=dict)
    """Per kind of :data:`CUE_KINDS`: regex alternatives that mark it."""
    whole_words: bool = False
    log_cues: tuple[str, ...] = ()
    """Regexes, matched case-sensitively, of what marks a line of a log or of a tool's output as telling
    a failure (``ERROR``, ``Traceback``, ``OOMKilled``, 错误): a cut keeps such lines wherever they stand
    (:func:`contextmem.textcut.cut_keeping`). Each alternative starts with a literal character (no
    ``\\b``, class, group or repeat first), so a search jumps from one character that can start a cue
    to the next: 10 MB of text are searched in a fraction of a second, not seconds."""
    stop_words: frozenset[str] = frozenset()
    """Lower-cased words that carry no content (dropped from the rare-word count)."""
    not_names: frozenset[str] = frozenset()
    """Words written capitalised that are not names (sentence openers, interjections, labels)."""
    fillers: tuple[str, ...] = ()
    """Regexes, each anchored at the start (``^``), of lead-ins that say nothing: interjections,
    "guess what?", greetings. Matched case-insensitively."""
    laughter: str = ""
    """Regex: laughter anywhere in a sentence, with the spaces before it."""
    months: tuple[tuple[str, ...], ...] = ()
    """Per month, January first: its names as written (full name first, then abbreviations). In a
    language with ``whole_words``, ``8 May 2023`` and ``May 8, 2023`` are read as dates and a month name
    alone as a partial one."""
    weekdays: tuple[tuple[str, ...], ...] = ()
    """Per weekday, Monday first: its names as written (with ``whole_words``, a partial date)."""
    day_phrases: tuple[DayPhrase, ...] = ()
    """The phrases naming a day relative to today that memory search reads, tried in this order where
    two can start at the same place (the longer first)."""
    number_words: Mapping[str, int] = field(default_factory=dict)
    """Lower-cased numbers written as words in a day phrase ("three" days ago, 三天前), and their values."""
    tens_word: str = ""
    """The word for ten that makes a number with digit words around it (二十一 is 2 x 10 + 1)."""
    tens_digits: Mapping[str, int] = field(default_factory=dict)
    """The digit words that make a number with ``tens_word`` (without it, ``number_words`` alone)."""
    weeks_back: Mapping[str, int] = field(default_factory=dict)
    """Lower-cased words of a day phrase that choose a week, and how many weeks before today's it is
    (negative: after)."""
    period_phrases: tuple[PeriodPhrase, ...] = ()
    """The phrases naming a month or year relative to the one a text was said in, which a memory note
    writes out ("last month" said in May 2023: April 2023). Memory search leaves them alone."""
    month_spelling: str = ""
    """How this language writes a month of a year, with ``{y}``, ``{m}`` and ``{month}`` (its first name)."""
    year_spelling: str = "{y}"
    """How this language writes a year, with ``{y}``."""
    written_dates: tuple[str, ...] = ()
    """Regexes of a date written with its year, named groups ``year``, ``month`` (digits, a number word
    or a month name) and ``day``: memory search reads it without a reference day."""
    written_months: tuple[str, ...] = ()
    """Regexes of a month written with its year ("December 2023", 2023年12月), named groups ``year`` and
    ``month`` (digits, a number word or a month name): memory search reads it as every day of that month.
    Matched case-insensitively; a match inside a full date ("8 December, 2023") is not a month."""
    date_spellings: tuple[str, ...] = ()
    """Regexes of how a text writes one day, with ``{y}``, ``{m}``, ``{d}`` for its numbers and
    ``{month}`` for its month's name (its first name, or that name's first three letters and a dot)."""
    dates: tuple[str, ...] = ()
    """Regexes of a full date (day, month and year) in any other form this language writes one."""
    partial_dates: tuple[str, ...] = ()
    """Regexes of a date without a year or a relative day ("the 3rd", 去年) in any other form."""
    time_words: frozenset[str] = frozenset()
    """Lower-cased words that say when without a calendar name ("yesterday", "ago", "years"), in a
    language with ``whole_words``: with the month and weekday names and a year, what makes a text say
    when something happened."""
    time_phrases: tuple[str, ...] = ()
    """Regexes of what says when in a language without ``whole_words`` (去年, 三年前, 上周六), read with its
    ``dates`` and ``partial_dates`` in a text that holds its ``letters``."""
    when_questions: tuple[str, ...] = ()
    """Regexes of a question that asks when ("When did…", "What year…", 什么时候): memory search lifts the
    chunks that say when. Each anchors itself: "what did she do when…" asks what, not when."""
    numbers: str = ""
    """Regex of a number written in words (digits are read for every language)."""
    quotes: str = ""
    """Regex of a quoted title in this language's quotation marks (《书名》)."""
    sentence_end: str = ""
    """Regex of where a sentence ends (a zero-width or whitespace match: the text is split there)."""
    clause_end: str = ""
    """Regex of where a clause ends inside a sentence (the punctuation and the space after it)."""
    question_mark: str = ""
    """A question ends with it; a question counts less than a statement (its answer is the fact)."""
    sentence_marks: str = ""
    """The characters that end a sentence."""
    clause_marks: str = ""
    """The characters that end a clause; a sentence cut after one ends with ``full_stop`` instead."""
    full_stop: str = ""
    """What ends a sentence in this language (``.``, ``。``)."""
    speaker_name: str = ""
    """Regex of a speaker's name before ``:`` in a transcript; bounded in length."""
    header_words: frozenset[str] = frozenset()
    """Lower-cased words a session header line may hold beside its date ("session", "date", ...)."""
    save_claim: re.Pattern[str] | None = None
    """A reply that claims to have kept something in memory."""
    not_saved_note: str = ""
    """What is appended to such a reply when nothing was saved."""
    letters: str = ""
    """The body of a regex character class of the letters this language is written in (``A-Za-z``)."""
    letter_share: float = 0.0
    """A conversation is in this language when its letters are at least this share of every language's
    letters (0: never chosen by share; the first registered language is the default)."""
    summary: SummaryText | None = None
    """The words summaries in this language are written with (``None``: not a summary language)."""


@dataclass(frozen=True, slots=True)
class SummaryText:
    """The text of a summary written in one language: its headers, its prompt, its labels, and the
    forms a model's reply in this language takes. ``{budget}`` in :attr:`system` is the token budget."""

    sections: Mapping[str, str]
    """Per section key (goal, constraints, progress, decisions, next, context): its header."""
    hints: Mapping[str, str]
    """Per section key: what goes there, shown in the template the model fills in."""
    hint: str
    """How a hint follows the placeholder bullet: a format with one ``{}``."""
    none: str
    """What an empty section says."""
    none_items: frozenset[str]
    """Lower-cased items that say nothing, read back from a summary."""
    none_replies: frozenset[str]
    """Further lower-cased forms a model's reply writes for nothing."""
    label_sep: str
    """What follows a label before its value (``: ``, ``：``)."""
    joiner: str
    """What joins two sentences merged into one bullet."""
    earlier: str
    """The lead-in of a fact from a previous summary's free text."""
    system: str
    """The summary prompt's rules (the system message)."""
    prompt_labels: Mapping[str, str]
    """The summary prompt's labels: new, ledger, draft, empty, extra, fill."""
    title: str
    """The title of the summary block in the context."""
    archive: str
    """The line that introduces the archive of the summarised messages."""
    ledger_title: str
    """The title of the identifier ledger."""
    ledger_labels: Mapping[str, str]
    """Per identifier kind (path, url, host, email, error, id, number, name): its label."""
    error_words: str = ""
    """Regex alternatives of the words before an error's code ("exit code", 退出码)."""
    units: str = ""
    """Regex alternatives of the units written after a number (``ms``, 秒)."""
    chatty: str = ""
    """Regex alternatives of how a chatty reply opens ("Sure", 好的), matched case-insensitively."""
    closer: str = ""
    """Regex alternatives of how a chatty reply closes ("Hope this helps", 希望…帮助)."""
