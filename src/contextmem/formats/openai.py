"""OpenAI Chat Completions message dicts <-> contextmem messages, losslessly.

This is the default format at every public edge. The invariant is ``to_openai(from_openai(d)) == d`` for
every valid ``d``:

* content keeps its shape: a string stays a string, a list of parts stays a tuple of parts;
* keys contextmem has no field for (``refusal``, ``audio``, ``annotations``, ``function_call``, provider
  keys, ...) go into ``extra`` verbatim and are emitted back;
* a known optional key whose value carries nothing (``content: null``, ``tool_calls: []`` or ``null``,
  ``name: null``, ``reasoning_content: null``) is also kept in ``extra`` verbatim, so "absent" and "null"
  survive the round trip as they came;
* keys of a tool call other than ``id``/``type``/``function`` (Gemini's ``extra_content`` thought signature,
  a stream ``index``) are kept in ``extra["tool_call_extra"]`` keyed by call id, and merged back.

Two normalisations, by design: the reasoning alias ``reasoning`` is read like ``reasoning_content`` and
emitted as ``reasoning_content``; and keys owned by the Anthropic adapter (:data:`ANTHROPIC_EXTRA_KEYS`) are
never emitted into OpenAI dicts, because the OpenAI API rejects unknown message keys.
"""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .. import messages as msg
from ..errors import MessageFormatError, brief
from ..message_checks import check_arguments, check_json_value
from ._checks import fail, require_list, require_mapping, require_str
from .responses import ITEMS_KEY

__all__ = [
    "ANTHROPIC_EXTRA_KEYS",
    "REPLY_KEYS",
    "TOOL_CALL_EXTRA",
    "anthropic_extra",
    "from_openai",
    "from_openai_reply",
    "from_openai_stored",
    "messages_from_openai",
    "messages_to_openai",
    "to_openai",
]

TOOL_CALL_EXTRA = "tool_call_extra"
"""``extra`` key holding per-call unknown keys of OpenAI tool calls: ``{call_id: {key: value}}``."""

ANTHROPIC_EXTRA_KEYS = frozenset(
    {"thinking_signature", "is_error", "anthropic_blocks", "anthropic_block_keys"}
)
"""``extra`` keys written by :mod:`contextmem.formats.anthropic`; reserved, never emitted to OpenAI."""

_ASIDE = ANTHROPIC_EXTRA_KEYS | {ITEMS_KEY}  # stored beside the OpenAI dict; Responses items: to_responses
_RESERVED = _ASIDE | {TOOL_CALL_EXTRA}

# Keys each role maps onto message fields; everything else goes to ``extra``.
_KNOWN: dict[str, frozenset[str]] = {
    "system": frozenset({"role", "content", "name"}),
    "developer": frozenset({"role", "content", "name"}),
    "user": frozenset({"role", "content", "name"}),
    "assistant": frozenset({"role", "content", "name", "tool_calls", "reasoning_content", "reasoning"}),
    "tool": frozenset({"role", "content", "name", "tool_call_id"}),
}


def _where(index: int | None) -> str:
    return "message" if index is None else f"messages[{index}]"


# --- reading ------------------------------------------------------------------------------------


def _text_part(part: Mapping[str, Any], path: str) -> msg.TextPart:
    text = require_str(part.get("text"), f"{path}.text", "put the text of a text part in 'text' as a str")
    _no_other_keys(part, {"type", "text"}, path)
    return msg.TextPart(text)


def _image_part(part: Mapping[str, Any], path: str) -> msg.ImagePart:
    image = require_mapping(
        part.get("image_url"),
        f"{path}.image_url",
        'write {"type": "image_url", "image_url": {"url": "https://... or data:..."}}',
    )
    url = require_str(image.get("url"), f"{path}.image_url.url", "give the image as an https or data: URL")
    detail = None
    if "detail" in image:
        detail = require_str(
            image["detail"], f"{path}.image_url.detail", "use 'auto', 'low' or 'high', or leave 'detail' out"
        )
    _no_other_keys(image, {"url", "detail"}, f"{path}.image_url")
    _no_other_keys(part, {"type", "image_url"}, path)
    return msg.ImagePart(url, detail)


def _no_other_keys(obj: Mapping[str, Any], allowed: set[str], path: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise MessageFormatError(
            f"{path}.{unknown[0]}",
            f"is not a key contextmem can keep here (value {brief(obj[unknown[0]])})",
            f"remove it; this object takes only {sorted(allowed)!r}",
        )


def _content(value: Any, path: str, *, images: bool) -> msg.Content:
    """Read a content value: a str, or a list of text (and, if ``images``, image_url) parts."""
    if isinstance(value, str):
        return value
    items = require_list(
        value,
        path,
        "a string or a list of content parts",
        'pass the text as a str, or a list like [{"type": "text", "text": "..."}]',
    )
    parts: list[msg.Part] = []
    for j, part in enumerate(items):
        part_path = f"{path}[{j}]"
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text":
            parts.append(_text_part(part, part_path))
        elif kind == "image_url" and images:
            parts.append(_image_part(part, part_path))
        else:
            allowed = "'text' or 'image_url'" if images else "'text'"
            raise MessageFormatError(
                part_path if not isinstance(part, Mapping) else f"{part_path}.type",
                f"unsupported content part {brief(part)}",
                f"use parts of type {allowed} here (convert audio/files/refusals to text first)",
            )
    return tuple(parts)


def _tool_calls(value: Any, path: str) -> tuple[tuple[msg.ToolCall, ...], dict[str, dict[str, Any]]]:
    items = require_list(
        value,
        path,
        "a list of tool calls",
        'pass [{"id": ..., "type": "function", "function": {"name": ..., "arguments": "{...}"}}]',
    )
    calls: list[msg.ToolCall] = []
    call_extra: dict[str, dict[str, Any]] = {}
    for j, item in enumerate(items):
        call_path = f"{path}[{j}]"
        raw = require_mapping(item, call_path, "pass each tool call as a dict")
        call_id = require_str(
            raw.get("id"), f"{call_path}.id", "give every tool call the id the model returned", non_empty=True
        )
        if raw.get("type") != "function":
            raise MessageFormatError(
                f"{call_path}.type",
                f"must be 'function', got {brief(raw.get('type'))}",
                "set type to 'function' (custom tool calls are not supported)",
            )
        fn = require_mapping(
            raw.get("function"), f"{call_path}.function", 'pass {"name": ..., "arguments": "{...}"}'
        )
        name = require_str(
            fn.get("name"),
            f"{call_path}.function.name",
            "give the name of the tool that was called",
            non_empty=True,
        )
        arguments = fn.get("arguments")
        if not isinstance(arguments, str):
            fail(
                f"{call_path}.function.arguments",
                "a JSON object string",
                arguments,
                "pass json.dumps(arguments), not the dict itself",
                show_type=True,
            )
        check_arguments(arguments, f"{call_path}.function.arguments")
        _no_other_keys(fn, {"name", "arguments"}, f"{call_path}.function")
        others = {k: copy.deepcopy(v) for k, v in raw.items() if k not in ("id", "type", "function")}
        if others:
            call_extra[call_id] = others
        calls.append(msg.ToolCall(call_id, name, arguments))
    return tuple(calls), call_extra


def _optional_str(d: Mapping[str, Any], key: str, path: str) -> str | None:
    value = d.get(key)
    if value is None or isinstance(value, str):
        return value
    fail(f"{path}.{key}", "a string", value, f"pass '{key}' as a str", show_type=True)


def from_openai(d: Mapping[str, Any], *, index: int | None = None) -> msg.Message:
    """Read one OpenAI chat message dict. ``index`` only prefixes error paths as ``messages[index]``.

    The dict is checked first (:func:`~contextmem.message_checks.check_json_value`): a lone surrogate in any
    string, or nesting deeper than :data:`~contextmem.message_checks.MAX_NESTING`, is a
    :class:`MessageFormatError` naming the key path, so what is returned always passes
    :func:`~contextmem.message_checks.check_message_text` and nothing here can raise :class:`RecursionError`.
    """
    path = _where(index)
    check_json_value(d, path)
    if not isinstance(d, Mapping):
        fail(path, "a dict", d, "pass a message dict", show_type=True)
    if "role" not in d:
        raise MessageFormatError(
            f"{path}.role",
            f"is missing in {brief(dict(d))}",
            "add 'role': 'system' | 'user' | 'assistant' | 'tool'",
        )
    role = d["role"]
    if role == "function":
        raise MessageFormatError(
            f"{path}.role",
            "legacy role 'function' is not supported",
            "convert it to {'role': 'tool', 'tool_call_id': <id of the call>, 'content': ...}",
        )
    if role not in _KNOWN:
        raise MessageFormatError(
            f"{path}.role",
            f"unknown role {brief(role)}",
            "use one of 'system', 'developer', 'user', 'assistant', 'tool'",
        )
    reserved = sorted(k for k in d if k in _RESERVED)
    if reserved:
        raise MessageFormatError(
            f"{path}.{reserved[0]}",
            f"is a key contextmem reserves for its own round trips (value {brief(d[reserved[0]])})",
            "rename or remove it",
        )
    extra: dict[str, Any] = {k: copy.deepcopy(v) for k, v in d.items() if k not in _KNOWN[role]}
    # Known keys present with an empty value are kept as they came, so absent and null stay distinct.
    for key in ("name", "content", "reasoning_content", "reasoning"):
        if key in d and d[key] is None and key in _KNOWN[role] and (key != "content" or role == "assistant"):
            extra[key] = None
    name = _optional_str(d, "name", path)
    if role in ("system", "developer"):
        return msg.SystemMessage(
            _content(d.get("content"), f"{path}.content", images=False), name, role == "developer", extra
        )
    if role == "user":
        return msg.UserMessage(_content(d.get("content"), f"{path}.content", images=True), name, extra)
    if role == "tool":
        call_id = d.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            fail(
                f"{path}.tool_call_id",
                "the non-empty id of the call this answers",
                call_id,
                "set 'tool_call_id' to the id of the assistant tool call this result answers",
            )
        return msg.ToolMessage(
            call_id, _content(d.get("content"), f"{path}.content", images=False), name, extra
        )
    # assistant
    content = d.get("content")
    body = None if content is None else _content(content, f"{path}.content", images=False)
    reasoning = _optional_str(d, "reasoning_content", path)
    if reasoning is None:
        reasoning = _optional_str(d, "reasoning", path)
    elif "reasoning" in d:
        extra["reasoning"] = copy.deepcopy(d["reasoning"])  # both given: the alias is kept as it came
    raw_calls = d.get("tool_calls")
    calls: tuple[msg.ToolCall, ...] = ()
    if raw_calls is None or raw_calls == []:
        if "tool_calls" in d:
            extra["tool_calls"] = copy.deepcopy(raw_calls)
    else:
        calls, call_extra = _tool_calls(raw_calls, f"{path}.tool_calls")
        if call_extra:
            extra[TOOL_CALL_EXTRA] = call_extra
    return msg.AssistantMessage(body, reasoning, calls, name, extra)


REPLY_KEYS = frozenset({"role", "content", "reasoning_content", "reasoning", "tool_calls", "name"})
"""Keys of a response message that belong in history; the rest (``refusal: null``, ``annotations: []``,
``audio``, ``function_call``) describe that response only, and some servers reject them when sent back."""


def from_openai_reply(message: Mapping[str, Any], *, index: int | None = None) -> msg.AssistantMessage:
    """A model's reply message (``choices[0].message``) as it belongs in history: only :data:`REPLY_KEYS`,
    and of those only the ones that carry something (not ``None``, not ``[]``)."""
    kept = {k: v for k, v in message.items() if k in REPLY_KEYS and v is not None and v != []}
    result = from_openai({**kept, "role": "assistant"}, index=index)
    assert isinstance(result, msg.AssistantMessage)  # the role says so
    return result


def messages_from_openai(items: Iterable[Mapping[str, Any]]) -> list[msg.Message]:
    """Read a list of OpenAI message dicts with :func:`from_openai`; errors name ``messages[i]``."""
    return [from_openai(d, index=i) for i, d in enumerate(items)]


# --- writing ------------------------------------------------------------------------------------


def _part_to_openai(part: msg.Part) -> dict[str, Any]:
    if isinstance(part, msg.TextPart):
        return {"type": "text", "text": part.text}
    image: dict[str, Any] = {"url": part.url}
    if part.detail is not None:
        image["detail"] = part.detail
    return {"type": "image_url", "image_url": image}


def _content_to_openai(content: msg.Content) -> str | list[dict[str, Any]]:
    if isinstance(content, str):
        return content
    return [_part_to_openai(p) for p in content]


def to_openai(m: msg.Message) -> dict[str, Any]:
    """Write one message as an OpenAI chat dict (the inverse of :func:`from_openai`)."""
    out: dict[str, Any]
    if isinstance(m, msg.SystemMessage):
        out = {"role": "developer" if m.developer else "system", "content": _content_to_openai(m.content)}
    elif isinstance(m, msg.UserMessage):
        out = {"role": "user", "content": _content_to_openai(m.content)}
    elif isinstance(m, msg.ToolMessage):
        out = {"role": "tool", "tool_call_id": m.tool_call_id, "content": _content_to_openai(m.content)}
    else:
        out = {"role": "assistant"}
        if m.content is not None:
            out["content"] = _content_to_openai(m.content)
        if m.reasoning is not None:
            out["reasoning_content"] = m.reasoning
        if m.tool_calls:
            call_extra: Mapping[str, Mapping[str, Any]] = m.extra.get(TOOL_CALL_EXTRA) or {}
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                    **copy.deepcopy(dict(call_extra.get(c.id, {}))),
                }
                for c in m.tool_calls
            ]
    if m.name is not None:
        out["name"] = m.name
    for key, value in m.extra.items():
        if key not in _RESERVED and key not in out:
            out[key] = copy.deepcopy(value)
    return out


def messages_to_openai(msgs: Iterable[msg.Message]) -> list[dict[str, Any]]:
    """Write messages as a list of OpenAI chat dicts."""
    return [to_openai(m) for m in msgs]


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def anthropic_extra(m: msg.Message) -> dict[str, Any]:
    """The ``extra`` keys of ``m`` that :func:`to_openai` never emits (:data:`ANTHROPIC_EXTRA_KEYS`, and the
    Responses API's items, :data:`~.responses.ITEMS_KEY`): what
    a stored form (the store's rows, the dialog archive's lines) keeps beside the OpenAI dict, so the
    message reads back equal (:func:`from_openai_stored`)."""
    return {k: v for k, v in m.extra.items() if k in _ASIDE}


def from_openai_stored(doc: Mapping[str, Any], kept: Mapping[str, Any] | None = None) -> msg.Message:
    """:func:`from_openai` for a dict read back from storage (the store, the dialog archive), with the
    :func:`anthropic_extra` keys ``kept`` beside it put back in ``extra``.

    Older versions stored lone surrogates (as ``\\udXXX`` escapes), which messages now refuse. Such a
    message reads back with each lone surrogate replaced by U+FFFD, so a session or an archive line stays
    usable; the replacement is the only change, and any other problem is raised as usual.
    """
    try:
        message = from_openai(doc)
    except MessageFormatError:
        scrubbed = _scrub_surrogates(doc)
        if scrubbed == doc:
            raise
        message = from_openai(scrubbed)
    return dataclasses.replace(message, extra={**message.extra, **kept}) if kept else message


def _scrub_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, Mapping):
        return {_scrub_surrogates(k): _scrub_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_surrogates(v) for v in value]
    return value
