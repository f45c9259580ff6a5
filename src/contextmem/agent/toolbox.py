"""Tools the agent can call: a small protocol, a function adapter, and the memory tools (M5).

A tool is a name, a description, a JSON schema of its arguments and an async ``call`` returning text.
:class:`Toolbox` is the one dispatcher: unknown tools, bad JSON and tools that raise come back to the
model as ``error: ...`` text (the model can recover), never as exceptions that would end the turn.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ..errors import ConfigError
from ..llm.base import ToolSpec
from ..logs import get_logger
from ..messages import ToolCall

if TYPE_CHECKING:
    from ..memory import MemoryTools

logger = get_logger("contextmem.agent")

__all__ = ["FunctionTool", "MemoryTool", "Tool", "Toolbox", "memory_tools"]


@runtime_checkable
class Tool(Protocol):
    """What the agent needs from a tool. ``parameters`` is a JSON schema (``{"type": "object", ...}``)."""

    @property
    def name(self) -> str: ...
    @property
    def description(self) -> str: ...
    @property
    def parameters(self) -> Mapping[str, Any]: ...

    async def call(self, arguments: Mapping[str, Any]) -> str: ...


@dataclass(frozen=True, slots=True)
class FunctionTool:
    """A plain function (sync or async) as a tool; it receives the arguments as keyword arguments."""

    name: str
    description: str
    function: Callable[..., Any]
    parameters: Mapping[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})

    async def call(self, arguments: Mapping[str, Any]) -> str:
        if inspect.iscoroutinefunction(self.function):
            result = await self.function(**arguments)
        else:
            result = await asyncio.to_thread(lambda: self.function(**arguments))
        if inspect.isawaitable(result):
            result = await result
        return result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)


@dataclass(frozen=True, slots=True)
class MemoryTool:
    """One of the four memory tools, bound to a namespace's :class:`~contextmem.memory.MemoryTools`."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    tools: MemoryTools

    async def call(self, arguments: Mapping[str, Any]) -> str:
        return await self.tools.acall(self.name, arguments)


def memory_tools(tools: MemoryTools) -> list[Tool]:
    """``memory_search``, ``memory_get``, ``memory_write`` and ``read_file`` as agent tools."""
    return [
        MemoryTool(name, schema["description"], schema["parameters"], tools)
        for name, schema in tools.schemas.items()
    ]


class Toolbox:
    """The agent's tools by name, their specs for the model, and the one place tool calls are run."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ConfigError(f"two tools are named {tool.name!r}. Fix: give each tool a unique name")
        self._tools[tool.name] = tool

    def __len__(self) -> int:
        return len(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    @property
    def specs(self) -> tuple[ToolSpec, ...]:
        return tuple(ToolSpec(t.name, t.description, dict(t.parameters)) for t in self._tools.values())

    async def run(self, call: ToolCall) -> str:
        """Run one tool call; every failure becomes ``error: ...`` text for the model."""
        tool = self._tools.get(call.name)
        if tool is None:
            return f"error: unknown tool {call.name!r}; available: {', '.join(self._tools) or 'none'}"
        try:
            args = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            return f"error: the arguments of {call.name} are not valid JSON ({exc}); send a JSON object"
        if not isinstance(args, dict):
            return f"error: the arguments of {call.name} must be a JSON object, got {type(args).__name__}"
        try:
            return await tool.call(args)
        except Exception as exc:  # a tool's failure is the model's information, not the turn's end
            logger.warning("tool %s failed: %s", call.name, exc)
            return f"error: {call.name} failed: {type(exc).__name__}: {exc}"
