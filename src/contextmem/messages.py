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

What a *message* keeps (checked by :func:`check_message_text` on values, :func:`check_json_value` on wire
dicts, both at every edge):

* every string in it (content, parts, names, ids, arguments, reasoning, ``extra`` keys and values) is
  encodable as UTF-8, i.e. holds no lone surrogate (U+D800..U+DFFF). Such text is *refused* with a
  :class:`~contextmem.errors.MessageFormatError`, never silently replaced: what a user or tool said is not
  ours to change, and text that cannot be encoded cannot be stored, archived or sent;
* nothing in it nests deeper than :data:`MAX_NESTING` containers, so no reader, writer or ``repr`` can
  exhaust the stack on it.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from .errors import HistoryError, MessageFormatError, brief


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


MAX_NESTING = 64
"""The deepest a message may nest containers, counting the message itself (in OpenAI dict form) as level 1:
its ``extra`` values may nest 63 levels, tool-call ``arguments`` (parsed) 64. Far beyond any real message,
far below Python's recursion limit."""

_SURROGATE_FIX = (
    "remove or replace the character before passing the text (contextmem refuses it rather than change what "
    "was said); text decoded with errors='surrogateescape' should be decoded with errors='replace' instead"
)
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")

# A trail is the way from the root of a checked value to one item in it, as a linked list
# ``(parent_trail, key)``; it is turned into a path string only when an error needs one.
_Trail: TypeAlias = "tuple[_Trail, object] | None"


def _unencodable_at(text: str) -> int:
    """Index of the first code point UTF-8 cannot encode (a lone surrogate), or -1. O(1) for ASCII text."""
    if text.isascii():
        return -1
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return -1


def _surrogate_error(text: str, at: int, path: str) -> MessageFormatError:
    char = text[at]
    return MessageFormatError(
        path,
        f"contains {char!r} (U+{ord(char):04X}) at character {at}, a lone surrogate that UTF-8 cannot "
        f"encode, so the text could not be stored or sent (near {text[max(at - 20, 0) : at + 20]!r})",
        _SURROGATE_FIX,
    )


def check_text(text: str, path: str) -> None:
    """Raise :class:`MessageFormatError` naming ``path`` and the offset if UTF-8 cannot encode ``text``
    (or ``text`` is no string at all: a message value built by hand with another type)."""
    if not isinstance(text, str):
        raise MessageFormatError(
            path, f"must be a str, got {type(text).__name__} {brief(text)}", "pass this field as a str"
        )
    at = _unencodable_at(text)
    if at >= 0:
        raise _surrogate_error(text, at, path)


def _path(where: str, trail: _Trail, keep: int | None = None) -> str:
    keys: list[object] = []
    while trail is not None:
        trail, key = trail
        keys.append(key)
    keys.reverse()
    out = where
    for key in keys[:keep]:
        if isinstance(key, int):
            out += f"[{key}]"
        elif isinstance(key, str) and key.isidentifier():
            out += f".{key}"
        else:
            out += f"[{key!r}]"
    return out


def check_json_value(value: Any, where: str, *, limit: int = MAX_NESTING) -> None:
    """Raise :class:`MessageFormatError` if a JSON-like ``value`` nests deeper than ``limit`` containers
    (``value`` itself is level 1) or holds a string, value or key, that UTF-8 cannot encode.

    Mappings, lists and tuples are walked; other values are left alone. The walk is iterative, so no input
    can raise :class:`RecursionError`, and a cyclic value fails as too deep. ``where`` prefixes the paths
    in errors, e.g. ``messages[2]`` gives ``messages[2].content[0].text``.
    """
    stack: list[tuple[Any, int, _Trail]] = [(value, 1, None)]
    while stack:
        item, depth, trail = stack.pop()
        if isinstance(item, str):
            if (at := _unencodable_at(item)) >= 0:
                raise _surrogate_error(item, at, _path(where, trail))
            continue
        if isinstance(item, Mapping):
            children: Iterable[tuple[object, Any]] = item.items()
        elif isinstance(item, list | tuple):
            children = enumerate(item)
        else:
            continue
        if depth > limit:
            raise MessageFormatError(
                _path(where, trail, keep=2),
                f"nests containers deeper than {limit} levels",
                f"flatten the value, or pass deep structures as a JSON string; at most {MAX_NESTING} levels "
                "are accepted in a message",
            )
        for key, child in children:
            if isinstance(key, str) and (at := _unencodable_at(key)) >= 0:
                raise _surrogate_error(key, at, _path(where, (trail, key)) + " (the key)")
            stack.append((child, depth + 1, (trail, key)))


def check_arguments(arguments: str, field_path: str) -> None:
    """Tool-call arguments must be JSON text of an object (``""`` is accepted as "no arguments"), nested at
    most :data:`MAX_NESTING` levels, whose strings decode to valid text (``"\\ud800"`` alone is refused)."""
    if arguments == "":
        return
    check_text(arguments, field_path)
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise MessageFormatError(
            field_path,
            f"is not valid JSON ({exc.msg} at char {exc.pos}): {arguments[:80]!r}",
            "pass the arguments as a JSON object string, e.g. json.dumps({...})",
        ) from None
    except RecursionError:
        raise MessageFormatError(
            field_path,
            f"nests too deeply to be read: {arguments[:80]!r}",
            f"keep the arguments within {MAX_NESTING} levels of nesting",
        ) from None
    if not isinstance(value, dict):
        raise MessageFormatError(
            field_path,
            f"must be a JSON object, got {type(value).__name__}: {arguments[:80]!r}",
            'wrap the arguments in an object, e.g. {"value": ...}',
        )
    check_json_value(value, field_path)


def _check_content(content: Content | None, path: str) -> None:
    if content is None:
        return
    if isinstance(content, str):
        check_text(content, path)
        return
    if not isinstance(content, tuple):
        raise MessageFormatError(
            path, f"must be a str or a tuple of parts, got {_typed(content)}", _PARTS_FIX
        )
    for j, part in enumerate(content):
        if isinstance(part, TextPart):
            check_text(part.text, f"{path}[{j}].text")
        elif isinstance(part, ImagePart):
            check_text(part.url, f"{path}[{j}].image_url.url")
            if part.detail is not None:
                check_text(part.detail, f"{path}[{j}].image_url.detail")
        else:
            raise MessageFormatError(
                f"{path}[{j}]", f"must be a TextPart or ImagePart, got {_typed(part)}", _PARTS_FIX
            )


_PARTS_FIX = "pass the text as a str, or a tuple of TextPart / ImagePart values"


def _typed(value: object) -> str:
    return f"{type(value).__name__} {brief(value)}"


def check_message_text(message: Message, where: str = "message") -> None:
    """Refuse a message value that could not be stored: raise :class:`MessageFormatError` naming the field
    (``{where}.content[0].text``, ``{where}.tool_calls[1].function.arguments``, ``{where}.name``,
    ``{where}.tool_call_id``, ``{where}.reasoning``, ``{where}.<extra key>...``) and the character offset
    when a string holds a lone surrogate, or when ``extra`` nests deeper than :data:`MAX_NESTING` (counting
    the message as level 1, as in its OpenAI dict).

    Runs on every appended message, so it is cheap: ASCII strings cost O(1) (``str.isascii``), others one
    ``encode``; arguments are parsed only when they hold a ``\\uD8..``-style escape, since an escaped lone
    surrogate is valid JSON text but decodes to text nothing downstream can encode. Paths follow the OpenAI
    dict form, so ``where="messages[3]"`` names fields as the caller's list does.
    """
    _check_content(message.content, f"{where}.content")
    if message.name is not None:
        check_text(message.name, f"{where}.name")
    if isinstance(message, ToolMessage):
        check_text(message.tool_call_id, f"{where}.tool_call_id")
    elif isinstance(message, AssistantMessage):
        if message.reasoning is not None:
            check_text(message.reasoning, f"{where}.reasoning")
        if not isinstance(message.tool_calls, tuple):
            raise MessageFormatError(
                f"{where}.tool_calls",
                f"must be a tuple of ToolCall, got {_typed(message.tool_calls)}",
                _CALLS_FIX,
            )
        for j, call in enumerate(message.tool_calls):
            call_path = f"{where}.tool_calls[{j}]"
            if not isinstance(call, ToolCall):
                raise MessageFormatError(call_path, f"must be a ToolCall, got {_typed(call)}", _CALLS_FIX)
            check_text(call.id, f"{call_path}.id")
            check_text(call.name, f"{call_path}.function.name")
            arguments_path = f"{call_path}.function.arguments"
            check_text(call.arguments, arguments_path)
            if _ESCAPED_SURROGATE.search(call.arguments):
                _check_escaped_arguments(call.arguments, arguments_path)
    if message.extra:
        check_json_value(message.extra, where)


_CALLS_FIX = (
    'pass tool_calls=(ToolCall(id, name, arguments_json), ...), e.g. tool_call("c1", "search", {"q": "x"})'
)


def _check_escaped_arguments(arguments: str, path: str) -> None:
    """The decoded strings of JSON ``arguments`` must be valid text. Whether they are JSON of an object, and
    how deep, is :func:`check_arguments`' business at the edge; text that is not JSON is stored as it is."""
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return
    check_json_value(value, path, limit=sys.maxsize)


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

    Unlike :func:`validate_history` this also flags calls left open at the end, so it is the check to
    run on a finished request before it is sent.
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
    if open_calls and owner is not None:
        bad.append(owner)
    return sorted(set(bad))
