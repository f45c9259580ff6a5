"""Token counting (C2): real tokenizers where available, a CJK-aware heuristic otherwise.

A :class:`TokenCounter` counts text. :class:`MessageCounter` builds on one to count whole messages —
content, reasoning, tool calls (id, name, arguments), tool-call ids, per-message overhead, a flat cost
per image — and tool definitions, caching per message so a growing history costs O(new messages).
:class:`Calibration` corrects the estimate from what a provider reports it billed.
"""

from .calibrate import Calibration
from .counter import MessageCounter, TokenCounter, get_counter
from .heuristic import HeuristicCounter
from .tiktoken_backend import TiktokenCounter

__all__ = [
    "Calibration",
    "HeuristicCounter",
    "MessageCounter",
    "TiktokenCounter",
    "TokenCounter",
    "get_counter",
]
