"""The message door (issue 49): hostile text in every field ``engine.add`` reads, checked in every sink.

A message enters through :meth:`ContextEngine.add` as a message value, an OpenAI dict, an Anthropic dict
or an SDK object; its text may sit in user content or parts, assistant content, reasoning, a tool call's
name, id or arguments, a tool result, or an ``extra`` key. Each test draws :func:`hostile_text` into one
or more of those fields, runs the wired engine (``ContextMem.open``, no model, a small window so the
hostile turn is compacted) and checks each sink the text reaches:

* **the door:** the text is accepted, or refused with one typed line (a lone surrogate; a message over
  ``max_message_bytes`` is a :class:`MessageTooLargeError`), and then nothing of it is stored;
* **the store:** the session read back holds every accepted message exactly as the door read it;
* **the dialog archive:** every ``\\n``-line of ``dialog/*.jsonl`` is one JSON object, and what the archive
  reads back is exactly what left the context;
* **the summary, the events and the daily memory file:** no line at column 0 comes from the text unless it
  is the writer's own (a ``- `` item, a heading the writer writes);
* **the logs and events:** no raw exception; **verify()**: nothing lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import re
import tempfile
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from contextmem import ContextMem
from contextmem.engine import ContextEngine, EngineEvent
from contextmem.engine.door import TOOL_RESULT_FACTOR
from contextmem.errors import ContextmemError, MessageTooLargeError
from contextmem.formats.inputs import read_messages
from contextmem.formats.openai import to_openai
from contextmem.lang.registry import languages
from contextmem.messages import AssistantMessage, Message, TextPart, ToolCall, ToolMessage, UserMessage
from contextmem.settings import Settings
from contextmem.summarize.languages import summaries

from .doors import (
    BIDI,
    CONTROLS,
    FORMAT,
    LINE_BREAKS,
    MARKER_LOOKALIKES,
    SURROGATES,
    TERMINAL_SEQUENCES,
    assert_one_line_error,
    forged_lines,
    hostile_text,
    huge,
    raw_exception,
)

NOW = datetime(2026, 3, 8, 7, 41)  # the daily file's heading time: no drawn look-alike writes "## 07:41"
FILLER_TURNS = 4
_case_ids = itertools.count()

# --- the forms a message arrives in, one field of it hostile ------------------------------------------

Case = Callable[[str, int], list[Any]]
"""``case(text, n)``: the inputs of one ``add`` (a whole turn: a tool call comes with its result) with
``text`` in one field; ``n`` makes the turn's tool-call ids unique in the session."""


def _anthropic_reply(*blocks: dict[str, Any]) -> Any:
    from anthropic.types import Message as AnthropicMessage

    return AnthropicMessage.model_validate(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-test",
            "content": list(blocks),
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 3, "output_tokens": 5},
        }
    )


def _openai_reply(**fields: Any) -> Any:
    from openai.types.chat import ChatCompletionMessage

    return ChatCompletionMessage.model_validate({"role": "assistant", **fields})


def _call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _tool_turn(call_id: str, name: str, arguments: str, result: str) -> list[Any]:
    return [
        UserMessage("run the tool"),
        AssistantMessage(None, tool_calls=(ToolCall(call_id, name, arguments),)),
        ToolMessage(call_id, result),
        AssistantMessage("the tool ran"),
    ]


CASES: dict[str, Case] = {
    # user content and parts
    "user/value": lambda t, n: [UserMessage(t), AssistantMessage("noted")],
    "user/openai": lambda t, n: [{"role": "user", "content": t}, {"role": "assistant", "content": "noted"}],
    "user-part/value": lambda t, n: [UserMessage((TextPart("see:"), TextPart(t))), AssistantMessage("ok")],
    "user-part/openai": lambda t, n: [
        {"role": "user", "content": [{"type": "text", "text": t}]},
        {"role": "assistant", "content": "ok"},
    ],
    "user-part/anthropic": lambda t, n: [
        {"role": "user", "content": [{"type": "text", "text": t, "cache_control": {"type": "ephemeral"}}]},
        {"role": "assistant", "content": "ok"},
    ],
    "user-name/openai": lambda t, n: [{"role": "user", "content": "hi", "name": t}, AssistantMessage("ok")],
    # assistant content and reasoning
    "assistant/value": lambda t, n: [UserMessage("say it"), AssistantMessage(t)],
    "assistant/openai": lambda t, n: [UserMessage("say it"), {"role": "assistant", "content": t}],
    "assistant/openai-sdk": lambda t, n: [UserMessage("say it"), _openai_reply(content=t)],
    "assistant/anthropic-sdk": lambda t, n: [
        UserMessage("say it"),
        _anthropic_reply({"type": "text", "text": t}),
    ],
    "reasoning/value": lambda t, n: [UserMessage("think"), AssistantMessage("done", reasoning=t)],
    "reasoning/openai": lambda t, n: [
        UserMessage("think"),
        {"role": "assistant", "content": "done", "reasoning_content": t},
    ],
    "reasoning/anthropic": lambda t, n: [
        UserMessage("think"),
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": t, "signature": "sig"},
                {"type": "text", "text": "ok"},
            ],
        },
    ],
    # tool calls: name, id, arguments; tool results
    "tool-name/value": lambda t, n: _tool_turn(f"c{n}", t, "{}", "result"),
    "tool-id/value": lambda t, n: _tool_turn(f"c{n}{t}", "search", "{}", "result"),
    "tool-arguments/value": lambda t, n: _tool_turn(f"c{n}", "search", json.dumps({"q": t}), "result"),
    "tool-result/value": lambda t, n: _tool_turn(f"c{n}", "search", "{}", t),
    "tool-call/openai": lambda t, n: [
        UserMessage("run the tool"),
        {"role": "assistant", "content": None, "tool_calls": [_call(f"c{n}{t}", t, json.dumps({"q": t}))]},
        {"role": "tool", "tool_call_id": f"c{n}{t}", "content": t},
        {"role": "assistant", "content": "the tool ran"},
    ],
    "tool-call/openai-sdk": lambda t, n: [
        UserMessage("run the tool"),
        _openai_reply(
            content=None, tool_calls=[_call(f"c{n}{t}", t, json.dumps({"q": t}, ensure_ascii=False))]
        ),
        ToolMessage(f"c{n}{t}", "result"),
        AssistantMessage("the tool ran"),
    ],
    "tool-call/anthropic": lambda t, n: [
        UserMessage("run the tool"),
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": f"c{n}{t}", "name": t, "input": {"q": t}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"c{n}{t}", "content": t}]},
        {"role": "assistant", "content": "the tool ran"},
    ],
    "tool-call/anthropic-sdk": lambda t, n: [
        UserMessage("run the tool"),
        _anthropic_reply({"type": "tool_use", "id": f"c{n}{t}", "name": t, "input": {"q": t}}),
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": f"c{n}{t}", "content": [{"type": "text", "text": t}]}
            ],
        },
        AssistantMessage("the tool ran"),
    ],
    # extra keys, kept as written
    "extra/value": lambda t, n: [
        UserMessage("hi", extra={"x_" + t: t, "meta": {t: [t]}}),
        AssistantMessage("ok"),
    ],
    "extra/openai": lambda t, n: [
        {"role": "user", "content": "hi", "x_" + t: {"k": t}},
        AssistantMessage("ok"),
    ],
}


def strings(message: Message) -> Iterator[str]:
    """Every text a message holds, as the wire form has it: keys and values, tool-call arguments parsed."""
    stack: list[Any] = [to_openai(message)]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                yield key
                stack.append(item)
                if key == "arguments" and isinstance(item, str):
                    with contextlib.suppress(ValueError):
                        stack.append(json.loads(item))
        elif isinstance(value, list):
            stack.extend(value)
        elif isinstance(value, str):
            yield value


# --- the writer's own lines in the summary and the daily memory file ------------------------------


def _writer_lines() -> re.Pattern[str]:
    """A line of a summary or a memory entry that the writer writes itself: a ``- `` item, a section
    heading, the daily entry's heading (at :data:`NOW`), a digest's date heading, the summary's lead-in."""
    fixed: list[str] = []
    for _, words in summaries(languages()):
        fixed += [f"{mark} {title}" for title in words.sections.values() for mark in ("##", "###")]
        fixed += [words.title, words.archive]
    titles = "|".join(map(re.escape, fixed))
    daily = rf"## {NOW:%H:%M} s\d+: (?:left the context|context overflow|context cleared)"
    dated = r"### (?:\d{4}-\d\d-\d\d|\d{1,2} \w+,? \d{4})"
    return re.compile(rf"- .*|{titles}|{daily}|{dated}")


WRITER_LINES = _writer_lines()


def forged(sink: str, payload: str) -> list[str]:
    """Lines of ``sink`` at column 0 that come from ``payload`` and are not the writer's own."""
    return forged_lines(sink, payload, starts=("",), allowed=WRITER_LINES)


# --- running the engine -----------------------------------------------------------------------------


class Run:
    """One engine on a workspace of its own (``store`` a SQLite file there unless a DSN is given): the
    events and log records it produced, for the sink checks."""

    def __init__(self, root: Path, store_url: str | None, **settings: Any) -> None:
        self.root = root
        self.store_url = store_url or f"sqlite:///{root / 'sessions.sqlite'}"
        base: dict[str, Any] = {
            "model": "none",
            "workspace": str(root / "ws"),
            "store": self.store_url,
            "context_window": 2_000,
            "compact_message_threshold": 6,
            "agent_max_context_turns": 2,
        }
        self.settings = Settings(**(base | settings))
        self.session_id = f"s{next(_case_ids)}"
        self.events: list[EngineEvent] = []
        self.logs: list[logging.LogRecord] = []

    async def __aenter__(self) -> Run:
        self.cm = await ContextMem.open(self.settings, memory=True)
        self.cm.clock = lambda: NOW
        self.engine: ContextEngine = await self.cm.session(self.session_id)
        self.engine.subscribe(self.events.append)
        self._handler = _Collect(self.logs)
        logging.getLogger("contextmem").addHandler(self._handler)
        return self

    async def __aexit__(self, *exc: object) -> None:
        logging.getLogger("contextmem").removeHandler(self._handler)
        await self.cm.close()

    async def add(self, inputs: list[Any]) -> list[Message] | ContextmemError:
        """Add one turn: the messages the door read, or the typed error it refused them with."""
        before = (await self.engine.verify()).appended
        try:
            await self.engine.add(*inputs)
        except ContextmemError as exc:
            assert (await self.engine.verify()).appended == before, "a refused add stored something"
            return exc
        return read_messages(inputs)

    async def turn(self, inputs: list[Any]) -> list[Message] | ContextmemError:
        added = await self.add(inputs)
        await self.engine.end_turn()
        await self.engine.wait_idle()
        await self.engine.build("You are a test.")
        return added

    async def finish(self) -> list[Message]:
        """Plain turns that push the hostile ones out of the window (compacted, archived); the messages."""
        added: list[Message] = []
        for i in range(FILLER_TURNS):
            turn = [UserMessage(f"filler question {i} " * 20), AssistantMessage(f"filler {i} " * 20)]
            assert await self.turn(turn) == turn
            added += turn
        await self.engine.wait_idle()
        await self.cm.flush()
        return added

    def sinks_of_lines(self) -> dict[str, str]:
        """The line-shaped sinks: the summary, the events' summaries and digests, the daily memory files."""
        found = {"summary": self.engine.summary.render() if self.engine.summary else ""}
        for i, event in enumerate(self.events):
            for key in ("summary", "digest"):
                if isinstance(event.data.get(key), str):
                    found[f"event {i} {event.kind}.{key}"] = event.data[key]
        for path in sorted(self.cm.workspace.daily_dir.glob("*.md")):
            found[path.name] = path.read_text(encoding="utf-8")
        return found


class _Collect(logging.Handler):
    def __init__(self, into: list[logging.LogRecord]) -> None:
        super().__init__(logging.DEBUG)
        self.into = into

    def emit(self, record: logging.LogRecord) -> None:
        self.into.append(record)


async def check_sinks(run: Run, accepted: list[Message], payload: str) -> None:
    """Every sink of ``run`` against the messages accepted (in order) and the hostile ``payload``."""
    engine = run.engine
    report = await engine.verify()
    assert report.lost == 0 and not report.corrupt, report
    stored = await engine.store.messages(engine.namespace, engine.session_id)
    assert [s.message for s in stored] == accepted, "the store does not hold the messages as accepted"
    by_seq = {s.seq: s.message for s in stored}
    if not engine.store.shared:  # a shared store is its own archive: no dialog files are written
        for path in sorted((run.cm.workspace.dir / "dialog").glob("*.jsonl")):
            data = path.read_bytes()
            assert data.endswith(b"\n"), path
            for line in data[:-1].split(b"\n"):
                assert isinstance(json.loads(line), dict), line[:200]
        archived = list(engine.archive.read(engine.session_id))
        assert archived, "the hostile turns were never archived: the test compacted nothing"
        for item in archived:
            assert item.message == by_seq[item.seq], item.seq
    for name, text in run.sinks_of_lines().items():
        assert forged(text, payload) == [], name
    for event in run.events:
        assert raw_exception(repr(event.data)) == [], event
    logged = "\n".join(record.getMessage() for record in run.logs)
    assert raw_exception(logged) == [], logged[-2000:]
    assert not [r for r in run.logs if r.levelno >= logging.ERROR], logged[-2000:]


def _pg_or_sqlite(store_url: str) -> str | None:
    return store_url if store_url.startswith("postgres") else None


# --- the properties ---------------------------------------------------------------------------------


# Pinned at 12 in every profile: each example opens a wired engine with its memory index, runs six
# compacted turns and reads every sink (about a second an example; the surrogate and size tests below
# cover the refusals cheaply).
@settings(max_examples=12, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@example(turns=[("assistant/anthropic-sdk", "`0\r0`")])  # a \r in a message began a line of the summary
@given(
    turns=st.lists(
        st.tuples(st.sampled_from(sorted(CASES)), hostile_text(surrogates=False)), min_size=1, max_size=3
    )
)
def test_hostile_text_in_any_field_is_stored_exactly_and_forges_nothing(
    store_url: str, turns: list[tuple[str, str]]
) -> None:
    async def scenario(root: Path) -> None:
        async with Run(root, _pg_or_sqlite(store_url)) as run:
            accepted: list[Message] = []
            for n, (case, text) in enumerate(turns):
                added = await run.turn(CASES[case](text, n))
                if isinstance(added, ContextmemError):  # e.g. an empty tool name: refused, one line
                    assert_one_line_error(added)
                    continue
                assert any(text in s for m in added for s in strings(m)), (case, text)
                accepted += added
            accepted += await run.finish()
            await check_sinks(run, accepted, "".join(t for _, t in turns))

    with tempfile.TemporaryDirectory() as root:
        asyncio.run(scenario(Path(root)))


def _with_surrogate(text: str, at: int, surrogate: str) -> str:
    at = min(at, len(text))
    return text[:at] + surrogate + text[at:]


# Pinned at 10 in every profile: each example runs a wired engine through compaction and reads every
# sink; which field and form, where the surrogate sits and what surrounds it are what vary.
@settings(max_examples=10, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(
    case=st.sampled_from(sorted(CASES)),
    text=hostile_text(max_size=20, surrogates=False),
    at=st.integers(0, 40),
    surrogate=st.sampled_from(SURROGATES) | st.characters(categories=["Cs"]),
)
def test_a_lone_surrogate_in_any_field_is_refused_in_one_line_and_reaches_no_sink(
    store_url: str, case: str, text: str, at: int, surrogate: str
) -> None:
    bad = _with_surrogate(text, at, surrogate)

    async def scenario(root: Path) -> None:
        async with Run(root, _pg_or_sqlite(store_url)) as run:
            refused = await run.turn(CASES[case](bad, 0))
            assert isinstance(refused, ContextmemError), f"{case}: a lone surrogate was accepted"
            assert_one_line_error(refused)
            accepted = await run.finish()
            await check_sinks(run, accepted, bad)
            sinks = [*run.sinks_of_lines().values(), *(repr(e.data) for e in run.events)]
            sinks += [p.read_text("utf-8") for p in (run.cm.workspace.dir / "dialog").glob("*.jsonl")]
            assert not [s for s in sinks if surrogate in s or ascii(surrogate)[1:-1] in s]

    with tempfile.TemporaryDirectory() as root:
        asyncio.run(scenario(Path(root)))


LIMIT = 20_000
HOSTILE = "".join(LINE_BREAKS + CONTROLS + BIDI + FORMAT + TERMINAL_SEQUENCES + MARKER_LOOKALIKES) + "数据"


async def test_a_field_over_max_message_bytes_is_refused_in_one_line(tmp_path: Path) -> None:
    """Huge text in any field of any form is a MessageTooLargeError, and nothing of it is stored: a tool
    result may be 10 times larger, so it is drawn 10 times larger."""
    async with Run(tmp_path, None, max_message_bytes=LIMIT) as run:
        for case in sorted(CASES):
            size = LIMIT * TOOL_RESULT_FACTOR + 1 if case == "tool-result/value" else LIMIT + 1
            refused = await run.add(CASES[case](huge(HOSTILE, size), 0))
            assert isinstance(refused, MessageTooLargeError), f"{case}: {refused!r}"[:300]
            assert_one_line_error(refused)
            assert len(str(refused)) < 400, case
        assert (await run.engine.verify()).appended == 0
