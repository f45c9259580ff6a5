"""Settings that follow the model in use, and applying changed settings to a live session.

A local llama.cpp model has a real context of ``n_ctx`` tokens (8192 by default), far below the
50,000-token budget cap: planning against the cap would overflow it on every long turn. Unless the user
set them, the window, the output reserve and the summary sizes are fitted to the model.
"""

from __future__ import annotations

from typing import Any

from ..engine import ContextEngine
from ..llm.base import LLM
from ..settings import Settings

__all__ = ["WINDOW_KEYS", "apply_settings", "fit_settings"]

WINDOW_KEYS = frozenset({"model", "context_window", "max_tokens", "agent_max_context_tokens"})
"""Settings the engine's window is computed from (a change re-resolves it)."""


def fit_settings(settings: Settings, llm: LLM) -> Settings:
    """``settings`` with defaults fitted to a model that states its context size (``n_ctx``)."""
    n_ctx: Any = getattr(llm, "n_ctx", None)
    if not isinstance(n_ctx, int) or n_ctx <= 0:
        return settings
    source = f"fitted to {llm.name} (n_ctx {n_ctx})"
    reply: Any = getattr(llm, "max_tokens", None)
    wanted: dict[str, Any] = {
        "context_window": n_ctx,
        "max_tokens": reply if isinstance(reply, int) and reply < n_ctx // 2 else n_ctx // 8,
        "summary_chunk_tokens": min(settings.summary_chunk_tokens, n_ctx // 2),
        "summary_max_tokens": min(settings.summary_max_tokens, n_ctx // 8),
    }
    for key, value in wanted.items():
        if settings.sources[key] == "default" and getattr(settings, key) != value:
            settings = settings.with_value(key, value, source)
    return settings


def apply_settings(engine: ContextEngine, settings: Settings) -> None:
    """Make a live session use ``settings`` from its next ``build`` on (window and summary sizes too)."""
    engine.reconfigure(settings)
