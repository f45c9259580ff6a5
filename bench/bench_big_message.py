"""A huge message at the door: what ``add`` and the next turns cost, and how long the
event loop stalls meanwhile.

For each size (5 MB and 50 MB) and kind (a user message, a tool result), one session on a real SQLite file
with a scripted summary model: a few ordinary turns, then ``add`` of the big message, ``build``, the reply,
``end_turn`` and the background summary (``wait_idle``), then the next ordinary turn's ``build``. A heartbeat
task ticks every 5 ms; the longest gap between its ticks is the longest the event loop was blocked.
A refused message (over ``max_message_bytes``) shows its error, its length, and the time to raise it.
The text is log lines, or (``one word``) a single run of one letter, the slowest text for a BPE tokenizer.

Run: ``python bench/bench_big_message.py [sizes in MB, default 5 50]`` (against another checkout: set
``PYTHONPATH`` to its ``src``). Writes ``bench/results/big_message.md``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import report

from contextmem.engine import ContextEngine
from contextmem.messages import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage
from contextmem.settings import Settings
from contextmem.store.open import open_store
from contextmem.testing import ScriptedLLM

SUMMARY = "## Goal\n- Read the logs.\n## Progress\n- Read them.\n## Critical context\n- None."
LINE = "2026-11-26T15:04:05Z INFO svc-{n} handled request id={n} path=/api/v1/items/{n} in 12 ms\n"


def big_text(size: int, kind: str = "log") -> str:
    if kind == "one word":  # one long run: the slowest text for a BPE tokenizer
        return "x" * size
    one = "".join(LINE.format(n=n) for n in range(1000))
    return (one * (size // len(one) + 1))[:size]


@dataclass
class Heartbeat:
    """The longest gap between ticks of a task that wants to run every ``period`` seconds."""

    period: float = 0.005
    worst: float = 0.0
    _task: Any = field(default=None, init=False)

    async def _run(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(self.period)
            now = time.perf_counter()
            self.worst = max(self.worst, now - last - self.period)
            last = now

    def __enter__(self) -> Heartbeat:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        self._task.cancel()


async def timed(step: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    try:
        result = await step
    except Exception as exc:  # a refused message: how long it took, and what it said
        result = exc
    return time.perf_counter() - start, result


async def run(size_mb: int, kind: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(f"sqlite:///{tmp}/s.sqlite")
        engine = await ContextEngine.open(
            "s1",
            store=store,
            settings=Settings(workspace=tmp),
            workspace_dir=Path(tmp),
            llm=ScriptedLLM.of(default=SUMMARY),
        )
        for i in range(4):
            await engine.add(UserMessage(f"question {i}"), AssistantMessage(f"answer {i}"))
        text = big_text(size_mb * 1_000_000, "one word" if kind.endswith("one word") else "log")
        big: list[Message]
        if kind.startswith("user"):
            big = [UserMessage(text)]
        else:
            call = ToolCall("c1", "read_logs", "{}")
            await engine.add(UserMessage("read the logs"), AssistantMessage(None, tool_calls=(call,)))
            big = [ToolMessage("c1", text)]
        out: dict[str, Any] = {"size": f"{size_mb} MB", "kind": kind}
        with Heartbeat() as beat:
            out["add"], result = await timed(engine.add(*big))
            if isinstance(result, Exception):
                out["refused"] = f"{type(result).__name__} ({len(str(result))} chars)"
                if kind.startswith("tool"):  # the call still waits for a result
                    await engine.add(ToolMessage("c1", "too large to keep"), AssistantMessage("done"))
            else:
                out["build"], _ = await timed(engine.build("system"))
                await engine.add(AssistantMessage("done"))
                await engine.end_turn()
                out["background"], _ = await timed(engine.wait_idle())
            await engine.add(UserMessage("and now?"))
            out["next build"], _ = await timed(engine.build("system"))
            out["stall"] = beat.worst
        await engine.close()
        await store.close()
        return out


def cell(value: Any) -> str:
    return f"{value:.2f} s" if isinstance(value, float) else str(value if value is not None else "—")


async def main(sizes: list[int]) -> None:
    started = time.perf_counter()
    columns = ["size", "kind", "add", "refused", "build", "background", "next build", "stall"]
    table = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    print("\n".join(table))
    for size in sizes:
        for kind in ("user", "tool", "tool, one word"):
            row = await run(size, kind)
            table.append("| " + " | ".join(cell(row.get(c)) for c in columns) + " |")
            print(table[-1], flush=True)
    report.write(
        "big_message",
        "A huge message at the door: what add and the next turns cost, the longest event-loop stall",
        "\n".join(table),
        seconds=time.perf_counter() - started,
    )


if __name__ == "__main__":
    asyncio.run(main([int(a) for a in sys.argv[1:]] or [5, 50]))
