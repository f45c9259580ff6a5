"""The stored form of a message: JSON text that reads back as an equal message.

Both SQL stores keep messages in this form, and a third-party store can reuse it: a database written by
one store reads back equal through the other.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import MessageFormatError
from ..formats.openai import anthropic_extra, from_openai_stored, to_openai
from ..message_checks import check_message_text
from ..messages import Message

__all__ = ["decode_message", "encode_message"]


def encode_message(message: Message) -> str:
    """JSON text of ``to_openai(message)``; ``decode_message`` gives back an equal message.

    Keys the OpenAI format never emits (those :mod:`contextmem.formats.anthropic` keeps in ``extra``) are
    wrapped alongside: ``{"openai": {...}, "anthropic_extra": {...}}``. A plain OpenAI dict always has
    ``role``, so the two shapes cannot be confused.

    A message that could not be read back (a lone surrogate, nesting past ``MAX_NESTING``) is refused
    here by :func:`~contextmem.message_checks.check_message_text` (a ``MessageFormatError``) before any write:
    a store never acknowledges a message that would make its session unreadable.
    """
    check_message_text(message)
    doc: dict[str, Any] = to_openai(message)
    kept = anthropic_extra(message)
    if kept:
        doc = {"openai": doc, "anthropic_extra": kept}
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


def decode_message(text: str) -> Message:
    """Inverse of :func:`encode_message`; raises :class:`MessageFormatError` (a ``ValueError``) if corrupt.

    A row an older version wrote with lone surrogates reads back with U+FFFD in their place
    (:func:`~contextmem.formats.openai.from_openai_stored`), so the session stays usable.
    """
    doc = json.loads(text)
    if not isinstance(doc, dict):
        raise MessageFormatError(
            "stored message",
            f"is not a JSON object: {text[:80]!r}",
            "the row is damaged: restore the database from a backup",
        )
    if "role" in doc:
        return from_openai_stored(doc)
    return from_openai_stored(doc["openai"], doc["anthropic_extra"])
