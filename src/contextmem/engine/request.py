"""Estimating and assembling one request (C4, C7): what goes to the model, in the request's order.

:func:`assemble` is the one assembler: system prompt + summary + history + tools. It reads the session
and never changes it. :class:`Regions` keeps a pass over a request cheap: the system prompt and tools
are counted once per pass, the summary once per summary (summaries are values), and the history never
(it keeps its own running total), so re-estimating after each compaction step costs O(1).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, replace

from ..budget import CountedHistory, RequestEstimate, Window
from ..compaction.pairs import sendable
from ..errors import BudgetExceededError
from ..llm.base import ToolSpec
from ..messages import Message, SystemMessage, TextPart, UserMessage
from ..summarize import Summary
from ..tokens import MessageCounter
from ..tokens.counter import MESSAGE_OVERHEAD, REPLY_PRIMING
from .types import Request

__all__ = ["Fixed", "Regions", "assemble", "history_budget", "shared_prefix"]


@dataclass(frozen=True, slots=True)
class Fixed:
    """The regions one pass counts once: the system prompt's tokens and the tool definitions'."""

    system_prompt: str
    tools: tuple[ToolSpec, ...]
    prompt: int
    tool_defs: int


class Regions:
    """Counts the regions of a request for one session (see the module docs for what is cached)."""

    def __init__(self, counter: MessageCounter) -> None:
        self.counter = counter
        self._rendered: tuple[Summary | None, str, int] = (None, "", 0)

    def fixed(self, system_prompt: str, tools: Sequence[ToolSpec]) -> Fixed:
        return Fixed(
            system_prompt,
            tuple(tools),
            self.counter.count_text(system_prompt),
            self.counter.count_tools(tools),
        )

    def summary(self, summary: Summary | None) -> tuple[str, int]:
        """``summary`` rendered, and its tokens."""
        if self._rendered[0] is not summary:
            text = summary.render() if summary else ""
            self._rendered = (summary, text, self.counter.count_text(text))
        return self._rendered[1], self._rendered[2]

    def estimate(
        self,
        fixed: Fixed,
        summary: Summary | None,
        history: CountedHistory,
        window: Window,
        ratio: float = 1.0,
    ) -> RequestEstimate:
        """The request's regions; ``ratio`` is the calibration :func:`history_budget` fits with."""
        rendered, summary_tokens = self.summary(summary)
        return RequestEstimate(
            system=(MESSAGE_OVERHEAD if fixed.system_prompt or rendered else 0) + fixed.prompt,
            summary=summary_tokens,
            history=history.total,
            tool_defs=fixed.tool_defs,
            max_tokens=window.max_tokens,
            context_window=window.context_window,
            ratio=ratio,
        )


def history_budget(est: RequestEstimate, window: Window, ratio: float) -> int:
    """Tokens (as we count them) left for history once the fixed regions are paid for. ``ratio`` (the
    calibration) says how far our counts are from what the provider bills; it was measured on whole
    prompts (reply priming included), so it applies to the whole prompt: a history within this budget
    keeps ``ratio * (prompt + priming)`` + the reserve in the window, and the request's ``est.prompt``
    (the same ratio) is never ``over_budget``."""
    room = window.context_window - window.max_tokens
    return int(room / ratio) - REPLY_PRIMING - est.system - est.summary - est.tool_defs


def assemble(
    history: CountedHistory,
    fixed: Fixed,
    est: RequestEstimate,
    *,
    budget: int | None,
    summary: str,
    first_user: bool,
    counter: MessageCounter,
    all_live: bool = False,
) -> Request:
    """The request: the system prompt and ``summary`` (or the summary before the first user message,
    ``first_user``), then the newest turns of ``history`` that fit ``budget``; all of it, unfitted, when
    ``budget`` is ``None``. Raises :class:`BudgetExceededError` when not even the newest turn fits, and with
    ``all_live`` (what ``build`` asks: a live message leaves the request only by leaving the context, archived
    and summarised) when not all of it fits. Only whole tool pairs are sent
    (:func:`~contextmem.compaction.pairs.sendable`): a call whose tool is still running, maybe another
    writer's, waits for its results, and a pair broken in the store is never sent.
    """
    messages: list[Message] = list(history.messages)
    whole = sendable(messages)  # never an orphan: not a broken pair, nor a call whose tool still runs
    if len(whole) != len(messages):
        history, messages = CountedHistory(counter, whole), whole
    if budget is not None and history.total > budget:
        fixed_tokens = est.system + est.summary + est.tool_defs + est.max_tokens + REPLY_PRIMING
        if all_live:
            what = f"this request with all {len(messages)} live messages (none may be left out unsummarised)"
            raise BudgetExceededError(history.total + fixed_tokens, est.context_window, what)
        try:
            cut = history.fit_cut(budget)
        except BudgetExceededError as exc:
            raise BudgetExceededError(exc.needed + fixed_tokens, est.context_window, "this request") from exc
        messages = messages[cut:]
    if first_user and summary:
        idx = next((i for i, m in enumerate(messages) if isinstance(m, UserMessage)), None)
        if idx is not None:
            first = messages[idx]
            assert isinstance(first, UserMessage)
            content = (
                f"{summary}\n\n{first.content}"
                if isinstance(first.content, str)
                else (TextPart(summary), *first.content)
            )
            messages[idx] = UserMessage(content, name=first.name, extra=first.extra)
            summary = ""
    system_text = "\n\n".join(p for p in (fixed.system_prompt, summary) if p)
    out: list[Message] = [SystemMessage(system_text)] if system_text else []
    out.extend(messages)
    sent = sum(counter.count_messages(messages))
    estimate = RequestEstimate(
        est.system, est.summary, sent, est.tool_defs, est.max_tokens, est.context_window, est.ratio
    )
    return Request(tuple(out), fixed.tools, est.max_tokens, estimate)


def shared_prefix(previous: Request | None, request: Request, history: CountedHistory) -> Request:
    """``request`` with :attr:`~.types.Request.expected_cached` set: the tokens of its beginning that
    ``previous`` (the session's request before it) began with too, as a provider's prompt cache reads a
    prefix. Counted as :mod:`contextmem.eval.prompt_cache` counts a replay: the tool definitions when
    they are unchanged (else nothing), then each leading message equal to the previous request's, whole;
    the first message that differs, and everything after it, counts nothing.

    ``history`` is the live history ``request`` was assembled from (its counts are reused when the
    request carries all of it). Pure; a message is compared by identity first, so an unchanged history
    costs no text comparison.
    """
    if previous is None or previous.tools != request.tools:
        return request
    est = request.estimate
    head = 1 if request.messages and isinstance(request.messages[0], SystemMessage) else 0
    sent = request.messages[head:]
    if len(sent) == len(history.messages) and all(map(operator.is_, sent, history.messages)):
        counts: Sequence[int] = history.counts
    else:  # a pair held back, or the summary in the first user message
        counts = history.counter.count_messages(sent)
    tokens = [est.system + est.summary] * head + list(counts)
    shared = est.tool_defs
    for old, new, n in zip(previous.messages, request.messages, tokens, strict=False):
        if old is not new and old != new:
            break
        shared += n
    return replace(request, expected_cached=shared)
