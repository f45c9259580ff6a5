"""Tool-result offload (SPEC C5), pure: which results to cut, and the head + tail that stays.

Thresholds depend on recency. The newest ``pruning_recent_n`` tool results, and every result of the
current turn, may keep up to ``pruning_recent_msg_max_bytes``; older ones ``pruning_old_msg_max_bytes``.
Results of past turns are also held to CowAgent's ``historical_tool_result_max_chars``. The current turn
is never cut below the recent threshold: the agent may still need it, and the full text stays one
``read_file`` away. With a small window ``cap_bytes`` bounds every threshold, so that no one result
can take the whole budget.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .. import textcut
from ..messages import Message, ToolMessage, text_of
from ..namespace import DEFAULT_NAMESPACE
from ..settings import Settings

NOTICE = (
    "\n\n[... {omitted} of {total} characters omitted. The full output is saved at {path} — "
    "read it with read_file(path, offset, limit). ...]\n\n"
)
_SAFE_ID = re.compile(r"[^A-Za-z0-9_.-]+")
_PLAIN = re.compile(r"[a-z0-9_][a-z0-9_.]*")
_READABLE_CHARS = 120


@dataclass(frozen=True, slots=True)
class OffloadLimit:
    max_bytes: int
    max_chars: int | None


@dataclass(frozen=True, slots=True)
class Offload:
    """Cut ``history[index]`` (a tool result) to ``limit``; its full text goes to ``path``."""

    index: int
    limit: OffloadLimit
    path: str


def offload_path(namespace: str, session_id: str, seq: int, tool_call_id: str) -> str:
    """Where a result's full text lives, relative to the namespace's tree: ``tool_results/<name>.txt``.

    Distinct ``(namespace, session_id, seq, tool_call_id)`` always get distinct names, on case-sensitive
    and case-insensitive file systems alike, and a name is at most 160 bytes (under the 255 limit):

    * ``{session}-{seq}-{call}`` as it is when that spelling is unambiguous: the default namespace, and
      session and call made only of ``[a-z0-9_.]`` (no ``-`` to blur where one part ends), short;
    * otherwise a readable prefix (unsafe characters replaced by ``_``, cut to 120 characters) plus
      ``-`` and 20 hex digits of a SHA-256 over an unambiguous encoding of all four parts, so ``a/b`` and
      ``a_b``, ``A`` and ``a``, or two long ids sharing their first 120 characters never share a file.
    """
    readable = f"{session_id}-{seq}-{tool_call_id}"
    plain = (
        namespace == DEFAULT_NAMESPACE
        and _PLAIN.fullmatch(session_id) is not None
        and _PLAIN.fullmatch(tool_call_id) is not None
        and len(readable) <= _READABLE_CHARS
    )
    if plain:
        return f"tool_results/{readable}.txt"
    key = json.dumps([namespace, session_id, seq, tool_call_id], ensure_ascii=True)
    digest = hashlib.sha256(key.encode("ascii")).hexdigest()[:20]
    prefix = _SAFE_ID.sub("_", readable)[:_READABLE_CHARS]
    return f"tool_results/{prefix}-{digest}.txt"


def fits(text: str, limit: OffloadLimit) -> bool:
    return textcut.fits(text, max_chars=limit.max_chars, max_bytes=limit.max_bytes)


def head_tail(text: str, limit: OffloadLimit, path: str) -> str:
    """``text`` cut to its head and tail (2 : 1) around a notice naming ``path``, within ``limit``
    whenever the limit leaves room for the notice (:func:`contextmem.textcut.cut_middle`)."""

    def notice(omitted: int) -> str:
        return NOTICE.format(omitted=omitted, total=len(text), path=path)

    return textcut.cut_middle(text, notice, max_chars=limit.max_chars, max_bytes=limit.max_bytes)


def offload_limits(
    history: Sequence[Message], current_turn_start: int, settings: Settings, cap_bytes: int | None = None
) -> list[OffloadLimit | None]:
    """The limit for every message (``None`` for non-tool messages), by recency among tool results."""
    limits: list[OffloadLimit | None] = [None] * len(history)
    cap = cap_bytes if cap_bytes is not None else 1 << 62
    recent, old = (
        min(settings.pruning_recent_msg_max_bytes, cap),
        min(settings.pruning_old_msg_max_bytes, cap),
    )
    history_chars = settings.historical_tool_result_max_chars
    rank = 0
    for i in range(len(history) - 1, -1, -1):
        if not isinstance(history[i], ToolMessage):
            continue
        if i >= current_turn_start:
            limits[i] = OffloadLimit(recent, None)
        elif rank < settings.pruning_recent_n:
            limits[i] = OffloadLimit(recent, history_chars)
        else:
            limits[i] = OffloadLimit(old, history_chars)
        rank += 1
    return limits


def plan_offload(
    history: Sequence[Message],
    current_turn_start: int,
    settings: Settings,
    path_of: Callable[[int], str],
    *,
    cap_bytes: int | None = None,
    first_new: int = 0,
) -> list[Offload]:
    """Tool results whose current form is over its limit, from index ``first_new`` on.

    A result cut earlier under the recent threshold is cut again, tighter, once it ages past
    ``pruning_recent_n``; the new cut is made from the original, never from an earlier cut.
    ``path_of(i)`` names the offload file of message ``i`` (asked only for the results that are cut).
    Idempotent: a cut always fits its limit, so planning again after applying yields nothing.

    ``first_new`` is where the messages the model has not seen yet begin: cutting one of those changes
    nothing a provider has cached, while cutting an older one again rewrites the middle of a cached
    prefix, so the engine plans the older ones (``first_new=0``) only when it compacts anyway.
    """
    return [
        Offload(i, limit, path_of(i))
        for i, limit in enumerate(offload_limits(history, current_turn_start, settings, cap_bytes))
        if i >= first_new and limit is not None and not fits(text_of(history[i].content), limit)
    ]
