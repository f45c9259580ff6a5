"""The agent's memory tools (M5), with JSON schemas ready to hand to a model.

:meth:`MemoryTools.call` is the single dispatcher, for models and for MCP. Invariants:

* **Arguments are checked against the schemas before dispatch**: names, types (a bool is not an integer),
  enums, ranges and lengths. A model's mistake comes back as an ``error: …`` text that names the argument
  and the Fix, never as an exception that would end the turn.
* **Bounded work.** ``memory_write`` keeps at most :data:`MAX_WRITE_CHARS` characters per call (longer is
  refused); ``memory_search`` uses the first :data:`~contextmem.memory.text.MAX_QUERY_CHARS` characters of
  its query (longer is cut, not refused: the search still answers); a path is at most
  :data:`~contextmem.safefs.MAX_PATH_CHARS` characters; a read reads at most :data:`MAX_READ_BYTES` of a
  file and returns at most :data:`MAX_READ_LINES` lines / :data:`MAX_READ_CHARS` characters.
* **Confined.** Every path a model names is opened through ``workspace.files`` (no symlink followed, no
  hard-linked file, nothing outside the namespace): ``memory_get`` reads only ``MEMORY.md`` and
  ``memory/**.md``, ``read_file`` only ``dialog/`` and ``tool_results/``.
* **Never raises.** Any unexpected exception inside a tool is logged and returned as
  ``error: internal error …``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..errors import ContextmemError, NotFoundError, ToolArgumentError
from ..logs import get_logger
from ..memory_docs import document_name, documents_of
from ..memory_files import append_note
from ..messages import ToolSpec
from ..redaction import redact_secrets
from ..safefs import MAX_PATH_CHARS
from ..textlines import lines as split_lines
from ..workspace import CORE_FILE, DAILY_DIR, DIALOG_DIR, TOOL_RESULTS_DIR
from .base import MemoryIndex
from .text import MAX_QUERY_CHARS, file_secrets, redact_chunk

__all__ = [
    "MAX_READ_BYTES",
    "MAX_READ_CHARS",
    "MAX_READ_LINES",
    "MAX_SEARCH_RESULTS",
    "MAX_WRITE_CHARS",
    "TOOL_SCHEMAS",
    "MemoryTools",
    "ToolArgumentError",
    "check_arguments",
]

logger = get_logger("contextmem.memory")

MAX_READ_LINES = 400
MAX_READ_CHARS = 40_000
MAX_READ_BYTES = 16 * 1024 * 1024  # of a file read by memory_get / read_file; lines past it are not read
MAX_WRITE_CHARS = 16_384  # of one memory_write: a note, not a document
MAX_SEARCH_RESULTS = 50
MAX_ARGUMENT_JSON_CHARS = 1_000_000  # arguments given as a JSON string


def _line_read_parameters(
    path_description: str, start: str, count: str, default_count: int
) -> dict[str, Any]:
    """The parameters of a tool that reads lines of a file: a path, the first line (1-based), how many."""
    return {
        "type": "object",
        "properties": {
            "path": {"type": "string", "maxLength": MAX_PATH_CHARS, "description": path_description},
            start: {
                "type": "integer",
                "minimum": 1,
                "default": 1,
                "description": "First line to read (1-based).",
            },
            count: {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_READ_LINES,
                "default": default_count,
                "description": "How many lines to read.",
            },
        },
        "required": ["path"],
        "additionalProperties": False,
    }


TOOL_SCHEMAS: dict[str, dict[str, Any]] = {
    "memory_search": {
        "description": (
            "Search long-term memory (MEMORY.md and daily notes) by meaning and keywords. Returns the best "
            "matching passages with their file path and line range; read more with memory_get."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": (
                        f"What to look for, in any language (only the first {MAX_QUERY_CHARS:,} characters "
                        "are used)."
                    ),
                },
                "k": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_SEARCH_RESULTS,
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
        "parameters": _line_read_parameters(
            "Relative path, e.g. 'memory/2026-03-08.md'.", "from_line", "lines", 50
        ),
    },
    "memory_write": {
        "description": (
            "Remember something. target 'core' appends to MEMORY.md (lasting facts, preferences, decisions); "
            "'daily' appends to today's memory/YYYY-MM-DD.md (events of the day). Secrets are redacted."
        ),
        "parameters": {
            "type": "object",
            "properties": {
                "text": {
                    "type": "string",
                    "maxLength": MAX_WRITE_CHARS,
                    "description": "The fact or note, self-contained.",
                },
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
        "parameters": _line_read_parameters(
            "Relative path under dialog/ or tool_results/.", "offset", "limit", 200
        ),
    },
}


def _usage(name: str) -> str:
    """``name(path: string (required), from_line: integer >= 1, ...)`` from the tool's schema."""
    params = TOOL_SCHEMAS[name]["parameters"]
    parts = []
    for arg, spec in params["properties"].items():
        bits = [spec["type"]]
        if "enum" in spec:
            bits = ["one of " + ", ".join(repr(v) for v in spec["enum"])]
        if "minimum" in spec and "maximum" in spec:
            bits.append(f"{spec['minimum']}-{spec['maximum']}")
        elif "minimum" in spec:
            bits.append(f">= {spec['minimum']}")
        if "maxLength" in spec:
            bits.append(f"at most {spec['maxLength']:,} characters")
        if arg in params["required"]:
            bits.append("required")
        parts.append(f"{arg} ({', '.join(bits)})")
    return f"{name}({'; '.join(parts)})"


def check_arguments(name: str, arguments: Mapping[str, Any] | str) -> dict[str, Any]:
    """The arguments of tool ``name`` as a dict, checked against its schema, else :class:`ToolArgumentError`.

    ``arguments`` may be a JSON object text (as models send them). Checks: an object; no unknown names;
    required ones present; strings are strings (valid Unicode, within ``maxLength``); integers are
    integers, not bools (within ``minimum``/``maximum``); enum values.
    """
    fix = f"Fix: call {_usage(name)}"
    if isinstance(arguments, str):
        if len(arguments) > MAX_ARGUMENT_JSON_CHARS:
            raise ToolArgumentError(
                f"the arguments of {name} are {len(arguments):,} characters of JSON. {fix}"
            )
        try:
            arguments = json.loads(arguments)
        except ValueError as exc:
            raise ToolArgumentError(f"the arguments of {name} are not valid JSON ({exc}). {fix}") from None
    if not isinstance(arguments, Mapping):
        raise ToolArgumentError(
            f"the arguments of {name} are a {type(arguments).__name__}, not an object. {fix}"
        )
    params = TOOL_SCHEMAS[name]["parameters"]
    properties: dict[str, dict[str, Any]] = params["properties"]
    unknown = [str(key)[:80] for key in arguments if key not in properties]
    if unknown:
        raise ToolArgumentError(f"{name} has no argument {', '.join(map(repr, unknown))}. {fix}")
    missing = [key for key in params["required"] if key not in arguments]
    if missing:
        raise ToolArgumentError(f"{name} needs the argument {', '.join(map(repr, missing))}. {fix}")
    for key, value in arguments.items():
        spec = properties[key]
        problem = _type_problem(value, spec)
        if problem:
            raise ToolArgumentError(f"argument {key!r} of {name} {problem}. {fix}")
    return dict(arguments)


def _type_problem(value: Any, spec: Mapping[str, Any]) -> str | None:
    """What is wrong with ``value`` for the JSON-schema property ``spec`` (``None`` when nothing is)."""
    kind = spec["type"]
    if kind == "string":
        if not isinstance(value, str):
            return f"must be a string, not {type(value).__name__}"
        if len(value) > spec.get("maxLength", len(value)):
            return f"is {len(value):,} characters long; at most {spec['maxLength']:,} are allowed"
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "is not valid Unicode (it contains a lone surrogate)"
    elif kind == "integer":
        if isinstance(value, bool) or not isinstance(value, int):
            return f"must be an integer, not {type(value).__name__}"
        if value < spec.get("minimum", value) or value > spec.get("maximum", value):
            low, high = spec.get("minimum", "-inf"), spec.get("maximum", "inf")
            return f"is {value}, outside {low}..{high}"
    if "enum" in spec and value not in spec["enum"]:
        return f"is {str(value)[:80]!r}, not one of {', '.join(map(repr, spec['enum']))}"
    return None


def _missing(path: str) -> NotFoundError:
    return NotFoundError(
        f"{path.strip()[:120]!r} does not exist. Fix: use a path from memory_search results or a tool-result "
        "reference"
    )


class MemoryTools:
    """The four tools bound to one namespace's index. ``clock`` dates ``memory_write`` daily entries.
    ``offloads`` reads an offloaded tool result the session store keeps, for a ``tool_results/`` path not on
    this host's disk (another host offloaded it, or the file expired): ``read_file`` gives the same lines
    from every host."""

    def __init__(
        self,
        index: MemoryIndex,
        *,
        clock: Callable[[], datetime] = datetime.now,
        offloads: Callable[[str], str | None] | None = None,
    ) -> None:
        self.index = index
        self.workspace = index.workspace
        self.clock = clock
        self.offloads = offloads  # tool_results/ path -> full text kept by the session store, else None
        self._handlers: dict[str, Callable[..., str]] = {
            "memory_search": self.memory_search,
            "memory_get": self.memory_get,
            "memory_write": self.memory_write,
            "read_file": self.read_file,
        }

    @property
    def schemas(self) -> dict[str, dict[str, Any]]:
        return TOOL_SCHEMAS

    def specs(self) -> list[ToolSpec]:
        """The tools as specs, for ``ContextEngine.build`` (which takes the two forms below as well)."""
        return [ToolSpec(name, s["description"], s["parameters"]) for name, s in TOOL_SCHEMAS.items()]

    def openai_tools(self) -> list[dict[str, Any]]:
        """The tools in OpenAI's ``tools=[{"type": "function", "function": {...}}]`` form."""
        return [spec.to_openai() for spec in self.specs()]

    def anthropic_tools(self) -> list[dict[str, Any]]:
        """The tools in Anthropic's ``tools=[{"name", "description", "input_schema"}]`` form."""
        return [spec.to_anthropic() for spec in self.specs()]

    def call(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        """Run tool ``name``; every failure comes back as an ``error: ...`` text, never an exception."""
        handler = self._handlers.get(name) if isinstance(name, str) else None
        if handler is None:
            return f"error: unknown tool {str(name)[:80]!r}. Fix: call one of {', '.join(self._handlers)}"
        try:
            return handler(**check_arguments(name, arguments))
        except (ContextmemError, FileNotFoundError) as exc:  # a mistake the caller can fix: its message
            return f"error: {exc}"
        except OSError as exc:
            logger.exception("memory tool %s failed on the workspace of %r", name, self.workspace.namespace)
            return (
                f"error: {name} could not use the workspace ({exc.strerror or type(exc).__name__}). "
                "Fix: retry later; if it persists, the operator should check the workspace's disk and files"
            )
        except Exception as exc:
            logger.exception("memory tool %s failed unexpectedly", name)
            return (
                f"error: internal error in {name} ({type(exc).__name__}). "
                "Fix: retry later; if it persists, the operator should read the contextmem log"
            )

    async def acall(self, name: str, arguments: Mapping[str, Any] | str) -> str:
        """:meth:`call` in a worker thread (embedding, SQLite and file I/O stay off the event loop)."""
        return await asyncio.to_thread(self.call, name, arguments)

    # --- the tools ----------------------------------------------------------------------------

    def memory_search(self, query: str, k: int = 5) -> str:
        hits = self.index.search(query, max(1, min(int(k), MAX_SEARCH_RESULTS)))
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
        """Lines of ``MEMORY.md`` or ``memory/**.md``, with any secret a person typed in redacted."""
        parts = self.workspace.files.parts(path, under=(CORE_FILE, DAILY_DIR))
        if parts != (CORE_FILE,) and not (parts[0] == DAILY_DIR and parts[-1].endswith(".md")):
            raise ToolArgumentError(
                f"{path[:120]!r} is not a memory file. Fix: memory_get reads MEMORY.md and memory/*.md; "
                "use read_file for dialog/ and tool_results/"
            )
        docs = documents_of(self.index)
        if docs is not None:  # a shared store: the document itself, as every host sees it now
            doc = docs.get(document_name(self.workspace.files, path))
            if doc is None or doc.deleted:
                raise _missing(path)
            return self._lines(path, doc.content[: MAX_READ_BYTES + 1], from_line, lines, redact=True)
        return self._read_lines(path, (CORE_FILE, DAILY_DIR), from_line, lines, redact=True)

    def memory_write(self, text: str, target: str = "daily") -> str:
        if len(text) > MAX_WRITE_CHARS:
            raise ToolArgumentError(
                f"the text is {len(text):,} characters; memory_write keeps at most {MAX_WRITE_CHARS:,}. "
                "Fix: save a shorter, self-contained note"
            )
        if target not in ("core", "daily"):
            raise ToolArgumentError(f"target {target[:80]!r} is not 'core' or 'daily'. Fix: use one of them")
        docs = documents_of(self.index)
        written = append_note(self.workspace, text, target, self.clock(), shared=docs)
        self._index_now()
        note = " (secrets in it were replaced by [REDACTED])" if redact_secrets(text) != text else ""
        return f"saved to {self.workspace.relative(written)}{note}"

    def _index_now(self) -> None:
        """Index what was just saved, so the write pays for embedding its note, not the next search (on a
        shared store, not the next search of any host: the index is shared). The note is saved either
        way: if indexing fails now, the next search's sync indexes it."""
        try:
            self.index.sync()
        except ContextmemError as exc:
            logger.warning("a saved note is indexed at the next search: %s", exc)

    def read_file(self, path: str, offset: int = 1, limit: int = 200) -> str:
        return self._read_lines(path, (DIALOG_DIR, TOOL_RESULTS_DIR), offset, limit, redact=False)

    def _offloaded(self, path: str) -> str | None:
        """The store's copy of an offloaded result (``path`` already passed the gate), else None."""
        parts = self.workspace.files.parts(path)
        if self.offloads is None or parts[0] != TOOL_RESULTS_DIR:
            return None
        return self.offloads("/".join(parts))

    def _read_lines(self, path: str, under: Sequence[str], first: int, count: int, *, redact: bool) -> str:
        """Lines ``first..first+count-1`` of ``path``, read through the gate (at most MAX_READ_BYTES)."""
        try:
            data = self.workspace.files.read_bytes(path, under=under, max_bytes=MAX_READ_BYTES + 1)
        except FileNotFoundError:
            kept = self._offloaded(path)
            if kept is None:
                raise _missing(path) from None
            data = kept.encode("utf-8", "backslashreplace")[: MAX_READ_BYTES + 1]
        return self._lines(path, data, first, count, redact=redact)

    def _lines(self, path: str, data: bytes, first: int, count: int, *, redact: bool) -> str:
        """Lines ``first..first+count-1`` of ``data`` (at most ``MAX_READ_BYTES + 1`` bytes of ``path``)."""
        shown = path.strip()[:120]
        truncated = len(data) > MAX_READ_BYTES
        if truncated:  # only whole lines of the first MAX_READ_BYTES
            data = data[: data.rfind(b"\n", 0, MAX_READ_BYTES) + 1]
        text = data.decode("utf-8-sig", "replace")
        all_lines = split_lines(text)
        first = max(1, int(first))
        count = max(1, min(int(count), MAX_READ_LINES))
        selected = all_lines[first - 1 : first - 1 + count]
        if redact:
            known = file_secrets(text)
            selected = [redact_chunk(line, known) for line in selected]
        body = "\n".join(selected)
        if len(body) > MAX_READ_CHARS:
            body = body[:MAX_READ_CHARS] + "\n… [truncated; read fewer lines]"
        last = first + len(selected) - 1
        total = f"{len(all_lines)}+" if truncated else str(len(all_lines))
        more = f"; {len(all_lines) - last} more" if last < len(all_lines) else ""
        if truncated:
            more += f"; only the first {MAX_READ_BYTES // (1024 * 1024)} MiB of the file can be read"
        return f"[{shown} lines {first}-{max(last, first - 1)} of {total}{more}]\n{body}"
