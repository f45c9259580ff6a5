"""One real summary with the packaged local model: the prompt must make a small model write the structure.

Slow (a model call takes 30-120 s on a busy 2-core machine), so the transcript is short and the reply
bounded. When it skips and when it fails: :mod:`tests.local_model`.
"""

from __future__ import annotations

import pytest

from contextmem.messages import Message, assistant, tool_call, tool_result, user
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


@pytest.mark.local_llm
async def test_the_local_model_writes_a_structured_summary_that_keeps_identifiers() -> None:
    local_model()
    from contextmem.llm.local import LocalLLM

    llm = LocalLLM("local", n_ctx=2048, temperature=0.0, n_threads=THREADS)
    summarizer = Summarizer(llm, MessageCounter(get_counter()), max_tokens=500, timeout=600)
    summary = await summarizer.summarize(None, CONVERSATION)
    assert summary.source == "llm", summary.fallback_reason
    _, sections = parse_sections(summary.text)
    assert len(sections) == 6
    assert any(value in summary.text for value in IDENTIFIERS)  # the model itself kept some verbatim
    for value in IDENTIFIERS:
        assert value in summary.render()
