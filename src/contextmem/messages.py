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
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from .errors import HistoryError, MessageFormatError


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


def check_arguments(arguments: str, field_path: str) -> None:
    """Tool-call arguments must be JSON text of an object (``""`` is accepted as "no arguments")."""
    if arguments == "":
        return
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as exc:
        raise MessageFormatError(
            field_path,
            f"is not valid JSON ({exc.msg} at char {exc.pos}): {arguments[:80]!r}",
            "pass the arguments as a JSON object string, e.g. json.dumps({...})",
        ) from None
    if not isinstance(value, dict):
        raise MessageFormatError(
            field_path,
            f"must be a JSON object, got {type(value).__name__}: {arguments[:80]!r}",
            'wrap the arguments in an object, e.g. {"value": ...}',
        )


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
                    f"history[{i}] is a tool result for call {msg.tool_call_id!r} with no matching "
                    "assistant tool call right before it. Fix: keep each tool result directly after "
                    "the assistant message that made the call."
                )
            del pending[msg.tool_call_id]
            continue
        if pending:
            raise HistoryError(
                f"history[{i}] ({msg.kind}) comes before the results of tool calls "
                f"{sorted(pending)!r}. Fix: append every tool result right after its assistant call."
            )
        if isinstance(msg, AssistantMessage):
            for call in msg.tool_calls:
                if call.id in pending:
                    raise HistoryError(f"history[{i}] repeats tool call id {call.id!r}. Fix: use unique ids.")
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
