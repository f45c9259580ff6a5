"""OpenAI Responses-API input items ⇄ contextmem messages (the wire format of the OpenAI Agents SDK).

Items are Responses-API input items. They are mapped to contextmem messages at the edge, one message per
run of items: a user/system/developer message becomes a user message; consecutive assistant-side items
(output message, reasoning, ``*_call`` items with a ``call_id``, hosted-tool items) become one assistant
message whose tool calls are the ``call_id`` items; each ``*_call_output`` becomes a tool result, so the
engine keeps every call with its output. Every message carries its source items in ``extra``; while the
message still is what those items map to, they are returned verbatim (ids, reasoning signatures, images),
and a message the engine rewrote (a cut tool result) is rebuilt from its fields.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..messages import (
    AssistantMessage,
    Content,
    ImagePart,
    Message,
    Part,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
    text_of,
)
from ._checks import fail, require_list, require_mapping, require_str

__all__ = ["ITEMS_KEY", "check_item", "is_item", "items_to_messages", "messages_to_items"]

ITEMS_KEY = "agents_items"
"""``extra`` key holding the Agents SDK items a message was made from."""

Item = Mapping[str, Any]


# --- items -> messages --------------------------------------------------------------------------

_ITEM_FIX = (
    "pass the Responses API's items as they came (engine.add(*response.output)), or a chat message dict"
)
_ROLES = ("user", "system", "developer", "assistant")


def is_item(value: Mapping[str, Any]) -> bool:
    """Whether a dict is a Responses-API item rather than a chat message: chat messages carry no ``type``;
    items do (``message``, ``reasoning``, ``function_call``, ``*_call``, ``*_call_output``)."""
    kind = value.get("type")
    if not isinstance(kind, str):
        return False
    return kind in ("message", "reasoning") or kind.endswith(("_call", "_call_output"))


def check_item(item: Mapping[str, Any], where: str) -> None:
    """Refuse an item :func:`items_to_messages` could not map, with the one format error: a message item's
    role and content, a call's ``call_id``, ``name`` and ``arguments``, an output's ``call_id``, a
    reasoning item's summary texts, each of the type it must be; a hosted tool's item (kept as its JSON)
    must be JSON."""
    kind = str(item.get("type"))
    if kind == "message":
        if item.get("role") not in _ROLES:
            fail(f"{where}.role", "'user', 'system', 'developer' or 'assistant'", item.get("role"), _ITEM_FIX)
        content = item.get("content")
        if not isinstance(content, str):
            parts = require_list(content, f"{where}.content", "a string or a list of parts", _ITEM_FIX)
            for j, part in enumerate(parts):
                require_mapping(part, f"{where}.content[{j}]", _ITEM_FIX)
    elif kind == "reasoning":
        summary = require_list(item.get("summary") or [], f"{where}.summary", "a list", _ITEM_FIX)
        for j, part in enumerate(summary):
            text = require_mapping(part, f"{where}.summary[{j}]", _ITEM_FIX).get("text", "")
            require_str(text, f"{where}.summary[{j}].text", _ITEM_FIX)
    elif kind.startswith("function_call") or "call_id" in item:
        require_str(item.get("call_id"), f"{where}.call_id", _ITEM_FIX, non_empty=True)
        if kind == "function_call":
            require_str(item.get("name"), f"{where}.name", _ITEM_FIX, non_empty=True)
            require_str(item.get("arguments") or "{}", f"{where}.arguments", _ITEM_FIX)
    if _is_output(item) and isinstance(item.get("output"), list):  # parts, as a message's content
        for j, part in enumerate(item["output"]):
            require_mapping(part, f"{where}.output[{j}]", _ITEM_FIX)
    if kind != "message" and not _is_output(item):  # kept as its JSON text: a call's, a hosted tool's
        try:
            json.dumps(dict(item), ensure_ascii=False)
        except (TypeError, ValueError):
            fail(where, "a JSON object", item, _ITEM_FIX, show_type=True)


def _is_user_side(item: Item) -> bool:
    return item.get("role") in ("user", "system", "developer") and item.get("type", "message") == "message"


def _is_output(item: Item) -> bool:
    kind = str(item.get("type", ""))
    return kind.endswith("_call_output") and "call_id" in item


def _is_call(item: Item) -> bool:
    kind = str(item.get("type", ""))
    return kind.endswith("_call") and "call_id" in item


def _content(value: Any) -> Content:
    """Message content: a string stays a string; text and image parts are kept, others as their JSON."""
    if isinstance(value, str):
        return value
    parts: list[Part] = []
    for part in value or ():
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            parts.append(TextPart(str(part.get("text", ""))))
        elif kind == "refusal":
            parts.append(TextPart(str(part.get("refusal", ""))))
        elif kind == "input_image" and part.get("image_url"):
            parts.append(ImagePart(str(part["image_url"]), part.get("detail")))
        else:
            parts.append(TextPart(json.dumps(part, ensure_ascii=False)))
    return tuple(parts)


def _output_content(value: Any) -> Content:
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return _content(value)
    return json.dumps(value, ensure_ascii=False)


def _assistant(items: Sequence[Item]) -> AssistantMessage:
    texts: list[str] = []
    reasoning: list[str] = []
    calls: list[ToolCall] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            texts.append(text_of(_content(item.get("content"))))
        elif kind == "reasoning":
            reasoning.extend(str(s.get("text", "")) for s in item.get("summary") or ())
        elif kind == "function_call":
            calls.append(
                ToolCall(str(item["call_id"]), str(item["name"]), str(item.get("arguments") or "{}"))
            )
        elif _is_call(item):  # computer, shell, custom tools...: the item itself is the call's arguments
            calls.append(ToolCall(str(item["call_id"]), str(item.get("name") or kind), json.dumps(item)))
        else:  # a hosted tool (web search, file search, ...): call and result in one item
            texts.append(json.dumps(item, ensure_ascii=False))
    return AssistantMessage(
        "\n".join(texts) if texts else None,
        "\n".join(reasoning) if reasoning else None,
        tuple(calls),
        extra={ITEMS_KEY: [dict(i) for i in items]},
    )


def items_to_messages(items: Iterable[Item]) -> list[Message]:
    """Agents SDK input items -> contextmem messages (see the module docstring for the grouping)."""
    out: list[Message] = []
    pending: list[Item] = []  # assistant-side items of the current group
    for item in items:
        if _is_user_side(item) or _is_output(item):
            if pending:
                out.append(_assistant(pending))
                pending = []
            if _is_output(item):
                out.append(
                    ToolMessage(
                        str(item["call_id"]),
                        _output_content(item.get("output")),
                        extra={ITEMS_KEY: [dict(item)]},
                    )
                )
            else:
                out.append(UserMessage(_content(item.get("content")), extra={ITEMS_KEY: [dict(item)]}))
        else:
            pending.append(item)
    if pending:
        out.append(_assistant(pending))
    return out


# --- messages -> items --------------------------------------------------------------------------


def _text_content(content: Content | None, part_type: str) -> str | list[dict[str, Any]]:
    if content is None or isinstance(content, str):
        return content or ""
    return [
        {"type": part_type, "text": p.text}
        if isinstance(p, TextPart)
        else {"type": "input_image", "image_url": p.url, "detail": p.detail or "auto"}
        for p in content
    ]


def _rebuilt(message: Message) -> list[dict[str, Any]]:
    """Items made from the message's fields alone (it was rewritten by the engine, or never had items)."""
    if isinstance(message, SystemMessage):
        return [{"role": "developer", "content": text_of(message.content)}]
    if isinstance(message, UserMessage):
        return [{"role": "user", "content": _text_content(message.content, "input_text")}]
    if isinstance(message, ToolMessage):
        source = (message.extra.get(ITEMS_KEY) or [{}])[0]
        item = {k: v for k, v in source.items() if k != "output"}
        item.update(type=item.get("type", "function_call_output"), call_id=message.tool_call_id)
        item["output"] = text_of(message.content)
        return [item]
    items: list[dict[str, Any]] = []
    if message.content is not None:
        items.append({"role": "assistant", "content": text_of(message.content)})
    items.extend(
        {"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
        for c in message.tool_calls
    )
    return items


def messages_to_items(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """contextmem messages -> Agents SDK input items: the source items verbatim while still accurate."""
    out: list[dict[str, Any]] = []
    for message in messages:
        source = message.extra.get(ITEMS_KEY)
        if source and _same(items_to_messages(source), message):
            out.extend(dict(item) for item in source)
        else:
            out.extend(_rebuilt(message))
    return out


def _same(view: list[Message], message: Message) -> bool:
    return len(view) == 1 and replace(view[0], extra={}) == replace(message, extra={})
