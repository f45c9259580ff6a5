"""Hypothesis strategies for valid histories: turns with tool calls, huge outputs, Chinese, images."""

from __future__ import annotations

import random

from hypothesis import strategies as st

from contextmem.messages import (
    AssistantMessage,
    ImagePart,
    Message,
    TextPart,
    ToolCall,
    ToolMessage,
    UserMessage,
)

PHRASES = [
    "",
    "hello",
    "deploy src/auth.ts to api.example.com",
    "error 502 on worker-3, retrying",
    "你好",
    "数据库迁移到 PostgreSQL 16 之后索引丢失了",
    "上下文窗口快满了，请压缩",
    '{"a": 1, "path": "/tmp/x.json"}',
    "def f(x):\n    return x * 2\n",
    "Mixed 中文 and English with numbers 12345",
    " ",
    "\n\n",
]
# Mostly prebuilt phrases (one draw each, so 10,000 histories stay cheap), some arbitrary unicode.
text = st.one_of(
    st.sampled_from(PHRASES), st.sampled_from(PHRASES), st.sampled_from(PHRASES), st.text(max_size=30)
)
big_text = st.integers(1, 40).map(lambda n: f"日志行 log line {n}\n" * n * 10)


@st.composite
def user_messages(draw: st.DrawFn) -> UserMessage:
    if draw(st.booleans()):
        return UserMessage(draw(text))
    parts = draw(
        st.lists(
            st.one_of(text.map(TextPart), st.just(ImagePart("data:image/png;base64,AAAA"))),
            min_size=1,
            max_size=3,
        )
    )
    return UserMessage(tuple(parts))


@st.composite
def turns(draw: st.DrawFn, turn_no: int = 0) -> list[Message]:
    out: list[Message] = [draw(user_messages())]
    for step in range(draw(st.integers(0, 3))):
        n_calls = draw(st.integers(1, 3))
        calls = tuple(
            ToolCall(
                f"call_{turn_no}_{step}_{k}",
                draw(st.sampled_from(["read_file", "search", "shell"])),
                '{"q": "x"}',
            )
            for k in range(n_calls)
        )
        out.append(AssistantMessage(draw(st.none() | text), tool_calls=calls))
        order = draw(st.permutations(list(calls)))
        for c in order:
            out.append(ToolMessage(c.id, draw(st.one_of(text, big_text))))
    if draw(st.booleans()) or len(out) == 1:
        out.append(AssistantMessage(draw(text), reasoning=draw(st.none() | text)))
    return out


@st.composite
def histories(draw: st.DrawFn, max_turns: int = 12) -> list[Message]:
    n = draw(st.integers(0, max_turns))
    out: list[Message] = []
    for t in range(n):
        out.extend(draw(turns(t)))
    return out


def build_history(seed: int, n_turns: int) -> list[Message]:
    """A valid history made from a seed: same shapes as :func:`histories`, far fewer hypothesis draws."""
    rng = random.Random(seed)
    out: list[Message] = []
    for t in range(n_turns):
        if rng.random() < 0.2:
            out.append(UserMessage((TextPart(rng.choice(PHRASES)), ImagePart("data:image/png;base64,AAAA"))))
        else:
            out.append(UserMessage(rng.choice(PHRASES)))
        for step in range(rng.choice([0, 0, 1, 2, 3])):
            calls = tuple(
                ToolCall(f"call_{t}_{step}_{k}", rng.choice(["read_file", "search", "shell"]), '{"q": "x"}')
                for k in range(rng.randint(1, 3))
            )
            out.append(AssistantMessage(rng.choice([None, *PHRASES]), tool_calls=calls))
            for c in rng.sample(calls, len(calls)):
                n = rng.randint(1, 40)
                body = rng.choice(PHRASES) if rng.random() < 0.7 else f"日志行 log line {n}\n" * n * 10
                out.append(ToolMessage(c.id, body))
        if rng.random() < 0.8 or out[-1].kind == "user":
            out.append(AssistantMessage(rng.choice(PHRASES), reasoning=rng.choice([None, "thinking…"])))
    return out


def seeded_histories(max_turns: int = 12) -> st.SearchStrategy[list[Message]]:
    return st.builds(build_history, st.integers(0, 2**32 - 1), st.integers(0, max_turns))
