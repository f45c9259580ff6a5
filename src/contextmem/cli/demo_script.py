"""The demo's scripted side: the bundled conversation, the assistant's script and the recorded tools.

The assistant is a :class:`contextmem.testing.ScriptedLLM` playing the recorded steps of each turn; a
question about earlier days is a scripted *function* of the request, answered from the memory hits in
its last tool result — by the local model when there is one, else extractively. Every scripted reply
reports zero usage, so the engine's calibration is left to real models. :class:`BoundedLLM` lends the
local model to the summariser for a fixed number of calls, which keeps the demo's runtime bounded.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from importlib import resources
from typing import Any

from ..agent import FunctionTool, TaskStep
from ..errors import LLMError
from ..llm.base import LLM, BaseLLM, ChatResponse, ModelCall, StreamEvent, Usage
from ..messages import AssistantMessage, Message, SystemMessage, ToolCall, ToolMessage, UserMessage, text_of
from ..testing import Reply, Script

__all__ = [
    "ANSWER_SYSTEM",
    "NO_USAGE",
    "BoundedLLM",
    "ScriptedTools",
    "extractive_answer",
    "generate_output",
    "load_conversation",
    "memory_answer",
    "question_script",
    "turn_messages",
    "turn_script",
]

ANSWER_SYSTEM = (
    "Answer the question in one short sentence, using only the memory excerpts given. "
    "Quote names, hosts, ports and numbers exactly. Answer in the question's language."
)
NO_USAGE = Usage()  # a scripted reply bills nothing, so the engine never calibrates against it


# --- the bundled conversation -------------------------------------------------------------------


def load_conversation() -> dict[str, Any]:
    data = resources.files("contextmem").joinpath("data/demo_conversation.json").read_text(encoding="utf-8")
    conversation: dict[str, Any] = json.loads(data)
    return conversation


# One row of each kind of generated output: a function of the row number and the kind's own random stream.
_ROWS: dict[str, Callable[[int, random.Random], str]] = {
    "error_log": lambda k, rng: (
        f"2025-03-{14 + k // 600:02d}T23:{10 + k % 50:02d}:{k % 60:02d}Z ERROR recon-worker "
        f"payments: Lock wait timeout exceeded; try restarting transaction (txn {rng.randrange(10**8)})"
    ),
    "table_rows": lambda k, rng: f"tbl_{k:02d}\t{rng.randrange(10_000, 990_000)}",
    "k8s_events": lambda k, rng: (
        f"{k // 3 + 2}m Warning OOMKilled pod/order-service-7d9f-{k % 3} 容器内存超过限制 512Mi，已被终止"
    ),
    "heap_log": lambda k, rng: (
        f"02:{14 + k // 10:02d}:{k % 60:02d} heap_used={180 + 8 * k}Mi 缓存预热 page={k}"
    ),
    "test_run": lambda k, rng: (
        f"PASSED tests/test_case_{k:04d}.py::test_{rng.choice(['order', 'invoice', 'cart'])}"
    ),
    "git_log": lambda k, rng: (
        f"{rng.randrange(16**7):07x} Merge pull request #{1400 + k} from lumen/feature-{k}"
    ),
}


def _progress_row(k: int, rng: random.Random) -> str:  # pgloader and any other kind: a progress table
    return f"table_{k:02d}   rows {rng.randrange(10**6):>9}   est {rng.randrange(1, 60):>3} min"


def generate_output(kind: str, lines: int) -> str:
    """Deterministic stand-ins for long tool outputs (logs, test runs), so the data file stays small."""
    rng = random.Random(f"{kind}:{lines}")
    row = _ROWS.get(kind, _progress_row)
    return "\n".join(row(k, rng) for k in range(lines))


def _result_text(result: Any) -> str:
    if isinstance(result, dict):
        return generate_output(str(result["generate"]), int(result["lines"]))
    return str(result)


class ScriptedTools:
    """The conversation's non-memory tools (shell, files): they return the recorded outputs, in order."""

    def __init__(self) -> None:
        self.pending: dict[str, list[str]] = {}

    def load(self, steps: Sequence[dict[str, Any]]) -> None:
        self.pending = {}
        for step in steps:
            if "result" in step:
                self.pending.setdefault(step["tool"], []).append(_result_text(step["result"]))

    def tool(self, name: str) -> FunctionTool:
        def run(**_args: Any) -> str:
            return self.pending[name].pop(0)

        return FunctionTool(name, f"{name.replace('_', ' ')} (recorded)", run, {"type": "object"})


# --- the assistant's script ---------------------------------------------------------------------


def turn_script(turn: dict[str, Any], number: int = 0) -> list[Script]:
    """The assistant's side of turn ``number``: one tool-calling step per recorded step, then the reply
    (call ids are unique in the session, as a model's are: a reused id is refused)."""
    steps: list[Script] = [
        Reply(
            tool_calls=(
                ToolCall(f"call_{number}_{k}", step["tool"], json.dumps(step["args"], ensure_ascii=False)),
            ),
            usage=NO_USAGE,
        )
        for k, step in enumerate(turn["steps"])
    ]
    return [*steps, Reply(turn["reply"], usage=NO_USAGE)]


def question_script(number: int, question: dict[str, Any], answerer: LLM | None) -> list[Script]:
    """A question about earlier days: a ``memory_search`` call, then an answer from its hits."""
    args = json.dumps({"query": question["query"], "k": 3}, ensure_ascii=False)
    search = Reply(tool_calls=(ToolCall(f"q_{number}", "memory_search", args),), usage=NO_USAGE)
    return [search, memory_answer(question["ask"], answerer)]


def memory_answer(question: str, answerer: LLM | None) -> Callable[[Sequence[Message]], Awaitable[Reply]]:
    """A scripted reply that answers ``question`` from the hits in the request's last tool result:
    by ``answerer`` (a model given the top excerpts), or, without one, :func:`extractive_answer`."""

    async def answer(messages: Sequence[Message]) -> Reply:
        hits = _hits(messages)
        if answerer is None:
            return Reply(extractive_answer(question, hits), usage=NO_USAGE)
        prompt: list[Message] = [
            SystemMessage(ANSWER_SYSTEM),
            UserMessage(_excerpts(hits) + f"\n\nQuestion: {question}"),
        ]
        events = answerer.stream(prompt, max_tokens=80, temperature=0.0)
        parts = [event.text async for event in events if event.kind == "text"]
        return Reply("".join(parts).strip(), usage=NO_USAGE)

    return answer


def _hits(messages: Sequence[Message]) -> list[dict[str, Any]]:
    last = next((m for m in reversed(messages) if isinstance(m, ToolMessage)), None)
    try:
        hits = json.loads(text_of(last.content)) if last else []
    except json.JSONDecodeError:
        return []
    return hits if isinstance(hits, list) else []


def _excerpts(hits: Sequence[dict[str, Any]]) -> str:
    return "Memory excerpts:\n" + "\n".join(
        f"[{h['path']} lines {h['start_line']}-{h['end_line']}]\n{str(h['snippet'])[:500]}" for h in hits[:3]
    )


def extractive_answer(question: str, hits: Sequence[dict[str, Any]]) -> str:
    """The line of the top hits sharing the most words with the question, with its source."""
    from ..memory import keyword_tokens  # the memory extra, which the demo's memory_search needs anyway

    wanted = set(keyword_tokens(question))
    best, source, score = "", "", -1
    for hit in hits[:3]:
        for line in str(hit["snippet"]).splitlines():
            overlap = len(wanted & set(keyword_tokens(line)))
            if overlap > score and line.strip(" -#"):
                best, source, score = line.strip(" -"), f"{hit['path']}:{hit['start_line']}", overlap
    return f"From memory ({source}): {best}" if best else "Nothing in memory about that."


def turn_messages(user: str, sent: Sequence[AssistantMessage], steps: Sequence[TaskStep]) -> list[Message]:
    """What the agent appended in one turn, rebuilt outside the engine (for the lost check)."""
    out: list[Message] = [UserMessage(user)]
    results = iter(steps)
    for message in sent:
        out.append(message)
        if message.tool_calls:
            out.extend(next(results).results)
    return out


# --- the local model, lent to the summariser ----------------------------------------------------


class BoundedLLM(BaseLLM):
    """The local model for at most ``calls`` completions; after that it refuses, so the engine falls
    back to its extractive summary (a documented path) and the demo's runtime stays bounded. Streams
    pass through uncounted (the demo's answers stream from :attr:`inner` directly)."""

    def __init__(self, inner: LLM, calls: int) -> None:
        self.inner = inner
        self.calls = calls
        self.name = inner.name
        self.used = 0
        self.seconds = 0.0

    @property
    def context_window(self) -> int | None:
        """The wrapped model's window, so the engine sizes summary requests to it."""
        window: int | None = getattr(self.inner, "context_window", None)
        return window

    def _request(self, call: ModelCall) -> dict[str, Any]:
        return {"call": call}  # no wire format: the call goes to the inner model as it is

    async def _complete(self, request: dict[str, Any]) -> ChatResponse:
        call: ModelCall = request["call"]
        if self.used >= self.calls:
            raise LLMError(f"the demo's budget of {self.calls} local-model summaries is used")
        self.used += 1
        started = time.monotonic()
        try:
            return await self.inner.complete(
                call.messages, tools=call.tools, max_tokens=call.max_tokens, temperature=call.temperature
            )
        finally:
            self.seconds += time.monotonic() - started

    async def _stream(self, request: dict[str, Any]) -> AsyncGenerator[StreamEvent, None]:
        call: ModelCall = request["call"]
        events = self.inner.stream(
            call.messages, tools=call.tools, max_tokens=call.max_tokens, temperature=call.temperature
        )
        async for event in events:
            yield event
