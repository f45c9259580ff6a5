"""The agent's memory tools (SPEC M5), with JSON schemas ready to hand to a model.

Every path a model names goes through :meth:`Workspace.resolve`: ``memory_get`` reads only ``MEMORY.md``
and ``memory/``, ``read_file`` only ``dialog/`` and ``tool_results/``, both inside the namespace. Tool
errors a model can fix (a bad path, a missing file) come back as text for the model, never as exceptions
that would end the turn; :meth:`MemoryTools.call` is the single dispatcher.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError, PathEscapeError
from .index import MemoryIndex

if TYPE_CHECKING:
    from .pg_index import PgMemoryIndex
from .workspace import CORE_FILE, DAILY_DIR, DIALOG_DIR, TOOL_RESULTS_DIR
from .writer import append_daily, write_core

MAX_READ_LINES = 400
MAX_READ_CHARS = 40_000

TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "memory_search": {
        "description": (
            "Search long-term memory (MEMORY.md and daily notes) by meaning and keywords. Returns the best "
            "matching passages with their file path and line range; read more with memory_get."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for, in any language."},
                "k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 50,
                    "default": 5,
                    "description": "How many passages to return.",
                },
            },
            "required": ["query"],
            "additionalProperties": False,
        },
    },
    "memory_get": {
        "description": "Read lines of a memory file (MEMORY.md or memory/...md), e.g. around a search hit.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Relative path, e.g. 'memory/2026-03-08.md'."},
                "from_line": {
                    "type": "integer",
                    "minimum": 1,
                    "default": 1,
                    "description": "First line to read (1-based).",
                },
                "lines": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_READ_LINES,
                    "default": 50,
                    "description": "How many lines to read.",
                },
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    },
    "memory_write": {
        "description": (
            "Remember something. target 'core' appends to MEMORY.md (lasting facts, preferences, decisions); "
            "'daily' appends to today's memory/YYYY-MM-DD.md (events of the day)."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "The fact or note, self-contained."},
                "target": {"type": "string", "enum": ["core", "daily"], "default": "daily"},
            },
            "required": ["text"],
            "additionalProperties": False,
        },
    },
    "read_file": {
        "description": (
            "Read an archived conversation (dialog/YYYY-MM-DD.jsonl) or an offloaded tool result "
            "(tool_results/ID.txt) by lines."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Relative path under dialog/ or tool_results/."},
                "offset": {
                    "type": "integer",
                    "minimum": 1,
                    "default": 1,
                    "description": "First line to read (1-based).",
                },
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_READ_LINES,
                    "default": 200,
                    "description": "How many lines to read.",
                },
            },
            "required": ["path"],
            "additionalProperties": False,
        },
    },
}


class MemoryTools:
    """The four tools bound to one namespace's index. ``clock`` dates ``memory_write`` daily entries."""

    def __init__(
        self, index: MemoryIndex | PgMemoryIndex, *, clock: Callable[[], datetime] = datetime.now
    ) -> None:
        self.index = index
        self.workspace = index.workspace
        self.clock = clock
        self._handlers: dict[str, Callable[..., str]] = {
            "memory_search": self.memory_search,
            "memory_get": self.memory_get,
            "memory_write": self.memory_write,
            "read_file": self.read_file,
        }

    @property
    def schemas(self) -> dict[str, dict[str, Any]]:
        return TOOL_SCHEMAS

    def openai_tools(self) -> list[dict[str, Any]]:
        """The schemas in OpenAI's ``tools=[{"type": "function", ...}]`` form."""
        return [{"type": "function", "function": {"name": n, **s}} for n, s in TOOL_SCHEMAS.items()]

    def call(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        """Run tool ``name``; bad paths and arguments come back as an ``error: ...`` text for the model."""
        handler = self._handlers.get(name)
        if handler is None:
            return f"error: unknown tool {name!r}; available: {', '.join(self._handlers)}"
        try:
            args = json.loads(arguments) if isinstance(arguments, str) else dict(arguments)
            return handler(**args)
        except (
            PathEscapeError,
            ConfigError,
            FileNotFoundError,
            IsADirectoryError,
            TypeError,
            ValueError,
        ) as exc:
            return f"error: {exc}"

    async def acall(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        """:meth:`call` in a worker thread (embedding, SQLite and file I/O stay off the event loop)."""
        return await asyncio.to_thread(self.call, name, arguments)

    # --- the tools ----------------------------------------------------------------------------

    def memory_search(self, query: str, k: int = 5) -> str:
        hits = self.index.search(query, max(1, min(int(k), 50)))
        return json.dumps(
            [
                {
                    "path": h.path,
                    "start_line": h.start_line,
                    "end_line": h.end_line,
                    "score": round(h.score, 4),
                    "snippet": h.snippet,
                }
                for h in hits
            ],
            ensure_ascii=False,
        )

    def memory_get(self, path: str, from_line: int = 1, lines: int = 50) -> str:
        target = self.workspace.resolve(path, under=(CORE_FILE, DAILY_DIR))
        if target.name != CORE_FILE and target.suffix != ".md":
            raise ValueError(f"{path!r} is not a memory file; memory_get reads MEMORY.md and memory/*.md")
        return _read_lines(target, path, from_line, lines)

    def memory_write(self, text: str, target: str = "daily") -> str:
        if target == "core":
            written = write_core(self.workspace, text)
        elif target == "daily":
            written = append_daily(self.workspace, text, self.clock())
        else:
            raise ValueError(f"target {target!r} is not 'core' or 'daily'")
        return f"saved to {self.workspace.relative(written)}"

    def read_file(self, path: str, offset: int = 1, limit: int = 200) -> str:
        target = self.workspace.resolve(path, under=(DIALOG_DIR, TOOL_RESULTS_DIR))
        return _read_lines(target, path, offset, limit)


def _read_lines(target: Any, shown: str, first: int, count: int) -> str:
    first = max(1, int(first))
    count = max(1, min(int(count), MAX_READ_LINES))
    if not target.is_file():
        raise FileNotFoundError(f"{shown!r} does not exist")
    with open(target, encoding="utf-8", errors="replace") as handle:
        all_lines = handle.read().splitlines()
    selected = all_lines[first - 1 : first - 1 + count]
    body = "\n".join(selected)
    if len(body) > MAX_READ_CHARS:
        body = body[:MAX_READ_CHARS] + "\n… [truncated; read fewer lines]"
    last = first + len(selected) - 1
    more = f"; {len(all_lines) - last} more" if last < len(all_lines) else ""
    return f"[{shown} lines {first}-{max(last, first - 1)} of {len(all_lines)}{more}]\n{body}"
