"""Summary prompts (C8), in English and Chinese, the transcript they are built from, and the structure.

Each call costs O(new messages): only what is new goes in — the new messages, the identifier ledger and
the extractive draft of the new summary (previous summary + new messages, :mod:`.facts`) — and the model
returns the draft corrected: stale items dropped, duplicates merged, what the draft missed added. The
output has a fixed structure — Goal, Constraints, Progress, Key decisions, Next steps, Critical context —
so it can be validated and reconciled with the draft (:mod:`.revise`). The language of the conversation
(:func:`~.languages.detect_language`) picks the prompt and the section headers, from its table
(:class:`~contextmem.lang.SummaryText`).

Everything that enters a prompt passes :func:`~contextmem.redaction.redact_secrets` (with ``known``,
the secret values already found in the input, scrubbed wherever they reappear): a secret a model never
sees cannot end up in a summary.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence

from ..lang import TablePattern, derived
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
from ..textcut import cut_keeping
from .languages import Lang, detect_language, summaries, summary_languages, summary_text
from .ledger import secrets_in

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


_BY_LANGUAGE = derived(lambda langs: {code: texts.sections for code, texts in summaries(langs)})


class _SectionTitles(Mapping[Lang, Mapping[str, str]]):
    """Per summary language (its code): the section headers, by section key; read from the registry."""

    def __getitem__(self, lang: Lang) -> Mapping[str, str]:
        return _BY_LANGUAGE()[lang]

    def __iter__(self) -> Iterator[Lang]:
        return iter(_BY_LANGUAGE())

    def __len__(self) -> int:
        return len(_BY_LANGUAGE())


SECTION_TITLES: Mapping[Lang, Mapping[str, str]] = _SectionTitles()
"""Per summary language: its section headers (:attr:`~contextmem.lang.SummaryText.sections`)."""


# --- transcript ---------------------------------------------------------------------------------


def _head_tail(text: str, limit: int) -> str:
    return cut_keeping(text, _omitted_notice, max_chars=limit)


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

_TITLE_TO_KEY = derived(
    lambda langs: {
        title.lower(): key for _, texts in summaries(langs) for key, title in texts.sections.items()
    }
)


def _titles(_: object) -> str:
    """Every summary language's headers, as regex alternatives, the longest first."""
    return "|".join(re.escape(t) for t in sorted(_TITLE_TO_KEY(), key=len, reverse=True))


_HEADER = TablePattern(
    lambda langs: (
        r"^[ \t]*(?:#{1,6}[ \t]*)?(?:\*\*)?(?:\d+[.)、][ \t]*)?(?P<title>"
        + _titles(langs)
        + r")(?:\*\*)?[ \t]*[:：]?(?:\*\*)?[ \t]*(?P<rest>.*)$"
    ),
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
        key = _TITLE_TO_KEY()[m.group("title").lower()]
        end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
        body = (m.group("rest") + text[m.end() : end]).strip()
        sections[key] = f"{sections[key]}\n{body}".strip() if key in sections else body
    return preamble.strip(), sections


_BULLET = re.compile(r"^[ \t]*(?:[-*•+][ \t]*)?")
_LABELS_AHEAD = TablePattern(
    lambda langs: r"^(?:(?:" + _titles(langs) + r")[ \t]*[:：][ \t]*)+", re.IGNORECASE
)


def without_labels(item: str) -> str:
    """``item`` without the section names ahead of it: ``Critical context: Critical context: x`` is ``x``.

    The draft is shown as ``- Section: fact`` lines (:func:`_flatten`) and a model copies them back under
    the headers, labels and all; read back unchanged, every summary of a summary would add one more.
    An item that is nothing but a label is kept as it is.
    """
    rest = _LABELS_AHEAD.sub("", item)
    return rest if rest.strip() else item


_NONE_MARKERS = derived(
    lambda langs: frozenset({""}).union(
        *(texts.none_items | texts.none_replies for _, texts in summaries(langs))
    )
)
_HINTS = derived(
    lambda langs: frozenset(hint for _, texts in summaries(langs) for hint in texts.hints.values())
)


def _is_placeholder(line: str) -> bool:
    """A template placeholder left unfilled (``- ...``, ``- ... (hint)``, a bare hint) or a none marker."""
    item = _BULLET.sub("", line).strip()
    if item.lower() in _NONE_MARKERS() or item.startswith(("...", "…")):
        return True
    return item.strip("()（）").strip() in _HINTS()


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
    if titles:  # the language most of the headers are in; the default's when none has most
        langs = summary_languages()
        lang = next(
            (
                language.code
                for language in langs[1:]
                if sum(t in set(SECTION_TITLES[language.code].values()) for t in titles) * 2 > len(titles)
            ),
            langs[0].code,
        )
    words = summary_text(lang)
    blocks = []
    for key in SECTION_KEYS:
        lines = [line for line in lines_of.get(key, []) if not _is_placeholder(line)]
        body = "\n".join(lines).strip() or f"- {words.none}"
        blocks.append(f"## {words.sections[key]}\n{body}")
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
    words = summary_text(lang)
    titles, none = words.sections, words.none
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

PLACEHOLDER = "..."


def _flatten(summary: str, lang: Lang) -> str:
    """A summary as one list of ``- Section: fact`` bullets, not as a filled-in template.

    Shown a summary in the template's own shape, a small model copies it back unchanged and ignores the
    new messages; as a flat list of facts it has to rebuild the sections.
    """
    preamble, sections = parse_sections(summary.strip())
    if not sections:
        return summary.strip()
    words = summary_text(lang)
    names, sep = words.sections, words.label_sep
    lines = [preamble] if preamble else []
    for key, body in sections.items():
        lines += [
            f"- {names[key]}{sep}{without_labels(_BULLET.sub('', line).strip())}"
            for line in body.splitlines()
            if line.strip() and not _is_placeholder(line)
        ]
    return "\n".join(lines)


_FLAT_ITEM = re.compile(r"^(?P<title>[^:：]{1,24}?)\s*[:：]\s*(?P<fact>\S.*)$")
_TITLE_KEYS = derived(
    lambda langs: {
        t.lower(): (code, key) for code, texts in summaries(langs) for key, t in texts.sections.items()
    }
)


def unflatten(text: str) -> str:
    """The inverse of the draft's flat list (:func:`_flatten`): ``- Progress: fact`` lines, as a small model
    writes back the list it was shown, as the sections they name; ``""`` when no line names one."""
    found: dict[Lang, dict[str, list[str]]] = {lang: {} for lang in SECTION_TITLES}
    for line in text.splitlines():
        m = _FLAT_ITEM.match(_BULLET.sub("", line).strip())
        if m and (hit := _TITLE_KEYS().get(m["title"].lower())):
            found[hit[0]].setdefault(hit[1], []).append(m["fact"].strip())
    # the language it named most sections in (the first registered of those that tie)
    chosen = max(found, key=lambda lang: len(found[lang]))
    sections = found[chosen]  # only those it wrote: a section it lacks is the draft's
    return "\n\n".join(
        f"## {SECTION_TITLES[chosen][key]}\n" + "\n".join(f"- {item}" for item in sections[key])
        for key in SECTION_KEYS
        if key in sections
    )


def summary_template(lang: Lang) -> str:
    """The six headers, each with a placeholder bullet and a hint: what the model fills in."""
    words = summary_text(lang)
    return "\n".join(
        f"## {words.sections[key]}\n- {PLACEHOLDER}{words.hint.format(words.hints[key])}"
        for key in SECTION_KEYS
    )


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
    labels = summary_text(lang).prompt_labels
    facts = _flatten(redact_secrets(draft, known), lang)
    parts = [f"{labels['new']}\n{redact_secrets(transcript, known)}"]
    if ledger.strip():
        parts.append(f"{labels['ledger']}\n{redact_secrets(ledger.strip(), known)}")
    parts.append(f"{labels['draft']}\n{facts or labels['empty']}")
    if instruction and instruction.strip():
        parts.append(f"{labels['extra']}\n{redact_secrets(instruction.strip(), known)}")
    parts.append(f"{labels['fill']}\n\n{summary_template(lang)}")
    return [SystemMessage(summary_text(lang).system.format(budget=budget)), UserMessage("\n\n".join(parts))]
