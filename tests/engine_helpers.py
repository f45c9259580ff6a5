"""Shared set-up for engine tests: a small window, scripted summaries, and turn-shaped adds."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from contextmem.budget import Window
from contextmem.engine import ContextEngine, Request
from contextmem.messages import Message, ToolMessage, UserMessage, orphan_tool_messages, text_of
from contextmem.settings import Settings
from contextmem.summarize.prompts import SECTION_TITLES
from contextmem.testing import InMemorySessionStore, ScriptedLLM

GOOD_SUMMARY = """## Goal
- Keep the service running.
## Constraints
- Do not restart the production database.
## Progress
- Work is under way.
## Key decisions
- Use the existing tools.
## Next steps
- Continue.
## Critical context
- None beyond the identifiers."""


_DRAFT_FACT = re.compile(
    r"^- (?:"
    + "|".join(re.escape(t) for titles in SECTION_TITLES.values() for t in titles.values())
    + r")[:：]\s*(.+)$",
    re.M,
)


def correcting(summary: str = GOOD_SUMMARY) -> Callable[[Sequence[Message]], str]:
    """A summary model that corrects the draft it is shown, as the summariser asks: ``summary``'s items,
    then every draft fact under its last section. (A fixed reply is a copy of the previous summary from
    the second call on, which the summariser rightly rejects.)"""

    def reply(messages: Sequence[Message]) -> str:
        facts = _DRAFT_FACT.findall(text_of(messages[-1].content))
        return "\n".join([summary, *(f"- {fact}" for fact in facts if fact not in summary)])

    return reply


def small_settings(**kw: Any) -> Settings:
    base: dict[str, Any] = {
        "agent_max_context_turns": 8,
        "summary_max_tokens": 300,
        "compact_message_threshold": 30,
        "pruning_old_msg_max_bytes": 600,
        "pruning_recent_msg_max_bytes": 4000,
        "historical_tool_result_max_chars": 2000,
        "emergency_max_chars": 1500,
        "summary_timeout_seconds": 5.0,
    }
    base.update(kw)
    return Settings(**base)


async def make_engine(
    tmp: Path,
    *,
    llm: ScriptedLLM | None = None,
    window: int = 4000,
    reserve: int = 200,
    store: Any = None,
    **kw: Any,
) -> ContextEngine:
    return await ContextEngine.open(
        "s1",
        store=store or InMemorySessionStore(),
        settings=small_settings(**kw),
        workspace_dir=tmp,
        llm=llm,
        window=Window(window, reserve),
    )


def groups(turn: list[Message]) -> list[list[Message]]:
    """A turn as the agent appends it: each tool call together with its results."""
    out: list[list[Message]] = []
    for m in turn:
        if isinstance(m, ToolMessage):
            out[-1].append(m)
        else:
            out.append([m])
    return out


def check_request(engine: ContextEngine, request: Request, newest_user: UserMessage) -> None:
    est = request.estimate
    assert est.prompt + est.max_tokens <= engine.window.context_window, est
    body = [m for m in request.messages if m.kind != "system"]
    assert orphan_tool_messages(body) == []
    users = [m for m in body if isinstance(m, UserMessage)]
    assert users, "the newest user message must be sent"
    assert users[-1] == newest_user or len(str(newest_user.content)) > engine.settings.emergency_max_chars
