"""The parser's parts: usage errors as one line with a Fix, and value types that refuse an out-of-range
number or a missing input file while parsing, before anything is opened.

Each type raises :class:`argparse.ArgumentTypeError` with its own Fix; :class:`Parser` prints any usage
error as ``PROG: MESSAGE. Fix: …`` on one line (argparse's default is a usage block and then the error).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import NoReturn

from ..errors import ConfigError
from ..settings import check_key

__all__ = ["Parser", "count", "existing_file", "input_file", "positive_int", "setting_key"]


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line ending in a Fix (subparsers inherit it)."""

    def error(self, message: str) -> NoReturn:
        fix = "" if "Fix:" in message else f". Fix: see `{self.prog} --help`"
        self.exit(2, f"{self.prog}: {' '.join(message.split())}{fix}\n")


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number. Fix: e.g. 5") from None


def positive_int(text: str) -> int:
    """A whole number of at least 1 (a window, a token count, ``--k``)."""
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is below 1. Fix: give a whole number of at least 1")
    return value


def count(text: str) -> int:
    """A whole number of at least 0 (``--days``, ``--last``, ``--llm-summaries``)."""
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative. Fix: give a whole number of at least 0")
    return value


def input_file(text: str) -> str:
    """A file to read, or ``-`` for standard input: a missing path is refused before anything opens."""
    return text if text == "-" else existing_file(text)


def existing_file(text: str) -> str:
    """A file to read (no standard input)."""
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text[:80]!r} is a directory. Fix: give a file")
    if not path.is_file():
        where = "" if path.is_absolute() else f" (relative to {str(Path.cwd())[:80]})"
        raise argparse.ArgumentTypeError(f"no such file {text[:80]!r}{where}. Fix: check the path")
    return text


def setting_key(text: str) -> str:
    """The name of a setting; a mistyped one is refused with the closest name."""
    try:
        return check_key(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
