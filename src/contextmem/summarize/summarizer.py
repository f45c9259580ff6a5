"""The summariser (C8): previous summary + messages that left the context → a new, bounded summary.

Order of work, and why:

1. The ledger is computed first, deterministically, from the previous ledger and the messages — so no
   identifier depends on what the model chose to write.
2. The extractive draft is written next (:func:`~.extractive.extractive_summary`: the facts of the previous
   summary and the new messages, within the budget). It is the summary whenever the model cannot do
   better — no model, an error, a timeout, junk — so a timeout still leaves a good summary.
3. The model is asked to correct a draft of what is new, in one background call (replies on the same
   endpoint go first) under a timeout that counts the time the call runs, not the time it queues. The
   prompt holds the new messages, the ledger, and the draft of their facts and of the previous facts
   they may make stale (:func:`~.facts.fresh_draft`), in a third of the budget — never the rest of the
   previous summary (:func:`~.prompts.summary_prompt`; a ``/compact`` instruction reshapes the whole
   draft, in half the budget); everything in it is redacted first (a secret
   the model never sees cannot come back). The reply is cleaned, checked and reconciled with that draft
   (:mod:`.revise`): junk or a copy of the previous summary leaves the full draft; a section it lacks
   is the draft's; a draft fact with a number, date or identifier it dropped without a replacement
   comes back (every dropped fact, when it dropped most of the draft). The rest of the previous summary
   and the new facts the draft had no room for are merged in without the model
   (:func:`~.facts.merge_facts`): the call stays short and the summary keeps its whole budget. There is
   no retry: a second call would double the cost of a summary the draft already covers. Errors are
   retried by the provider adapter's own policy.
4. The result is redacted once more and fitted to ``max_tokens``: ``render()`` — summary, ledger and
   archive guide together — never exceeds it as counted by the summariser's counter. Whatever path wrote
   the text (model, draft, a previous summary kept as it was), no secret is kept.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from ..errors import ConfigError, LLMError
from ..llm.base import LLM, CallTotals
from ..llm.scheduler import background_calls, wait_running
from ..logs import get_logger
from ..messages import Message, text_of
from ..offloop import off_loop, texts_bytes
from ..redaction import redact_secrets
from ..textlines import newline_only
from ..tokens import MessageCounter
from .extractive import extractive_summary, truncate_to_tokens
from .facts import Sizing, fresh_draft, merge_facts, voiced
from .languages import Lang, detect_language, summary_text
from .ledger import DEFAULT_MAX_ENTRIES, Ledger, build_ledger, secrets_in
from .prompts import render_transcript, summary_prompt
from .revise import revise

__all__ = ["MIN_SUMMARY_TOKENS", "Summarizer", "Summary", "SummarySource", "merge_archive_refs"]

logger = get_logger(__name__)

SummarySource = Literal["llm", "extractive"]
MIN_SUMMARY_TOKENS = 64  # below this not even the header and one fact fit
REPLY_SLACK = 1.25
"""The model's reply may take this many times the text budget (its tokenizer is not ours; small models
rarely hit a budget exactly); what is over the budget is re-compressed deterministically."""
FRESH_SHARE, FRESH_MIN = 1 / 3, 200
"""The model corrects the new messages' facts (and the previous ones they may make stale) in this share of
the summary's text budget, at least ``FRESH_MIN`` tokens; the other previous facts are merged in without
it."""


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
        words = summary_text(self.lang)
        blocks = [words.title]
        if self.text.strip():
            blocks[0] += "\n" + self.text.strip()
        ledger = self.ledger.render(self.lang)
        if ledger:
            blocks.append(ledger)
        if self.archive_refs:
            blocks.append("\n".join([words.archive, *(f"- {ref}" for ref in self.archive_refs)]))
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
                "(the default summary_max_tokens is 3000)."
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
        self.model_calls = CallTotals()  # the summary calls made, with the tokens they reported
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
        """Fold ``messages`` into ``previous``. Never raises for a model failure: the draft stands instead.

        The passes over ``messages`` (redaction, ledger, draft, revision) run in a worker thread when their
        text is large (:func:`~contextmem.offloop.off_loop`): only the model call is awaited here."""
        size = texts_bytes(messages)
        frame = await off_loop(size, self._frame, previous, messages, archive_refs, instruction or "")
        if not messages and instruction is None and previous is not None:
            return self._finish(previous.text, frame, previous.source, previous.fallback_reason)
        text, problem = await self._ask_model(previous, messages, frame, instruction, size)
        if text is not None:
            return self._finish(text, frame, "llm", None)
        logger.warning("summary model gave nothing usable (%s); using the extractive draft", problem)
        draft = await off_loop(size, self._draft, previous, messages, frame)
        return self._finish(draft, frame, "extractive", problem)

    def extract(
        self,
        previous: Summary | None,
        messages: Sequence[Message],
        *,
        archive_refs: Sequence[str] = (),
    ) -> Summary:
        """The extractive summary alone, with no model call (the draft :meth:`summarize` starts from)."""
        frame = self._frame(previous, messages, archive_refs)
        return self._finish(self._draft(previous, messages, frame), frame, "extractive", "requested")

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
            block = "\n".join([summary_text(lang).archive, *(f"- {r}" for r in candidate)])
            if count(block) > archive_budget:
                break
            kept = candidate
        empty = Summary("x", ledger, tuple(kept), lang=lang).render()
        margin = 8  # BPE counts are not additive across the joins
        text_budget = max(0, self.max_tokens - count(empty) - margin)
        return _Frame(ledger, tuple(kept), text_budget, lang, covered, secrets)

    def _draft(
        self,
        previous: Summary | None,
        messages: Sequence[Message],
        frame: _Frame,
        budget: int | None = None,
    ) -> str:
        """The extractive summary of ``previous`` + ``messages`` in ``budget`` (the text's): the
        fallback, and what the model reshapes on ``/compact`` with an instruction."""
        return extractive_summary(
            messages,
            previous=previous.text if previous else None,
            ledger=frame.ledger,
            lang=frame.lang,
            budget=frame.text_budget if budget is None else budget,
            counter=self.counter,
            known=frame.secrets,
        )

    def _shown(
        self, previous: Summary | None, messages: Sequence[Message], frame: _Frame, reshape: bool
    ) -> tuple[str, str, int]:
        """What the model is shown, what is merged back without it, and the reply's budget: the fresh
        draft and the rest of the previous facts (:func:`~.facts.fresh_draft`) in :data:`FRESH_SHARE` of
        the budget; to reshape, the whole draft in half of it — shown and rewritten, with the ledger,
        that is the 1.5 summaries a call holds beside its chunk (:func:`~contextmem.budget.fit_window`)."""
        if reshape:
            budget = frame.text_budget // 2
            return self._draft(previous, messages, frame, budget=budget), "", budget
        budget = min(frame.text_budget, max(FRESH_MIN, int(frame.text_budget * FRESH_SHARE)))
        shown, rest = fresh_draft(
            messages,
            previous=previous.text if previous else None,
            known=frame.secrets,
            ledger=frame.ledger,
            lang=frame.lang,
            budget=budget,
            counter=self.counter,
        )
        return shown, rest, budget

    async def _ask_model(
        self,
        previous: Summary | None,
        messages: Sequence[Message],
        frame: _Frame,
        instruction: str | None,
        size: int,
    ) -> tuple[str | None, str]:
        """The model's summary, or ``None`` and why not. One call: the reply may run :data:`REPLY_SLACK`
        over its budget (the surplus is re-compressed without the model), no further.

        The model corrects the draft of the new messages' facts and of the previous facts they may make
        stale (:meth:`_shown`); its reply, reconciled with that draft (:func:`~.revise.revise`), is merged
        with the other previous facts without the model (:func:`~.facts.merge_facts`). So the call is
        short — only what is new, in and out — and the summary keeps its whole budget. With a
        ``/compact`` instruction the model rewrites the whole draft, in half the budget, as the user asked.
        ``size``: the text of ``messages``, which the steps before and after the call go over.
        """
        reshape = bool(instruction and instruction.strip())
        prompt, draft = await off_loop(size, self._prompt, previous, messages, frame, instruction, reshape)
        budget = draft[2]
        try:
            with background_calls():
                reply = await wait_running(
                    self.llm.complete(prompt, max_tokens=max(256, int(budget * REPLY_SLACK))),
                    self.timeout,
                    max_queue=self.queue_timeout,
                )
        except TimeoutError as exc:
            self.model_calls = self.model_calls.add(None)
            return None, str(exc)
        except LLMError as exc:
            self.model_calls = self.model_calls.add(None)
            return None, f"{type(exc).__name__}: {exc}"
        self.model_calls = self.model_calls.add(reply.usage)
        reply_text = text_of(reply.message.content)
        return await off_loop(
            size,
            self._revised,
            reply_text,
            previous=previous,
            messages=messages,
            frame=frame,
            draft=draft,
            reshape=reshape,
        )

    def _prompt(
        self,
        previous: Summary | None,
        messages: Sequence[Message],
        frame: _Frame,
        instruction: str | None,
        reshape: bool,
    ) -> tuple[list[Message], tuple[str, str, int]]:
        """The model's prompt, and the draft it shows (:meth:`_shown`: shown, rest, the reply's budget)."""
        draft = self._shown(previous, messages, frame, reshape)
        shown, _, budget = draft
        prompt = summary_prompt(
            shown,
            render_transcript(messages, known=frame.secrets),
            lang=frame.lang,
            budget=budget,
            ledger=frame.ledger.render(frame.lang),
            instruction=instruction,
            known=frame.secrets,
        )
        return prompt, draft

    def _revised(
        self,
        reply: str,
        *,
        previous: Summary | None,
        messages: Sequence[Message],
        frame: _Frame,
        draft: tuple[str, str, int],
        reshape: bool,
    ) -> tuple[str | None, str]:
        """The model's ``reply`` reconciled with the ``draft`` (:meth:`_shown`: what it was shown, the rest
        of the previous facts, the reply's budget) and merged with that rest; ``None`` and why when
        nothing usable is left."""
        lang, secrets = frame.lang, frame.secrets
        shown, rest, budget = draft
        sizing: Sizing = {
            "ledger": frame.ledger,
            "lang": lang,
            "budget": budget,
            "counter": self.counter,
            "voiced": voiced(messages, frame.ledger, secrets),  # the reply is text: no roles in it
        }
        revision = revise(
            reply,
            shown,
            previous=previous.text if previous else None,
            known=secrets,
            instruction=reshape,
            **sizing,
        )
        if revision.restored:
            why = "it kept too little of the draft" if revision.rewrote else "they hold exact values"
            logger.info("the summary model dropped %d draft facts; kept them: %s", revision.restored, why)
        if revision.text is None or reshape:
            return revision.text, revision.problem
        whole: Sizing = {**sizing, "budget": frame.text_budget}
        merged = merge_facts(rest, revision.text, **whole)
        return (merged, revision.problem) if merged else (None, "merged summary does not fit")

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
        text = newline_only(text)  # a line end a message carried (\r, U+2028) starts no line of its own
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
