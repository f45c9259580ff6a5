"""contextmem messages -> the plain chat dicts of a llama.cpp model's own chat template.

The local model (:mod:`contextmem.llm.local`) renders these with ``create_chat_completion``. Mapping:

* system, user and assistant map to the chat roles of the same names, their content as text (an image
  becomes a line ``[image omitted]``);
* small models cannot make native tool calls, so tools are *text*: an assistant's tool calls become lines
  ``[tool call <id>] <name>(<arguments>)``, a tool result becomes a user message headed
  ``[tool result <id>]`` (``... from <name>]`` when named), and tool definitions are listed in the system
  prompt (:func:`render_tools`) — unless the model's chat template takes them, when the local adapter
  offers them through it and reads the calls back (:mod:`contextmem.llm.local_tools`);
* consecutive messages of one role are merged with a blank line, because several chat templates reject
  two user turns in a row.

One way only: a reply is read back by the adapter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    ToolSpec,
    UserMessage,
    image_count,
    text_of,
)

__all__ = ["render_tools", "to_llama_messages", "with_tools_listed"]


def _content_text(content: Any) -> str:
    text = text_of(content)
    images = image_count(content)
    return text + "\n[image omitted]" * images if images else text


def render_tools(tools: Sequence[ToolSpec]) -> str:
    """Tool definitions as text for a model without native tool calling."""
    lines = ["Tools used in this conversation (shown as text; you cannot call them):"]
    lines += [f"- {t.name}: {t.description}" if t.description else f"- {t.name}" for t in tools]
    return "\n".join(lines)


def to_llama_messages(messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> list[dict[str, str]]:
    """Our messages as plain ``{"role", "content"}`` chat dicts (the rules are in the module docstring)."""
    out: list[dict[str, str]] = []

    def add(role: str, text: str) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"] += "\n\n" + text
        else:
            out.append({"role": role, "content": text})

    for msg in messages:
        if isinstance(msg, SystemMessage):
            add("system", _content_text(msg.content))
        elif isinstance(msg, UserMessage):
            add("user", _content_text(msg.content))
        elif isinstance(msg, AssistantMessage):
            parts = [_content_text(msg.content)] if msg.content else []
            parts += [f"[tool call {c.id}] {c.name}({c.arguments})" for c in msg.tool_calls]
            add("assistant", "\n".join(parts))
        elif isinstance(msg, ToolMessage):
            head = f"[tool result {msg.tool_call_id}" + (f" from {msg.name}]" if msg.name else "]")
            add("user", f"{head}\n{_content_text(msg.content)}")
    return with_tools_listed(out, tools)


def with_tools_listed(messages: list[dict[str, str]], tools: Sequence[ToolSpec]) -> list[dict[str, str]]:
    """``messages`` with the tools listed as text in the system prompt (:func:`render_tools`)."""
    if not tools:
        return messages
    out = [dict(m) for m in messages]
    if out and out[0]["role"] == "system":
        out[0]["content"] += "\n\n" + render_tools(tools)
    else:
        out.insert(0, {"role": "system", "content": render_tools(tools)})
    return out
