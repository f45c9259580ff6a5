"""Chat commands (C13): each is a few lines over one engine, runtime or settings call.

``/context`` · ``/context clear`` · ``/compact [instruction]`` · ``/config [KEY VALUE]`` ·
``/memory QUERY`` · ``/help``. :meth:`ChatCommands.dispatch` returns the text to print.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

from ..agent import Agent, apply_settings
from ..errors import ContextmemError
from ..settings import Settings
from .config import save_setting, setting_rows, unset_message, unset_setting
from .render import context_report, hits_table, shown, table

if TYPE_CHECKING:
    from ..runtime import ContextMem

__all__ = ["HELP", "RESTART_KEYS", "ChatCommands"]

HELP = """commands:
  /context                  tokens by region (gauge), messages, roles, characters
  /context clear            archive the whole conversation and start afresh (memory keeps it)
  /compact [instruction]    summarise the older part now, e.g. /compact keep decisions only
  /config                   list settings and where each value comes from
  /config KEY VALUE         change a setting (validated, saved to the workspace config.json)
  /config unset KEY         take a setting back to its default
  /memory QUERY             search long-term memory
  /help                     this help
  /exit                     leave (Ctrl-D too)
input: end a line with \\ to continue it; a line with only \"\"\" starts and ends a block"""


# Settings a running chat cannot switch (its model, store and files are open): saved for the next start.
RESTART_KEYS = frozenset(
    {"model", "base_url", "api_key_env", "strict_server", "workspace", "store", "namespace", "tokenizer"}
)


class ChatCommands:
    """The slash commands of one chat: bound to its runtime, agent and settings file."""

    def __init__(self, runtime: ContextMem, agent: Agent, config_file: Path, *, color: bool = False) -> None:
        self.runtime = runtime
        self.agent = agent
        self.config_file = config_file
        self.color = color
        self._table: dict[str, Callable[[str], Awaitable[str]]] = {
            "context": self.context,
            "compact": self.compact,
            "config": self.config,
            "memory": self.memory,
            "help": self.help,
        }

    async def dispatch(self, line: str) -> str:
        name, _, arg = line.strip().removeprefix("/").partition(" ")
        command = self._table.get(name.lower())
        if command is None:
            return f"unknown command /{shown(name)}. Type /help for the list."
        try:
            return await command(arg.strip())
        except ContextmemError as exc:  # said in place; the chat's exit code is about its turns
            return f"error: {shown(exc)}"

    async def context(self, arg: str) -> str:
        engine = self.agent.engine
        if arg == "clear":
            n = await engine.clear()
            return f"context cleared: {n} messages archived; the summary went to today's memory"
        if arg:
            return "usage: /context  or  /context clear"
        stats = engine.stats(self.agent.system_prompt, self.agent.tool_specs)
        return context_report(stats, color=self.color)

    async def compact(self, arg: str) -> str:
        result = await self.agent.engine.compact(arg or None)
        if not result.compacted:
            return "nothing to compact yet"
        return f"compacted {result.compacted} messages\n{shown(result.summary, lines=True)}"

    async def config(self, arg: str) -> str:
        if not arg:
            rows = setting_rows(self.agent.engine.settings)
            return table(rows, ("key", "value", "source"))
        key, _, value = arg.partition(" ")
        if key == "unset" and value.strip():
            return self.unset(value.strip())
        if not value.strip():
            return "usage: /config KEY VALUE, /config unset KEY  (or /config alone to list)"
        save_setting(self.config_file, key, value.strip())
        settings = self.agent.engine.settings.with_value(key, value.strip(), f"file:{self.config_file}")
        self._apply(settings)
        value = settings.shown()[key]
        return f"{key} = {value!r} (saved to {self.config_file}){self._later(key)}"

    def unset(self, key: str) -> str:
        before = self.agent.engine.settings
        said = unset_message(key, unset_setting(self.config_file, key), self.config_file, before)
        if before.sources[key].startswith("file:"):  # a variable or an option in force keeps its value
            self._apply(before.without(key))
        return said + self._later(key)

    def _apply(self, settings: Settings) -> None:
        apply_settings(self.agent.engine, settings)
        self.runtime.settings = settings

    @staticmethod
    def _later(key: str) -> str:
        return " — takes effect at the next start" if key in RESTART_KEYS else ""

    async def memory(self, arg: str) -> str:
        if not arg:
            return "usage: /memory QUERY"
        if self.runtime.memory is None:
            return "long-term memory is off"
        return hits_table(await self.runtime.memory.asearch(arg, 5))

    async def help(self, arg: str) -> str:
        return HELP
