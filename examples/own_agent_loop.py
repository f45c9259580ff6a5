"""contextmem inside your own agent loop: open, add, build, send, record usage — 200 turns, 4,000 tokens.

python examples/own_agent_loop.py

``send`` stands in for your model call (the official SDK, httpx, anything): it gets exactly what
``build`` assembled and returns the reply and the usage the provider reported. No network here.
"""

from __future__ import annotations

import asyncio
import re
import tempfile
from collections.abc import Sequence

from contextmem import ContextMem, Message, Request, Settings, Usage, text_of
from contextmem.testing import InMemorySessionStore, ScriptedLLM


def summarise(messages: Sequence[Message]) -> str:
    """Stands in for the model contextmem summarises with (yours, or the local one): the six sections."""
    turns = [int(n) for n in re.findall(r"Turn (\d+)", text_of(messages[-1].content))]
    done = f"noted turns up to {max(turns)}" if turns else "noted the conversation so far"
    sections = {"Goal": "keep notes for the user", "Constraints": "(none)", "Progress": done}
    sections |= {"Key decisions": "(none)", "Next steps": "keep noting", "Critical context": "(none)"}
    return "\n".join(f"## {title}\n- {item}" for title, item in sections.items())


async def send(request: Request) -> tuple[dict[str, str], Usage]:
    """Your model call. Here: a canned reply, with the prompt size a provider would report."""
    reply = {"role": "assistant", "content": "Noted: " + "details " * 40}
    return reply, Usage(prompt_tokens=request.estimate.prompt, completion_tokens=60)


async def main() -> None:
    with tempfile.TemporaryDirectory() as workspace:
        settings = Settings(workspace=workspace, context_window=4_000, max_tokens=400)
        summariser = ScriptedLLM.of(default=summarise)  # the model contextmem summarises with
        mem = await ContextMem.open(settings, llm=summariser, store=InMemorySessionStore(), memory=False)
        engine = await mem.session("chat-1")
        largest = 0
        for turn in range(200):
            await engine.add({"role": "user", "content": f"Turn {turn}: " + "context " * 50})
            request = await engine.build("You are a helpful assistant.")  # fits 4,000 tokens, pairs whole
            reply, usage = await send(request)
            await engine.add(reply)
            engine.record_usage(request, usage)  # calibrates the estimate to what was billed
            await engine.end_turn()  # summarises in the background when due
            largest = max(largest, request.estimate.prompt + request.max_tokens)
        await engine.wait_idle()
        report = await engine.verify()
        print(f"turns: 200; largest request: {largest} of {engine.window.context_window} tokens")
        print(f"live: {report.live}, archived: {report.archived}, lost: {report.lost}")
        await mem.close()


if __name__ == "__main__":
    asyncio.run(main())
