"""Task memory (C14): the working steps of one task, folded to its outcome when the task ends.

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

from ..compaction.plans import plan_fold_task
from ..engine import ContextEngine
from ..messages import AssistantMessage, ToolCall, ToolMessage, text_of

__all__ = ["TaskMemory", "TaskStep", "fold_task", "plan_fold_task"]


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


async def fold_task(engine: ContextEngine) -> int:
    """Fold the finished task at the end of ``engine``'s history; returns how many messages left.

    The steps are archived (dialog/ + store) before they leave; with ``summarize=False`` they are not
    added to the running summary, because the reply that stays already carries the outcome.
    """
    return await engine.fold_turn()
