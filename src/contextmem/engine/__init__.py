"""The context engine: one session's state and the only assembler of model requests."""

from .core import ContextEngine
from .types import CompactResult, ContextStats, EngineEvent, Request, VerifyReport

__all__ = ["CompactResult", "ContextEngine", "ContextStats", "EngineEvent", "Request", "VerifyReport"]
