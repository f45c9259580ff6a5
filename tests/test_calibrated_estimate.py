"""Issue 52, items 5 and 6: the request's estimate is the calibrated count the budget fits, and an overflow
corrects a calibration that a provider under-reporting ``prompt_tokens`` pushed down to its floor.

The provider of the own-loop test is a real HTTP server speaking OpenAI's API (:mod:`tests.servers`), with
its own tokenizer (ours x 1.2, as Claude's or Qwen's differ from o200k), its own window, OpenAI's
``context_length_exceeded`` error past it, and a usage that reports 40% of the prompt it counted.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from contextmem import ContextMem, Settings
from contextmem.formats.openai import messages_from_openai
from contextmem.llm.base import Usage
from contextmem.llm.overflow import is_overflow
from contextmem.tokens import Calibration, MessageCounter, get_counter
from contextmem.tokens.counter import REPLY_PRIMING

from .engine_helpers import make_engine
from .servers import FakeOpenAIServer, Scripted, ServerReply, openai_error

WINDOW, RESERVE = 4_000, 300
SYSTEM = "You are a deploy assistant."


def _turn(i: int) -> list[dict[str, str]]:
    words = " ".join(f"svc-{i}-{k} rolled to eu-west-{k % 3} in {k * 7} s" for k in range(24))
    return [
        {"role": "user", "content": f"Step {i}: {words}"},
        {"role": "assistant", "content": f"svc-{i} is live; {words[:200]}"},
    ]


async def test_the_estimate_is_the_calibrated_count_the_budget_fits(tmp_path: Path) -> None:
    """After ``record_usage`` of a bill below our count, ``build`` reports the count the budget used (the
    history times the ratio), not our raw count, and ``over_budget`` agrees with it. Before: the estimate
    was the raw count, over the window and ``over_budget=True`` for a request the provider took whole."""
    engine = await make_engine(
        tmp_path, window=WINDOW, reserve=RESERVE, compact_message_threshold=100, agent_max_context_turns=50
    )
    for i in range(4):
        await engine.add(*_turn(i))
    first = await engine.build(SYSTEM)
    billed = int((first.estimate.counted + REPLY_PRIMING) * 0.6)
    engine.record_usage(first, Usage(prompt_tokens=billed, completion_tokens=9))
    ratio = engine.calibration.ratio
    assert ratio == pytest.approx(0.6, abs=0.01)
    for i in range(4, 12):
        await engine.add(*_turn(i))
    request = await engine.build(SYSTEM)
    est = request.estimate
    assert len(request.messages) == 1 + 24  # nothing left the context: the budget took all of it
    assert est.counted + est.max_tokens > WINDOW  # our raw count is over the window ...
    assert est.prompt == math.ceil(est.counted * ratio)
    assert est.prompt + est.max_tokens <= WINDOW  # ... the calibrated one, which the budget fitted, is not
    assert not est.over_budget
    assert engine.stats(SYSTEM).estimate.prompt == est.prompt  # /context shows the same figure
    # and calibration still compares the bill with our own count, not with the calibrated one
    engine.record_usage(request, Usage(prompt_tokens=int((est.counted + REPLY_PRIMING) * 0.6)))
    assert engine.calibration.ratio == pytest.approx(0.6, abs=0.01)


def test_a_floor_holds_the_ratio_against_later_reports() -> None:
    cal = Calibration().observe(1000, 400).at_least(1.1)
    assert (cal.ratio, cal.low) == (1.1, 1.1)
    for _ in range(10):
        cal = cal.observe(1000, 400)  # a provider still under-reporting
    assert cal.ratio == pytest.approx(1.1)
    assert Calibration().at_least(9.0).ratio == Calibration().high  # never past the clamp


class UnderReporting:
    """An OpenAI-compatible provider with a window of ``window`` tokens of its own tokenizer (ours x 1.2),
    which rejects a longer request (prompt + max_tokens) as OpenAI does and reports 40% of the prompt."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.counter = MessageCounter(get_counter("o200k_base"))
        self.loop_calls = self.overflows = 0

    def __call__(self, body: Any) -> Scripted:
        msgs = messages_from_openai(body["messages"])
        real = int(1.2 * (sum(self.counter.count_messages(msgs)) + REPLY_PRIMING))
        loop = body["messages"][0]["content"].startswith(SYSTEM)  # not one of contextmem's summary calls
        self.loop_calls += loop
        if real + int(body.get("max_tokens") or 0) > self.window:
            self.overflows += loop
            return openai_error(
                400,
                f"This model's maximum context length is {self.window} tokens. However, your messages "
                f"resulted in {real} tokens. Please reduce the length of the messages.",
                code="context_length_exceeded",
            )
        return ServerReply("Done; health check green.", usage=Usage(int(0.4 * real), 6))


async def own_loop(workspace: Path, base_url: str, turns: int) -> tuple[int, int]:
    """The own-loop recipe of docs/own-loop.md with overflow handling, over ``turns`` turns: returns the
    messages lost (``verify``) and the overflows recovered."""
    from openai import AsyncOpenAI, BadRequestError

    client = AsyncOpenAI(base_url=base_url, api_key="sk-test")
    settings = Settings(
        model="openai:gpt-4o-mini",
        base_url=base_url,
        workspace=workspace,
        context_window=WINDOW,
        max_tokens=RESERVE,
    )
    mem = await ContextMem.open(settings, memory=False)
    engine = await mem.session("own-loop")
    recovered = 0
    for i in range(turns):
        await engine.add(_turn(i)[0])
        request = await engine.build(SYSTEM)
        while True:
            try:
                completion = await client.chat.completions.create(
                    model="gpt-4o-mini", messages=request.to_openai(), max_tokens=request.max_tokens
                )
                break
            except BadRequestError as exc:
                if not is_overflow(exc):
                    raise
                request = await engine.handle_overflow(exc, SYSTEM)  # shrinks; raises when nothing is left
                recovered += 1
        await engine.add(completion.choices[0].message)
        engine.record_usage(request, completion.usage)
        await engine.end_turn()
    await engine.wait_idle()
    lost = (await engine.verify()).lost
    await mem.close()
    return lost, recovered


@pytest.mark.usefixtures("no_provider_env")
async def test_an_overflow_corrects_a_calibration_an_under_reporting_provider_pushed_down(
    tmp_path: Path,
) -> None:
    """30 turns against a provider that reports 40% of the prompt it counts: its reports pull the ratio
    to the 0.5 floor, the budget lets the history double, and the provider rejects it. After the first
    overflow the ratio stays at the one it proved (x 1.125): one overflow in 30 turns. Before: every few
    turns (the ratio fell back to the floor after each)."""
    provider = UnderReporting(WINDOW)
    with FakeOpenAIServer(respond=provider) as server:
        lost, recovered = await own_loop(tmp_path, server.base_url, 30)
    assert lost == 0
    assert provider.overflows == recovered
    assert provider.loop_calls == 30 + recovered
    assert recovered <= 1, f"{recovered} overflows in 30 turns"


def test_the_recipe_in_the_docs_is_this_loop() -> None:
    """docs/own-loop.md shows the overflow handling this test runs."""
    doc = (Path(__file__).parents[1] / "docs" / "own-loop.md").read_text()
    assert "engine.handle_overflow(exc, SYSTEM" in doc and "is_overflow(exc)" in doc


@pytest.mark.usefixtures("no_provider_env")
async def test_summary_calls_are_counted_and_go_to_the_summary_model(tmp_path: Path) -> None:
    """Item 7: contextmem's own summary calls are counted in ``stats()`` and shown by ``/context``; with
    ``summary_model`` they go to that model (another server here), not to the agent's."""
    from contextmem.cli.render import context_report

    def provider(body: Any) -> Scripted:
        return ServerReply("## Goal\n- Deploy.", usage=Usage(500, 40))

    with FakeOpenAIServer(respond=provider) as server:
        settings = Settings(
            model="openai:gpt-4o",
            summary_model="openai:gpt-4o-mini",
            base_url=server.base_url,
            workspace=tmp_path,
            context_window=WINDOW,
            max_tokens=RESERVE,
        )
        mem = await ContextMem.open(settings, memory=False)
        engine = await mem.session("s")
        for i in range(12):
            await engine.add(*_turn(i))
            await engine.end_turn()
        await engine.wait_idle()
        stats = engine.stats(SYSTEM)
        await mem.close()
    models = [r.body["model"] for r in server.requests]
    assert models and set(models) == {"gpt-4o-mini"}  # not one summary went to the agent's model
    assert stats.summary_calls.calls == len(models)
    assert stats.summary_calls.prompt_tokens == 500 * len(models)
    assert stats.summary_model == "openai:gpt-4o-mini"
    assert f"summaries: {len(models)} calls to openai:gpt-4o-mini" in context_report(stats)


def test_summary_model_is_checked_when_set(tmp_path: Path) -> None:
    from contextmem.cli.config import save_setting
    from contextmem.errors import ConfigError
    from contextmem.llm.registry import summary_llm

    with pytest.raises(ConfigError, match="summary_model"):  # where the runtime builds it
        summary_llm(Settings(summary_model="nonsense"), None)
    with pytest.raises(ConfigError, match="summary_model"):  # and when it is set
        save_setting(tmp_path / "config.json", "summary_model", "nonsense")
    assert not (tmp_path / "config.json").exists()
    assert Settings(summary_model=" none ").summary_model == "none"
    assert summary_llm(Settings(summary_model="none"), None) is None
