"""The summariser (C8): previous summary + messages that left the context → a new, bounded summary.

Order of work, and why:

1. The ledger is computed first, deterministically, from the previous ledger and the messages — so no
   identifier depends on what the model chose to write.
2. The model is asked for the new structured summary, as a background call (replies on the same endpoint go
   first), under a timeout that counts the time the call runs, not the time it queues. Everything in the
   prompt is redacted first (a secret the model never sees cannot come back), and so is the reply, with
   every secret value found in the input scrubbed wherever the model repeats it. The reply is cleaned (a
   chatty preface or a code fence is stripped) and validated: empty, chatty, fewer than four of the six
   sections, a template echoed back unfilled, or over budget is junk. A reply with four or five sections is
   kept, the missing ones filled with "(none)" (small local models tend to drop the last section). Junk
   gets exactly one retry — the re-compression prompt when the reply was only too long, the same prompt
   otherwise. Errors and timeouts are not retried here (the provider adapter has its own retry policy).
3. If the model still has nothing usable, the extractive fallback writes the summary, starting from the
   previous summary's items: the previous summary is never lost.
4. The result is redacted once more and fitted to ``max_tokens``: ``render()`` — summary, ledger and
   archive guide together — never exceeds it as counted by the summariser's counter. Whatever path wrote
   the text (model, extractive, a previous summary kept as it was), no secret is kept.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from ..errors import ConfigError, LLMError
from ..llm.base import LLM
from ..llm.scheduler import background_calls, wait_running
from ..messages import Message, text_of
from ..redaction import redact_secrets
from ..tokens import MessageCounter
from .extractive import extractive_summary, truncate_to_tokens
from .ledger import DEFAULT_MAX_ENTRIES, Ledger, build_ledger, secrets_in
from .prompts import (
    SECTION_KEYS,
    SECTION_TITLES,
    Lang,
    complete_sections,
    detect_language,
    merge_sections,
    parse_sections,
    recompress_prompt,
    render_transcript,
    repeats,
    section_has_content,
    summary_prompt,
)

__all__ = ["MIN_SUMMARY_TOKENS", "Summarizer", "Summary", "SummarySource", "merge_archive_refs"]

logger = logging.getLogger(__name__)

SummarySource = Literal["llm", "extractive"]
MIN_SUMMARY_TOKENS = 64  # below this not even the header and one fact fit

_RENDER_TEXT: dict[Lang, dict[str, str]] = {
    "en": {
        "title": "Summary of the earlier conversation:",
        "archive": "Archive of the summarised messages (read the full text with read_file(path)):",
    },
    "zh": {
        "title": "早期对话摘要：",
        "archive": "已归档的原始消息（可用 read_file(path) 读取全文）：",
    },
}


@dataclass(frozen=True, slots=True)
class Summary:
    """A running summary: the text, the identifier ledger and the guide to the archive.

    ``messages_covered`` counts every message summarised so far, across incremental updates.
    ``fallback_reason`` says why the extractive path was taken (``None`` when the model's summary was used).
    """

    text: str
    ledger: Ledger = field(default_factory=Ledger)
    archive_refs: tuple[str, ...] = ()
    source: SummarySource = "llm"
    messages_covered: int = 0
    lang: Lang = "en"
    fallback_reason: str | None = None

    def render(self) -> str:
        """The block injected into the prompt: summary, identifiers, and where the full messages are."""
        words = _RENDER_TEXT[self.lang]
        blocks = [words["title"]]
        if self.text.strip():
            blocks[0] += "\n" + self.text.strip()
        ledger = self.ledger.render(self.lang)
        if ledger:
            blocks.append(ledger)
        if self.archive_refs:
            blocks.append("\n".join([words["archive"], *(f"- {ref}" for ref in self.archive_refs)]))
        return "\n\n".join(blocks)


_LINES_REF = re.compile(r"^(?P<path>.+?) lines (?P<start>\d+)-(?P<end>\d+)$")


def merge_archive_refs(*groups: Sequence[str]) -> tuple[str, ...]:
    """All refs, de-duplicated, in order; ``path lines a-b`` refs to one file become one span."""
    spans: dict[str, tuple[int, int]] = {}
    order: list[str] = []
    for ref in (r.strip() for group in groups for r in group):
        if not ref:
            continue
        m = _LINES_REF.match(ref)
        if m is None:
            if ref not in order:
                order.append(ref)
            continue
        path, start, end = m["path"], int(m["start"]), int(m["end"])
        key = f"\0{path}"
        if key in spans:
            old = spans[key]
            spans[key] = (min(old[0], start), max(old[1], end))
        else:
            spans[key] = (start, end)
            order.append(key)
    return tuple(f"{k[1:]} lines {spans[k][0]}-{spans[k][1]}" if k in spans else k for k in order)


# --- validating the model's reply ---------------------------------------------------------------

_FENCE_OPEN = re.compile(r"^\s*```[A-Za-z]*\s*$")
_CHATTY = re.compile(
    r"(?i)^\W*(?:sure|certainly|of course|okay|ok|absolutely|here is|here's|hello|hi|hey|greetings|"
    r"i'd be happy|i can help|as an ai|好的|当然|没问题|以下是|下面是|你好|您好|很高兴)"
)
_CLOSER = re.compile(
    r"(?i)^\W*(?:let me know|hope this helps|feel free|if you need|希望.*帮助|如需|如果您?还?需要)"
)


def _clean(reply: str, secrets: Iterable[str]) -> str:
    """Strip whatever precedes the first section ("Sure! Here is…", a title, a fence), a closing fence
    or chatty last line, and redact secrets — including ``secrets`` known from the input."""
    text = reply.strip()
    preamble, sections = parse_sections(text)
    if sections and preamble:
        text = text[len(preamble) :].strip()
    lines = text.splitlines()
    while lines and (_CLOSER.search(lines[-1]) or lines[-1].strip() == "```"):
        lines.pop()
    if lines and _FENCE_OPEN.match(lines[0]):
        lines.pop(0)
    return redact_secrets("\n".join(lines).strip(), secrets)


MIN_SECTIONS = 4  # of the six: small models drop one or two; the rest are filled with "(none)"


OVER_BUDGET_SLACK = 1.25
"""A reply up to 25% over its budget is kept and trimmed to it (by :meth:`Summarizer._finish`); only
a longer one costs another model call to re-compress — small local models rarely hit a budget exactly."""


def _problem(text: str, budget: int, counter: MessageCounter) -> str | None:
    """Why ``text`` is not a usable summary, or ``None``. ``text`` has been through :func:`_accept`."""
    tokens = counter.count_text(text)
    if tokens > budget * OVER_BUDGET_SLACK:
        return f"over budget ({tokens} > {budget} tokens)"
    return None


def _accept(text: str, lang: Lang) -> tuple[str | None, str]:
    """The reply with every section present (missing ones say "(none)"), or ``None`` and why not.

    Rejected: an empty reply, a chatty one with no sections, fewer than :data:`MIN_SECTIONS` sections,
    and a template echoed back with nothing filled in.
    """
    if not text.strip():
        return None, "empty reply"
    _, sections = parse_sections(text)
    if not sections and _CHATTY.search(text):
        return None, f"chatty reply: {text[:60]!r}"
    if len(sections) < MIN_SECTIONS:
        missing = [SECTION_TITLES["en"][k] for k in SECTION_KEYS if k not in sections]
        return None, f"missing sections {missing}"
    if not any(section_has_content(body) for body in sections.values()):
        return None, "template echoed back with nothing filled in"
    return complete_sections(text, lang), ""


# --- the summariser -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Frame:
    """What surrounds the text in ``render()``, already fitted, and the tokens left for the text.

    ``secrets``: every secret value in the input (messages, previous summary, instruction), scrubbed
    from whatever is sent or kept even where no pattern would spot it.
    """

    ledger: Ledger
    refs: tuple[str, ...]
    text_budget: int
    lang: Lang
    covered: int
    secrets: frozenset[str] = frozenset()


class Summarizer:
    """Incremental, bounded summaries with a deterministic fallback (see the module docstring).

    ``max_tokens`` bounds ``Summary.render()``; of it, the ledger may take ``ledger_share`` and the
    archive guide ``archive_share``, the summary text gets the rest.

    Model calls are background calls (:func:`~contextmem.llm.scheduler.background_calls`): on a gated
    model they wait while a reply runs or waits on the same endpoint. ``timeout`` (seconds) bounds the
    time each call *runs*; time queued behind replies is bounded separately by ``queue_timeout``
    (default: ``timeout``), after which the call is given up like a timed-out one: the extractive
    summary stands in, so nothing is lost.
    """

    def __init__(
        self,
        llm: LLM,
        counter: MessageCounter,
        *,
        max_tokens: int = 2000,
        timeout: float = 120.0,
        queue_timeout: float | None = None,
        ledger_share: float = 0.35,
        archive_share: float = 0.1,
        ledger_max_entries: int = DEFAULT_MAX_ENTRIES,
    ) -> None:
        if max_tokens < MIN_SUMMARY_TOKENS:
            raise ConfigError(
                f"summary max_tokens={max_tokens!r} is too small. Fix: use at least {MIN_SUMMARY_TOKENS} "
                "(the default summary_max_tokens is 2000)."
            )
        if timeout <= 0:
            raise ConfigError(f"summary timeout={timeout!r} must be > 0 seconds. Fix: use e.g. 120.")
        if queue_timeout is not None and queue_timeout <= 0:
            raise ConfigError(
                f"summary queue_timeout={queue_timeout!r} must be > 0 seconds. Fix: use e.g. 120, or None "
                "for the same as timeout."
            )
        if not (0 <= ledger_share < 1 and 0 <= archive_share < 1 and ledger_share + archive_share < 1):
            raise ConfigError(
                f"ledger_share={ledger_share!r} and archive_share={archive_share!r} must be in [0, 1) and "
                "sum to less than 1. Fix: leave room for the summary text, e.g. 0.35 and 0.1."
            )
        self.llm = llm
        self.counter = counter
        self.max_tokens = max_tokens
        self.timeout = timeout
        self.queue_timeout = timeout if queue_timeout is None else queue_timeout
        self.ledger_share = ledger_share
        self.archive_share = archive_share
        self.ledger_max_entries = ledger_max_entries

    async def summarize(
        self,
        previous: Summary | None,
        messages: Sequence[Message],
        *,
        instruction: str | None = None,
        archive_refs: Sequence[str] = (),
    ) -> Summary:
        """Fold ``messages`` into ``previous``. Never raises for a model failure: falls back instead."""
        frame = self._frame(previous, messages, archive_refs, instruction or "")
        if not messages and instruction is None and previous is not None:
            return self._finish(previous.text, frame, previous.source, previous.fallback_reason)
        text, problem = await self._ask_model(previous, messages, frame, instruction)
        if text is not None:
            return self._finish(text, frame, "llm", None)
        logger.warning("summary model gave nothing usable (%s); using the extractive summary", problem)
        return self._extractive(previous, messages, frame, problem)

    def extract(
        self,
        previous: Summary | None,
        messages: Sequence[Message],
        *,
        archive_refs: Sequence[str] = (),
    ) -> Summary:
        """The extractive summary alone, with no model call (also what :meth:`summarize` falls back to)."""
        frame = self._frame(previous, messages, archive_refs)
        return self._extractive(previous, messages, frame, "requested")

    # --- steps ---

    def _frame(
        self,
        previous: Summary | None,
        messages: Sequence[Message],
        archive_refs: Sequence[str],
        instruction: str = "",
    ) -> _Frame:
        """The ledger and archive guide, merged and fitted to their shares, and the text's budget."""
        lang = detect_language(messages, previous.text if previous else "")
        secrets = secrets_in(messages, previous.text if previous else "", instruction)
        old = previous.ledger if previous else None
        if old is not None and old.max_entries != self.ledger_max_entries:
            old = replace(old, max_entries=self.ledger_max_entries).bounded()
        ledger = build_ledger(messages, old, max_entries=self.ledger_max_entries, known=secrets)
        refs = merge_archive_refs(previous.archive_refs if previous else (), archive_refs)
        covered = (previous.messages_covered if previous else 0) + len(messages)
        count = self.counter.count_text
        ledger = ledger.fit(self.counter, int(self.max_tokens * self.ledger_share), lang)
        archive_budget = int(self.max_tokens * self.archive_share)
        kept: list[str] = []
        for ref in reversed(refs):  # the newest refs are kept when the guide must shrink
            candidate = [ref, *kept]
            block = "\n".join([_RENDER_TEXT[lang]["archive"], *(f"- {r}" for r in candidate)])
            if count(block) > archive_budget:
                break
            kept = candidate
        empty = Summary("x", ledger, tuple(kept), lang=lang).render()
        margin = 8  # BPE counts are not additive across the joins
        text_budget = max(0, self.max_tokens - count(empty) - margin)
        return _Frame(ledger, tuple(kept), text_budget, lang, covered, secrets)

    async def _ask_model(
        self,
        previous: Summary | None,
        messages: Sequence[Message],
        frame: _Frame,
        instruction: str | None,
    ) -> tuple[str | None, str]:
        """The model's validated summary, or ``None`` and why not.

        At most two calls (a reply still over budget after its re-compression is trimmed to fit rather
        than thrown away), except in one case: when the reply only repeats the previous summary (small
        models do, ignoring the new messages), the retry asks for a summary of the new messages alone,
        merged into the previous one section by section here, and a merge over budget gets one
        re-compression call.
        """
        lang, budget, secrets = frame.lang, frame.text_budget, frame.secrets
        transcript = render_transcript(messages, known=secrets)
        old = previous.text if previous and previous.text.strip() else None
        prompt = summary_prompt(
            old, transcript, lang=lang, budget=budget, instruction=instruction, known=secrets
        )
        problem = ""
        merge = False
        too_long: str | None = None  # the shortest well-formed reply that was over budget
        attempts = 2
        attempt = 0
        while attempt < attempts:
            attempt += 1
            try:
                with background_calls():
                    reply = await wait_running(
                        self.llm.complete(prompt, max_tokens=max(256, budget * 2)),
                        self.timeout,
                        max_queue=self.queue_timeout,
                    )
            except TimeoutError as exc:
                return None, str(exc)
            except LLMError as exc:
                return None, f"{type(exc).__name__}: {exc}"
            text, problem = _accept(_clean(text_of(reply.message.content), secrets), lang)
            if text is not None and merge:
                assert old is not None
                text, merge = merge_sections(old, text, lang), False
                attempts = 3  # the merge may need re-compressing
            elif text is not None and old is not None and messages and repeats(text, old):
                logger.info(
                    "summary attempt %d repeats the previous summary; summarising the new part", attempt
                )
                problem, merge = "reply repeats the previous summary", True
                prompt = summary_prompt(
                    None, transcript, lang=lang, budget=budget, instruction=instruction, known=secrets
                )
                continue
            if text is not None:
                problem = _problem(text, budget, self.counter) or ""
                if not problem:
                    return text, ""
            logger.info("summary attempt %d rejected: %s", attempt, problem)
            if text is not None and problem.startswith("over budget"):
                if too_long is None or self.counter.count_text(text) < self.counter.count_text(too_long):
                    too_long = text
                prompt = recompress_prompt(text, lang=lang, budget=budget, known=secrets)
        if too_long is not None:
            # Well-formed but long every time: the model's own words, trimmed to the budget by
            # _finish, still beat the extractive summary.
            logger.info("summary over budget after every attempt; trimming the shortest reply")
            return too_long, ""
        return None, problem

    def _extractive(
        self,
        previous: Summary | None,
        messages: Sequence[Message],
        frame: _Frame,
        reason: str,
    ) -> Summary:
        text = extractive_summary(
            messages,
            previous=previous.text if previous else None,
            ledger=frame.ledger,
            lang=frame.lang,
            budget=frame.text_budget,
            counter=self.counter,
            known=frame.secrets,
        )
        return self._finish(text, frame, "extractive", reason)

    def _finish(
        self,
        text: str,
        frame: _Frame,
        source: SummarySource,
        reason: str | None,
    ) -> Summary:
        """Assemble the summary and enforce the hard bound on ``render()``, whatever the parts cost.

        The one place every summary text passes: redacted here whichever path wrote it.
        """
        text = truncate_to_tokens(redact_secrets(text, frame.secrets), frame.text_budget, self.counter)
        summary = Summary(text, frame.ledger, frame.refs, source, frame.covered, frame.lang, reason)
        over = self.counter.count_text(summary.render()) - self.max_tokens
        while over > 0:
            if summary.text:
                keep = max(0, self.counter.count_text(summary.text) - over - 1)
                summary = replace(summary, text=truncate_to_tokens(summary.text, keep, self.counter))
            elif summary.archive_refs:
                summary = replace(summary, archive_refs=summary.archive_refs[1:])
            elif len(summary.ledger):
                summary = replace(summary, ledger=summary.ledger.evict(1))
            else:  # only the title is left; MIN_SUMMARY_TOKENS guarantees it fits
                break
            over = self.counter.count_text(summary.render()) - self.max_tokens
        return summary
