"""Summary prompts (C8), in English and Chinese, the transcript they are built from, and the structure.

Each call costs O(new messages): only what is new goes in — the new messages, the identifier ledger and
the extractive draft of the new summary (previous summary + new messages, :mod:`.facts`) — and the model
returns the draft corrected: stale items dropped, duplicates merged, what the draft missed added. The
output has a fixed structure — Goal, Constraints, Progress, Key decisions, Next steps, Critical context —
so it can be validated and reconciled with the draft (:mod:`.revise`). The language of the conversation
(share of CJK characters) picks the prompt and the section headers.

Everything that enters a prompt passes :func:`~contextmem.redaction.redact_secrets` (with ``known``,
the secret values already found in the input, scrubbed wherever they reappear): a secret a model never
sees cannot end up in a summary.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ..lang.scripts import IDEOGRAPH_CHAR
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
    "format_sections",
    "items_of",
    "parse_sections",
    "render_transcript",
    "section_has_content",
    "summary_prompt",
    "summary_template",
    "unflatten",
    "without_labels",
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
    cjk = len(IDEOGRAPH_CHAR.findall(text))
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
_LABELS_AHEAD = re.compile(
    r"^(?:(?:"
    + "|".join(re.escape(t) for t in sorted(_TITLE_TO_KEY, key=len, reverse=True))
    + r")[ \t]*[:：][ \t]*)+",
    re.IGNORECASE,
)


def without_labels(item: str) -> str:
    """``item`` without the section names ahead of it: ``Critical context: Critical context: x`` is ``x``.

    The draft is shown as ``- Section: fact`` lines (:func:`_flatten`) and a model copies them back under
    the headers, labels and all; read back unchanged, every summary of a summary would add one more.
    An item that is nothing but a label is kept as it is.
    """
    rest = _LABELS_AHEAD.sub("", item)
    return rest if rest.strip() else item


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


def items_of(body: str) -> list[str]:
    """A section body's items: its lines, bullets stripped, placeholders and "(none)" left out."""
    return [
        without_labels(_BULLET.sub("", line).strip())
        for line in body.splitlines()
        if not _is_placeholder(line)
    ]


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
# message, the material in the user message, and the user message *ends* with a fill-in template of the
# six headers. A 1.5B model given the headers as a list inside the rules answered "- (none)" and stopped;
# given a template to fill as the last thing it reads, it writes the sections. Every header carries a
# short hint of what goes there (the last one most of all: without a hint small models drop it), and
# "(none)" is mentioned nowhere, so there is no ready-made answer to copy.
#
# The material is what is new, not the previous summary: the new messages, the identifier ledger, and the
# extractive draft (:func:`~.facts.compact_facts` over the previous summary + the new messages), which the
# model corrects rather than writes from nothing. Shown the previous summary, a 1.5B model copied it back
# and ignored the new messages; shown a draft that already holds them, copying is harmless, and the draft
# is the summary whenever the model fails.

_SYSTEM: dict[Lang, str] = {
    "en": """You maintain the running memory of a long conversation between a user and an AI assistant. \
You never talk to the user; you only write the memory document.

You get the new part of the conversation, the identifiers recorded so far, and a draft of the new memory \
made automatically from the earlier memory and the new part. Correct the draft:
- Drop draft items the new part makes outdated (a value that changed, a plan done or cancelled): keep \
only the newest statement.
- Merge draft items that say the same thing into one.
- Add what matters in the new part that the draft missed: decisions, outcomes, preferences, plans.
- Shorten wordy items, but copy names, numbers, dates, file paths, identifiers and error messages exactly \
as written, character for character.
- Keep every other item of the draft.
- Write in English, tersely, as bullet points under the six headers of the template, in its order.
- Output only the filled-in template: no greeting, no preface, no closing remark. \
Stay under {budget} tokens.""",
    "zh": """你负责维护用户与 AI 助手之间长对话的记忆。你从不与用户对话，只输出记忆文档本身。

你会收到新的对话内容、已记录的关键标识，以及一份由早先记忆和新对话自动生成的新记忆草稿。请修订草稿：
- 删除被新对话推翻或已过时的条目（数值变了、计划已完成或取消）：只保留最新的说法。
- 把意思相同的条目合并为一条。
- 补充新对话中草稿遗漏的重要内容：决定、结果、偏好、计划。
- 精简啰嗦的条目，但人名、数字、日期、文件路径、编号和错误信息必须逐字照抄，不得改写。
- 草稿中的其他条目全部保留。
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
        "new": "New part of the conversation:",
        "ledger": "Identifiers recorded so far (kept separately; copy them exactly when you use them):",
        "draft": "Draft of the new memory (one fact a line, with its section):",
        "empty": "(empty)",
        "extra": "Additional instruction from the user for this summary:",
        "fill": "Now write the corrected memory. Fill in this template, replacing each ... with bullet "
        "points from the draft, corrected with the new part of the conversation; write every one of the "
        "six sections:",
    },
    "zh": {
        "new": "新的对话内容：",
        "ledger": "已记录的关键标识（另行保存；使用时请逐字照抄）：",
        "draft": "新记忆的草稿（每行一条事实，标明所属部分）：",
        "empty": "（空）",
        "extra": "用户对本次总结的额外要求：",
        "fill": "现在写出修订后的记忆。请填写下面的模板，把每个 ... 替换为来自草稿、并按新对话修订过的要点，"
        "六个部分都要写：",
    },
}

PLACEHOLDER = "..."


def _flatten(summary: str, lang: Lang) -> str:
    """A summary as one list of ``- Section: fact`` bullets, not as a filled-in template.

    Shown a summary in the template's own shape, a small model copies it back unchanged and ignores the
    new messages; as a flat list of facts it has to rebuild the sections.
    """
    preamble, sections = parse_sections(summary.strip())
    if not sections:
        return summary.strip()
    names, sep = SECTION_TITLES[lang], "：" if lang == "zh" else ": "
    lines = [preamble] if preamble else []
    for key, body in sections.items():
        lines += [
            f"- {names[key]}{sep}{without_labels(_BULLET.sub('', line).strip())}"
            for line in body.splitlines()
            if line.strip() and not _is_placeholder(line)
        ]
    return "\n".join(lines)


_FLAT_ITEM = re.compile(r"^(?P<title>[^:：]{1,24}?)\s*[:：]\s*(?P<fact>\S.*)$")
_TITLE_KEYS = {t.lower(): (lang, key) for lang, titles in SECTION_TITLES.items() for key, t in titles.items()}


def unflatten(text: str) -> str:
    """The inverse of the draft's flat list (:func:`_flatten`): ``- Progress: fact`` lines, as a small model
    writes back the list it was shown, as the sections they name; ``""`` when no line names one."""
    found: dict[Lang, dict[str, list[str]]] = {"en": {}, "zh": {}}
    for line in text.splitlines():
        m = _FLAT_ITEM.match(_BULLET.sub("", line).strip())
        if m and (hit := _TITLE_KEYS.get(m["title"].lower())):
            found[hit[0]].setdefault(hit[1], []).append(m["fact"].strip())
    chosen: Lang = "zh" if len(found["zh"]) > len(found["en"]) else "en"
    sections = found[chosen]  # only those it wrote: a section it lacks is the draft's
    return "\n\n".join(
        f"## {SECTION_TITLES[chosen][key]}\n" + "\n".join(f"- {item}" for item in sections[key])
        for key in SECTION_KEYS
        if key in sections
    )


def summary_template(lang: Lang) -> str:
    """The six headers, each with a placeholder bullet and a hint: what the model fills in."""
    titles, hints = SECTION_TITLES[lang], _HINTS[lang]
    hint = "（{}）" if lang == "zh" else " ({})"
    return "\n".join(f"## {titles[key]}\n- {PLACEHOLDER}{hint.format(hints[key])}" for key in SECTION_KEYS)


def summary_prompt(
    draft: str,
    transcript: str,
    *,
    lang: Lang,
    budget: int,
    ledger: str = "",
    instruction: str | None = None,
    known: Iterable[str] = (),
) -> list[Message]:
    """The prompt: new messages + identifier ledger + extractive draft → the corrected summary.

    The system message holds the rules; the user message the new messages (``transcript``), the
    rendered ``ledger``, the ``draft`` as a flat list of facts, ``instruction`` — the text after
    ``/compact`` (e.g. "keep requirements and decisions only"), as the user's extra requirement — and,
    last, the template to fill in. The previous summary is not sent: the draft holds what of it still
    fits. Everything is redacted (``known``: secret values to scrub wherever they appear).
    """
    labels = _LABELS[lang]
    facts = _flatten(redact_secrets(draft, known), lang)
    parts = [f"{labels['new']}\n{redact_secrets(transcript, known)}"]
    if ledger.strip():
        parts.append(f"{labels['ledger']}\n{redact_secrets(ledger.strip(), known)}")
    parts.append(f"{labels['draft']}\n{facts or labels['empty']}")
    if instruction and instruction.strip():
        parts.append(f"{labels['extra']}\n{redact_secrets(instruction.strip(), known)}")
    parts.append(f"{labels['fill']}\n\n{summary_template(lang)}")
    return [SystemMessage(_SYSTEM[lang].format(budget=budget)), UserMessage("\n\n".join(parts))]
