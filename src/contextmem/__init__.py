"""contextmem — the context-window and long-term memory engine for LLM agents.

The public API is what ``__all__`` lists; submodules not re-exported here may change.
"""

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
from .errors import (
    BudgetExceededError,
    ConfigError,
    ContextmemError,
    ContextOverflowError,
    HistoryError,
    LLMError,
    MessageFormatError,
)
from .llm.base import LLM, ChatResponse, ToolSpec, Usage
from .messages import (
    AssistantMessage,
    ImagePart,
    Message,
    SystemMessage,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
    orphan_tool_messages,
    validate_history,
)
from .models import ModelInfo, lookup_model
from .settings import Settings
from .tokens import Calibration, HeuristicCounter, MessageCounter, TiktokenCounter, TokenCounter, get_counter

__version__ = "0.1.0"

__all__ = [
    "LLM",
    "AssistantMessage",
    "BudgetExceededError",
    "Calibration",
    "ChatResponse",
    "ConfigError",
    "ContextOverflowError",
    "ContextmemError",
    "CountedHistory",
    "HeuristicCounter",
    "HistoryError",
    "ImagePart",
    "LLMError",
    "Message",
    "MessageCounter",
    "MessageFormatError",
    "ModelInfo",
    "RequestEstimate",
    "Settings",
    "SystemMessage",
    "TextPart",
    "TiktokenCounter",
    "TokenCounter",
    "ToolCall",
    "ToolMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
    "Window",
    "allowed_cuts",
    "fit_cut",
    "get_counter",
    "is_over_budget",
    "lookup_model",
    "orphan_tool_messages",
    "resolve_window",
    "safe_cut",
    "turn_starts",
    "validate_history",
]
