"""The reference agent (A1, C14, M1): a tool-calling loop over any LLM, built on the context engine.

runtime = await ContextMem.open(settings)
agent = await Agent.open(runtime, "chat")           # memory tools included
result = await agent.ask("What did we decide about the billing migration?")
"""

from .fit import apply_settings, fit_settings
from .loop import Agent, AgentEvent, TurnResult
from .profile import (
    DEFAULT_SYSTEM_PROMPT,
    ONBOARDING_QUESTIONS,
    compose_system_prompt,
    needs_onboarding,
    save_user_facts,
)
from .task import TaskMemory, TaskStep, fold_task, plan_fold_task
from .toolbox import FunctionTool, MemoryTool, Tool, Toolbox, memory_tools

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "ONBOARDING_QUESTIONS",
    "Agent",
    "AgentEvent",
    "FunctionTool",
    "MemoryTool",
    "TaskMemory",
    "TaskStep",
    "Tool",
    "Toolbox",
    "TurnResult",
    "apply_settings",
    "compose_system_prompt",
    "fit_settings",
    "fold_task",
    "memory_tools",
    "needs_onboarding",
    "plan_fold_task",
    "save_user_facts",
]
