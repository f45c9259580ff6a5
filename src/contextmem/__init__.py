"""contextmem — the context-window and long-term memory engine for LLM agents.

The public API is what ``__all__`` lists; submodules not re-exported here may change. ::

    from contextmem import ContextMem, Settings, user

    cm = await ContextMem.open(Settings.load())
    engine = await cm.session("user-42")
    await engine.add(user("hello"))
    request = await engine.build("You are helpful.")   # what to send the model, fitted to its window

``import contextmem`` and ``ContextMem.open(memory=False)`` need the core dependencies only (the workspace
and the daily memory writer are core). The memory-index names (``MemoryIndex``, ``MemoryHit``,
``MemoryTools``, ``Embedder``, ``open_memory_index``) are imported on first use; the index and the
embedders compute with numpy, so ``Embedder`` and ``open_memory_index`` need the ``memory`` extra and
without it raise :class:`MissingExtraError` naming the extra.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from .agent import Agent
from .budget import (
    CountedHistory,
    RequestEstimate,
    Window,
    allowed_cuts,
    fit_cut,
    is_over_budget,
    resolve_window,
    safe_cut,
    turn_starts,
)
from .engine import ContextEngine, EngineEvent, Request
from .errors import (
    ArchiveError,
    AuthenticationError,
    BadRequestError,
    BrokenExtraError,
    BudgetExceededError,
    CompactionError,
    ConfigError,
    ContextmemError,
    ContextOverflowError,
    HistoryError,
    IncompleteReplyError,
    InternalError,
    JsonlLineError,
    LLMError,
    LLMTimeoutError,
    MemoryConflictError,
    MessageFormatError,
    MessageStateError,
    MessageTooLargeError,
    MissingExtraError,
    MissingPackageError,
    NotFoundError,
    PathEscapeError,
    RateLimitError,
    SessionBusyError,
    SessionConflictError,
    StoreError,
    StoreLockedError,
    StoreSchemaError,
    StoreUnavailableError,
    StoreURLError,
    TokenizerError,
    ToolArgumentError,
    ToolCallExpiredError,
    TransientLLMError,
    UsageError,
)
from .formats.openai import from_openai, to_openai
from .llm.base import LLM, ChatResponse, Usage
from .llm.overflow import is_overflow
from .messages import (
    AssistantMessage,
    Content,
    ImagePart,
    Message,
    Part,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    ToolSpec,
    UserMessage,
    assistant,
    orphan_tool_messages,
    system,
    text_of,
    tool_call,
    tool_result,
    user,
    validate_history,
)
from .models import ModelInfo, lookup_model
from .runtime import ContextMem
from .settings import Settings
from .store.base import SessionStore
from .store.open import open_store
from .tokens import Calibration, HeuristicCounter, MessageCounter, TiktokenCounter, TokenCounter, get_counter
from .workspace import Workspace

if TYPE_CHECKING:
    from .memory import Embedder, MemoryHit, MemoryIndex, MemoryTools, open_memory_index

__version__ = "0.1.0"

# Names whose module needs an extra: imported on first access (PEP 562), so the core imports without it.
_LAZY = {
    "Embedder": "contextmem.memory",
    "MemoryHit": "contextmem.memory",
    "MemoryIndex": "contextmem.memory",
    "MemoryTools": "contextmem.memory",
    "open_memory_index": "contextmem.memory",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'contextmem' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next access skips this hook
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "LLM",
    "Agent",
    "ArchiveError",
    "AssistantMessage",
    "AuthenticationError",
    "BadRequestError",
    "BrokenExtraError",
    "BudgetExceededError",
    "Calibration",
    "ChatResponse",
    "CompactionError",
    "ConfigError",
    "Content",
    "ContextEngine",
    "ContextMem",
    "ContextOverflowError",
    "ContextmemError",
    "CountedHistory",
    "Embedder",
    "EngineEvent",
    "HeuristicCounter",
    "HistoryError",
    "ImagePart",
    "IncompleteReplyError",
    "InternalError",
    "JsonlLineError",
    "LLMError",
    "LLMTimeoutError",
    "MemoryConflictError",
    "MemoryHit",
    "MemoryIndex",
    "MemoryTools",
    "Message",
    "MessageCounter",
    "MessageFormatError",
    "MessageStateError",
    "MessageTooLargeError",
    "MissingExtraError",
    "MissingPackageError",
    "ModelInfo",
    "NotFoundError",
    "Part",
    "PathEscapeError",
    "RateLimitError",
    "Request",
    "RequestEstimate",
    "SessionBusyError",
    "SessionConflictError",
    "SessionStore",
    "Settings",
    "StoreError",
    "StoreLockedError",
    "StoreSchemaError",
    "StoreURLError",
    "StoreUnavailableError",
    "SystemMessage",
    "TextPart",
    "TiktokenCounter",
    "TokenCounter",
    "TokenizerError",
    "ToolArgumentError",
    "ToolCall",
    "ToolCallExpiredError",
    "ToolMessage",
    "ToolSpec",
    "TransientLLMError",
    "Usage",
    "UsageError",
    "UserMessage",
    "Window",
    "Workspace",
    "allowed_cuts",
    "assistant",
    "fit_cut",
    "from_openai",
    "get_counter",
    "is_over_budget",
    "is_overflow",
    "lookup_model",
    "open_memory_index",
    "open_store",
    "orphan_tool_messages",
    "resolve_window",
    "safe_cut",
    "system",
    "text_of",
    "to_openai",
    "tool_call",
    "tool_result",
    "turn_starts",
    "user",
    "validate_history",
]
