"""The structured outputs of the MCP tools: pydantic models the SDK turns into output schemas.

The engine's results are ``slots`` dataclasses, which the SDK cannot read, so :func:`_output_model` mirrors
them field for field; the text content of a call is the same JSON.
"""

from __future__ import annotations

from dataclasses import fields
from datetime import UTC, datetime
from typing import Any, get_type_hints

from pydantic import BaseModel, Field, create_model

from ..engine.types import CompactResult, ContextStats
from ..store.base import SessionInfo

__all__ = [
    "CompactResultOutput",
    "ContextStatsOutput",
    "SearchHit",
    "SearchResults",
    "SessionList",
    "SessionSummary",
]


class SearchHit(BaseModel):
    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str


class SearchResults(BaseModel):
    """Structured output of memory_search (the text content is the bare JSON list of hits)."""

    hits: list[SearchHit]


def _utc(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="seconds")


class SessionSummary(BaseModel):
    session_id: str
    messages: int = Field(description="Live messages (what the next request is built from).")
    archived: int = Field(description="Messages compacted away, kept in the archive.")
    created: str = Field(description="When the session was created, ISO 8601 UTC.")
    last_activity: str = Field(description="When the session last changed, ISO 8601 UTC.")

    @classmethod
    def of(cls, info: SessionInfo) -> SessionSummary:
        return cls(
            session_id=info.session_id,
            messages=info.live_count,
            archived=info.archived_count,
            created=_utc(info.created_at),
            last_activity=_utc(info.updated_at),
        )


class SessionList(BaseModel):
    """Structured output of list_sessions: the most recently active first, ``total`` in the namespace."""

    sessions: list[SessionSummary]
    total: int


def _output_model(cls: type[Any], doc: str) -> type[BaseModel]:
    """A pydantic model with the fields of dataclass ``cls`` (the SDK cannot read ``slots`` dataclasses)."""
    hints = get_type_hints(cls)
    definitions: dict[str, Any] = {f.name: (hints[f.name], ...) for f in fields(cls)}
    return create_model(cls.__name__, __doc__=doc, **definitions)


ContextStatsOutput = _output_model(ContextStats, "Structured output of context_stats.")
CompactResultOutput = _output_model(CompactResult, "Structured output of compact.")
