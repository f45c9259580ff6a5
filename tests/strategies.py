"""Hypothesis strategies for valid histories: turns with tool calls, huge outputs, Chinese, images."""

from __future__ import annotations

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

WORDS = [
    "hello",
    "deploy",
    "src/auth.ts",
    "error 502",
    "你好",
    "数据库迁移",
    "上下文",
    "JSON",
    '{"a": 1}',
    " ",
    "\n",
]
text = st.lists(st.sampled_from(WORDS), min_size=0, max_size=12).map("".join) | st.text(max_size=40)
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
