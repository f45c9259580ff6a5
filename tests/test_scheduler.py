"""Replies first (llm.scheduler): background summaries yield to replies on the same endpoint.

No test waits on the clock to synchronise: calls are held by events the test sets, and :func:`until` lets
other tasks run until the gate reaches the state the test waits for. The one test that lets time pass does
so on purpose, to prove a timeout that would have fired did not.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncGenerator, Callable, Collection
from contextlib import suppress
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextmem.errors import ConfigError
from contextmem.llm.base import BaseLLM, ChatResponse, ModelCall, StreamEvent
from contextmem.llm.openai_compat import OpenAICompatLLM
from contextmem.llm.scheduler import (
    EndpointGate,
    GateState,
    Priority,
    admit,
    background_calls,
    current_priority,
    foreground_calls,
    wait_running,
)
from contextmem.messages import AssistantMessage, text_of, user
from contextmem.summarize import Summarizer

from .servers import FakeOpenAIServer, Scripted
from .test_summarize import COUNTER, EN_SUMMARY, PREVIOUS, assert_previous_kept, load

MESSAGES = load("en_deploy_debug")


async def until(condition: Callable[[], bool]) -> None:
    """Let other tasks run until ``condition`` holds; no clock involved, and it fails rather than hang."""
    for _ in range(10_000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


class Endpoint(BaseLLM):
    """A gated model with ``slots`` slots. Each call records its label (its last message) when it starts
    running, and a call whose label is in ``held`` runs until the test sets ``release[label]``."""

    def __init__(self, slots: int | None = 1, *, held: Collection[str] = ()) -> None:
        self.name = "endpoint"
        self._gate_slots = slots  # type: ignore[misc]
        self.started: list[str] = []
        self.release = {label: asyncio.Event() for label in held}

    def _request(self, call: ModelCall) -> dict[str, Any]:
        return {"label": text_of(call.messages[-1].content)}

    async def _complete(self, request: dict[str, Any]) -> ChatResponse:
        label = request["label"]
        self.started.append(label)
        if label in self.release:
            await self.release[label].wait()
        return ChatResponse(AssistantMessage(EN_SUMMARY))

    async def _stream(self, request: dict[str, Any]) -> AsyncGenerator[StreamEvent, None]:
        yield StreamEvent("text", text="…")
        yield StreamEvent("done", response=await self._complete(request))

    def summaries_started(self) -> int:
        return sum("## Goal" in label for label in self.started)


def call(llm: BaseLLM, label: str, priority: Priority = "foreground") -> asyncio.Task[ChatResponse]:
    """Start ``llm.complete`` for ``label`` in a task of its own, at ``priority``."""
    with background_calls() if priority == "background" else foreground_calls():
        return asyncio.create_task(llm.complete([user(label)]))


# --- the rules --------------------------------------------------------------------------------------


async def test_a_reply_goes_before_a_queued_summary_on_a_single_slot_endpoint() -> None:
    llm = Endpoint(1, held={"running summary"})
    gate = llm.gate
    first = call(llm, "running summary", "background")
    await until(lambda: llm.started == ["running summary"])
    queued = call(llm, "queued summary", "background")
    await until(lambda: gate.state().waiting_background == 1)
    reply = call(llm, "reply")
    await until(lambda: gate.state().waiting_foreground == 1)
    # The summary already running is not interrupted: the reply waits for it, not for the queued one.
    assert llm.started == ["running summary"]
    llm.release["running summary"].set()
    await asyncio.gather(first, queued, reply)
    assert llm.started == ["running summary", "reply", "queued summary"]
    assert gate.state() == GateState()


async def test_a_summary_does_not_start_while_replies_run_or_wait() -> None:
    llm = Endpoint(None, held={"reply 1", "reply 2"})  # unbounded, like a hosted API
    gate = llm.gate
    reply1 = call(llm, "reply 1")
    await until(lambda: llm.started == ["reply 1"])
    summary = call(llm, "summary", "background")
    await until(lambda: gate.state().waiting_background == 1)
    reply2 = call(llm, "reply 2")  # not queued behind the summary: it starts at once
    await until(lambda: llm.started == ["reply 1", "reply 2"])
    llm.release["reply 1"].set()
    await reply1
    assert gate.state() == GateState(running_foreground=1, waiting_background=1)
    llm.release["reply 2"].set()
    await asyncio.gather(reply2, summary)
    assert llm.started == ["reply 1", "reply 2", "summary"]


async def test_a_stream_holds_the_endpoint_until_it_is_closed() -> None:
    llm = Endpoint(None)
    gate = llm.gate
    stream = llm.stream([user("streamed reply")])
    first = await anext(stream)
    assert first.kind == "text" and gate.state().running_foreground == 1
    summary = call(llm, "summary", "background")
    await until(lambda: gate.state().waiting_background == 1)
    await stream.aclose()  # type: ignore[attr-defined]
    await summary
    assert llm.started == ["summary"] and gate.state() == GateState()


def test_priority_is_foreground_unless_marked_and_an_outer_foreground_wins() -> None:
    assert current_priority() == "foreground"
    with background_calls():
        assert current_priority() == "background"
    with foreground_calls(), background_calls():
        assert current_priority() == "foreground"  # e.g. a /compact the user waits for
    assert current_priority() == "foreground"


def test_admit_examples_and_bad_slots() -> None:
    fg: Priority = "foreground"
    bg: Priority = "background"
    assert admit([bg, fg, bg, fg], running_foreground=0, running_background=0, slots=1) == (1,)
    assert admit([bg, bg], running_foreground=0, running_background=0, slots=None) == (0, 1)
    assert admit([bg], running_foreground=1, running_background=0, slots=None) == ()
    assert admit([fg, bg], running_foreground=0, running_background=1, slots=1) == ()
    with pytest.raises(ConfigError, match="Fix:"):
        EndpointGate(0)


# --- the summary's timeout counts running time ------------------------------------------------------


async def test_summary_timeout_does_not_count_time_queued_behind_a_reply() -> None:
    llm = Endpoint(1, held={"reply"})
    reply = call(llm, "reply")
    await until(lambda: llm.started == ["reply"])
    summarizer = Summarizer(llm, COUNTER, timeout=0.2, queue_timeout=60)
    summary_task = asyncio.create_task(summarizer.summarize(PREVIOUS, MESSAGES))
    await until(lambda: llm.gate.state().waiting_background == 1)
    await asyncio.sleep(0.5)  # not synchronisation: longer than the timeout, which must not fire
    assert not summary_task.done() and llm.summaries_started() == 0
    llm.release["reply"].set()
    summary = await summary_task
    await reply
    assert summary.source == "llm" and summary.fallback_reason is None
    assert llm.summaries_started() == 1


async def test_summary_queued_past_its_queue_timeout_falls_back_and_keeps_everything() -> None:
    llm = Endpoint(1, held={"reply"})
    gate = llm.gate
    reply = call(llm, "reply")
    await until(lambda: llm.started == ["reply"])
    summary = await Summarizer(llm, COUNTER, timeout=60, queue_timeout=0.05).summarize(PREVIOUS, MESSAGES)
    assert summary.source == "extractive" and "queued" in (summary.fallback_reason or "")
    assert_previous_kept(summary)
    assert gate.state() == GateState(running_foreground=1)  # the given-up summary left no trace
    llm.release["reply"].set()
    await reply
    assert llm.summaries_started() == 0


async def test_summary_running_past_its_timeout_still_times_out() -> None:
    llm = Endpoint(1)
    running = asyncio.Event()

    async def hang() -> ChatResponse:
        async with llm.gate.hold():
            running.set()
            await asyncio.Event().wait()
        raise AssertionError("unreachable")

    with pytest.raises(TimeoutError, match="of running"):
        await wait_running(hang(), 0.05)
    assert running.is_set() and llm.gate.state() == GateState()


def test_summarizer_rejects_a_bad_queue_timeout() -> None:
    with pytest.raises(ConfigError, match="queue_timeout"):
        Summarizer(Endpoint(), COUNTER, queue_timeout=0)


# --- cancellation -------------------------------------------------------------------------------------


async def test_cancelling_a_queued_summary_leaves_the_endpoint_usable() -> None:
    llm = Endpoint(1, held={"reply"})
    gate = llm.gate
    reply = call(llm, "reply")
    await until(lambda: llm.started == ["reply"])
    summary = call(llm, "summary", "background")
    await until(lambda: gate.state().waiting_background == 1)
    summary.cancel()
    with suppress(asyncio.CancelledError):
        await summary
    assert gate.state() == GateState(running_foreground=1)
    llm.release["reply"].set()
    await reply
    await call(llm, "later summary", "background")
    assert llm.started == ["reply", "later summary"] and gate.state() == GateState()


async def test_cancelling_a_waiting_reply_lets_a_summary_start_only_once_the_endpoint_is_free() -> None:
    llm = Endpoint(1, held={"reply 1"})
    gate = llm.gate
    reply1 = call(llm, "reply 1")
    await until(lambda: llm.started == ["reply 1"])
    reply2 = call(llm, "reply 2")
    summary = call(llm, "summary", "background")
    await until(lambda: gate.state() == GateState(1, 0, 1, 1))
    reply2.cancel()
    with suppress(asyncio.CancelledError):
        await reply2
    assert gate.state() == GateState(running_foreground=1, waiting_background=1)
    llm.release["reply 1"].set()
    await asyncio.gather(reply1, summary)
    assert llm.started == ["reply 1", "summary"] and gate.state() == GateState()


async def test_a_waiter_cancelled_after_its_grant_gives_the_slot_back() -> None:
    gate = EndpointGate(1)
    entered = asyncio.Event()

    async def hold_forever() -> None:
        async with gate.hold("foreground"):
            entered.set()
            await asyncio.Event().wait()

    async with gate.hold("foreground"):
        waiter = asyncio.create_task(hold_forever())
        await until(lambda: gate.state().waiting_foreground == 1)
    assert gate.state() == GateState(running_foreground=1)  # granted; the task has not resumed yet
    waiter.cancel()
    with suppress(asyncio.CancelledError):
        await waiter
    assert not entered.is_set() and gate.state() == GateState()


# --- the gate's invariants under any interleaving -------------------------------------------------

OPS = st.lists(
    st.one_of(
        st.tuples(st.just("arrive"), st.sampled_from(["foreground", "background"])),
        st.tuples(st.sampled_from(["finish", "cancel"]), st.integers(0, 7)),
    ),
    max_size=30,
)


def check(before: GateState, after: GateState, slots: int | None) -> None:
    running = after.running_foreground + after.running_background
    full = slots is not None and running == slots
    assert slots is None or running <= slots
    assert not after.waiting_foreground or full  # a reply never waits behind a queued summary
    assert not after.waiting_background or full or after.running_foreground or after.waiting_foreground
    if after.running_background > before.running_background:  # a summary started: no reply in sight
        assert after.running_foreground == after.waiting_foreground == 0


async def play(slots: int | None, ops: list[tuple[str, Any]]) -> None:
    gate = EndpointGate(slots)
    calls: list[tuple[asyncio.Task[None], asyncio.Event]] = []
    inside: set[asyncio.Task[None]] = set()

    async def one(priority: Priority, done: asyncio.Event) -> None:
        async with gate.hold(priority):
            inside.add(asyncio.current_task())  # type: ignore[arg-type]
            await done.wait()

    for kind, arg in ops:
        before = gate.state()
        if kind == "arrive":
            done = asyncio.Event()
            calls.append((asyncio.create_task(one(arg, done)), done))
            await asyncio.sleep(0)  # one step: the new task queues or starts
        else:
            live = [(t, d) for t, d in calls if not t.done() and (kind == "cancel" or t in inside)]
            if not live:
                continue
            task, done = live[arg % len(live)]
            if kind == "finish":
                done.set()
            else:
                task.cancel()
            await asyncio.wait({task})
        check(before, gate.state(), slots)
    for _, done in calls:
        done.set()
    if calls:
        await asyncio.wait([t for t, _ in calls])
    assert gate.state() == GateState()


@given(st.sampled_from([1, 2, None]), OPS)
def test_gate_invariants_hold_for_any_interleaving(slots: int | None, ops: list[tuple[str, Any]]) -> None:
    asyncio.run(play(slots, ops))


# --- end to end, over HTTP ------------------------------------------------------------------------------


class HeldServer(FakeOpenAIServer):
    """Holds its first chat request until :attr:`release` is set (and says so with :attr:`arrived`)."""

    def __init__(self, script: list[Scripted]) -> None:
        super().__init__(script)
        self.arrived = threading.Event()
        self.release = threading.Event()

    def _next(self) -> Scripted | None:
        entry = super()._next()
        if not self.arrived.is_set():
            self.arrived.set()
            self.release.wait(timeout=30)
        return entry

    def chat_requests(self) -> list[Any]:
        return [r.body for r in self.requests if r.path == self.path]


async def test_summary_waits_for_a_reply_on_the_same_http_endpoint() -> None:
    server = HeldServer(["the reply", EN_SUMMARY])
    with server:
        replier = OpenAICompatLLM("local-model", base_url=server.base_url, api_key="sk-test")
        summariser_llm = OpenAICompatLLM("local-model", base_url=server.base_url, api_key="sk-test")
        gate = replier.gate
        assert summariser_llm.gate is gate  # one server and model: one gate, whichever adapter calls it
        reply = asyncio.create_task(replier.complete([user("hi")]))
        assert await asyncio.to_thread(server.arrived.wait, 30)
        summarizer = Summarizer(summariser_llm, COUNTER, timeout=30)
        summary_task = asyncio.create_task(summarizer.summarize(PREVIOUS, MESSAGES))
        await until(lambda: gate.state().waiting_background == 1)
        assert len(server.chat_requests()) == 1  # the summary has not reached the server
        server.release.set()
        response, summary = await asyncio.gather(reply, summary_task)
    assert text_of(response.message.content) == "the reply"
    assert summary.source == "llm" and summary.fallback_reason is None
    first, second = server.chat_requests()
    assert first["messages"][-1]["content"] == "hi"
    assert "## Goal" in second["messages"][-1]["content"]
    assert gate.state() == GateState()
