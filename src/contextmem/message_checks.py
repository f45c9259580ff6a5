"""What a message value must hold to be stored, archived and sent: checks run at every edge.

* every string in it (content, parts, names, ids, arguments, reasoning, ``extra`` keys and values) is
  encodable as UTF-8, i.e. holds no lone surrogate (U+D800..U+DFFF). Such text is *refused* with a
  :class:`~contextmem.errors.MessageFormatError`, never silently replaced: what a user or tool said is not
  ours to change, and text that cannot be encoded cannot be stored, archived or sent;
* a tool call's id and name, and a tool result's ``tool_call_id``, are not empty: the stored form is read
  back by :func:`~contextmem.formats.openai.from_openai`, which refuses them, so a store that took one
  could not read its session again;
* nothing in it nests deeper than :data:`MAX_NESTING` containers, so no reader, writer or ``repr`` can
  exhaust the stack on it;
* each field has the type its value class declares (a value built by hand with another type is named);
* its text is at most ``max_message_bytes`` (a tool result :data:`TOOL_RESULT_FACTOR` times it):
  :func:`check_size`, the one bound every reader of messages applies (``ContextEngine.add``, and the
  JSON Lines reader of ``contextmem count`` and ``replay``), measured before any pass over the text.

:func:`check_message_text` checks message values, :func:`check_json_value` wire dicts.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any, TypeAlias

from .errors import MessageFormatError, MessageTooLargeError, brief
from .messages import AssistantMessage, Content, ImagePart, Message, TextPart, ToolCall, ToolMessage

__all__ = [
    "MAX_NESTING",
    "TOOL_RESULT_FACTOR",
    "check_arguments",
    "check_json_value",
    "check_message_text",
    "check_size",
    "check_text",
    "text_bytes",
    "too_large",
    "unencodable_at",
]

MAX_NESTING = 64
"""The deepest a message may nest containers, counting the message itself (in OpenAI dict form) as level 1:
its ``extra`` values may nest 63 levels, tool-call ``arguments`` (parsed) 64. Far beyond any real message,
far below Python's recursion limit."""

TOOL_RESULT_FACTOR = 10
"""A tool result may be this many times ``max_message_bytes``: it is offloaded (C5), not sent whole."""

_SURROGATE_FIX = (
    "remove or replace the character before passing the text (contextmem refuses it rather than change what "
    "was said); text decoded with errors='surrogateescape' should be decoded with errors='replace' instead"
)
_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]")

# A trail is the way from the root of a checked value to one item in it, as a linked list
# ``(parent_trail, key)``; it is turned into a path string only when an error needs one.
_Trail: TypeAlias = "tuple[_Trail, object] | None"


def unencodable_at(text: str) -> int:
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
    at = unencodable_at(text)
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
            if (at := unencodable_at(item)) >= 0:
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
            if isinstance(key, str) and (at := unencodable_at(key)) >= 0:
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


def _check_named(text: str, path: str, fix: str) -> None:
    """:func:`check_text`, and ``text`` must not be empty (an id, a tool's name)."""
    check_text(text, path)
    if not text:
        raise MessageFormatError(path, "must be a non-empty string, got ''", fix)


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
        _check_named(message.tool_call_id, f"{where}.tool_call_id", "pass the id of the call this answers")
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
            _check_named(call.id, f"{call_path}.id", "give every tool call the id the model returned")
            _check_named(call.name, f"{call_path}.function.name", "give the name of the tool that was called")
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


def text_bytes(message: Message, stop: int) -> int:
    """UTF-8 bytes of the text in ``message`` (content, parts, tool calls, reasoning, names, ids,
    ``extra``), counted until they pass ``stop``: a string longer than ``stop`` characters is over it
    without being encoded. Fields of the wrong type are skipped (:func:`check_message_text` names them)."""
    found: list[object] = []
    content = message.content
    if isinstance(content, tuple):
        found.extend(getattr(p, "text", getattr(p, "url", None)) for p in content)
    else:
        found.append(content)
    found.append(message.name)  # names and ids too: a 50 MB tool-call id is as large as 50 MB of text
    if isinstance(message, AssistantMessage):
        if isinstance(message.tool_calls, tuple):
            for c in message.tool_calls:
                found += [getattr(c, "arguments", None), getattr(c, "id", None), getattr(c, "name", None)]
        found.append(message.reasoning)
    elif isinstance(message, ToolMessage):
        found.append(message.tool_call_id)
    if message.extra:  # keys kept as written: their JSON
        found.append(json.dumps(message.extra, ensure_ascii=False, default=str))
    total = 0
    for text in found:
        if isinstance(text, str):
            total += len(text) if len(text) > stop or text.isascii() else len(text.encode("utf-8", "replace"))
            if total > stop:
                break
    return total


def check_size(message: Message, where: str, max_bytes: int) -> None:
    """Raise :class:`MessageTooLargeError` (field ``{where}.content``) when the text of ``message`` is over
    ``max_bytes`` UTF-8 bytes, or over :data:`TOOL_RESULT_FACTOR` times it for a tool result. Costs at
    most one pass over ``max_bytes`` of text, whatever the message's size."""
    factor = TOOL_RESULT_FACTOR if isinstance(message, ToolMessage) else 1
    if (size := text_bytes(message, max_bytes * factor)) > max_bytes * factor:
        raise too_large(where, size, max_bytes, factor)


def too_large(where: str, size: int, max_bytes: int, factor: int) -> MessageTooLargeError:
    """The error for the message ``where`` holding ``size`` bytes (or more) of text, over ``max_bytes *
    factor``."""
    return MessageTooLargeError(
        f"{where}.content",
        size,
        max_bytes * factor,
        "send a shorter text (a big document is better read by a tool, in parts), or raise "
        f"max_message_bytes (now {max_bytes:,}; a tool result may be {TOOL_RESULT_FACTOR} times it)",
    )
