"""Values the engine hands out: requests, events, stats, verification reports; summary (de)serialisation."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, TypedDict

from ..archive import ArchiveProblem
from ..budget import RequestEstimate, Window
from ..formats.openai import messages_to_openai
from ..llm.base import LLM, CallTotals, ToolSpec, Usage
from ..messages import Message
from ..safefs import Confined
from ..summarize import Ledger, LedgerEntry, Summary
from ..tokens import MessageCounter

__all__ = [
    "CompactResult",
    "ContextStats",
    "EngineEvent",
    "EngineParts",
    "EventKind",
    "Request",
    "UsageTotals",
    "VerifyReport",
    "summary_from_json",
    "summary_to_json",
]

EventKind = Literal[
    "offload",
    "offload_failed",
    "compaction_started",
    "compaction_finished",
    "summary_fallback",
    "archive_failed",
    "overflow",
    "cleared",
    "restored",
    "usage",
    "window_learned",
    "calibration_raised",
    "repaired",
    "lease_expired",
]


class EngineParts(TypedDict, total=False):
    """The optional parts of a :class:`ContextEngine` (see its docstring), for ``__init__`` and ``open``."""

    workspace_dir: str | os.PathLike[str] | None
    files: Confined | None
    llm: LLM | None
    summary_llm: LLM | None  # the model that writes summaries: ``llm`` unless given; None: extractive
    counter: MessageCounter | None
    window: Window | None
    clock: Callable[[], float]


@dataclass(frozen=True, slots=True)
class EngineEvent:
    """Something the engine did. ``data`` is JSON-ready; never contains message text beyond summaries."""

    kind: EventKind
    namespace: str
    session_id: str
    data: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Request:
    """Exactly what goes to the model: the assembled messages, tools and output reserve, with estimates."""

    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...]
    max_tokens: int
    estimate: RequestEstimate
    expected_cached: int = 0
    """Of ``estimate.counted`` (our count of the prompt), the tokens the session's previous request began
    with too (the tool definitions, then the leading messages that are unchanged): what a provider's
    prompt cache can serve (:func:`~.request.shared_prefix`). ``build`` sets it; 0 for the first one."""

    def to_openai(self) -> list[dict[str, Any]]:
        """The messages as OpenAI chat dicts (``messages=``); pass the tools as you gave them to ``build``."""
        return messages_to_openai(self.messages)

    def to_responses(self) -> list[dict[str, Any]]:
        """The messages as OpenAI Responses API input items (``input=``): the items ``add`` took, as they
        came, where a message still is what they say
        (:func:`~contextmem.formats.responses.messages_to_items`);
        the system prompt and summary as a ``developer`` item."""
        from ..formats.responses import messages_to_items

        return messages_to_items(self.messages)

    def to_anthropic(self) -> dict[str, Any]:
        """The Anthropic Messages API keywords ``system`` (left out when empty), ``messages`` and ``tools``
        (left out when none), with prompt-cache breakpoints as the Anthropic adapter marks them
        (:func:`~contextmem.llm.anthropic_api.messages_body`)::

            await client.messages.create(model=MODEL, max_tokens=request.max_tokens, **request.to_anthropic())
        """
        from ..llm.anthropic_api import messages_body  # the adapter module, loaded only by those who use it

        return messages_body(self.messages, self.tools)


@dataclass(frozen=True, slots=True)
class CompactResult:
    compacted: int
    summary: str


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """A session's model calls as the providers billed them; ``prompt_tokens`` include ``cached_tokens``
    (what was read from the provider's prompt cache, at a fraction of the price). Beside them, the same
    calls as the engine counted them: ``sent_tokens`` (its estimate of each prompt) and
    ``expected_cached_tokens`` (the part each request shared with the one before,
    :attr:`Request.expected_cached`), so a provider that caches less than it could shows."""

    calls: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    sent_tokens: int = 0
    expected_cached_tokens: int = 0

    @property
    def cache_ratio(self) -> float:
        """The share of prompt tokens read from the cache, 0.0 before any call."""
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def expected_cache_ratio(self) -> float:
        """The share the engine's requests left unchanged from the request before: what the provider's
        cache could have served (0.0 before any call)."""
        return self.expected_cached_tokens / self.sent_tokens if self.sent_tokens else 0.0

    def add(self, usage: Usage, request: Request | None = None) -> UsageTotals:
        """These totals and one more call: ``usage`` as the provider reported it, for ``request``."""
        sent = request.estimate.counted if request is not None else 0
        expected = request.expected_cached if request is not None else 0
        return UsageTotals(
            self.calls + 1,
            self.prompt_tokens + usage.prompt_tokens,
            self.cached_tokens + usage.cached_tokens,
            self.sent_tokens + sent,
            self.expected_cached_tokens + expected,
        )


@dataclass(frozen=True, slots=True)
class ContextStats:
    """What ``/context`` shows. ``archive_error``: the last failed archive write (disk full, ...) until one
    succeeds again; while it stands, what should leave the context stays in it."""

    messages: int
    turns: int
    by_role: dict[str, int]
    characters: int
    estimate: RequestEstimate
    archived: int
    summary_source: str | None
    usage: UsageTotals = UsageTotals()
    archive_error: str | None = None
    summary_calls: CallTotals = CallTotals()  # noqa: RUF009 - a frozen value; the summary calls since opened
    summary_model: str | None = None  # what writes the summaries; None: the extractive summary


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """Every message ever appended is live or archived, and every archived one is in the archive files.

    ``missing`` (and ``lost``): archived messages found in no readable archive line. ``corrupt``: lines of
    the namespace's archive files that readers skip (damaged, torn, not an archive record); a corrupt line
    costs nothing as long as ``lost`` is 0. ``quarantined``: files holding torn tails that appends cut off.
    """

    appended: int
    live: int
    archived: int
    missing: tuple[int, ...]
    corrupt: tuple[ArchiveProblem, ...] = ()
    quarantined: tuple[str, ...] = ()

    @property
    def lost(self) -> int:
        return len(self.missing)


def summary_to_json(summary: Summary | None) -> str | None:
    if summary is None:
        return None
    data = asdict(summary)
    data["ledger"] = {
        "max_entries": summary.ledger.max_entries,
        "entries": [[e.value, e.kind, e.from_user] for e in summary.ledger.entries],
    }
    return json.dumps(data, ensure_ascii=False)


def summary_from_json(text: str | None) -> Summary | None:
    if not text:
        return None
    data = json.loads(text)
    ledger = data.pop("ledger")
    entries = tuple(LedgerEntry(v, k, bool(u)) for v, k, u in ledger["entries"])
    data["archive_refs"] = tuple(data.get("archive_refs", ()))
    return Summary(ledger=Ledger(entries, ledger["max_entries"]), **data)
