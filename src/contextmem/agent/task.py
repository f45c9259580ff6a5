"""Task memory (SPEC C14): the working steps of one task, folded to its outcome when the task ends.

The conversation memory is what the user and the agent *said*; a task's working memory is how the agent
got there — assistant tool calls and their results. While a task runs its steps live in the session like
any message (so the model sees them and the engine budgets, offloads and archives them). When the task
ends with a reply and ``fold_task_memory`` is on, :func:`fold_task` removes the steps from the context by
a compaction plan — the engine archives them first, as every removal — leaving the user's message and the
final reply: the task's outcome. Nothing is lost: the steps stay readable in ``dialog/``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..budget import turn_starts
from ..compaction.plans import Plan
from ..engine import ContextEngine
from ..messages import AssistantMessage, Message, ToolCall, ToolMessage, text_of

__all__ = ["TaskMemory", "TaskStep", "fold_task", "plan_fold_task"]

FOLD_REASON = "fold_task"


@dataclass(frozen=True, slots=True)
class TaskStep:
    """One model step that called tools: the calls, their results, and any text the model wrote."""

    thought: str
    calls: tuple[ToolCall, ...]
    results: tuple[ToolMessage, ...]


@dataclass(slots=True)
class TaskMemory:
    """The working memory of one task (one user turn): its request, steps and outcome."""

    request: str
    steps: list[TaskStep] = field(default_factory=list)
    outcome: str | None = None
    folded: int = 0  # messages moved from the context to the archive when the task ended

    def record(self, message: AssistantMessage, results: Sequence[ToolMessage]) -> None:
        self.steps.append(TaskStep(text_of(message.content), message.tool_calls, tuple(results)))

    @property
    def tool_calls(self) -> list[ToolCall]:
        return [call for step in self.steps for call in step.calls]


def plan_fold_task(history: Sequence[Message]) -> Plan:
    """Pure: drop the newest turn's tool steps when that turn ended in a plain reply; keep the rest.

    Only whole steps leave (an assistant tool call together with all its results), so no tool pair is
    ever split; the user message and every plain assistant reply stay. An unfinished turn (its last
    message is not a plain reply) is left alone.
    """
    starts = turn_starts(history)
    if not starts or not history:
        return Plan(tuple(range(len(history))), ())
    last = history[-1]
    if not isinstance(last, AssistantMessage) or last.tool_calls:
        return Plan(tuple(range(len(history))), ())
    first = starts[-1]
    drop = tuple(
        i
        for i in range(first, len(history))
        if isinstance(history[i], ToolMessage)
        or (isinstance(history[i], AssistantMessage) and history[i].tool_calls)  # type: ignore[union-attr]
    )
    keep = tuple(i for i in range(len(history)) if i not in set(drop))
    return Plan(keep, drop, steps=(FOLD_REASON,))


async def fold_task(engine: ContextEngine) -> int:
    """Fold the finished task at the end of ``engine``'s history; returns how many messages left.

    The steps are archived (dialog/ + store) before they leave; with ``summarize=False`` they are not
    added to the running summary, because the reply that stays already carries the outcome.
    """
    # The engine applies plans under its own lock; it has no public "apply this plan" method yet, so this
    # is the one place outside the engine that reaches for it (see the agent's notes for the lead).
    async with engine._lock:
        plan = plan_fold_task(engine.history.messages)
        if plan.empty:
            return 0
        applied = await engine._apply(plan, FOLD_REASON, summarize=False)
    return len(plan.drop) if applied else 0
