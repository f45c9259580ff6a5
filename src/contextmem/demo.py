"""``contextmem demo`` — what ``make run`` shows: the engine's parts on a long bilingual conversation.

Offline, no API key. It grows with the project; today it shows the budget core: real token counts
(and the heuristic's error), the window's regions, and budget fitting at turn boundaries as an agent
conversation with tool calls grows far past its window.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable

from .budget import CountedHistory, resolve_window, turn_starts
from .llm.base import ToolSpec
from .messages import AssistantMessage, Message, ToolCall, ToolMessage, UserMessage, orphan_tool_messages
from .settings import Settings
from .tokens import HeuristicCounter, MessageCounter, get_counter

_EN = [
    "Please refactor src/auth/login.ts to use the new session store and keep the tests green.",
    "The deploy failed with error 502 on api.example.com; can you check the nginx logs?",
    "Summarise what we decided about the billing migration last week.",
]
_ZH = [
    "请帮我把订单服务迁移到 PostgreSQL 16，并保留原来的索引。",
    "昨天的部署在 k8s 集群里报了 OOMKilled，帮我看看内存配置。",
    "把会议纪要整理成要点，发给产品经理。",
]


def sample_turn(i: int, rng: random.Random) -> list[Message]:
    """One turn of a bilingual agent conversation; every third turn calls a tool with a large output."""
    lang = _EN if i % 2 == 0 else _ZH
    out: list[Message] = [UserMessage(f"{rng.choice(lang)} (#{i})")]
    if i % 3 == 0:
        call = ToolCall(f"call_{i}", "read_file", json.dumps({"path": f"src/module_{i}.py"}))
        out.append(AssistantMessage(None, tool_calls=(call,)))
        out.append(ToolMessage(call.id, "\n".join(f"line {k}: value = {k * i}  # 日志" for k in range(120))))
    out.append(AssistantMessage(f"Done with step {i}. " + rng.choice(lang)))
    return out


def run(
    settings: Settings | None = None, turns: int = 300, echo: Callable[[str], None] = print
) -> dict[str, int]:
    settings = settings or Settings()
    counter = MessageCounter(get_counter(settings.tokenizer), image_tokens=settings.image_tokens)
    window = resolve_window(
        model=settings.model if settings.model != "local" else "",
        context_window=settings.context_window,
        max_tokens=settings.max_tokens,
        cap=settings.agent_max_context_tokens,
    )
    system_prompt = "You are a helpful coding agent. 你是一个乐于助人的编程助手。"
    tools = [
        ToolSpec(
            "read_file",
            "Read a file in the workspace",
            {"type": "object", "properties": {"path": {"type": "string"}}},
        )
    ]
    system_t, tools_t = counter.count_text(system_prompt) + 3, counter.count_tools(tools)
    budget = window.history_budget(system=system_t, tool_defs=tools_t)
    echo(f"tokenizer: {counter.name}   window: {window.context_window}   output reserve: {window.max_tokens}")
    echo(
        f"regions: system {system_t} + tool defs {tools_t} + reserve {window.max_tokens}"
        f" -> history budget {budget}"
    )

    rng = random.Random(7)
    full = CountedHistory(counter)
    kept_start = 0
    sent_total = full_total = cuts = 0
    for i in range(turns):
        full.extend(sample_turn(i, rng))
        cut = max(kept_start, full.fit_cut(budget))
        if cut > kept_start:
            cuts += 1
            kept_start = cut
        kept = full.messages[kept_start:]
        if orphan_tool_messages(kept):
            raise AssertionError("a cut orphaned a tool pair")  # cannot happen: cuts are turn starts
        sent, whole = full.tokens_from(kept_start), full.total
        sent_total += sent
        full_total += whole
        if i % 50 == 0 or i == turns - 1:
            bar = _gauge(sent, budget)
            echo(f"turn {i:4d}  {bar}  sent {sent:6d} / budget {budget}   full history {whole:7d} tokens")

    heuristic = HeuristicCounter()
    texts = [m.content for m in full.messages if isinstance(m.content, str)]
    real = sum(counter.count_text(t) for t in texts)
    est = sum(heuristic.count_text(t) for t in texts)
    turns_total = len(turn_starts(full.messages))
    echo("")
    echo(f"turns: {turns_total}   messages: {len(full)}   cuts (always at turn starts): {cuts}")
    echo(f"tokens sent over all turns: {sent_total}   vs full history each turn: {full_total}")
    echo(f"heuristic vs {counter.name} on this conversation: {100 * (est - real) / real:+.1f}%")
    return {"turns": turns_total, "messages": len(full), "cuts": cuts, "sent": sent_total, "full": full_total}


def _gauge(used: int, total: int, width: int = 30) -> str:
    filled = min(width, round(width * used / max(total, 1)))
    return "[" + "#" * filled + "." * (width - filled) + f"] {100 * used / max(total, 1):3.0f}%"
