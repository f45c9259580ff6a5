"""Incremental summary prompts (C8), in English and Chinese, and the transcript they are built from.

The prompt follows ChatAgent's incremental design (our seed): the previous summary and only the *new*
messages go in, a complete new summary comes out, so each call costs O(new messages). The output has a
fixed structure — Goal, Constraints, Progress, Key decisions, Next steps, Critical context — so it can be
validated, merged and re-compressed. The language of the conversation (share of CJK characters) picks
the prompt and the section headers.

Everything that enters a prompt passes :func:`~contextmem.redaction.redact_secrets` (with ``known``,
the secret values already found in the input, scrubbed wherever they reappear): a secret a model never
sees cannot end up in a summary.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
    image_count,
    text_of,
)
from ..redaction import redact_secrets
from ..textcut import cut_middle
from .ledger import Lang, secrets_in

__all__ = [
    "SECTION_KEYS",
    "SECTION_TITLES",
    "Lang",
    "complete_sections",
    "detect_language",
    "merge_sections",
    "parse_sections",
    "recompress_prompt",
    "render_transcript",
    "repeats",
    "section_has_content",
    "summary_prompt",
    "summary_template",
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
    return cut_middle(text, _omitted_notice, max_chars=limit)


def _omitted_notice(omitted: int) -> str:
    return f"\n…[{omitted} chars omitted]…\n"


def render_transcript(
    messages: Sequence[Message],
    *,
    tool_result_chars: int = 1500,
    message_chars: int = 6000,
    known: Iterable[str] | None = None,
) -> str:
    """Messages as ``role: text`` lines; tool calls as ``→ tool(args)``; long texts cut to head + tail.

    Tool results are cut harder (``tool_result_chars``) than what people wrote (``message_chars``):
    the archive keeps the full text, the summary needs only the outcome. Secrets are redacted before
    anything is cut (a cut must not split a key into pieces no pattern recognises), and a secret value
    found in one message is scrubbed from all (``known``: those values, when already found).
    """
    if known is None:
        known = secrets_in(messages)
    lines: list[str] = []
    for m in messages:
        text = redact_secrets(text_of(m.content), known)
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
                arguments = redact_secrets(call.arguments, known)
                lines.append(f"assistant: → {call.name}({_head_tail(arguments, tool_result_chars)})")
    return "\n".join(lines)


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


_BULLET = re.compile(r"^[ \t]*(?:[-*•+][ \t]*)?")
_NONE_MARKERS = frozenset({"", "(none)", "none", "n/a", "（无）", "(无)", "无", "none.", "无。"})


def _is_placeholder(line: str) -> bool:
    """A template placeholder left unfilled (``- ...``, ``- ... (hint)``, a bare hint) or a none marker."""
    item = _BULLET.sub("", line).strip()
    if item.lower() in _NONE_MARKERS or item.startswith(("...", "…")):
        return True
    bare = item.strip("()（）").strip()
    return any(bare == hint for hints in _HINTS.values() for hint in hints.values())


def section_has_content(body: str) -> bool:
    """Whether a section body says anything beyond placeholders and "(none)"."""
    return any(not _is_placeholder(line) for line in body.splitlines())


def complete_sections(text: str, lang: Lang) -> str:
    """``text`` with every section present, in order: missing or empty ones say "(none)".

    A reply that already has all six sections, each with content, is returned unchanged. Otherwise the
    summary is rebuilt in the canonical order, placeholder lines dropped, with the headers in the
    language the reply used (``lang`` when it used none).
    """
    _, sections = parse_sections(text)
    lines_of = {key: [line for line in body.splitlines() if line.strip()] for key, body in sections.items()}
    if len(sections) == len(SECTION_KEYS) and all(
        lines and not any(_is_placeholder(line) for line in lines) for lines in lines_of.values()
    ):
        return text
    titles = [m.group("title") for m in _HEADER.finditer(text)]
    zh_titles = set(SECTION_TITLES["zh"].values())
    if titles:
        lang = "zh" if sum(t in zh_titles for t in titles) * 2 > len(titles) else "en"
    none = "（无）" if lang == "zh" else "(none)"
    blocks = []
    for key in SECTION_KEYS:
        lines = [line for line in lines_of.get(key, []) if not _is_placeholder(line)]
        body = "\n".join(lines).strip() or f"- {none}"
        blocks.append(f"## {SECTION_TITLES[lang][key]}\n{body}")
    return "\n\n".join(blocks)


def _items(body: str) -> list[str]:
    return [_BULLET.sub("", line).strip() for line in body.splitlines() if not _is_placeholder(line)]


def repeats(reply: str, previous: str, share: float = 0.8) -> bool:
    """Whether ``reply`` is (nearly) the previous summary again: ``share`` of its items were in it."""
    _, new = parse_sections(reply)
    _, old = parse_sections(previous)
    items = [item for body in new.values() for item in _items(body)]
    known = {item for body in old.values() for item in _items(body)}
    return bool(items) and sum(item in known for item in items) >= share * len(items)


def merge_sections(previous: str, new: str, lang: Lang) -> str:
    """The previous summary with the new summary's items appended to each section, duplicates dropped."""
    _, old_sections = parse_sections(previous)
    _, new_sections = parse_sections(new)
    merged: dict[str, list[str]] = {}
    for key in SECTION_KEYS:
        items: list[str] = []
        for item in _items(old_sections.get(key, "")) + _items(new_sections.get(key, "")):
            if item not in items:
                items.append(item)
        merged[key] = items
    return format_sections(merged, lang)


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
#
# Shaped for small instruction-tuned models as much as for big hosted ones: the rules go in the system
# message, the material (previous summary, new messages, the user's /compact instruction) in the user
# message, and the user message *ends* with a fill-in template of the six headers. A 1.5B model given
# the headers as a list inside the rules answered "- (none)" and stopped; given a template to fill as
# the last thing it reads, it writes the sections. Every header carries a short hint of what goes there
# (the last one most of all: without a hint small models drop it), and "(none)" is mentioned nowhere,
# so there is no ready-made answer to copy.

_SYSTEM: dict[Lang, str] = {
    "en": """You maintain the running memory of a long conversation between a user and an AI assistant. \
You never talk to the user; you only write the memory document.

Rules:
- Fold the new part of the conversation into the current summary and write one complete new summary \
that replaces it.
- Keep every fact of the current summary that still matters; drop only what the new messages make obsolete.
- Copy file paths, URLs, function and class names, commands, numbers, versions, IDs and error messages \
exactly as written, character for character.
- Record outcomes of tool calls, not their raw output.
- Write in English, tersely, as bullet points under the six headers of the template, in its order.
- Output only the filled-in template: no greeting, no preface, no closing remark. \
Stay under {budget} tokens.""",
    "zh": """你负责维护用户与 AI 助手之间长对话的记忆。你从不与用户对话，只输出记忆文档本身。

要求：
- 请逐步总结提供的对话内容，将其补充到当前摘要中，写出一个完整的新摘要来替换它。
- 保留当前摘要中仍然重要的所有信息，只删除被新对话推翻或已过时的内容。
- 文件路径、URL、函数名和类名、命令、数字、版本号、编号和错误信息必须逐字照抄，不得改写。
- 记录工具调用的结果，而不是原始输出。
- 用中文简洁地分条书写，使用模板中的六个标题，并保持顺序。
- 只输出填好的模板：不要问候、不要开场白、不要结尾语。总长度不超过 {budget} 个 token。""",
}

# What each section holds, shown in the template as the placeholder bullet's hint.
_HINTS: dict[Lang, dict[str, str]] = {
    "en": {
        "goal": "what the user wants to achieve",
        "constraints": "requirements, limits and things not to do",
        "progress": "what has been done and found, with outcomes",
        "decisions": "choices made and why",
        "next": "what remains to do",
        "context": "exact errors, paths, values and facts needed to resume",
    },
    "zh": {
        "goal": "用户想要达成什么",
        "constraints": "要求、限制和禁止做的事",
        "progress": "已完成的工作和发现，以及结果",
        "decisions": "做出的选择及原因",
        "next": "还要做什么",
        "context": "继续工作所需的准确错误信息、路径、数值和事实",
    },
}

_LABELS: dict[Lang, dict[str, str]] = {
    "en": {
        "current": "Current summary:",
        "empty": "(empty: this is the start of the conversation)",
        "new": "New part of the conversation:",
        "extra": "Additional instruction from the user for this summary:",
        "fill": "Now write the new summary. Fill in this template, replacing each ... with bullet points "
        "taken from the current summary and the conversation above; write every one of the six sections:",
    },
    "zh": {
        "current": "当前摘要：",
        "empty": "（空：对话刚开始）",
        "new": "新的对话内容：",
        "extra": "用户对本次总结的额外要求：",
        "fill": "现在写出新摘要。请填写下面的模板，把每个 ... 替换为来自当前摘要和上述对话的要点，"
        "六个部分都要写：",
    },
}

PLACEHOLDER = "..."


def _flatten(summary: str, lang: Lang) -> str:
    """The previous summary as one list of ``- Section: fact`` bullets, not as a filled-in template.

    Shown the previous summary in the template's own shape, a small model copies it back unchanged and
    ignores the new messages; as a flat list of facts it has to rebuild the sections, new facts included.
    """
    preamble, sections = parse_sections(summary.strip())
    if not sections:
        return summary.strip()
    names, sep = SECTION_TITLES[lang], "：" if lang == "zh" else ": "
    lines = [preamble] if preamble else []
    for key, body in sections.items():
        lines += [
            f"- {names[key]}{sep}{_BULLET.sub('', line).strip()}"
            for line in body.splitlines()
            if line.strip() and not _is_placeholder(line)
        ]
    return "\n".join(lines)


def summary_template(lang: Lang) -> str:
    """The six headers, each with a placeholder bullet and a hint: what the model fills in."""
    titles, hints = SECTION_TITLES[lang], _HINTS[lang]
    hint = "（{}）" if lang == "zh" else " ({})"
    return "\n".join(f"## {titles[key]}\n- {PLACEHOLDER}{hint.format(hints[key])}" for key in SECTION_KEYS)


def summary_prompt(
    previous: str | None,
    transcript: str,
    *,
    lang: Lang,
    budget: int,
    instruction: str | None = None,
    known: Iterable[str] = (),
) -> list[Message]:
    """The incremental prompt: previous summary + new messages → a complete new structured summary.

    The system message holds the rules; the user message the current summary, the new messages,
    ``instruction`` — the text after ``/compact`` (e.g. "keep requirements and decisions only"), as the
    user's extra requirement — and, last, the template to fill in. All three are redacted (``known``:
    secret values to scrub wherever they appear).
    """
    labels = _LABELS[lang]
    current = _flatten(redact_secrets(previous, known), lang) if previous else labels["empty"]
    parts = [
        f"{labels['current']}\n{current}",
        f"{labels['new']}\n{redact_secrets(transcript, known)}",
    ]
    if instruction and instruction.strip():
        parts.append(f"{labels['extra']}\n{redact_secrets(instruction.strip(), known)}")
    parts.append(f"{labels['fill']}\n\n{summary_template(lang)}")
    return [SystemMessage(_SYSTEM[lang].format(budget=budget)), UserMessage("\n\n".join(parts))]


_ROLE: dict[Lang, str] = {lang: text.split("\n\n", 1)[0] for lang, text in _SYSTEM.items()}

_RECOMPRESS: dict[Lang, str] = {
    "en": """The summary below is too long: it must fit in {budget} tokens. Rewrite it shorter with the same \
six headers in the same order. Merge related bullets, drop finished details and anything repeated; keep the \
goal, the constraints, open problems and every path, name, number and error message exactly as written. \
Output only the filled-in template.""",
    "zh": """下面的摘要太长，必须压缩到 {budget} 个 token 以内。\
请保留相同的六个标题并保持顺序，合并相关条目，删去已完成的细节和重复内容；\
目标、约束、未解决的问题，以及所有路径、名称、数字和错误信息必须原样保留。只输出填好的模板。""",
}

_RECOMPRESS_LABELS: dict[Lang, dict[str, str]] = {
    "en": {
        "summary": "Summary:",
        "fill": "Now write the shorter summary. Fill in this template, replacing each ... with bullet points "
        "taken from the summary above:",
    },
    "zh": {
        "summary": "摘要：",
        "fill": "现在写出压缩后的摘要。请填写下面的模板，把每个 ... 替换为来自上述摘要的要点：",
    },
}


def recompress_prompt(summary: str, *, lang: Lang, budget: int, known: Iterable[str] = ()) -> list[Message]:
    """Ask the model to shrink an over-budget summary, keeping its structure and identifiers.

    Same shape as :func:`summary_prompt`: the task, the material, and the template to fill in last.
    """
    labels = _RECOMPRESS_LABELS[lang]
    body = "\n\n".join(
        [
            _RECOMPRESS[lang].format(budget=budget),
            f"{labels['summary']}\n{redact_secrets(summary.strip(), known)}",
            f"{labels['fill']}\n\n{summary_template(lang)}",
        ]
    )
    return [SystemMessage(_ROLE[lang]), UserMessage(body)]
