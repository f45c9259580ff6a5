"""JSON Lines at the edge: one JSON object per line, and errors that say ``file:line[:column]``.

What :func:`read_jsonl` accepts and refuses, by design:

* UTF-8, with or without a leading byte-order mark (what Windows editors write); ``-`` reads stdin;
* blank (whitespace-only) lines are skipped but still counted, so line numbers match the editor's;
* lines are split on ``\\n`` only (a trailing ``\\r`` is whitespace to JSON), never on U+2028 and friends,
  which are legal inside JSON strings;
* invalid UTF-8, invalid JSON, ``NaN``/``Infinity`` (not JSON), a line nested too deeply to parse, and a line
  that is not a JSON object each raise :class:`~contextmem.errors.JsonlLineError` naming the line (and the
  column when known), never ``UnicodeDecodeError``, ``JSONDecodeError`` or ``RecursionError``.

:func:`messages_from_jsonl` reads OpenAI chat messages, one per line, and prefixes any
:class:`~contextmem.errors.MessageFormatError` from :func:`~contextmem.formats.openai.from_openai` with the
line: ``transcript.jsonl:7: messages[6].content: ...``. Given ``max_bytes``, it refuses a message over it
as ``ContextEngine.add`` does (:func:`~contextmem.message_checks.check_size`, the one size rule), so a
command that only reads a transcript is bounded like one that replays it.
"""

from __future__ import annotations

import codecs
import json
import sys
from pathlib import Path
from typing import Any

from .errors import JsonlLineError, MessageFormatError
from .formats.openai import from_openai
from .message_checks import MAX_NESTING, check_size
from .messages import Message

__all__ = ["messages_from_jsonl", "read_jsonl", "source_name"]

STDIN = "-"


class _NotJSON(ValueError):
    """Raised by the ``parse_constant`` hook: ``NaN`` and ``Infinity`` are not JSON."""


def _refuse_constant(name: str) -> Any:
    raise _NotJSON(name)


def source_name(source: str | Path) -> str:
    """How errors name ``source``: ``<stdin>`` for ``-``, else the path as given."""
    return "<stdin>" if isinstance(source, str) and source == STDIN else str(source)


def _read_bytes(source: str | Path) -> bytes:
    if isinstance(source, str) and source == STDIN:
        return sys.stdin.buffer.read()
    return Path(source).read_bytes()


def _decode(raw: bytes, name: str, number: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        column = len(raw[: exc.start].decode("utf-8", "replace")) + 1
        bad = raw[exc.start : exc.start + 1]
        raise JsonlLineError(
            name,
            number,
            f"is not valid UTF-8 (byte {bad!r} at byte {exc.start + 1}: {exc.reason})",
            "save the file as UTF-8 (e.g. iconv -f LATIN1 -t UTF-8), or fix the damaged bytes on that line",
            column=column,
        ) from None


def _parse(text: str, name: str, number: int, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError as exc:
        raise JsonlLineError(
            name,
            number,
            f"is not valid JSON ({exc.msg}): {text[:80]!r}",
            f"write each {what} entry as one JSON object on a single line (JSON Lines)",
            column=exc.colno,
        ) from None
    except _NotJSON as exc:
        raise JsonlLineError(
            name,
            number,
            f"holds {exc.args[0]}, which is not JSON: {text[:80]!r}",
            "write the number as a string or null",
        ) from None
    except RecursionError:
        raise JsonlLineError(
            name,
            number,
            f"nests too deeply to be read: {text[:80]!r}",
            f"keep each {what} entry within {MAX_NESTING} levels of nesting",
        ) from None
    if not isinstance(value, dict):
        raise JsonlLineError(
            name,
            number,
            f"is a JSON {type(value).__name__}, not an object: {text[:80]!r}",
            f'write each {what} entry as one JSON object per line, e.g. {{"role": "user", "content": "hi"}}',
        )
    return value


def read_jsonl(source: str | Path, *, what: str = "transcript") -> list[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for each non-blank line of the JSON Lines file ``source`` (``-``: stdin).

    ``what`` names an entry in the fixes of errors (``"transcript"``, ``"session export"``). Raises
    :class:`~contextmem.errors.JsonlLineError` for a line that cannot be read (see the module docstring);
    ``OSError`` from opening the file is left to the caller.
    """
    name = source_name(source)
    data = _read_bytes(source)
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    out: list[tuple[int, dict[str, Any]]] = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if raw.strip():
            out.append((number, _parse(_decode(raw, name, number), name, number, what)))
    return out


def messages_from_jsonl(
    source: str | Path, *, what: str = "transcript", max_bytes: int | None = None
) -> list[Message]:
    """OpenAI chat messages, one per line of ``source`` (``-``: stdin), read with
    :func:`~contextmem.formats.openai.from_openai`.

    Message ``i`` is the i-th non-blank line; a message it refuses raises
    :class:`~contextmem.errors.JsonlLineError` naming both, e.g. ``t.jsonl:7: messages[6].content: ...``.
    With ``max_bytes`` (the ``max_message_bytes`` setting), a message whose text is over it (a tool result:
    ten times it) is refused so too, before anything counts or stores it.
    """
    messages: list[Message] = []
    for index, (number, value) in enumerate(read_jsonl(source, what=what)):
        try:
            message = from_openai(value, index=index)
            if max_bytes is not None:
                check_size(message, f"messages[{index}]", max_bytes)
            messages.append(message)
        except MessageFormatError as exc:
            raise JsonlLineError(source_name(source), number, exc.problem, exc.fix, path=exc.field) from None
    return messages
