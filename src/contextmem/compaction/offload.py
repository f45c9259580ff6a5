"""Tool-result offload (C5), pure: which results to cut, and the head + tail that stays.

Thresholds depend on recency, in UTF-8 bytes of a result's text:

* **the current turn** (from the newest user message on), every result: ``pruning_recent_msg_max_bytes``
  (50,000) or what the window can hold, whichever is smaller (:func:`current_turn_caps`). What it can
  hold is the history budget less the current turn's other messages (its user message, the assistant's
  calls), shared among the turn's results as evenly as their sizes allow; older turns leave first (C7).
  The agent asked for these results and has not read them yet, so they are never cut to a share of
  the budget: at a 50,000-token window a 33.8 KB log stays whole (17,203 bytes under the share), at an
  8,192-token one it keeps 13,598 bytes, what fits (2,677 under the share). Measured in
  ``evals/current_turn.py``: below 128k the agent makes 32-53% fewer calls (it need not
  ``read_file`` what it was just given) and sends 27-47% fewer tokens, at a lower cache ratio;
* **the newest ``pruning_recent_n`` results of past turns**: ``pruning_recent_msg_max_bytes``, and
  **older ones** ``pruning_old_msg_max_bytes`` (3,000); both at most CowAgent's
  ``historical_tool_result_max_chars`` and at most ``tool_result_budget_share`` of the history budget
  (:func:`past_cap`, about 3 bytes a token), so that no result the agent has read takes the room of
  the turns after it, and a trim to ``compact_target_ratio`` of the budget is not undone by one result.

**Each result is rewritten at most once after the model read it**: a rewrite breaks the
provider's cached prefix, and every token after it is billed again. A result the model has read that
must shrink goes straight to :func:`read_cap` (the old threshold), never first to the recent one; in
the current turn, once its results no longer fit, every read one is cut in the same request and the
unread ones share what is left; and when the prefix breaks anyway (a trim, a new summary), the read
results of the current turn are cut along with it. Measured in ``evals/current_turn.py`` (8k / 16k /
32k: billed-equivalent 1.24 / 1.47 / 1.18 M -> 0.79 / 0.85 / 0.99 M, answers in the next request 35 /
48 / 64 -> 38 / 52 / 66 of 70) and ``bench/bench_cache.py``.

A cut result's full text stays one ``read_file`` away: the notice in the middle names its file.
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
from ..workspace import TOOL_RESULTS_DIR

__all__ = [
    "FIT_MARGIN",
    "MIN_CUT_BYTES",
    "NOTICE",
    "Offload",
    "OffloadLimit",
    "current_turn_caps",
    "fits",
    "head_tail",
    "offload_limits",
    "offload_path",
    "past_cap",
    "plan_offload",
    "read_cap",
]

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
        return f"{TOOL_RESULTS_DIR}/{readable}.txt"
    key = json.dumps([namespace, session_id, seq, tool_call_id], ensure_ascii=True)
    digest = hashlib.sha256(key.encode("ascii")).hexdigest()[:20]
    prefix = _SAFE_ID.sub("_", readable)[:_READABLE_CHARS]
    return f"{TOOL_RESULTS_DIR}/{prefix}-{digest}.txt"


def fits(text: str, limit: OffloadLimit) -> bool:
    return textcut.fits(text, max_chars=limit.max_chars, max_bytes=limit.max_bytes)


def head_tail(text: str, limit: OffloadLimit, path: str) -> str:
    """``text`` cut to its head and tail (2 : 1) and, between them, the lines that tell a failure (each
    language's ``log_cues``), around a notice naming ``path``, within ``limit`` whenever the limit leaves
    room for the notice (:func:`contextmem.textcut.cut_keeping`)."""

    def notice(omitted: int) -> str:
        return NOTICE.format(omitted=omitted, total=len(text), path=path)

    return textcut.cut_keeping(text, notice, max_chars=limit.max_chars, max_bytes=limit.max_bytes)


FIT_MARGIN = 0.9
"""The share of the current turn's room its results are cut to, once they are over it: a head and tail
may take a few more tokens per byte than the whole result, the notice adds some, and the room may shrink
a little as the summary grows."""

MIN_CUT_BYTES = 1_000
"""The least a cut result keeps (its notice and path, and a few lines), however small the room."""


def past_cap(budget: int, settings: Settings) -> int:
    """The byte cap on any result of a past turn: ``tool_result_budget_share`` of the history
    ``budget`` tokens at 3 bytes a token (conservative for prose and code), at least
    :data:`MIN_CUT_BYTES`."""
    return max(MIN_CUT_BYTES, int(budget * settings.tool_result_budget_share * 3))


def _water_level(sizes: Sequence[int], room: int) -> int | None:
    """The largest ``level`` with ``sum(min(s, level)) <= room``, or ``None`` when all of ``sizes`` fit
    (a negative ``room`` counts as 0)."""
    left = max(room, 0)
    if sum(sizes) <= left:
        return None
    ordered = sorted(sizes)
    for k, size in enumerate(ordered):
        share = left // (len(ordered) - k)
        if size > share:
            return share
        left -= size
    return left  # unreachable: the sizes did not fit


def read_cap(budget: int | None, settings: Settings) -> int:
    """The one size a result the model has already read is cut to, when it must shrink at all:
    ``pruning_old_msg_max_bytes``, at most :func:`past_cap` of ``budget``. Cut straight to it, a result
    is rewritten at most once after it was sent, so it breaks the cached prefix at most once."""
    cap = past_cap(budget, settings) if budget is not None else 1 << 62
    return min(settings.pruning_old_msg_max_bytes, cap)


def _size(message: Message) -> int:
    return len(text_of(message.content).encode("utf-8", "surrogatepass"))


def current_turn_caps(
    history: Sequence[Message],
    counts: Sequence[int],
    current_turn_start: int,
    budget: int,
    settings: Settings,
    *,
    unseen: int | None = None,
    cut_read: bool = False,
) -> dict[int, int]:
    """The byte cap of each result of the current turn (index -> bytes): what the window can hold.

    ``budget`` is the history budget in tokens (window less system, summary, tool definitions and output
    reserve) and ``counts`` each message's tokens, in the same units. The room is the budget less the
    turn's other messages (its user message, the assistant's calls). Results that fit it together are
    not cut for the window. Otherwise, all at once:

    * the results the model has already read (those before ``unseen``, the first message no request
      carried yet; ``None``: none was read) are cut to :func:`read_cap`, every one over it in the same
      request: one break of the cached prefix, and far enough that the steps after it append;
    * with ``cut_read`` (the cached prefix breaks in this request anyway), the read ones over
      :func:`read_cap` are cut even when all fit: the break is paid once, not again later;
    * the unread ones share what is left at :data:`FIT_MARGIN`: each keeps at most a common level
      (results under it stay whole, :func:`_water_level`), converted to bytes at that result's own bytes
      per token. So a cut result, counted again, is back within the room and planning again yields
      nothing.

    Never above ``pruning_recent_msg_max_bytes``, never below :data:`MIN_CUT_BYTES`.
    """
    results = [i for i in range(current_turn_start, len(history)) if isinstance(history[i], ToolMessage)]
    if not results:
        return {}
    recent = settings.pruning_recent_msg_max_bytes
    room = budget - (sum(counts[current_turn_start:]) - sum(counts[i] for i in results))
    first_unread = 0 if unseen is None else unseen
    final = read_cap(budget, settings)
    ride_along = cut_read and any(i < first_unread and _size(history[i]) > final for i in results)
    if sum(counts[i] for i in results) <= room and not ride_along:
        return {i: max(MIN_CUT_BYTES, recent) for i in results}
    caps: dict[int, int] = {}
    for i in results:
        if i < first_unread:
            size = _size(history[i])
            caps[i] = max(MIN_CUT_BYTES, recent if size <= final else final)
            # what it will count once cut: its bytes per token, and the notice's few dozen tokens
            room -= counts[i] if size <= final else min(counts[i], final * counts[i] // max(size, 1) + 40)
    unread = [i for i in results if i >= first_unread]
    sizes = [counts[i] for i in unread]
    level = None if sum(sizes) <= room else _water_level(sizes, int(room * FIT_MARGIN))
    for i in unread:
        cap = recent
        if level is not None and counts[i] > level:
            cap = min(cap, level * _size(history[i]) // max(counts[i], 1))
        caps[i] = max(MIN_CUT_BYTES, cap)
    return caps


def offload_limits(
    history: Sequence[Message],
    current_turn_start: int,
    settings: Settings,
    *,
    budget: int | None = None,
    counts: Sequence[int] | None = None,
    unseen: int | None = None,
    cut_read: bool = False,
) -> list[OffloadLimit | None]:
    """The limit for every message (``None`` for non-tool messages), by recency among tool results (see
    the module docs). Without ``budget`` (and ``counts``, each message's tokens) only the settings apply.

    A past result that must shrink is cut straight to :func:`read_cap`, never first to the recent
    threshold and later again: one of the ``pruning_recent_n`` newest stays as it is while its current
    form fits the recent threshold, and is otherwise limited to the read cap, which its cut form then
    fits at every later age. ``unseen`` (where the messages no request carried yet begin) and
    ``cut_read`` are passed to :func:`current_turn_caps`.
    """
    limits: list[OffloadLimit | None] = [None] * len(history)
    cap = past_cap(budget, settings) if budget is not None else 1 << 62
    recent, old = min(settings.pruning_recent_msg_max_bytes, cap), read_cap(budget, settings)
    current: dict[int, int] = {}
    if budget is not None and counts is not None:
        current = current_turn_caps(
            history, counts, current_turn_start, budget, settings, unseen=unseen, cut_read=cut_read
        )
    history_chars = settings.historical_tool_result_max_chars
    recent_limit = OffloadLimit(recent, history_chars)
    rank = 0
    for i in range(len(history) - 1, -1, -1):
        if not isinstance(history[i], ToolMessage):
            continue
        if i >= current_turn_start:
            limits[i] = OffloadLimit(current.get(i, settings.pruning_recent_msg_max_bytes), None)
        elif rank < settings.pruning_recent_n and fits(text_of(history[i].content), recent_limit):
            limits[i] = recent_limit
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
    budget: int | None = None,
    counts: Sequence[int] | None = None,
    first_new: int = 0,
    unseen: int | None = None,
    cut_read: bool = False,
) -> list[Offload]:
    """Tool results whose current form is over its limit, from index ``first_new`` on.

    A result is cut at most once after the model read it: straight to :func:`read_cap` (see
    :func:`offload_limits`); a cut is made from the original, never from an earlier cut.
    ``path_of(i)`` names the offload file of message ``i`` (asked only for the results that are cut).
    Idempotent: a cut always fits its limit, so planning again after applying yields nothing.

    ``first_new`` is where the messages the model has not seen yet begin: cutting one of those changes
    nothing a provider has cached, while cutting an older one again rewrites the middle of a cached
    prefix, so the engine plans the older ones (``first_new=0``) only when it compacts anyway.

    ``budget`` (the history budget, tokens) and ``counts`` (each message's tokens) size the window caps:
    :func:`current_turn_caps` for the current turn, :func:`past_cap` for the rest. ``unseen`` is where
    the messages no request carried yet begin (``None``: none was sent), and ``cut_read`` says the
    cached prefix breaks in this request anyway (see :func:`current_turn_caps`).
    """
    limits = offload_limits(
        history, current_turn_start, settings, budget=budget, counts=counts, unseen=unseen, cut_read=cut_read
    )
    return [
        Offload(i, limit, path_of(i))
        for i, limit in enumerate(limits)
        if i >= first_new and limit is not None and not fits(text_of(history[i].content), limit)
    ]
