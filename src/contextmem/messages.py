"""Messages are values.

Frozen dataclasses with a ``kind`` discriminator. They carry what a model sees — no storage ids or
timestamps; those belong to the store. Wire formats (OpenAI chat dicts, Anthropic blocks) are converted
at the edge by :mod:`contextmem.formats`.

Invariants a *history* keeps (checked by :func:`validate_history`):

* it holds only user, assistant and tool messages (system prompt and summary live apart);
* the results of an assistant's tool calls follow it directly, one per call id, before anything else;
* every tool result answers a call of the assistant message just before its block.

Because results sit right after their call, no tool-call pair ever straddles a user message, which is what
makes a user message a safe place to cut (see :mod:`contextmem.budget`).

What a *message* keeps (UTF-8-encodable text, bounded nesting) is checked at every edge by
:mod:`contextmem.message_checks`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from .errors import HistoryError, MessageFormatError, brief

__all__ = [
    "AssistantMessage",
    "Content",
    "ImagePart",
    "Message",
    "Part",
    "SystemMessage",
    "TextPart",
    "ToolCall",
    "ToolInput",
    "ToolMessage",
    "ToolSpec",
    "UserMessage",
    "assistant",
    "image_count",
    "orphan_tool_messages",
    "system",
    "text_of",
    "tool_call",
    "tool_result",
    "user",
    "validate_history",
    "wire_form",
]


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ImagePart:
    """An image by URL or ``data:`` URI. Counted at a flat per-image cost."""

    url: str
    detail: str | None = None
    type: Literal["image"] = "image"


Part: TypeAlias = TextPart | ImagePart
Content: TypeAlias = str | tuple[Part, ...]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call. ``arguments`` is the JSON text exactly as the model produced it."""

    id: str
    name: str
    arguments: str = "{}"


def _no_extra() -> Mapping[str, Any]:
    return {}


@dataclass(frozen=True, slots=True)
class SystemMessage:
    content: Content
    name: str | None = None
    developer: bool = False  # OpenAI's "developer" role, kept so a round trip is lossless
    extra: Mapping[str, Any] = field(default_factory=_no_extra, hash=False)
    kind: Literal["system"] = "system"


@dataclass(frozen=True, slots=True)
class UserMessage:
    content: Content
    name: str | None = None
    extra: Mapping[str, Any] = field(default_factory=_no_extra, hash=False)
    kind: Literal["user"] = "user"


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    content: Content | None = None
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    name: str | None = None
    extra: Mapping[str, Any] = field(default_factory=_no_extra, hash=False)
    kind: Literal["assistant"] = "assistant"


@dataclass(frozen=True, slots=True)
class ToolMessage:
    tool_call_id: str
    content: Content
    name: str | None = None
    extra: Mapping[str, Any] = field(default_factory=_no_extra, hash=False)
    kind: Literal["tool"] = "tool"


Message: TypeAlias = SystemMessage | UserMessage | AssistantMessage | ToolMessage


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool definition as handed to a model: name, description and JSON schema of its parameters.

    It lives with the messages because it is part of what a model sees (the token counter and every
    wire format read it); :mod:`contextmem.llm.base` re-exports it.
    """

    name: str
    description: str = ""
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    def to_openai(self) -> dict[str, Any]:
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": dict(self.parameters),
            },
        }

    def to_anthropic(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "input_schema": dict(self.parameters)}

    @classmethod
    def from_openai(cls, tool: Mapping[str, Any], where: str = "tool") -> ToolSpec:
        """An OpenAI tool: the chat form ``{"type": "function", "function": {name, description,
        parameters}}``, the bare function, or the Responses form (the function's keys beside ``type``).
        Keys contextmem does not model (``strict``) are not kept."""
        fn = tool.get("function", tool)
        if not isinstance(fn, Mapping):
            raise _tool_error(f"{where}.function", f"must be an object, got {fn!r}", _OPENAI_TOOL)
        return cls._read(fn, "parameters", where if fn is tool else f"{where}.function")

    @classmethod
    def from_anthropic(cls, tool: Mapping[str, Any], where: str = "tool") -> ToolSpec:
        """An Anthropic tool ``{name, description, input_schema}``. ``cache_control`` is not kept: a request
        marks its own cache breakpoints."""
        return cls._read(tool, "input_schema", where)

    @classmethod
    def of(cls, tool: object, where: str = "tool") -> ToolSpec:
        """Any tool definition a user already has, as a spec: a :class:`ToolSpec`, an OpenAI or Anthropic
        tool dict (:meth:`from_openai`, :meth:`from_anthropic`), or an SDK object of those shapes (anything
        with ``model_dump()``). Anything else is a :class:`MessageFormatError` naming ``where``."""
        if isinstance(tool, ToolSpec):
            return tool
        data = wire_form(tool)
        if not isinstance(data, Mapping) or not ({"function", "name"} & data.keys()):
            raise _tool_error(where, f"is not a tool definition: {data!r}", _ANY_TOOL)
        if data.get("type", "function") not in ("function", "custom"):
            raise _tool_error(
                f"{where}.type",
                f"is {data['type']!r}, a tool the provider runs, not a function tool",
                "pass only function tools here; add provider-run tools to the provider's request yourself",
            )
        return cls.from_anthropic(data, where) if "input_schema" in data else cls.from_openai(data, where)

    @classmethod
    def _read(cls, fn: Mapping[str, Any], schema_key: str, where: str) -> ToolSpec:
        name, description, schema = fn.get("name"), fn.get("description"), fn.get(schema_key)
        if not isinstance(name, str) or not name:
            raise _tool_error(f"{where}.name", f"must be a non-empty string, got {name!r}", _ANY_TOOL)
        if description is not None and not isinstance(description, str):
            raise _tool_error(
                f"{where}.description", f"must be a string, got {description!r}", "give it as a str"
            )
        if schema is not None and not isinstance(schema, Mapping):
            raise _tool_error(
                f"{where}.{schema_key}", f"must be a JSON schema object, got {schema!r}", _ANY_TOOL
            )
        if schema is None:
            return cls(name, description or "")  # no parameters
        return cls(name, description or "", dict(schema))


ToolInput: TypeAlias = ToolSpec | Mapping[str, Any] | Any
"""A tool definition :meth:`ToolSpec.of` reads: a spec, an OpenAI or Anthropic tool dict, an SDK object."""

_OPENAI_TOOL = (
    'write {"type": "function", "function": {"name": ..., "description": ..., "parameters": {...}}}'
)
_ANY_TOOL = (
    'pass a ToolSpec, an OpenAI tool {"type": "function", "function": {"name": ..., "parameters": {...}}} '
    'or an Anthropic tool {"name": ..., "description": ..., "input_schema": {...}}'
)


def _tool_error(path: str, problem: str, fix: str) -> MessageFormatError:
    return MessageFormatError(path, problem if len(problem) <= 300 else problem[:300] + "…", fix)


def wire_form(value: object) -> Any:
    """What an SDK (pydantic) object holds, as JSON-ready data: ``model_dump(mode="json",
    exclude_unset=True)``, so only the fields it was given or received are seen; anything else as it is."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json", exclude_unset=True) if callable(dump) and not isinstance(value, type) else value


# --- small constructors -------------------------------------------------------------------------


def system(text: str) -> SystemMessage:
    return SystemMessage(text)


def user(text: str) -> UserMessage:
    return UserMessage(text)


def assistant(text: str | None = None, *, tool_calls: Iterable[ToolCall] = ()) -> AssistantMessage:
    return AssistantMessage(text, tool_calls=tuple(tool_calls))


def tool_result(tool_call_id: str, text: str, *, name: str | None = None) -> ToolMessage:
    return ToolMessage(tool_call_id, text, name=name)


def tool_call(id: str, name: str, arguments: Mapping[str, Any] | str = "{}") -> ToolCall:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return ToolCall(id, name, args)


# --- reading ------------------------------------------------------------------------------------


def text_of(content: Content | None) -> str:
    """All text of a content value, parts joined by newlines; images are skipped."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(p.text for p in content if isinstance(p, TextPart))


def image_count(content: Content | None) -> int:
    if content is None or isinstance(content, str):
        return 0
    return sum(1 for p in content if isinstance(p, ImagePart))


# --- history invariants -------------------------------------------------------------------------


def validate_history(history: Sequence[Message]) -> None:
    """Raise :class:`HistoryError` unless ``history`` keeps the invariants in the module docstring."""
    pending: dict[str, str] = {}  # call id -> tool name, awaiting its result
    for i, msg in enumerate(history):
        if isinstance(msg, SystemMessage):
            raise HistoryError(
                f"history[{i}] is a system message. Fix: pass the system prompt separately "
                "(it is assembled by build), keep only user/assistant/tool messages in history."
            )
        if isinstance(msg, ToolMessage):
            if msg.tool_call_id not in pending:
                raise HistoryError(
                    f"history[{i}] is a tool result for call {brief(msg.tool_call_id)} with no matching "
                    "assistant tool call right before it. Fix: keep each tool result directly after "
                    "the assistant message that made the call."
                )
            del pending[msg.tool_call_id]
            continue
        if pending:
            raise HistoryError(
                f"history[{i}] ({msg.kind}) comes before the results of tool calls "
                f"{brief(sorted(pending))}. Fix: append every tool result right after its assistant call."
            )
        if isinstance(msg, AssistantMessage):
            for call in msg.tool_calls:
                if call.id in pending:
                    raise HistoryError(
                        f"history[{i}] repeats tool call id {brief(call.id)}. Fix: use unique ids."
                    )
                pending[call.id] = call.name
    # Calls still pending at the end are the turn in progress: allowed while tools run.


def orphan_tool_messages(messages: Sequence[Message]) -> list[int]:
    """Indices of messages that break a tool-call pair: calls without all results, results without call.

    A result must follow its call directly (only other results of the same call in between) and answer
    it once; an assistant message whose calls repeat an id is flagged too (a result could not say which
    call it answers). Unlike :func:`validate_history` this also flags calls left open at the end, so it
    is the check to run on a finished request before it is sent.
    """
    bad: list[int] = []
    open_calls: dict[str, int] = {}
    owner: int | None = None
    for i, msg in enumerate(messages):
        if isinstance(msg, ToolMessage):
            if msg.tool_call_id in open_calls:
                del open_calls[msg.tool_call_id]
            else:
                bad.append(i)
            continue
        if open_calls and owner is not None:
            bad.append(owner)
        open_calls = {}
        owner = None
        if isinstance(msg, AssistantMessage) and msg.tool_calls:
            open_calls = {c.id: i for c in msg.tool_calls}
            owner = i
            if len(open_calls) < len(msg.tool_calls):
                bad.append(i)
    if open_calls and owner is not None:
        bad.append(owner)
    return sorted(set(bad))
