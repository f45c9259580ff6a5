"""Applying settings to a live session (``/config``); fitting them to a model lives in one place.

:func:`contextmem.budget.fit_window` is the one pure function that fits the window and summary sizes to a
model's ``context_window``; :func:`contextmem.budget.fit_settings` records the result in the settings, and
:meth:`ContextMem.open <contextmem.runtime.ContextMem.open>` applies it. This module re-exports it under
the agent's name and applies changed settings to an engine.
"""

from __future__ import annotations

from ..budget import fit_settings
from ..engine import ContextEngine
from ..settings import Settings

__all__ = ["apply_settings", "fit_settings"]


def apply_settings(engine: ContextEngine, settings: Settings) -> None:
    """Make a live session use ``settings`` from its next ``build`` on (window and summary sizes too)."""
    engine.reconfigure(settings)
