"""The agent's standing context: its system prompt (``system.md``) and what it knows of the user.

First launch (M1): when ``user.md`` is empty the agent asks the user a few key facts — name,
preferences, goals — and saves the answers there, so every later session starts knowing them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..errors import PathEscapeError
from ..redaction import redact_secrets
from ..workspace import SYSTEM_FILE, USER_FILE, Workspace

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "ONBOARDING_QUESTIONS",
    "compose_system_prompt",
    "needs_onboarding",
    "save_user_facts",
]

DEFAULT_SYSTEM_PROMPT = (
    "You are a helpful assistant with long-term memory. Answer concisely, in the user's language. "
    "Earlier parts of a long conversation may be summarised; when you need details from earlier sessions, "
    "use memory_search, then memory_get or read_file. Save lasting facts with memory_write."
)

ONBOARDING_QUESTIONS: tuple[tuple[str, str], ...] = (
    ("name", "What should I call you?"),
    ("preferences", "Any preferences for how I answer (language, tone, level of detail)?"),
    ("goals", "What are you working on, or what would you like help with?"),
)
"""(key, question) pairs the agent asks on first launch."""

_TITLES = {"name": "Name", "preferences": "Preferences", "goals": "Goals"}


def _read(workspace: Workspace, name: str) -> str:
    """A standing file of the workspace, through its gate (a link is never followed: read as empty)."""
    try:
        return workspace.files.read_text(name).strip()
    except (FileNotFoundError, PathEscapeError):
        return ""


def needs_onboarding(workspace: Workspace) -> bool:
    """True when ``user.md`` is missing or blank: the agent knows nothing about its user yet."""
    return not _read(workspace, USER_FILE)


def save_user_facts(workspace: Workspace, answers: Mapping[str, str]) -> Path | None:
    """Write the non-empty answers to ``user.md`` (atomically); ``None`` when every answer was empty."""
    lines = [f"- {_TITLES.get(k, k.capitalize())}: {v.strip()}" for k, v in answers.items() if v.strip()]
    if not lines:
        return None
    text = "# About the user\n\n" + "\n".join(lines) + "\n"
    workspace.files.write_atomic(USER_FILE, redact_secrets(text).encode("utf-8"))
    return workspace.user_file


def compose_system_prompt(workspace: Workspace, base: str | None = None) -> str:
    """``base`` (else ``system.md``, else the default) followed by what ``user.md`` says."""
    prompt = base if base is not None else (_read(workspace, SYSTEM_FILE) or DEFAULT_SYSTEM_PROMPT)
    about = _read(workspace, USER_FILE)
    return f"{prompt}\n\n{about}" if about else prompt
