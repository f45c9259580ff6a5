"""A deterministic synthetic agent conversation (English + Chinese, tool calls, big outputs) for benches."""

from __future__ import annotations

import json
import random

from contextmem.messages import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage

EN = [
    "Please refactor src/auth/login.ts to use the new session store and keep the tests green.",
    "The deploy failed with error 502 on api.example.com; can you check the nginx logs?",
    "Summarise what we decided about the billing migration last week.",
]
ZH = [
    "请帮我把订单服务迁移到 PostgreSQL 16，并保留原来的索引。",
    "昨天的部署在 k8s 集群里报了 OOMKilled，帮我看看内存配置。",
    "把会议纪要整理成要点，发给产品经理。",
]


def turn(i: int, rng: random.Random) -> list[Message]:
    lang = EN if i % 2 == 0 else ZH
    out: list[Message] = [UserMessage(f"{rng.choice(lang)} (#{i})")]
    if i % 3 == 0:
        call = ToolCall(f"call_{i}", "read_file", json.dumps({"path": f"src/module_{i}.py"}))
        out.append(AssistantMessage(None, tool_calls=(call,)))
        out.append(ToolMessage(call.id, "\n".join(f"line {k}: value = {k * i}  # 日志" for k in range(40))))
    out.append(AssistantMessage(f"Done with step {i}. " + rng.choice(lang)))
    return out


def conversation(n_messages: int, seed: int = 7) -> list[Message]:
    rng = random.Random(seed)
    msgs: list[Message] = []
    i = 0
    while len(msgs) < n_messages:
        msgs.extend(turn(i, rng))
        i += 1
    return msgs
