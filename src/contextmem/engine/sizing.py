"""Sizes the engine derives from its settings: the window, the summary budget, the summarising chunks.

Pure functions of the settings and the model (no I/O), plus the chunked incremental fold that uses them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..budget import Window, resolve_window
from ..messages import Message
from ..settings import Settings
from ..summarize import Summarizer, Summary
from ..tokens import MessageCounter

__all__ = ["NoLLM", "fold_in_chunks", "summary_sizes", "window_for"]


def window_for(settings: Settings) -> Window:
    """The context window and output reserve the settings ask for (``local`` takes the model's own)."""
    return resolve_window(
        model="" if settings.model == "local" else settings.model,
        context_window=settings.context_window,
        max_tokens=settings.max_tokens,
        cap=settings.agent_max_context_tokens,
    )


def summary_sizes(settings: Settings, llm_window: int | None) -> tuple[int, int]:
    """``(summary max tokens, chunk tokens)`` from the settings, shrunk to fit a model with a small window
    (the local one): the previous summary, a chunk of history and the reply share one call."""
    summary_max = settings.summary_max_tokens
    chunk_tokens = settings.summary_chunk_tokens
    if llm_window is not None:
        summary_max = max(200, min(summary_max, llm_window // 5))
        chunk_tokens = max(500, min(chunk_tokens, llm_window - 3 * summary_max - 400))
    return summary_max, chunk_tokens


async def fold_in_chunks(
    summarizer: Summarizer,
    counter: MessageCounter,
    chunk_tokens: int,
    base: Summary | None,
    messages: Sequence[Message],
    *,
    instruction: str | None,
) -> Summary:
    """Incremental summary over ``messages`` in chunks of at most ``chunk_tokens`` (one message may be
    alone over it); the ``instruction`` goes with the last chunk."""
    chunks: list[list[Message]] = []
    chunk: list[Message] = []
    size = 0
    for m in messages:
        n = counter.count_message(m)
        if chunk and size + n > chunk_tokens:
            chunks.append(chunk)
            chunk, size = [], 0
        chunk.append(m)
        size += n
    if chunk or not chunks:
        chunks.append(chunk)
    summary = base
    for k, part in enumerate(chunks):
        summary = await summarizer.summarize(
            summary, part, instruction=instruction if k == len(chunks) - 1 else None
        )
    assert summary is not None
    return summary


class NoLLM:
    """The extractive summariser needs no model; this satisfies the type and fails loudly if called."""

    name = "none"

    async def complete(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the extractive summariser called a model")

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the extractive summariser called a model")
