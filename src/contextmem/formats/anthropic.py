"""Anthropic Messages API <-> contextmem messages.

Mapping (``to_anthropic`` and ``from_anthropic`` are inverses on everything the API sends back):

* system messages <-> the ``system`` parameter: a string, joined with blank lines. When a system message
  carries block keys (``cache_control`` from a list-shaped ``system``), a list of text blocks is returned
  instead, so the cache marker survives.
* assistant <-> blocks in the order ``thinking``, ``text``..., ``tool_use``...: the thinking text is
  ``reasoning`` and its signature ``extra["thinking_signature"]``; ``tool_use.input`` is
  ``json.loads(arguments or "{}")`` and ``arguments`` is ``json.dumps(input, ensure_ascii=False)``.
* a user message's ``tool_result`` blocks <-> one :class:`ToolMessage` each (``is_error`` in ``extra``),
  followed by a :class:`UserMessage` for its other blocks. Consecutive tool messages, and a list-content
  user message right after them, are merged back into one user message.
* images: a ``data:`` URI <-> a ``base64`` source, any other URL <-> a ``url`` source.

Nothing is dropped silently. Blocks contextmem has no field for (``redacted_thinking``, a second thinking
block, ``document``, server tool blocks, images with a ``file`` source, ...) are kept verbatim with their
position in ``extra["anthropic_blocks"]`` as ``[[index, block], ...]``; keys of mapped blocks beyond the
ones mapped (``cache_control``, ``citations``) are kept in ``extra["anthropic_block_keys"]`` as
``[[index, {key: value}], ...]``. Both are re-inserted on the way out. Malformed blocks raise
:class:`~contextmem.errors.MessageFormatError`.

Prompt caching: :func:`mark_cache_breakpoints` puts ``cache_control`` on a copy of a request body (the
stored messages never carry it unless they were read with it).

Known limits, by design: text or image blocks placed *after* ``tool_use`` blocks (or before ``tool_result``
blocks) come back in the canonical order above; OpenAI-only fields (``name``, image ``detail``, OpenAI
``extra`` keys) have no Anthropic form and are not sent; a tool result without ``content`` is read as ``""``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from .. import messages as msg
from ..errors import MessageFormatError, brief
from ..message_checks import MAX_NESTING, check_arguments, check_json_value
from ..messages import text_of
from ._checks import fail, require_list, require_mapping, require_str

__all__ = [
    "MAX_CACHE_BREAKPOINTS",
    "from_anthropic",
    "from_anthropic_reply",
    "mark_cache_breakpoints",
    "to_anthropic",
]

RAW_BLOCKS = "anthropic_blocks"
BLOCK_KEYS = "anthropic_block_keys"
SIGNATURE = "thinking_signature"

# Kept blocks and block keys are stored one level deeper than they sit on the wire ([index, block] pairs in
# ``extra``; two levels for the ``system`` list), so the wire is held that much under MAX_NESTING and what
# is read always passes check_message_text.
_MESSAGE_NESTING = MAX_NESTING - 1
_SYSTEM_NESTING = MAX_NESTING - 2

_MAPPED_KEYS: dict[str, frozenset[str]] = {
    "text": frozenset({"type", "text"}),
    "image": frozenset({"type", "source"}),
    "thinking": frozenset({"type", "thinking", "signature"}),
    "tool_use": frozenset({"type", "id", "name", "input"}),
    "tool_result": frozenset({"type", "tool_use_id", "content", "is_error"}),
}


# --- writing ------------------------------------------------------------------------------------


def _image_block(part: msg.ImagePart) -> dict[str, Any]:
    if part.url.startswith("data:") and ";base64," in part.url:
        media_type, data = part.url[len("data:") :].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": part.url}}


def _part_block(part: msg.Part) -> dict[str, Any]:
    if isinstance(part, msg.TextPart):
        return {"type": "text", "text": part.text}
    return _image_block(part)


def _content_blocks(content: msg.Content | None) -> list[dict[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [_part_block(p) for p in content]


def _restore(blocks: list[dict[str, Any]], extra: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Re-insert kept blocks at their positions and merge kept keys back into mapped blocks."""
    for index, block in extra.get(RAW_BLOCKS, ()):
        blocks.insert(min(index, len(blocks)), copy.deepcopy(block))
    for index, keys in extra.get(BLOCK_KEYS, ()):
        if index < len(blocks):
            blocks[index].update(copy.deepcopy(keys))
    return blocks


def _assistant_to_anthropic(m: msg.AssistantMessage) -> dict[str, Any]:
    if (
        isinstance(m.content, str)
        and m.reasoning is None
        and not m.tool_calls
        and not m.extra.get(RAW_BLOCKS)
        and not m.extra.get(BLOCK_KEYS)
    ):
        return {"role": "assistant", "content": m.content}
    blocks: list[dict[str, Any]] = []
    if m.reasoning is not None:
        thinking: dict[str, Any] = {"type": "thinking", "thinking": m.reasoning}
        if m.extra.get(SIGNATURE) is not None:
            thinking["signature"] = m.extra[SIGNATURE]
        blocks.append(thinking)
    blocks.extend(_content_blocks(m.content))
    for call in m.tool_calls:
        check_arguments(call.arguments, f"tool_calls[{brief(call.id)}].arguments")
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": json.loads(call.arguments or "{}"),
            }
        )
    return {"role": "assistant", "content": _restore(blocks, m.extra)}


def _tool_result_block(m: msg.ToolMessage) -> dict[str, Any]:
    content: str | list[dict[str, Any]] = (
        m.content if isinstance(m.content, str) else _content_blocks(m.content)
    )
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": content}
    if "is_error" in m.extra:
        block["is_error"] = m.extra["is_error"]
    return _restore([block], m.extra)[0]


def _system_param(systems: list[msg.SystemMessage]) -> str | list[dict[str, Any]] | None:
    if not systems:
        return None
    if not any(s.extra.get(BLOCK_KEYS) for s in systems):
        return "\n\n".join(text_of(s.content) for s in systems)
    return [_restore([{"type": "text", "text": text_of(s.content)}], s.extra)[0] for s in systems]


def to_anthropic(
    messages: Sequence[msg.Message],
) -> tuple[str | list[dict[str, Any]] | None, list[dict[str, Any]]]:
    """Split messages into Anthropic's ``(system, messages)``.

    ``system`` is a string (system messages joined by blank lines), ``None`` when there are none, or a list
    of text blocks when a system message carries block keys such as ``cache_control``.
    """
    systems: list[msg.SystemMessage] = []
    out: list[dict[str, Any]] = []
    open_results = False  # the last message in ``out`` is a user message of tool_result blocks
    for m in messages:
        if isinstance(m, msg.SystemMessage):
            systems.append(m)
            continue
        if isinstance(m, msg.ToolMessage):
            if not open_results:
                out.append({"role": "user", "content": []})
                open_results = True
            out[-1]["content"].append(_tool_result_block(m))
            continue
        if isinstance(m, msg.UserMessage):
            if open_results and not isinstance(m.content, str):
                out[-1]["content"].extend(_restore(_content_blocks(m.content), m.extra))
            elif isinstance(m.content, str) and not m.extra.get(RAW_BLOCKS) and not m.extra.get(BLOCK_KEYS):
                out.append({"role": "user", "content": m.content})
            else:
                out.append({"role": "user", "content": _restore(_content_blocks(m.content), m.extra)})
        else:
            out.append(_assistant_to_anthropic(m))
        open_results = False
    return _system_param(systems), out


# --- prompt-cache breakpoints -------------------------------------------------------------------

MAX_CACHE_BREAKPOINTS = 4
"""Blocks one request may mark with ``cache_control`` (the API rejects more)."""

_EPHEMERAL = {"type": "ephemeral"}
_UNMARKABLE = frozenset({"thinking", "redacted_thinking"})  # the API refuses cache_control on these


def _marked(block: Any) -> bool:
    return isinstance(block, Mapping) and "cache_control" in block


def _markable(block: Any) -> bool:
    if not isinstance(block, Mapping) or block.get("type") in _UNMARKABLE:
        return False
    return block.get("type") != "text" or bool(block.get("text"))  # an empty text block cannot be cached


def _starts_turn(message: Mapping[str, Any]) -> bool:
    """A user message with something besides tool results: where a turn starts."""
    content = message.get("content")
    if message.get("role") != "user":
        return False
    return isinstance(content, str) or any(
        not isinstance(b, Mapping) or b.get("type") != "tool_result" for b in content or ()
    )


def _breakpoint_messages(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indexes of the messages to mark, most valuable first: the newest message (what this call adds),
    the end of the previous call (the user message before the newest one), the end of the previous turn
    (the message before the newest turn starts, the same for every call of this turn)."""
    last = len(messages) - 1
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    turns = [i for i in users if _starts_turn(messages[i])]
    wanted = [last, users[-2] if len(users) > 1 else -1, turns[-1] - 1 if turns else -1]
    return list(dict.fromkeys(i for i in wanted if i >= 0))


def _mark_last(blocks: list[Any]) -> list[Any] | None:
    """``blocks`` with the last markable one marked (a copy), ``None`` if marked already or none can be."""
    for j in range(len(blocks) - 1, -1, -1):
        if _marked(blocks[j]):
            return None
        if _markable(blocks[j]):
            return [*blocks[:j], {**blocks[j], "cache_control": dict(_EPHEMERAL)}, *blocks[j + 1 :]]
    return None


def _as_blocks(content: Any) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or ())


def mark_cache_breakpoints(body: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of an Anthropic request ``body`` with ``cache_control`` breakpoints where later calls reuse
    the prefix: the end of tools + system (the ``system`` block, else the last tool), the newest message,
    the end of the previous call and the end of the previous turn (:func:`_breakpoint_messages`).

    A string ``system`` or message content becomes one text block, the only form that carries a marker.
    Markers already in the body are kept and count against :data:`MAX_CACHE_BREAKPOINTS`; ``body`` itself
    and everything in it are left unchanged.
    """
    out = dict(body)
    messages = list(out.get("messages") or ())
    blocks = [b for m in messages if not isinstance(m.get("content"), str) for b in m.get("content") or ()]
    system = out.get("system")
    existing = [*blocks, *(out.get("tools") or ()), *(system if isinstance(system, list) else ())]
    room = MAX_CACHE_BREAKPOINTS - sum(map(_marked, existing))
    if room <= 0:
        return out
    if system:
        if (marked := _mark_last(_as_blocks(system))) is not None:
            out["system"], room = marked, room - 1
    elif out.get("tools") and (tools := _mark_last(list(out["tools"]))) is not None:
        out["tools"], room = tools, room - 1
    for i in _breakpoint_messages(messages):
        if room <= 0:
            break
        if (content := _mark_last(_as_blocks(messages[i].get("content")))) is not None:
            messages[i] = {**messages[i], "content": content}
            room -= 1
    out["messages"] = messages
    return out


# --- reading ------------------------------------------------------------------------------------


def _block_type(block: Any, path: str) -> str:
    kind = block.get("type") if isinstance(block, Mapping) else None
    if not isinstance(kind, str):
        raise MessageFormatError(
            path,
            f"must be a content block with a 'type', got {brief(block)}",
            'write blocks like {"type": "text", ...}',
        )
    return kind


def _str_field(block: Mapping[str, Any], key: str, path: str, fix: str, *, non_empty: bool = False) -> str:
    return require_str(block.get(key), f"{path}.{key}", fix, non_empty=non_empty)


def _image_part(block: Mapping[str, Any]) -> msg.ImagePart | None:
    """The image as a part, or ``None`` when its source has no URL form (kept verbatim instead)."""
    source = block.get("source")
    if not isinstance(source, Mapping):
        return None
    if source.get("type") == "base64" and set(source) == {"type", "media_type", "data"}:
        media_type, data = source["media_type"], source["data"]
        if isinstance(media_type, str) and isinstance(data, str):
            return msg.ImagePart(f"data:{media_type};base64,{data}")
    if source.get("type") == "url" and set(source) == {"type", "url"} and isinstance(source["url"], str):
        return msg.ImagePart(source["url"])
    return None


def _part(block: Mapping[str, Any], kind: str, path: str) -> msg.Part | None:
    if kind == "text":
        return msg.TextPart(_str_field(block, "text", path, "put the block's text in 'text' as a str"))
    if kind == "image":
        return _image_part(block)
    return None


class _Blocks:
    """Collects what a list of blocks maps to, and what must be kept verbatim to restore it."""

    def __init__(self) -> None:
        self.extra: dict[str, Any] = {}
        self.count = 0  # blocks seen, i.e. the index the next block will have on the way out

    def keep(self, block: Mapping[str, Any]) -> None:
        self.extra.setdefault(RAW_BLOCKS, []).append([self.count, copy.deepcopy(dict(block))])
        self.count += 1

    def mapped(self, block: Mapping[str, Any], kind: str) -> None:
        keys = {k: copy.deepcopy(v) for k, v in block.items() if k not in _MAPPED_KEYS[kind]}
        if keys:
            self.extra.setdefault(BLOCK_KEYS, []).append([self.count, keys])
        self.count += 1


def _content_list(value: Any, path: str) -> list[Any]:
    return require_list(
        value,
        path,
        "a string or a list of content blocks",
        'pass the text as a str, or blocks like [{"type": "text", "text": "..."}]',
    )


def _typed_blocks(content: Any, path: str) -> Iterator[tuple[Any, str, str]]:
    """``(block, type, block path)`` for each block of a content list, checking the list and each type."""
    for j, block in enumerate(_content_list(content, path)):
        block_path = f"{path}[{j}]"
        yield block, _block_type(block, block_path), block_path


def _tool_message(block: Mapping[str, Any], path: str) -> msg.ToolMessage:
    call_id = _str_field(
        block, "tool_use_id", path, "set 'tool_use_id' to the id of the tool_use it answers", non_empty=True
    )
    collected = _Blocks()
    collected.mapped(block, "tool_result")
    extra = collected.extra
    if "is_error" in block:
        if not isinstance(block["is_error"], bool):
            fail(f"{path}.is_error", "a bool", block["is_error"], "pass true or false")
        extra["is_error"] = block["is_error"]
    raw = block.get("content", "")
    if isinstance(raw, str):
        return msg.ToolMessage(call_id, raw, extra=extra)
    parts: list[msg.Part] = []
    for item, kind, item_path in _typed_blocks(raw, f"{path}.content"):
        part = _part(item, kind, item_path)
        if part is None or set(item) != _MAPPED_KEYS[kind]:
            raise MessageFormatError(
                item_path,
                f"unsupported block in a tool result: {brief(item)}",
                "use plain text blocks or base64/url image blocks inside tool_result content",
            )
        parts.append(part)
    return msg.ToolMessage(call_id, tuple(parts), extra=extra)


def _user_messages(content: Any, path: str) -> list[msg.Message]:
    if isinstance(content, str):
        return [msg.UserMessage(content)]
    results: list[msg.Message] = []
    parts: list[msg.Part] = []
    rest = _Blocks()
    for block, kind, block_path in _typed_blocks(content, path):
        if kind == "tool_result":
            results.append(_tool_message(block, block_path))
            continue
        part = _part(block, kind, block_path)
        if part is None:
            rest.keep(block)
        else:
            parts.append(part)
            rest.mapped(block, kind)
    if rest.count or not results:
        results.append(msg.UserMessage(tuple(parts), extra=rest.extra))
    return results


def _assistant_message(content: Any, path: str) -> msg.AssistantMessage:
    if isinstance(content, str):
        return msg.AssistantMessage(content)
    reasoning: str | None = None
    parts: list[msg.Part] = []
    calls: list[msg.ToolCall] = []
    blocks = _Blocks()
    for block, kind, block_path in _typed_blocks(content, path):
        if kind == "thinking" and reasoning is None:
            reasoning = _str_field(
                block, "thinking", block_path, "put the thinking text in 'thinking' as a str"
            )
            if "signature" in block:
                blocks.extra[SIGNATURE] = _str_field(
                    block, "signature", block_path, "keep the signature as sent"
                )
            blocks.mapped(block, kind)
        elif kind == "tool_use":
            calls.append(_tool_call(block, block_path))
            blocks.mapped(block, kind)
        elif (part := _part(block, kind, block_path)) is not None:
            parts.append(part)
            blocks.mapped(block, kind)
        else:
            blocks.keep(block)
    return msg.AssistantMessage(tuple(parts) if parts else None, reasoning, tuple(calls), extra=blocks.extra)


def _tool_call(block: Mapping[str, Any], path: str) -> msg.ToolCall:
    fix = "give every tool_use block the 'id' and 'name' the model returned"
    call_id = _str_field(block, "id", path, fix, non_empty=True)  # as OpenAI's reader, which reads it back
    name = _str_field(block, "name", path, fix, non_empty=True)
    arguments = require_mapping(
        block.get("input", {}), f"{path}.input", 'pass the tool input as an object, e.g. {"q": 1}'
    )
    return msg.ToolCall(call_id, name, json.dumps(arguments, ensure_ascii=False))


def _system_messages(system: str | list[Any] | None) -> list[msg.Message]:
    if system is None:
        return []
    if isinstance(system, str):
        return [msg.SystemMessage(system)]
    out: list[msg.Message] = []
    for block, kind, path in _typed_blocks(system, "system"):
        if kind != "text":
            fail(path, "a text block", block, "put only text blocks in system")
        text = _str_field(block, "text", path, "put the system text in 'text' as a str")
        kept = _Blocks()
        kept.mapped(block, "text")
        out.append(msg.SystemMessage(text, extra=kept.extra))
    return out


def from_anthropic(
    messages: Iterable[Mapping[str, Any]], system: str | list[Any] | None = None, *, start: int = 0
) -> list[msg.Message]:
    """Read Anthropic ``messages`` (and the ``system`` parameter) into contextmem messages.

    Each input is checked first (:func:`~contextmem.message_checks.check_json_value`): a lone surrogate or too
    deep a nesting is a :class:`MessageFormatError` naming the path, never a :class:`RecursionError`.
    Paths count the messages from ``start`` (``messages[start]`` is the first).
    """
    check_json_value(system, "system", limit=_SYSTEM_NESTING)
    out = _system_messages(system)
    for i, d in enumerate(messages, start):
        path = f"messages[{i}]"
        check_json_value(d, path, limit=_MESSAGE_NESTING)
        if not isinstance(d, Mapping):
            fail(path, "a dict", d, "pass a message dict")
        unknown = sorted(set(d) - {"role", "content"})
        if unknown:
            raise MessageFormatError(
                f"{path}.{unknown[0]}",
                f"is not a key of an Anthropic message (value {brief(d[unknown[0]])})",
                "keep only 'role' and 'content'",
            )
        role = d.get("role")
        if role == "user":
            out.extend(_user_messages(d.get("content"), f"{path}.content"))
        elif role == "assistant":
            out.append(_assistant_message(d.get("content"), f"{path}.content"))
        else:
            raise MessageFormatError(
                f"{path}.role",
                f"must be 'user' or 'assistant', got {brief(role)}",
                "pass the system prompt as system=..., and use only user/assistant roles in messages",
            )
    return out


def from_anthropic_reply(blocks: Sequence[Mapping[str, Any]], *, index: int = 0) -> msg.AssistantMessage:
    """A model's reply (its ``content`` blocks) as it belongs in history: the ``null`` fields of each block
    (``citations: null``) are dropped, and a reply of one plain text block reads as a string, as OpenAI's
    does."""
    clean = [{k: v for k, v in b.items() if v is not None} if isinstance(b, Mapping) else b for b in blocks]
    (message,) = from_anthropic([{"role": "assistant", "content": clean}], start=index)
    assert isinstance(message, msg.AssistantMessage)  # the role says so
    content = message.content
    if isinstance(content, tuple) and len(content) == 1 and isinstance(content[0], msg.TextPart):
        message = dataclasses.replace(message, content=content[0].text)
    return message
