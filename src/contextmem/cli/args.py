"""The parser's parts: usage errors as one line with a Fix, and value types that refuse an out-of-range
number or a missing input file while parsing, before anything is opened.

Each type raises :class:`argparse.ArgumentTypeError` with its own Fix; :class:`Parser` prints any usage
error as ``PROG: MESSAGE. Fix: …`` on one line (argparse's default is a usage block and then the error).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import difflib
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from ..errors import ConfigError, one_line
from ..settings import check_key

__all__ = ["Parser", "count", "existing_file", "input_file", "positive_int", "setting_key"]


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors are one line ending in a Fix (subparsers inherit it); a
    mistyped command or option gets the closest one (as Python 3.12's ``suggest_on_error``, on 3.11 too).

    An option a command does not take is refused by that command's parser, not the top one, so the line
    names the command, its ``--help`` and the closest of *its* options."""

    def parse_known_args(  # type: ignore[override]  # the same call; the unknown ones are refused here
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._typed = list(sys.argv[1:] if args is None else args)
        parsed, extras = super().parse_known_args(args, namespace)
        if extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return parsed, extras

    def error(self, message: str) -> NoReturn:
        fix = "" if "Fix:" in message else f". Fix: {self._suggestion(message)}see `{self.prog} --help`"
        self.exit(2, f"{self.prog}: {one_line(message, 600)}{fix}\n")  # the words typed: shown printable

    def _suggestion(self, message: str) -> str:
        """``did you mean 'sessions'? `` for a mistyped choice or option, else ``""``."""
        words: list[str] = []
        candidates: list[str] = []
        if found := re.search(r"invalid choice: ('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")", message):
            # an unknown option before the command took its value for the command: name the option
            typed = [w.split("=", 1)[0] for w in getattr(self, "_typed", ()) if w.startswith("--")]
            options = [o for a in self._actions for o in a.option_strings]
            for word in (w for w in typed if w not in options):
                if close := difflib.get_close_matches(word, options, n=1, cutoff=0.6):
                    return f"{word!r} is not an option: did you mean {close[0]!r}? Or "
            with contextlib.suppress(ValueError, SyntaxError):
                words = [str(ast.literal_eval(found.group(1)))]
            candidates = [str(c) for a in self._actions if a.choices for c in a.choices]
        elif message.startswith("unrecognized arguments: "):
            words = [w.split("=", 1)[0] for w in message.split()[2:] if w.startswith("-")]
            candidates = [o for a in self._actions for o in a.option_strings]
        for word in words:
            if close := difflib.get_close_matches(word, candidates, n=1, cutoff=0.6):
                return f"did you mean {close[0]!r}? Or "
        return ""


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
