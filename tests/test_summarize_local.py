"""One real summary with the packaged local model: the prompt must make a small model write the structure.

Slow (a model call takes 30-120 s on a busy 2-core machine), so the transcript is short and the reply
bounded. When it skips and when it fails: :mod:`tests.local_model`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from contextmem.llm.base import ChatResponse
from contextmem.messages import Message, assistant, text_of, tool_call, tool_result, user
from contextmem.summarize import Summarizer, parse_sections
from contextmem.tokens import MessageCounter, get_counter

from .local_model import THREADS, local_model

IDENTIFIERS = ["src/billing/invoice.py", "ZeroDivisionError", "v4.2.0"]

CONVERSATION: list[Message] = [
    user(
        "After the v4.2.0 release, invoice generation crashes with ZeroDivisionError in "
        "src/billing/invoice.py. Please fix it. Do not change the database schema."
    ),
    assistant(
        "Reading the file.",
        tool_calls=[tool_call("c1", "read_file", {"path": "src/billing/invoice.py"})],
    ),
    tool_result("c1", "def unit_price(total, qty):\n    return total / qty", name="read_file"),
    assistant(
        "unit_price() divides by qty, which is 0 for free items. I will return 0 when qty is 0 "
        "instead of raising. Next: add a regression test."
    ),
]


class Recorded:
    """The real model with its raw replies kept: the summary is the reply reconciled with the extractive
    draft (``revise`` restores the sections and the facts a reply drops), so only the raw reply shows
    what the model itself wrote."""

    def __init__(self, llm: Any) -> None:
        self.llm = llm
        self.replies: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.llm, name)

    async def complete(self, messages: Sequence[Message], **options: Any) -> ChatResponse:
        reply: ChatResponse = await self.llm.complete(messages, **options)
        self.replies.append(text_of(reply.message.content))
        return reply


def model_wrote(reply: str) -> list[str]:
    """What a raw reply lacks of a structured summary that keeps identifiers (empty: nothing)."""
    _, sections = parse_sections(reply)
    lacks = [f"only {len(sections)} of 6 sections"] if len(sections) < 4 else []
    if not any(value in reply for value in IDENTIFIERS):
        lacks.append("no identifier verbatim")
    return lacks


def test_model_wrote_catches_a_one_line_reply_and_passes_a_structured_one() -> None:
    assert model_wrote("Fixed the invoice bug.") == ["only 0 of 6 sections", "no identifier verbatim"]
    structured = (
        "## Goal\n- Fix ZeroDivisionError in src/billing/invoice.py\n## Constraints\n- No schema change\n"
        "## Progress\n- Read the file\n## Key decisions\n- Return 0 when qty is 0\n"
        "## Next steps\n- Add a regression test\n## Critical context\n- v4.2.0"
    )
    assert model_wrote(structured) == []


@pytest.mark.local_llm
async def test_the_local_model_writes_a_structured_summary_that_keeps_identifiers() -> None:
    local_model()
    from contextmem.llm.local import LocalLLM

    llm = Recorded(LocalLLM("local", n_ctx=2048, temperature=0.0, n_threads=THREADS))
    summarizer = Summarizer(llm, MessageCounter(get_counter()), max_tokens=500, timeout=600)
    summary = await summarizer.summarize(None, CONVERSATION)
    assert summary.source == "llm", summary.fallback_reason
    assert len(llm.replies) == 1
    assert model_wrote(llm.replies[0]) == [], llm.replies[0]  # the model itself, before revise()
    _, sections = parse_sections(summary.text)
    assert len(sections) == 6
    for value in IDENTIFIERS:
        assert value in summary.render()
