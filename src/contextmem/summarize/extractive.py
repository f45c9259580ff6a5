"""The extractive fallback (C8): a structured summary built without a model, deterministically.

Used when the model fails, times out or returns junk. It picks sentences by cue words (English and
Chinese) into the same six sections the model writes, keeps the previous summary's items first, and
fits a token budget by keeping the head and the tail of each section (the oldest facts and the newest
ones) and dropping the middle. Identifiers are not repeated here: the ledger keeps them verbatim.

Nothing is written unredacted: every message text and the previous summary pass
:func:`~contextmem.redaction.redact_secrets`, with the secret values found anywhere in them scrubbed
everywhere (``known``), before a single item is picked, so Goal lines, error lines and the previous
summary's items are all clean.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence

from ..messages import Message, ToolMessage, UserMessage, text_of
from ..redaction import redact_secrets
from .ledger import Ledger, TextCounter, secrets_in
from .prompts import SECTION_KEYS, Lang, format_sections, parse_sections

__all__ = ["extractive_summary", "truncate_to_tokens"]


ITEM_CHARS = 280  # one extracted sentence at most; the archive has the rest
ELLIPSIS = "…"


def truncate_to_tokens(text: str, budget: int, counter: TextCounter) -> str:
    """The longest prefix of ``text`` (plus ``…`` when cut) that costs at most ``budget`` tokens."""
    if counter.count_text(text) <= budget:
        return text
    if budget <= 0:
        return ""
    lo, hi = 0, len(text)  # lo always fits (an empty prefix costs nothing)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if counter.count_text(text[:mid].rstrip() + ELLIPSIS) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo].rstrip() + ELLIPSIS if lo else ""


def _cap(text: str, limit: int = ITEM_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + ELLIPSIS


def _cue(english: str, chinese: str) -> re.Pattern[str]:
    return re.compile(rf"(?i)(?<![A-Za-z])(?:{english})(?![A-Za-z])|{chinese}")


_CONSTRAINT = _cue(
    r"must|mustn't|should|shouldn't|don't|do not|never|always|only|without|need to|needs to|have to|"
    r"required?|avoid|make sure|ensure|cannot|can't|no more than|at most|at least",
    r"不要|必须|需要|只能|禁止|不能|务必|应该|别|不得|至少|最多|确保|一定要|不允许",
)
_PROGRESS = _cue(
    r"done|fixed|completed?|implemented|added|created|updated|resolved|passe[sd]|passing|works now|"
    r"merged|deployed|finished|wrote|written|removed|refactored|migrated|installed|succeeded",
    r"完成|修复|已经|已|实现了|添加了|通过|解决|部署了|更新了|创建了|删除了|改好",
)
_DECISION = _cue(
    r"decided?|decision|chose|choose|chosen|we will|we'll|going with|go with|opted|instead of|prefer|"
    r"agreed|let's use",
    r"决定|选择|采用|改用|我们将|确定|就用|方案",
)
_NEXT = _cue(
    r"todo|next|remaining|still need|will need|plan to|follow-up|afterwards|later",
    r"接下来|下一步|待办|然后|还需要|计划|之后|稍后",
)
_ERROR_LINE = _cue(
    r"error|exception|traceback|failed|failure|fatal|panic|denied|refused|timed out|killed",
    r"错误|失败|异常|报错|超时|拒绝",
)
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+|(?<=[。！？；])")
_NONE_ITEMS = {"(none)", "（无）", "none", "无", "n/a", "-"}


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    for raw in text.splitlines():
        line = raw.strip().lstrip("-*•>#").strip()
        if line:
            out.extend(s.strip() for s in _SENTENCE_END.split(line) if s.strip())
    return out


def _previous_items(previous: str, lang: Lang) -> dict[str, list[str]]:
    """Items of a previous summary, by section; free text (no sections) is kept under Progress."""
    preamble, sections = parse_sections(previous)
    items: dict[str, list[str]] = {k: [] for k in SECTION_KEYS}
    for key, body in sections.items():
        for line in body.splitlines():
            item = " ".join(line.strip().lstrip("-*•").split())
            if item and item.lower() not in _NONE_ITEMS:
                items[key].append(item)
    if preamble:
        earlier = "此前：" if lang == "zh" else "Earlier: "
        items["progress"] = [earlier + s for s in _sentences(preamble)] + items["progress"]
    return items


def _new_items(messages: Sequence[Message], ledger: Ledger, known: Iterable[str]) -> dict[str, list[str]]:
    items: dict[str, list[str]] = {k: [] for k in SECTION_KEYS}
    texts = [redact_secrets(text_of(m.content), known) for m in messages]
    users = [t.strip() for m, t in zip(messages, texts, strict=True) if isinstance(m, UserMessage)]
    users = [u for u in users if u]
    if users:
        items["goal"].append(_cap(users[0]))
        if len(users) > 1 and users[-1] != users[0]:
            items["goal"].append(_cap(users[-1]))
    errors = [e.value for e in ledger if e.kind == "error"]
    for m, text in zip(messages, texts, strict=True):
        # Errors verbatim: any line of a tool result that reads like one; a sentence people wrote only
        # when it names an error identifier.
        if isinstance(m, ToolMessage):
            candidates = [line.strip() for line in text.splitlines()]
            hits = [c for c in candidates if _ERROR_LINE.search(c) or any(e in c for e in errors)]
        else:
            hits = [s for s in _sentences(text) if any(e in s for e in errors)]
        items["context"].extend(_cap(h, 240) for h in hits if h)
        if isinstance(m, ToolMessage):
            continue
        rules: list[tuple[str, re.Pattern[str]]] = (
            [("constraints", _CONSTRAINT), ("decisions", _DECISION), ("next", _NEXT)]
            if isinstance(m, UserMessage)
            else [("decisions", _DECISION), ("next", _NEXT), ("progress", _PROGRESS)]
        )
        for sentence in _sentences(text):
            for key, cue in rules:
                if cue.search(sentence):
                    items[key].append(_cap(sentence))
                    break
    return items


def _dedupe(items: list[str]) -> list[str]:
    return list(dict.fromkeys(i for i in items if i))


def _pick(items: list[str], budget: int, cost: Callable[[str], int], newest_first: bool) -> list[str]:
    """Items within ``budget``, taken alternately from the tail and the head; the middle is dropped."""
    total = sum(cost(i) for i in items)
    if total <= budget:
        return items
    head: list[str] = []
    tail: list[str] = []
    lo, hi, spent = 0, len(items) - 1, cost(ELLIPSIS)
    from_tail = newest_first
    while lo <= hi:
        index = hi if from_tail else lo
        c = cost(items[index])
        if spent + c > budget:
            break
        spent += c
        if from_tail:
            tail.insert(0, items[hi])
            hi -= 1
        else:
            head.append(items[lo])
            lo += 1
        from_tail = not from_tail
    return [*head, ELLIPSIS, *tail]


def _fit(sections: dict[str, list[str]], lang: Lang, budget: int, counter: TextCounter) -> str:
    text = format_sections(sections, lang)
    if counter.count_text(text) <= budget:
        return text

    def cost(item: str) -> int:
        return counter.count_text(f"- {item}\n")

    available = budget - counter.count_text(format_sections({}, lang))
    need = {k: sum(cost(i) for i in sections[k]) for k in SECTION_KEYS}
    allot: dict[str, int] = {}
    left, keys = available, sorted(SECTION_KEYS, key=lambda k: need[k])
    for n, key in enumerate(keys):  # water-filling: small sections keep everything, big ones share the rest
        allot[key] = min(need[key], max(0, left) // (len(keys) - n))
        left -= allot[key]
    fitted = {
        k: _pick(sections[k], allot[k], cost, newest_first=k in ("progress", "next")) for k in SECTION_KEYS
    }
    fitted = {k: [] if v == [ELLIPSIS] else v for k, v in fitted.items()}
    return truncate_to_tokens(format_sections(fitted, lang), budget, counter)


def extractive_summary(
    messages: Sequence[Message],
    *,
    previous: str | None,
    ledger: Ledger,
    lang: Lang,
    budget: int,
    counter: TextCounter,
    known: Iterable[str] | None = None,
) -> str:
    """A six-section summary of ``previous`` + ``messages`` within ``budget`` tokens, headers in ``lang``.

    The previous summary's items come first in every section and the fit keeps each section's head, so
    what the previous summary said survives as long as the budget allows any of it. Secrets are
    redacted first; ``known`` are the secret values already found in ``messages`` and ``previous``
    (found here when not given).
    """
    if known is None:
        known = secrets_in(messages, previous or "")
    old: dict[str, list[str]] = {k: [] for k in SECTION_KEYS}
    if previous:
        old = _previous_items(redact_secrets(previous, known), lang)
    new = _new_items(messages, ledger, known)
    merged = {k: _dedupe(old[k] + new[k]) for k in SECTION_KEYS}
    return _fit(merged, lang, budget, counter)
