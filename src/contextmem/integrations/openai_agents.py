"""OpenAI Agents SDK: a ``Session`` backed by contextmem, so any agent gets compaction and the archive.

Swap the session and nothing else::

    cm = await ContextMem.open(settings)
    tools = agent_tool_specs(agent)
    session = ContextMemSession(cm, "user-42", system_prompt=agent.instructions, tools=tools)
    await Runner.run(agent, "hello", session=session)

``get_items`` returns what :meth:`ContextEngine.build` assembles — the running summary (as a ``developer``
item) and the budget-fitted live history — instead of every item ever stored; what left the context is in
the dialog archive. Pass the agent's instructions and tools so the fit leaves room for them.

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
from typing import TYPE_CHECKING, Any, cast

from .. import (
    AssistantMessage,
    Content,
    ContextEngine,
    ContextMem,
    ImagePart,
    Message,
    MissingExtraError,
    Part,
    Request,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
    text_of,
)

try:
    from agents.memory.session_settings import SessionSettings
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("agents", "openai-agents") from exc

if TYPE_CHECKING:
    from agents import Agent
    from agents.items import TResponseInputItem

__all__ = ["ITEMS_KEY", "ContextMemSession", "agent_tool_specs", "items_to_messages", "messages_to_items"]

ITEMS_KEY = "agents_items"
"""``extra`` key holding the Agents SDK items a message was made from."""

Item = Mapping[str, Any]


# --- items -> messages --------------------------------------------------------------------------


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


# --- the session ---------------------------------------------------------------------------------


def agent_tool_specs(agent: Agent[Any]) -> list[ToolSpec]:
    """The function tools of an agent as :class:`ToolSpec`, so the budget leaves room for them."""
    from agents import FunctionTool

    return [
        ToolSpec(t.name, t.description, t.params_json_schema)
        for t in agent.tools
        if isinstance(t, FunctionTool)
    ]


class ContextMemSession:
    """An Agents SDK ``Session`` over one contextmem session (its store, archive and summary).

    ``system_prompt`` and ``tools`` are what the agent sends besides the history: the history is fitted
    to what is left of the window after them and the output reserve.
    """

    def __init__(
        self,
        runtime: ContextMem,
        session_id: str,
        *,
        system_prompt: str = "",
        tools: Sequence[ToolSpec] = (),
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.runtime = runtime
        self.session_id = session_id
        self.session_settings = session_settings
        self.system_prompt = system_prompt
        self.tools = tuple(tools)
        self._engine: ContextEngine | None = None

    async def engine(self) -> ContextEngine:
        """The session's engine, opened (and restored from the store) on first use."""
        if self._engine is None:
            self._engine = await self.runtime.session(self.session_id)
        return self._engine

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The summary and the budget-fitted history (compacting first when over budget)."""
        engine = await self.engine()
        summary, history = _summary_and_history(engine, await engine.build(self.system_prompt, self.tools))
        items = messages_to_items([SystemMessage(summary), *history] if summary else history)
        if limit is not None:
            items = items[max(len(items) - limit, 0) :]
        return cast("list[TResponseInputItem]", items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        engine = await self.engine()
        messages = items_to_messages(cast("list[Item]", items))
        if not messages:
            return
        await engine.add(*messages)
        last = messages[-1]
        if isinstance(last, AssistantMessage) and not last.tool_calls:  # the turn is over
            await engine.end_turn()

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove the newest item. Its message leaves through the engine (archived first, never lost);
        the other items of its group, if any, come back as a new message."""
        engine = await self.engine()
        message = await engine.pop_newest()
        if message is None:
            return None
        items = messages_to_items([message])
        if len(items) > 1:
            await engine.add(*items_to_messages(items[:-1]))
        return cast("TResponseInputItem", items[-1])

    async def clear_session(self) -> None:
        """Everything leaves the context (archived first) and the summary is reset."""
        await (await self.engine()).clear()


def _summary_and_history(engine: ContextEngine, request: Request) -> tuple[str, list[Message]]:
    """A built request split for the SDK: the running summary (a ``developer`` item) and the history.

    The agent sends its instructions itself, so the request's system message (the system prompt, and
    the summary when it is injected there) is not sent as an item; the summary is read from the engine,
    not cut out of that message. With ``summary_injection="first_user"`` the summary already is in the
    history's first user message.
    """
    messages = list(request.messages)
    if messages and isinstance(messages[0], SystemMessage):
        messages.pop(0)
    summary = engine.summary
    in_system = summary is not None and engine.settings.summary_injection == "system"
    return (summary.render() if summary is not None and in_system else ""), messages
