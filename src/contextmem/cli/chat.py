"""``contextmem chat``: the REPL — history, multi-line input, streaming replies, compaction notices.

Input is read in a worker thread so the engine's background summaries keep running while the user types.
Engine events are queued and shown as dim notices at the next quiet moment (before a reply streams,
after it, or after a command), so they never cut through the user's typing.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from ..agent import ONBOARDING_QUESTIONS, Agent, compose_system_prompt, needs_onboarding, save_user_facts
from ..engine import ContextEngine, EngineEvent
from ..errors import ContextmemError
from ..messages import AssistantMessage, ToolMessage, UserMessage
from ..safefs import write_atomic_path
from .commands import ChatCommands
from .render import describe_event, paint, shown

if TYPE_CHECKING:
    from ..runtime import ContextMem

__all__ = ["BLOCK", "FAILED_NOTE", "HISTORY_FILE", "Chat", "ReadLine", "close_failed_turn", "enable_history"]

ReadLine = Callable[[str], str]
BLOCK = '"""'
HISTORY_FILE = ".chat_history"


def enable_history(workspace_dir: Path) -> Callable[[], None]:
    """Line editing and persistent history with readline, when the platform has it; returns a saver."""
    try:
        import readline
    except ImportError:  # pragma: no cover - Windows without pyreadline
        return lambda: None
    path = workspace_dir / HISTORY_FILE
    with contextlib.suppress(OSError):
        readline.read_history_file(path)
    readline.set_history_length(1000)

    def save() -> None:
        # readline writes in place, through links and with the umask's mode; a history holds what the
        # user typed, so it is written to a private scratch file and then replaced atomically, 0600.
        with contextlib.suppress(OSError), tempfile.TemporaryDirectory() as scratch:
            readline.write_history_file(Path(scratch, HISTORY_FILE))
            write_atomic_path(path, Path(scratch, HISTORY_FILE).read_bytes())

    return save


FAILED_NOTE = "(no reply: {error})"


async def close_failed_turn(engine: ContextEngine, error: BaseException) -> None:
    """A turn whose model call failed ends with a short assistant note saying so, rather than with the
    user's message (or a tool result) left waiting: nothing the user said is removed, the next turn does
    not begin after an unanswered one, and ``sessions show`` tells what happened."""
    live = engine.history.messages
    if live and isinstance(live[-1], UserMessage | ToolMessage):
        text = " ".join(str(error).split())
        note = FAILED_NOTE.format(error=text if len(text) <= 200 else text[:199] + "…")
        with contextlib.suppress(ContextmemError):  # the store itself failing: the caller reports it
            await engine.add(AssistantMessage(note))


class Chat:
    """One chat on one agent. :meth:`run` is the whole REPL; ``read`` and ``out`` are injectable.

    ``onboard=False`` skips the first-launch questions (the CLI passes it unless stdin and stdout are a
    terminal, so piped input is never taken as answers); ``prompts=False`` reads without the ``you>``
    prompt (piped input: the output is the replies). :meth:`run` returns 1 when a model turn failed; a
    failed ``/command`` is reported where it happened and does not change the exit code.
    """

    def __init__(
        self,
        runtime: ContextMem,
        agent: Agent,
        commands: ChatCommands,
        *,
        read: ReadLine = input,
        out: TextIO,
        color: bool = False,
        onboard: bool = True,
        prompts: bool = True,
    ) -> None:
        self.runtime = runtime
        self.onboarding = onboard
        self.prompts = prompts
        self.failed = False
        self.agent = agent
        self.commands = commands
        self.read = read
        self.out = out
        self.color = color
        self.notices: list[str] = []
        agent.engine.subscribe(self._on_event)

    def _on_event(self, event: EngineEvent) -> None:
        notice = describe_event(event)
        if notice:
            self.notices.append(notice)

    def say(self, text: str = "", end: str = "\n") -> None:
        self.out.write(text + end)
        self.out.flush()

    def show_notices(self) -> None:
        notices, self.notices = self.notices, []
        for notice in notices:
            self.say(paint(f"  [{shown(notice)}]", "2", self.color))

    async def ask(self, prompt: str) -> str | None:
        """One logical input: continued lines (trailing ``\\``) or a triple-quote block; None at EOF."""
        if not self.prompts:
            prompt = ""
        try:
            line = await asyncio.to_thread(self.read, prompt)
        except EOFError:
            return None
        if line.strip() == BLOCK:
            lines: list[str] = []
            while True:
                try:
                    more = await asyncio.to_thread(self.read, "... " if self.prompts else "")
                except EOFError:
                    break
                if more.strip() == BLOCK:
                    break
                lines.append(more)
            return "\n".join(lines)
        while line.endswith("\\"):
            try:
                line = line[:-1] + "\n" + await asyncio.to_thread(self.read, "... " if self.prompts else "")
            except EOFError:
                break
        return line

    async def onboard(self) -> None:
        """First launch (M1): ask the key facts and save them to user.md."""
        workspace = self.runtime.workspace
        if not self.onboarding or not needs_onboarding(workspace):
            return
        self.say("First launch: a few questions so I remember you across sessions (Enter skips).")
        answers: dict[str, str] = {}
        for key, question in ONBOARDING_QUESTIONS:
            answer = await self.ask(f"{question}\n> ")
            if answer is None:
                break
            answers[key] = answer
        saved = save_user_facts(workspace, answers)
        if saved is not None:
            self.agent.system_prompt = compose_system_prompt(workspace)
            self.say(f"Saved to {saved}. Edit it any time.")

    async def turn(self, text: str) -> None:
        self.show_notices()
        started = False
        async for event in self.agent.run(text):
            if event.kind == "text":
                if not started:
                    self.out.write(paint("assistant> ", "1;36", self.color))
                    started = True
                self.out.write(shown(event.text, lines=True))
                self.out.flush()
            elif event.kind == "tool_call":
                self.say(paint(f"  → {shown(f'{event.name}({event.text[:120]})')}", "2", self.color))
            elif event.kind == "tool_result":
                first = event.text.strip().splitlines()[0][:100] if event.text.strip() else ""
                self.say(paint(f"  ← {shown(first)}", "2", self.color))
            elif event.kind == "overflow":
                self.say(
                    paint(
                        "  [the model reported a context overflow: compacting and retrying]", "33", self.color
                    )
                )
            elif event.kind == "done" and not started and event.text:
                self.say(paint("assistant> ", "1;36", self.color) + shown(event.text, lines=True), end="")
        self.say()
        self.show_notices()

    async def run(self) -> int:
        self.say(
            f"contextmem chat · model {self.agent.llm.name} · session {self.agent.engine.session_id}"
            f" · window {self.agent.engine.window.context_window:,} tokens · /help for commands"
        )
        await self.onboard()
        self.show_notices()
        while True:
            text = await self.ask(paint("you> ", "1;32", self.color))
            if text is None or text.strip() in ("/exit", "/quit"):
                break
            if not text.strip():
                continue
            try:
                if text.startswith("/"):
                    self.say(await self.commands.dispatch(text))
                    self.show_notices()
                else:
                    await self.turn(text)
            except ContextmemError as exc:
                self.failed = True
                await close_failed_turn(self.agent.engine, exc)
                self.say(f"\nerror: {shown(exc)}")
        self.say("saving…")
        await self.agent.engine.wait_idle()
        await self.runtime.flush()
        self.show_notices()
        return 1 if self.failed else 0
