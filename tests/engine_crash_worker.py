"""Child process for the crash test: appends turns and compacts until killed.

After each ``add`` returns (the store committed it), the number of acknowledged messages is appended
to ``ACK`` and fsynced, so the parent knows what must survive a SIGKILL.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from contextmem.budget import Window
from contextmem.engine import ContextEngine
from contextmem.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from contextmem.settings import Settings
from contextmem.store.sqlite import SqliteSessionStore


async def main(root: Path) -> None:
    settings = Settings(
        tokenizer="heuristic",
        agent_max_context_turns=6,
        summary_max_tokens=200,
        pruning_old_msg_max_bytes=400,
        pruning_recent_msg_max_bytes=2000,
    )
    store = SqliteSessionStore(root / "sessions.sqlite")
    engine = await ContextEngine.open(
        "crash", store=store, settings=settings, workspace_dir=root, window=Window(2500, 200)
    )
    ack = os.open(root / "ACK", os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    n = (await store.open_session("default", "crash")).next_seq - 1
    print("ready", flush=True)
    i = n
    while True:
        call = ToolCall(f"c{i}", "read_file", '{"path": "src/x.py"}')
        batch = [
            [UserMessage(f"turn {i}: 检查 worker-{i} 的日志")],
            [AssistantMessage(None, tool_calls=(call,)), ToolMessage(call.id, f"log line {i}\n" * 200)],
            [AssistantMessage(f"worker-{i} is fine")],
        ]
        for group in batch:
            await engine.add(*group)
            n += len(group)
            os.write(ack, f"{n}\n".encode())
            os.fsync(ack)
            await engine.build("system prompt")
        await engine.end_turn()
        i += 1


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
