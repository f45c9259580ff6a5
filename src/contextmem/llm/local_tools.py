"""The local model's tool calls: offered through its own chat template, read back from its text.

llama.cpp's chat handlers render ``tools`` into the prompt when the GGUF's chat template takes them
(Qwen2.5's does, in the format the model was trained on), but hand the model's answer back as plain text.
Measured on the packaged Qwen2.5-Coder-1.5B: told of the tools as text it "cannot call", it
answered "Remember that my code word is BLUEHERON" with "I remember that your code word is BLUEHERON." and
nothing was written; offered them through its template, it answered with a ``memory_write`` call, in
English and in Chinese. It writes that call as a JSON object ``{"name": ..., "arguments": {...}}`` — bare,
fenced as ```json, or inside ``<tool_call>`` tags as the template asks; at temperature 0, in the doubled
braces of the template's own example — so all of these are read back here, for the tools offered only.
A template without tools gets them as text, as before (:func:`~contextmem.formats.llama.to_llama_messages`).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field

from ..messages import ToolCall

__all__ = ["CallHold", "read_tool_calls", "template_takes_tools"]

_TAGGED = re.compile(r"<tool_call>\s*(?P<body>.*?)\s*(?:</tool_call>|$)", re.DOTALL)
_FENCED = re.compile(r"```(?:json)?\s*(?P<body>\{.*?\})\s*```", re.DOTALL)
OPENERS = ("<tool_call>", "```", "{")
"""How a reply that is a tool call starts: its text is held back until it is clearly not one."""


def template_takes_tools(template: str) -> bool:
    """Whether a chat template renders the ``tools`` it is given (else the model would never see them)."""
    return bool(re.search(r"\btools\b", template))


def _call(body: str, names: Collection[str]) -> ToolCall | None:
    """``{"name": N, "arguments": {...}}`` naming an offered tool as a call with a fresh id, else None."""
    try:
        value = json.loads(body)
    except json.JSONDecodeError:
        # At temperature 0 the 1.5B model copies the template's ``{{"name": ..., "arguments": ...}}``.
        if not (body.startswith("{{") and body.endswith("}}")):
            return None
        try:
            value = json.loads(body[1:-1])
        except json.JSONDecodeError:
            return None
    if not isinstance(value, dict) or value.get("name") not in names:
        return None
    arguments = value.get("arguments", value.get("parameters", {}))
    if isinstance(arguments, str):
        return ToolCall(f"call_{uuid.uuid4().hex[:16]}", value["name"], arguments)
    if not isinstance(arguments, dict):
        return None
    text = json.dumps(arguments, ensure_ascii=False)
    return ToolCall(f"call_{uuid.uuid4().hex[:16]}", value["name"], text)


def read_tool_calls(text: str, names: Collection[str]) -> tuple[str, tuple[ToolCall, ...]]:
    """The reply's text without its tool calls, and the calls (ids unique across sessions).

    A call is a JSON object naming one of ``names``, in ``<tool_call>`` tags, in a code fence, or the whole
    reply; anything else (JSON about something else, a tool that was not offered) stays text.
    """
    if not names:
        return text, ()
    calls: list[ToolCall] = []

    def take(match: re.Match[str]) -> str:
        call = _call(match["body"], names)
        if call is None:
            return match[0]
        calls.append(call)
        return ""

    rest = _FENCED.sub(take, _TAGGED.sub(take, text))
    if not calls and (whole := _call(text.strip(), names)) is not None:
        return "", (whole,)
    return rest.strip() if calls else text, tuple(calls)


@dataclass
class CallHold:
    """Streams a reply's text unless it may be a tool call: text that starts like one (:data:`OPENERS`)
    is held back, and read at the end by :func:`read_tool_calls`; anything else is handed out as it
    comes, so a plain answer still streams."""

    holding: bool = True
    held: list[str] = field(default_factory=list)

    def feed(self, delta: str) -> str:
        """What of ``delta`` (and what was held) to hand out now."""
        if not self.holding:
            return delta
        self.held.append(delta)
        so_far = "".join(self.held).lstrip()
        if not so_far or any(so_far.startswith(o) or o.startswith(so_far) for o in OPENERS):
            return ""
        self.holding = False
        return "".join(self.held)
