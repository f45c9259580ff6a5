"""How settings come from outside and how a bad one is told: a settings file read, and a validation error
as one line naming each key with a Fix (a URL setting's password masked, a huge value never echoed whole).

Beside :mod:`contextmem.settings`, which holds the keys and their defaults; nothing here knows a key.
"""

from __future__ import annotations

import difflib
import json
import tomllib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from .dsn import printable_store_url
from .errors import ConfigError, brief

__all__ = ["SECRET_URL_KEYS", "cut", "describe", "read_settings_file", "shown", "unknown_setting"]

SECRET_URL_KEYS = frozenset({"store", "base_url"})
"""Settings whose value is a URL that may carry a password: shown through
:func:`~contextmem.dsn.printable_store_url`."""


def shown(key: str, value: Any) -> str:
    """``value`` in an error about ``key``: a URL setting's passwords masked, never a huge value whole."""
    if key in SECRET_URL_KEYS:
        return printable_store_url(value) if isinstance(value, str) else f"a {type(value).__name__}"
    return brief(value)


def cut(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def unknown_setting(key: str, fields: Iterable[str]) -> str:
    """``unknown setting 'x'. Fix: did you mean 'y'?`` — the closest of ``fields``, not all of them."""
    close = difflib.get_close_matches(key, list(fields), n=1)
    hint = f"did you mean {close[0]!r}?" if close else "`contextmem config list` shows every setting"
    return f"unknown setting {cut(key)!r}. Fix: {hint}"


def read_settings_file(path: Path) -> dict[str, Any]:
    """The key = value pairs of a JSON or TOML settings file (its ``[contextmem]`` table if it has one)."""
    where = f"settings file {brief(str(path))}"
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {where}: {exc.strerror}. Fix: check the path") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where} is not UTF-8 (byte {exc.start}). Fix: save it as UTF-8 text") from None
    kind = path.suffix[1:].upper() or "JSON"
    try:
        data: Any = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except ValueError as exc:  # a decode error, or a number of more than 4,300 digits
        raise ConfigError(f"{where} is not valid {kind}: {brief(str(exc), 200)}. Fix: correct it") from None
    except RecursionError:
        raise ConfigError(f"{where} nests too deep to be settings. Fix: write key = value pairs") from None
    section = data.get("contextmem", data) if isinstance(data, dict) else None
    if not isinstance(section, dict):
        raise ConfigError(
            f"{where} must hold a table/object of key = value pairs. Fix: write e.g. "
            '{"model": "local"} (JSON) or model = "local" (TOML)'
        )
    return dict(section)


# What a value must be, by pydantic error type: the Fix of an out-of-range or mistyped value.
_WANTED = {
    "greater_than": "a number greater than {gt}",
    "greater_than_equal": "a number of at least {ge}",
    "less_than": "a number below {lt}",
    "less_than_equal": "a number of at most {le}",
    "int_parsing": "a whole number",
    "int_type": "a whole number",
    "int_from_float": "a whole number",
    "float_parsing": "a number",
    "float_type": "a number",
    "bool_parsing": "true or false",
    "bool_type": "true or false",
    "literal_error": "one of {expected}",
    "string_pattern_mismatch": "a value matching {pattern}",
    "string_type": "text",
    "finite_number": "a finite number",
}


def describe(exc: ValidationError, fields: Iterable[str]) -> str:
    """``exc`` as one line: each bad key, what it got, and what it must be."""
    lines = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"]) or "settings"
        ctx = err.get("ctx", {})
        if err["type"] == "extra_forbidden":
            lines.append(unknown_setting(key, fields))
        elif err["type"] == "value_error" and isinstance(ctx.get("error"), ConfigError):
            error = str(ctx["error"])  # already says what was wrong and the Fix
            lines.append(error if key == "settings" else f"{key}: {error}")
        elif key == "settings":  # a rule across keys (the model validator)
            lines.append(f"{err['msg'].removeprefix('Value error, ')}. Fix: change one of the values")
        else:
            got = shown(key, err.get("input"))
            wanted = _WANTED.get(err["type"])
            fix = f"set {key} to {wanted.format(**ctx)}" if wanted else f"give {key} a value as stated"
            lines.append(f"{key}: got {got}: {err['msg'].removeprefix('Value error, ')}. Fix: {fix}")
    return "invalid settings: " + "; ".join(lines)  # one line, as every error is (and the CLI prints them)
