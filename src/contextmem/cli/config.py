"""Settings for the CLI: where they are read from, and ``config set`` / ``/config KEY VALUE`` persistence.

Load order: defaults < ``<workspace>/config.json`` (or ``--config FILE``) < ``CONTEXTMEM_*`` variables <
command-line options. ``/config`` and ``contextmem config set`` validate a value, save it to the settings
file, and return the settings in force; ``config unset`` (``/config unset``) takes a value back.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..llm.registry import NO_MODEL, check_spec
from ..settings import Settings

__all__ = [
    "CONFIG_FILE",
    "OPTION_KEYS",
    "cli_overrides",
    "config_path",
    "load_settings",
    "save_setting",
    "setting_rows",
    "setting_values",
    "unset_message",
    "unset_setting",
]

CONFIG_FILE = "config.json"

# command-line option -> setting
OPTION_KEYS = (
    "model",
    "base_url",
    "api_key_env",
    "strict_server",
    "workspace",
    "namespace",
    "store",
    "context_window",
    "max_tokens",
)


def cli_overrides(args: argparse.Namespace) -> dict[str, Any]:
    return {k: v for k in OPTION_KEYS if (v := getattr(args, k, None)) is not None}


def config_path(args: argparse.Namespace) -> Path:
    """``--config FILE``, else ``config.json`` in the workspace the other sources name."""
    if getattr(args, "config", None):
        return Path(args.config)
    return Settings.load(**cli_overrides(args)).workspace_path / CONFIG_FILE


def load_settings(args: argparse.Namespace) -> Settings:
    path = config_path(args)
    explicit = bool(getattr(args, "config", None))
    return Settings.load(path if explicit or path.exists() else None, **cli_overrides(args))


def save_setting(path: Path, key: str, value: str) -> Settings:
    """Validate ``key = value`` and persist it in the settings file at ``path`` (only that file's values)."""
    current = Settings.load(path if path.exists() else None, env={})
    updated = current.with_value(key, value, f"file:{path}")
    spec = getattr(updated, key) if key in ("model", "summary_model") else None
    if spec is not None and spec != NO_MODEL:
        check_spec(spec, key)  # what loads the model checks it, so nothing saved fails only at use
    updated.save(path)
    return updated


def unset_setting(path: Path, key: str) -> Settings:
    """Remove ``key`` from the settings file at ``path``: it is back to its default (or its
    ``CONTEXTMEM_*`` variable). Returns the file's settings."""
    current = Settings.load(path if path.exists() else None, env={})
    updated = current.without(key)
    updated.save(path)
    return updated


def unset_message(key: str, saved: Settings, path: Path, before: Settings) -> str:
    """What ``config unset`` and ``/config unset`` say: the default now in force, or what still sets it
    (``before``: the settings in force before, with their sources)."""
    value = json.dumps(saved.shown()[key], ensure_ascii=False)
    source = before.sources[key]
    if source.startswith("env:"):
        still = f"; {source.removeprefix('env:')} still sets it"
    elif source == "override":
        still = "; the command line still sets it"
    else:
        still = ""
    return f"{key} unset in {path}: default {value}{still}"


def setting_rows(settings: Settings) -> list[tuple[str, str, str]]:
    """(key, value, source) for every setting."""
    values = settings.shown()
    return [(key, repr(values[key]), source) for key, source in settings.sources.items()]


def setting_values(settings: Settings) -> dict[str, dict[str, Any]]:
    """``{key: {"value", "source"}}`` for every setting: ``config list --json``."""
    values = settings.shown()
    return {key: {"value": values[key], "source": source} for key, source in settings.sources.items()}
