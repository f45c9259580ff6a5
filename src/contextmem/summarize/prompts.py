"""Incremental summary prompts (C8), in English and Chinese, and the transcript they are built from.

The prompt follows ChatAgent's incremental design (our seed): the previous summary and only the *new*
messages go in, a complete new summary comes out, so each call costs O(new messages). The output has a
fixed structure — Goal, Constraints, Progress, Key decisions, Next steps, Critical context — so it can be
validated, merged and re-compressed. The language of the conversation (share of CJK characters) picks
the prompt and the section headers.

Everything that enters a prompt passes :func:`~contextmem.summarize.ledger.redact_secrets`: a secret a
model never sees cannot end up in a summary.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
    image_count,
    text_of,
)
from .ledger import Lang, redact_secrets

__all__ = [
    "SECTION_KEYS",
    "SECTION_TITLES",
    "Lang",
    "detect_language",
    "parse_sections",
    "recompress_prompt",
    "render_transcript",
    "summary_prompt",
]

SECTION_KEYS: tuple[str, ...] = ("goal", "constraints", "progress", "decisions", "next", "context")
SECTION_TITLES: dict[Lang, dict[str, str]] = {
    "en": {
        "goal": "Goal",
        "constraints": "Constraints",
        "progress": "Progress",
        "decisions": "Key decisions",
        "next": "Next steps",
        "context": "Critical context",
    },
    "zh": {
        "goal": "目标",
        "constraints": "约束",
        "progress": "进展",
        "decisions": "关键决策",
        "next": "下一步",
        "context": "关键上下文",
    },
}

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LATIN = re.compile(r"[A-Za-z]")
CJK_SHARE_FOR_CHINESE = 0.2


def detect_language(messages: Sequence[Message], previous: str = "") -> Lang:
    """``"zh"`` when CJK characters are at least 20% of the letters users and the assistant wrote.

    Tool results are left out (logs and code are English whatever the conversation's language), and
    so is the previous summary unless there is nothing else to go on. The threshold is low because a
    Chinese sentence about code carries many Latin letters (``请修改src/auth.ts`` is 3 CJK : 9 Latin).
    """
    text = (
        "".join(text_of(m.content) for m in messages if isinstance(m, UserMessage | AssistantMessage))
        or previous
    )
    cjk = len(_CJK.findall(text))
    latin = len(_LATIN.findall(text))
    if cjk + latin == 0:
        return "en"
    return "zh" if cjk / (cjk + latin) >= CJK_SHARE_FOR_CHINESE else "en"


# --- transcript ---------------------------------------------------------------------------------


def _head_tail(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    return f"{text[:head]}\n…[{len(text) - limit} chars omitted]…\n{text[-tail:]}"


def render_transcript(
    messages: Sequence[Message],
    *,
    tool_result_chars: int = 1500,
    message_chars: int = 6000,
) -> str:
    """Messages as ``role: text`` lines; tool calls as ``→ tool(args)``; long texts cut to head + tail.

    Tool results are cut harder (``tool_result_chars``) than what people wrote (``message_chars``):
    the archive keeps the full text, the summary needs only the outcome. Secrets are redacted.
    """
    lines: list[str] = []
    for m in messages:
        text = text_of(m.content)
        images = image_count(m.content)
        if images:
            text = f"{text} [{images} image{'s' if images > 1 else ''}]".strip()
        if isinstance(m, ToolMessage):
            label = f"tool {m.name}" if m.name else "tool"
            lines.append(f"{label} [{m.tool_call_id}]: {_head_tail(text, tool_result_chars)}")
            continue
        role = "system" if isinstance(m, SystemMessage) else m.kind
        if text:
            lines.append(f"{role}: {_head_tail(text, message_chars)}")
        if isinstance(m, AssistantMessage):
            for call in m.tool_calls:
                lines.append(f"assistant: → {call.name}({_head_tail(call.arguments, tool_result_chars)})")
    return redact_secrets("\n".join(lines))


# --- parsing the structure ----------------------------------------------------------------------

_TITLE_TO_KEY = {title.lower(): key for titles in SECTION_TITLES.values() for key, title in titles.items()}
_HEADER = re.compile(
    r"^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*)?(?:\d+[.)、][ \t]*)?(?P<title>"
    + "|".join(re.escape(t) for t in sorted(_TITLE_TO_KEY, key=len, reverse=True))
    + r")(?:\*\*)?[ \t]*[:：]?(?:\*\*)?[ \t]*(?P<rest>.*)$",
    re.IGNORECASE | re.MULTILINE,
)


def parse_sections(text: str) -> tuple[str, dict[str, str]]:
    """Split a structured summary into ``(preamble, {section key: body})``.

    Headers are recognised in either language, with or without ``#``, ``**``, numbering or a colon,
    so a model's formatting quirks do not count as a missing section. A key seen twice keeps both
    bodies, joined.
    """
    matches = list(_HEADER.finditer(text))
    preamble = text[: matches[0].start()] if matches else text
    sections: dict[str, str] = {}
    for i, m in enumerate(matches):
        key = _TITLE_TO_KEY[m.group("title").lower()]
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = (m.group("rest") + text[m.end() : end]).strip()
        sections[key] = f"{sections[key]}\n{body}".strip() if key in sections else body
    return preamble.strip(), sections


def format_sections(sections: dict[str, list[str]], lang: Lang) -> str:
    """Markdown with every section header, in order; an empty section says so rather than vanishing."""
    titles = SECTION_TITLES[lang]
    none = "（无）" if lang == "zh" else "(none)"
    blocks = []
    for key in SECTION_KEYS:
        items = sections.get(key) or []
        body = "\n".join(f"- {item}" for item in items) if items else f"- {none}"
        blocks.append(f"## {titles[key]}\n{body}")
    return "\n\n".join(blocks)


# --- prompts ------------------------------------------------------------------------------------

_SYSTEM: dict[Lang, str] = {
    "en": (
        "You maintain the running memory of a long conversation between a user and an AI assistant. "
        "You never talk to the user; you only write the memory document."
    ),
    "zh": "你负责维护用户与 AI 助手之间长对话的记忆。你从不与用户对话，只输出记忆文档本身。",
}

_INSTRUCTIONS: dict[Lang, str] = {
    "en": """Update the summary step by step: fold the new part of the conversation into the current \
summary and return one complete new summary that replaces it.

Rules:
- Keep every fact of the current summary that still matters; drop only what the new messages make obsolete.
- Copy file paths, URLs, function and class names, commands, numbers, versions, IDs and error messages \
exactly as written, character for character.
- Record outcomes of tool calls, not their raw output.
- Write in English, tersely, as bullet points under exactly these six headers, in this order:

## Goal
## Constraints
## Progress
## Key decisions
## Next steps
## Critical context

Write "- (none)" under a header with nothing to say. Output only the summary: no greeting, no preface, \
no closing remark. Stay under {budget} tokens.""",
    "zh": """请逐步总结提供的对话内容，将其补充到当前摘要中，并返回一个完整的新摘要来替换它。

要求：
- 保留当前摘要中仍然重要的所有信息，只删除被新对话推翻或已过时的内容。
- 文件路径、URL、函数名和类名、命令、数字、版本号、编号和错误信息必须逐字照抄，不得改写。
- 记录工具调用的结果，而不是原始输出。
- 用中文简洁地分条书写，只使用以下六个标题，并保持顺序：

## 目标
## 约束
## 进展
## 关键决策
## 下一步
## 关键上下文

某个标题下没有内容时写“- （无）”。只输出摘要本身：不要问候、不要开场白、不要结尾语。\
总长度不超过 {budget} 个 token。""",
}

_LABELS: dict[Lang, dict[str, str]] = {
    "en": {
        "current": "Current summary:",
        "empty": "(empty: this is the start of the conversation)",
        "new": "New part of the conversation:",
        "extra": "Additional instruction from the user for this summary:",
        "answer": "New summary:",
    },
    "zh": {
        "current": "当前摘要：",
        "empty": "（空：对话刚开始）",
        "new": "新的对话内容：",
        "extra": "用户对本次总结的额外要求：",
        "answer": "新摘要：",
    },
}


def summary_prompt(
    previous: str | None,
    transcript: str,
    *,
    lang: Lang,
    budget: int,
    instruction: str | None = None,
) -> list[Message]:
    """The incremental prompt: previous summary + new messages → a complete new structured summary.

    ``instruction`` is the text after ``/compact`` (e.g. "keep requirements and decisions only"); it is
    appended as the user's extra requirement, after the fixed rules.
    """
    labels = _LABELS[lang]
    parts = [
        _INSTRUCTIONS[lang].format(budget=budget),
        f"{labels['current']}\n{redact_secrets(previous.strip()) if previous else labels['empty']}",
        f"{labels['new']}\n{transcript}",
    ]
    if instruction and instruction.strip():
        parts.append(f"{labels['extra']}\n{redact_secrets(instruction.strip())}")
    parts.append(labels["answer"])
    return [SystemMessage(_SYSTEM[lang]), UserMessage("\n\n".join(parts))]


_RECOMPRESS: dict[Lang, str] = {
    "en": """The summary below is too long: it must fit in {budget} tokens. Rewrite it shorter with the same \
six headers in the same order (## Goal, ## Constraints, ## Progress, ## Key decisions, ## Next steps, \
## Critical context). Merge related bullets, drop finished details and anything repeated; keep the goal, \
the constraints, open problems and every path, name, number and error message exactly as written. \
Output only the summary.

Summary:
{summary}""",
    "zh": """下面的摘要太长，必须压缩到 {budget} 个 token 以内。\
请保留相同的六个标题并保持顺序（## 目标、## 约束、## 进展、## 关键决策、## 下一步、## 关键上下文），\
合并相关条目，删去已完成的细节和重复内容；\
目标、约束、未解决的问题，以及所有路径、名称、数字和错误信息必须原样保留。只输出摘要本身。

摘要：
{summary}""",
}


def recompress_prompt(summary: str, *, lang: Lang, budget: int) -> list[Message]:
    """Ask the model to shrink an over-budget summary, keeping its structure and identifiers."""
    body = _RECOMPRESS[lang].format(budget=budget, summary=redact_secrets(summary.strip()))
    return [SystemMessage(_SYSTEM[lang]), UserMessage(body)]
