"""The type checks shared by the wire-format readers: each raises the one :class:`MessageFormatError` shape.

A failed check names the path, says what the value must be and what it was, and carries the Fix, so every
reader's error reads alike: ``<path>: must be <expected>, got <value>``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from ..errors import MessageFormatError, brief

__all__ = ["fail", "require_list", "require_mapping", "require_str"]


def fail(path: str, expected: str, value: Any, fix: str, *, show_type: bool = False) -> NoReturn:
    """Raise ``<path>: must be <expected>, got [<type name> ]<value!r>`` with ``fix`` (the value cut short:
    :func:`~contextmem.errors.brief`)."""
    got = f"{type(value).__name__} {brief(value)}" if show_type else brief(value)
    raise MessageFormatError(path, f"must be {expected}, got {got}", fix)


def require_str(value: Any, path: str, fix: str, *, non_empty: bool = False) -> str:
    """``value`` if it is a string (a non-empty one when ``non_empty``), else the format error."""
    if not isinstance(value, str) or (non_empty and not value):
        fail(path, "a non-empty string" if non_empty else "a string", value, fix)
    return value


def require_mapping(value: Any, path: str, fix: str, *, expected: str = "an object") -> Mapping[str, Any]:
    """``value`` if it is a mapping, else the format error (``must be an object`` unless told otherwise)."""
    if not isinstance(value, Mapping):
        fail(path, expected, value, fix)
    return value


def require_list(value: Any, path: str, expected: str, fix: str) -> list[Any]:
    """``value`` if it is a list, else the format error, naming the value's type."""
    if not isinstance(value, list):
        fail(path, expected, value, fix, show_type=True)
    return value
