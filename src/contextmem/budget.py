"""The pure budget core (C1, C3): regions, turns, safe cuts, fitting. No I/O, no clock, no globals.

Regions of the window::

    history_budget = context_window - system - summary - tool_defs - max_tokens

A *turn* starts at a user message and runs to the next one. A *cut* ``c`` means ``history[:c]`` leaves
the context and ``history[c:]`` stays. The only cuts allowed are turn starts (plus 0 and ``len``),
and :func:`turn_starts` is the one function that says where those are: every strategy asks it, none
re-derives it. Since a valid history keeps each tool result right after its call
(:func:`contextmem.messages.validate_history`), a cut at a turn start can never orphan a tool pair.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Literal

from .errors import BudgetExceededError, ConfigError, UsageError
from .messages import Message, UserMessage
from .models import lookup_model
from .settings import DEFAULT_OUTPUT_RESERVE, Settings
from .tokens.counter import MessageCounter

__all__ = [
    "FITTED",
    "CountedHistory",
    "RequestEstimate",
    "Window",
    "WindowFit",
    "allowed_cuts",
    "cut_for_budget",
    "fit_cut",
    "fit_settings",
    "fit_to_model",
    "fit_window",
    "is_explicit",
    "is_over_budget",
    "output_reserve",
    "prefix_sums",
    "resolve_window",
    "safe_cut",
    "turn_starts",
]

# --- the window and its regions -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Window:
    """The usable context window and the output reserve carved out of it."""

    context_window: int
    max_tokens: int

    def history_budget(self, *, system: int = 0, summary: int = 0, tool_defs: int = 0) -> int:
        """What is left for history once the fixed regions are paid for (may be negative)."""
        return self.context_window - system - summary - tool_defs - self.max_tokens


def resolve_window(
    *,
    model: str = "",
    context_window: int | None = None,
    max_tokens: int | None = None,
    cap: int | None = None,
) -> Window:
    """The window to plan against.

    The model's window is, in order: ``context_window`` when set; the model table's; ``4 * max_tokens``
    when only ``max_tokens`` is set (picoclaw's default); else ``cap``. ``cap``
    (``agent_max_context_tokens``) then bounds it: a budget may be smaller than what the model can take.
    The output reserve is ``max_tokens`` when set, else the model's max output up to 4096.
    """
    info = lookup_model(model) if model else None
    if context_window is not None:
        window = context_window
    elif info is not None:
        window = info.context_window
    elif max_tokens is not None:
        window = 4 * max_tokens
    elif cap is not None:
        window = cap
    else:
        raise ConfigError(
            "no window: resolve_window needs context_window, a known model, max_tokens or cap. "
            "Fix: set context_window"
        )
    if cap is not None:
        window = min(window, cap)
    if max_tokens is not None:
        reserve = max_tokens
    else:
        reserve = min(info.max_output, DEFAULT_OUTPUT_RESERVE) if info else DEFAULT_OUTPUT_RESERVE
    return Window(window, min(reserve, window // 2))


@dataclass(frozen=True, slots=True)
class RequestEstimate:
    """Tokens of one request by region, against its window.

    The regions are our own counts. ``ratio`` is the session's calibration (what the provider billed over
    what we counted, :class:`~contextmem.tokens.Calibration`, measured on whole prompts); the budget fits
    the calibrated prompt, so :attr:`prompt`, :attr:`free` and :attr:`over_budget` are calibrated too:
    the count the budget fitted, close to what the provider will bill. :attr:`counted` is our raw total,
    which calibration compares with the bill.
    """

    system: int
    summary: int
    history: int
    tool_defs: int
    max_tokens: int
    context_window: int
    ratio: float = 1.0

    def calibrated(self, tokens: int) -> int:
        """``tokens`` of our count as the provider is expected to bill them (unchanged when uncalibrated)."""
        return tokens if self.ratio == 1.0 else math.ceil(tokens * self.ratio)

    @property
    def prompt(self) -> int:
        """The prompt's tokens as the budget counts them: our count, calibrated."""
        return self.calibrated(self.counted)

    @property
    def counted(self) -> int:
        """The prompt's tokens as our tokenizer counts them, before calibration."""
        return self.system + self.summary + self.history + self.tool_defs

    @property
    def free(self) -> int:
        return self.context_window - self.prompt - self.max_tokens

    @property
    def over_budget(self) -> bool:
        return is_over_budget(self.prompt, self.max_tokens, self.context_window)


def is_over_budget(prompt_tokens: int, max_tokens: int, context_window: int) -> bool:
    """picoclaw's proactive check: ``messages + tool_defs + max_tokens > window``."""
    return prompt_tokens + max_tokens > context_window


# --- turns and cuts ------------------------------------------------------------------------------


def turn_starts(messages: Sequence[Message]) -> list[int]:
    """Indices of the user messages: where turns start. The one owner of the cut rule."""
    return [i for i, m in enumerate(messages) if isinstance(m, UserMessage)]


def allowed_cuts(messages: Sequence[Message]) -> list[int]:
    """Every cut that keeps tool pairs whole: 0, each turn start, and ``len(messages)``."""
    cuts = turn_starts(messages)
    if not cuts or cuts[0] != 0:
        cuts.insert(0, 0)
    if cuts[-1] != len(messages):
        cuts.append(len(messages))
    return cuts


def safe_cut(
    messages: Sequence[Message], target: int, *, direction: Literal["nearest", "down", "up"] = "nearest"
) -> int:
    """The allowed cut nearest to ``target`` (``down``: at or before it, ``up``: at or after it).

    Ties go down — a cut that keeps more is the safer mistake.
    """
    cuts = allowed_cuts(messages)
    target = min(max(target, 0), len(messages))
    i = bisect_right(cuts, target)
    below = cuts[i - 1]  # cuts[0] == 0 <= target, so i >= 1
    above = cuts[i] if i < len(cuts) else cuts[-1]
    if below == target or direction == "down":
        return below
    if direction == "up":
        return above
    return below if target - below <= above - target else above


def prefix_sums(counts: Iterable[int]) -> list[int]:
    """``p[i]`` = tokens of the first ``i`` messages; ``p[-1] - p[c]`` = tokens kept by cut ``c``."""
    return [0, *accumulate(counts)]


def cut_for_budget(prefix: Sequence[int], starts: Sequence[int], budget: int) -> int:
    """The smallest cut among ``[0, *starts]`` whose kept part fits ``budget``; the newest turn stays.

    ``prefix`` are the prefix sums of the counts and ``starts`` the turn starts, both ascending.
    Raises :class:`BudgetExceededError` when even the newest turn alone is over the budget.
    O(log n): kept tokens only shrink as the cut moves later, so a binary search finds it.
    """
    total = prefix[-1]
    if total <= budget:
        return 0
    cuts = list(starts) if starts and starts[0] == 0 else [0, *starts]
    # kept(c) = total - prefix[c] <= budget  <=>  prefix[c] >= total - budget
    need = total - budget
    lo = bisect_left(cuts, True, key=lambda c: prefix[c] >= need)
    if lo == len(cuts):
        newest = cuts[-1]
        raise BudgetExceededError(total - prefix[newest], budget, "the newest turn")
    return cuts[lo]


def fit_cut(messages: Sequence[Message], counts: Sequence[int], budget: int) -> int:
    """The smallest allowed cut that brings ``messages`` within ``budget`` tokens (see cut_for_budget)."""
    if len(counts) != len(messages):
        raise UsageError(
            f"counts has {len(counts)} entries for {len(messages)} messages. Fix: one count per message"
        )
    return cut_for_budget(prefix_sums(counts), turn_starts(messages), budget)


# --- an incrementally counted history ------------------------------------------------------------


class CountedHistory:
    """A history with its per-message counts, prefix sums and turn starts kept up to date.

    Appending costs one (cached) count; the total and :meth:`fit_cut` cost O(1) and O(log n), so a
    turn of an agent costs O(new messages), however long the history has grown.
    """

    def __init__(self, counter: MessageCounter, messages: Iterable[Message] = ()) -> None:
        self.counter = counter
        self.messages: list[Message] = []
        self.counts: list[int] = []
        self._prefix: list[int] = [0]
        self._starts: list[int] = []
        self.extend(messages)

    def __len__(self) -> int:
        return len(self.messages)

    @property
    def total(self) -> int:
        return self._prefix[-1]

    @property
    def starts(self) -> list[int]:
        return list(self._starts)

    def append(self, message: Message) -> int:
        n = self.counter.count_message(message)
        if isinstance(message, UserMessage):
            self._starts.append(len(self.messages))
        self.messages.append(message)
        self.counts.append(n)
        self._prefix.append(self._prefix[-1] + n)
        return n

    def extend(self, messages: Iterable[Message]) -> None:
        for m in messages:
            self.append(m)

    def tokens_from(self, cut: int) -> int:
        return self._prefix[-1] - self._prefix[cut]

    def fit_cut(self, budget: int) -> int:
        return cut_for_budget(self._prefix, self._starts, budget)

    def drop_before(self, cut: int) -> list[Message]:
        """Remove and return ``messages[:cut]``; ``cut`` must be an allowed cut."""
        if cut not in (0, len(self.messages)) and cut not in self._starts:
            raise UsageError(f"cut {cut} is not a turn start. Fix: use safe_cut() to find one")
        dropped = self.messages[:cut]
        base = self._prefix[cut]
        self.messages = self.messages[cut:]
        self.counts = self.counts[cut:]
        self._prefix = [p - base for p in self._prefix[cut:]]
        self._starts = [s - cut for s in self._starts if s >= cut]
        return dropped


# --- fitting the window to the model --------------------------------------------------------------

FITTED = "fitted to "
"""How :attr:`Settings.sources` marks a value :func:`fit_window` chose (``fitted to local:x (8192)``)."""

_FIT_KEYS = ("context_window", "max_tokens", "summary_max_tokens", "summary_chunk_tokens")


def output_reserve(window: int, reply: int | None) -> int:
    """The output reserve in a model's ``window``: its ``reply`` size if that leaves the prompt more than
    half the window, else an eighth of the window. The one statement of the rule."""
    return reply if reply is not None and 0 < reply < window // 2 else window // 8


@dataclass(frozen=True, slots=True)
class WindowFit:
    """What a session plans against with one model: its window, and the sizes of its summary calls.

    ``fitted`` holds the settings the model decided (not the user), as ``(key, value)`` pairs.
    """

    window: Window
    summary_max_tokens: int
    summary_chunk_tokens: int
    fitted: tuple[tuple[str, int], ...] = ()


def is_explicit(settings: Settings, key: str) -> bool:
    """Did the user choose ``key``? A file, the environment or an override did; so did a value passed to
    ``Settings(...)`` that differs from the default. A value :func:`fit_window` chose did not."""
    source = settings.sources[key]
    if source.startswith(FITTED):
        return False
    if source != "default":
        return True
    return bool(getattr(settings, key) != type(settings).model_fields[key].default)


def fit_window(
    settings: Settings,
    model_window: int | None = None,
    model_reply: int | None = None,
    *,
    proven: bool = False,
) -> WindowFit:
    """The one place the window and the summary sizes are fitted to the model (C1).

    ``model_window`` is what one call to the model may hold, prompt and reply (the LLM's
    ``context_window``: a local model's 8192, far below the 50,000-token cap); ``model_reply`` its own
    reply size. Without one, the settings and the model table decide (:func:`resolve_window`), and the
    summary (unless the user sized it) takes at most ``summary_window_share`` of that window: 35%, at
    8,000 tokens a 2,800-token fact list in a view of ~3,200-3,500 tokens (where a quarter kept 6 points
    fewer answers on the MADial dev set: ``evals/results/compaction_facts.md``). With one, each
    key the user did not set (:func:`is_explicit`) follows the model: the window is the model's, the
    output reserve its reply (an eighth of the window if the reply would take half), the summary at most
    ``summary_window_share`` of the window and a summarised chunk at most half. Whatever the user set, a
    summary call must fit the model: it holds a chunk, the ledger and a draft twice (shown and replied,
    a third of the summary each, or half to reshape on ``/compact``; the rest of the previous summary is
    merged in without the model), so the summary is bounded by half the window and the chunk by what
    1.5 summaries leave.
    ``agent_max_context_tokens`` still caps the window.

    ``proven``: the provider stated ``model_window`` while refusing a request (an overflow, see
    :meth:`~contextmem.engine.core.ContextEngine.handle_overflow`). Then it bounds what the user set too:
    a larger ``context_window`` becomes it, and the output reserve follows :func:`output_reserve`.
    """
    s = settings
    model = "" if s.model == "local" else s.model
    if model_window is None or model_window <= 0:
        window = resolve_window(
            model=model,
            context_window=s.context_window,
            max_tokens=s.max_tokens,
            cap=s.agent_max_context_tokens,
        )
        summary_max = s.summary_max_tokens
        if not is_explicit(s, "summary_max_tokens"):
            summary_max = max(200, min(summary_max, int(window.context_window * s.summary_window_share)))
        return WindowFit(window, summary_max, s.summary_chunk_tokens)
    w = model_window
    own = {key: not is_explicit(s, key) for key in _FIT_KEYS}
    context_window = w if own["context_window"] else s.context_window
    reply = output_reserve(w, model_reply)
    max_tokens = reply if own["max_tokens"] else s.max_tokens
    if proven:
        context_window = w if context_window is None else min(context_window, w)
        max_tokens = output_reserve(w, max_tokens)
    share = int(w * s.summary_window_share)
    summary_max = min(s.summary_max_tokens, share) if own["summary_max_tokens"] else s.summary_max_tokens
    summary_max = max(200, min(summary_max, w // 2))
    chunk = min(s.summary_chunk_tokens, w // 2) if own["summary_chunk_tokens"] else s.summary_chunk_tokens
    chunk = max(500, min(chunk, w - 3 * summary_max // 2 - 400))
    window = resolve_window(
        model=model, context_window=context_window, max_tokens=max_tokens, cap=s.agent_max_context_tokens
    )
    chosen = {
        "context_window": context_window,
        "max_tokens": window.max_tokens,  # the reserve taken (the model's reply fits a window the user set)
        "summary_max_tokens": summary_max,
        "summary_chunk_tokens": chunk,
    }
    fitted = tuple((k, v) for k, v in chosen.items() if own[k] and v is not None and getattr(s, k) != v)
    return WindowFit(window, summary_max, chunk, fitted)


def fit_to_model(settings: Settings, llm: object | None) -> WindowFit:
    """:func:`fit_window` for an LLM that states what one call may hold (its ``context_window``, see
    :class:`~contextmem.llm.base.LLM`) and its own reply size (``max_tokens``); others state nothing."""
    window = getattr(llm, "context_window", None)
    reply = getattr(llm, "max_tokens", None)
    return fit_window(
        settings, window if isinstance(window, int) else None, reply if isinstance(reply, int) else None
    )


def fit_settings(settings: Settings, llm: object | None) -> Settings:
    """``settings`` with the values :func:`fit_to_model` chose written in, their source saying so (for
    ``/config``). Fitting the result again changes nothing; engines fit themselves either way."""
    fit = fit_to_model(settings, llm)
    source = (
        f"{FITTED}{getattr(llm, 'name', 'the model')} (context_window {getattr(llm, 'context_window', '?')})"
    )
    for key, value in fit.fitted:
        settings = settings.with_value(key, value, source)
    return settings
