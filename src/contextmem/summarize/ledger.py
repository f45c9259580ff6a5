"""The identifier ledger: exact names, paths, numbers and errors, kept verbatim across summaries (C8).

A model that summarises paraphrases; an agent that resumes work needs ``src/auth.ts`` and ``ECONNREFUSED``
exactly as they were. The ledger is extracted deterministically from the messages, whatever the model
said, and merged with the previous summary's ledger, so no identifier is lost to paraphrase.

Secrets are never written to memory: :func:`~contextmem.redaction.redact_secrets` (the one detector,
re-exported here) runs before anything is extracted, and a secret found anywhere in the messages is
scrubbed wherever else it appears (``known``), so an API key, token or password can neither become an
identifier nor reach a summary. The summariser redacts everything it sends to a model or keeps.

Eviction rule (documented invariant): a ledger holds at most ``max_entries`` entries, ordered by when
each was last seen (a re-mention moves an entry to the end). When over the bound, the least recently seen
entry that never appeared in a user message is evicted first; only when every entry comes from the user
are the least recently seen user entries evicted. :meth:`Ledger.fit` applies the same order to fit a
token budget.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Literal, Protocol

from ..lang import Language, derived
from ..messages import AssistantMessage, Message, UserMessage, text_of
from ..redaction import REDACTED, find_secrets, redact_secrets
from ..textlines import newline_only
from .languages import Lang, alternatives, summary_text
from .salience import header_date

__all__ = [
    "DEFAULT_MAX_ENTRIES",
    "REDACTED",
    "Kind",
    "Ledger",
    "LedgerEntry",
    "build_ledger",
    "extract_identifiers",
    "find_secrets",
    "redact_secrets",
    "secrets_in",
]

Kind = Literal["path", "url", "host", "email", "error", "id", "number", "name"]

DEFAULT_MAX_ENTRIES = 150
MAX_IDENTIFIER_CHARS = 200  # longer matches are data, not identifiers; they are not kept

# --- extraction ---------------------------------------------------------------------------------

_EXT = (
    r"py|pyi|ts|tsx|js|jsx|mjs|cjs|go|rs|java|kt|c|h|cc|cpp|hpp|cs|rb|php|swift|sh|bash|zsh|ps1|sql|"
    r"json|jsonl|yaml|yml|toml|ini|cfg|conf|env|xml|html|css|scss|md|rst|txt|csv|tsv|log|lock|"
    r"proto|graphql|tf|dockerfile|gradle|vue|svelte|ipynb|pdf|png|jpg|jpeg|gif|svg|zip|gz|tar|db|sqlite"
)
_NOT_ERRNO = "ERROR|ERRORS|ENV|END|EXIT|EMPTY|ENABLED|EXAMPLE|EVENT|ENTRY|EXCEPTION|EXPORT|EXEC|ELSE|EOF|EACH"
_SEG = r"[A-Za-z0-9_.@%+~-]+"
# Order matters: each match is blanked out before the next pattern runs, so a path's date is not also
# taken as a number and a URL's path is not taken as a file path. A pattern with a hint (a literal it
# cannot match without) is skipped when the hint is not in the text. What a pattern may try from any
# letter is bounded (a URL scheme, an e-mail's local part, a host's labels, a dotted call): unbounded, it
# is scanned again from every letter of a long run, and 32k characters of "a.a.…" took 10 s.
_Patterns = list[tuple[Kind | Literal["relpath"], str | None, re.Pattern[str]]]


def _words(form: str, name: str, langs: Sequence[Language]) -> str:
    """``form`` holding the alternatives of the summary texts' field ``name`` (``""`` when none has any)."""
    words = alternatives(langs, name)
    return form.format(words) if words else ""


def _build_patterns(all_langs: Sequence[Language]) -> _Patterns:
    langs = [lang for lang in all_langs if lang.summary is not None]
    patterns: _Patterns = [
        (
            "url",
            "://",
            re.compile(r"\b[a-z][a-z0-9+.-]{0,31}://(?:\[REDACTED\]|[^\s<>\"'`)\]}，。；、）》])+", re.I),
        ),
        ("email", "@", re.compile(r"\b[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+\b")),
        ("path", ":\\", re.compile(r"(?<![A-Za-z0-9])[A-Za-z]:\\(?:[^\\\s\"'<>|*?，。；]+\\?)+")),
        ("path", "\\\\", re.compile(r"\\\\[A-Za-z0-9_.-]+(?:\\[^\\\s\"'<>|*?，。；]+)+")),
        ("id", "-", re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.I)),
        (
            "number",
            "/",
            re.compile(r"(?<![A-Za-z0-9_./-])\d{4}/\d{1,2}/\d{1,2}(?![A-Za-z0-9_./-])"),
        ),  # log dates
        ("path", "/", re.compile(rf"(?<![A-Za-z0-9_.@%+~/-])(?:~|\.{{1,2}})?/{_SEG}(?:/{_SEG})*/?")),
        ("relpath", "/", re.compile(rf"(?<![A-Za-z0-9_.@%+~/-]){_SEG}(?:/{_SEG})+/?")),
        (
            "path",
            ".",
            re.compile(rf"(?<![A-Za-z0-9_.-])[A-Za-z0-9_][A-Za-z0-9_.-]*\.(?:{_EXT})(?![A-Za-z0-9_])"),
        ),
        ("host", ".", re.compile(r"(?<![\d.])\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?(?![\d.])")),
        (
            "host",
            None,
            re.compile(
                r"\b(?:[a-z0-9-]{1,63}\.){1,10}(?:com|org|net|io|dev|ai|cn|co|app|cloud|internal|local|svc|cluster)"
                r"(?::\d{1,5})?\b",
                re.I,
            ),
        ),
        (
            "error",
            None,
            re.compile(
                r"\bHTTP[ /]?\d{3}\b" + _words(r"|\b(?:{})\s*\d{{1,3}}\b", "error_words", langs), re.I
            ),
        ),
        ("error", None, re.compile(r"\b[A-Z][A-Za-z0-9]*(?:Error|Exception|Killed|Fault|Timeout|Failure)\b")),
        (
            "error",
            None,
            re.compile(
                rf"\b(?!(?:{_NOT_ERRNO})\b)E[A-Z]{{3,}}\b|\bSIG[A-Z]{{2,}}\b|\bERR(?:OR)?_[A-Z0-9_]+\b"
                r"|\bE\d{3,5}\b"
            ),
        ),
        ("id", None, re.compile(r"\b[A-Z]{1,3}\d{3,6}\b")),
        ("id", None, re.compile(r"\b[A-Z][A-Z0-9]{1,9}-\d{1,6}\b")),  # JIRA-123, ORA-00942
        (
            "id",
            None,
            re.compile(
                r"\b(?:call|toolu|msg|req|run|chatcmpl|resp|job|task|txn|ord|evt|sess)[_-]"
                r"(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{3,}"
            ),
        ),
        ("id", None, re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,40}\b")),  # git SHA
        ("name", "`", re.compile(r"`([^`\n]{1,80})`")),
        ("name", None, re.compile(r"[“「『]([^”」』\n]{1,30})[”」』]")),
        ("number", "-", re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b")),
        (
            "number",
            None,
            re.compile(r"\bv\d+(?:\.\d+)*(?:-[0-9A-Za-z.]+)?\b|\b\d+(?:\.\d+){2,3}(?:-[0-9A-Za-z.]+)?\b"),
        ),
        (
            "number",
            None,
            re.compile(
                r"(?<![A-Za-z0-9_.])\d+(?:\.\d+)?\s?(?:[KMGTP]i?B|[KMGT]"
                + _words("|{}", "units", langs)
                + ")(?![A-Za-z])"
            ),
        ),
        (
            "number",
            None,
            re.compile(
                r"(?<![A-Za-z0-9_.])\d+\.\d+(?![A-Za-z0-9_.])|(?<![A-Za-z0-9_.])\d{3,}(?![A-Za-z0-9_.])"
            ),
        ),
        ("name", "()", re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*){0,8}\(\)")),
        (
            "name",
            None,
            re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]+)+\b|\b[a-z]+[0-9]*(?:[A-Z][a-z0-9]+)+\b"),
        ),
        ("name", None, re.compile(r"\b[a-z][a-z0-9]*(?:_[a-z0-9]+)+\b|\b[A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+\b")),
    ]
    # ASCII word boundaries: Chinese characters are \w in Unicode mode, so "修改src/auth.ts文件" would have
    # no boundary around the path.
    return [
        (kind, hint, re.compile(p.pattern, (p.flags & ~re.UNICODE) | re.ASCII)) for kind, hint, p in patterns
    ]


_PATTERNS = derived(_build_patterns)
_TRAILING = ".,;:!?'\")]}>，。；：！？、）】》"
_EXT_SET = frozenset(_EXT.split("|"))


def _plausible_relative_path(value: str) -> bool:
    """``src/auth.ts``, ``docs/``, ``a/b/c`` are paths; ``and/or`` and ``TCP/IP`` are not."""
    last = value.rstrip("/").rsplit("/", 1)[-1]
    ext = last.rsplit(".", 1)[-1].lower() if "." in last else ""
    return value.endswith("/") or ext in _EXT_SET or value.count("/") >= 2


def extract_identifiers(text: str, known: Iterable[str] = ()) -> list[tuple[str, Kind]]:
    """Exact identifiers in ``text`` (secrets, and the ``known`` secret values, redacted first), in order
    of first appearance.

    Each match is blanked out before the next, more general pattern runs, so a span is taken once,
    by its most specific kind. Values longer than ``MAX_IDENTIFIER_CHARS`` are skipped.
    """
    work = original = redact_secrets(text, known)
    found: list[tuple[int, str, Kind]] = []
    for pattern_kind, hint, pattern in _PATTERNS():
        if hint is not None and hint not in work:
            continue

        def take(m: re.Match[str], pattern_kind: Kind | Literal["relpath"] = pattern_kind) -> str:
            start, end = m.span(1) if m.groups() else m.span(0)
            if original[start:end] != m.string[start:end]:
                return m.group(0)  # overlaps a span an earlier pattern took: not an identifier of its own
            value = (m.group(1) if m.groups() else m.group(0)).strip()
            kind: Kind = "path" if pattern_kind == "relpath" else pattern_kind
            if kind in ("url", "path", "host", "email"):
                value = value.rstrip(_TRAILING)
            if pattern_kind == "relpath" and not _plausible_relative_path(value):
                return m.group(0)  # not taken: leave the text for the later patterns
            if value.replace(REDACTED, "").strip(" =:'\"") and len(value) <= MAX_IDENTIFIER_CHARS:
                found.append((m.start(), value, kind))
            return " " * (m.end() - m.start())

        work = pattern.sub(take, work)
    found.sort(key=lambda t: t[0])
    seen: set[str] = set()
    out: list[tuple[str, Kind]] = []
    for _, value, kind in found:
        if value not in seen:
            seen.add(value)
            out.append((value, kind))
    return out


# --- the ledger value ---------------------------------------------------------------------------


class TextCounter(Protocol):
    """Anything that counts the tokens of a text (a TokenCounter or a MessageCounter)."""

    def count_text(self, text: str) -> int: ...


@dataclass(frozen=True, slots=True)
class LedgerEntry:
    """One identifier: its exact text, its kind, and whether a user message ever mentioned it."""

    value: str
    kind: Kind
    from_user: bool = False


_KIND_ORDER: tuple[Kind, ...] = ("path", "url", "host", "email", "error", "id", "number", "name")


@dataclass(frozen=True, slots=True)
class Ledger:
    """An ordered, de-duplicated, bounded set of identifiers (see the module docstring for eviction)."""

    entries: tuple[LedgerEntry, ...] = ()
    max_entries: int = DEFAULT_MAX_ENTRIES

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[LedgerEntry]:
        return iter(self.entries)

    def __contains__(self, value: object) -> bool:
        return any(e.value == value for e in self.entries)

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(e.value for e in self.entries)

    def add(self, items: Iterable[tuple[str, Kind]], *, from_user: bool = False) -> Ledger:
        """A ledger with ``items`` seen now: new ones appended, known ones moved to the end."""
        by_value = {e.value: e for e in self.entries}
        for value, kind in items:
            old = by_value.pop(value, None)
            keep_user = from_user or (old is not None and old.from_user)
            by_value[value] = LedgerEntry(value, old.kind if old else kind, keep_user)
        return replace(self, entries=tuple(by_value.values())).bounded()

    def merge(self, newer: Ledger) -> Ledger:
        """This ledger followed by ``newer`` (whose entries count as seen more recently)."""
        by_value = {e.value: e for e in self.entries}
        for entry in newer.entries:
            old = by_value.pop(entry.value, None)
            by_value[entry.value] = replace(entry, from_user=entry.from_user or bool(old and old.from_user))
        return replace(self, entries=tuple(by_value.values())).bounded()

    def _eviction_order(self) -> list[int]:
        """Indices in the order they are evicted: non-user oldest first, then user oldest first."""
        n = len(self.entries)
        return [i for i in range(n) if not self.entries[i].from_user] + [
            i for i in range(n) if self.entries[i].from_user
        ]

    def evict(self, drop: int) -> Ledger:
        """This ledger without its first ``drop`` entries in eviction order."""
        gone = set(self._eviction_order()[:drop])
        return replace(self, entries=tuple(e for i, e in enumerate(self.entries) if i not in gone))

    def bounded(self) -> Ledger:
        """Apply the ``max_entries`` bound by the eviction rule."""
        excess = len(self.entries) - self.max_entries
        return self.evict(excess) if excess > 0 else self

    def fit(self, counter: TextCounter, budget: int, lang: Lang = "en") -> Ledger:
        """The largest ledger, by the eviction rule, whose :meth:`render` costs at most ``budget`` tokens."""
        if counter.count_text(self.render(lang)) <= budget:
            return self
        lo, hi = 1, len(self.entries)  # number of entries to drop; dropping all always fits (renders "")
        while lo < hi:
            mid = (lo + hi) // 2
            if counter.count_text(self.evict(mid).render(lang)) <= budget:
                hi = mid
            else:
                lo = mid + 1
        return self.evict(lo)

    def render(self, lang: Lang = "en") -> str:
        """A compact block, one line per kind: ``- paths: src/auth.ts, /etc/hosts``; ``""`` if empty."""
        if not self.entries:
            return ""
        words = summary_text(lang)
        labels, sep = words.ledger_labels, words.label_sep
        lines = [words.ledger_title]
        for kind in _KIND_ORDER:
            values = [e.value for e in self.entries if e.kind == kind]
            if values:
                lines.append(f"- {labels[kind]}{sep}{newline_only(', '.join(values))}")  # one line a kind
        return "\n".join(lines)


def _json_strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _json_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _json_strings(v)


def _arguments_text(arguments: str) -> str:
    """The string values of JSON arguments (so ``"a\\nb"`` is read as two lines), else the raw text."""
    try:
        return "\n".join(_json_strings(json.loads(arguments)))
    except ValueError:
        return arguments


def _said(text: str) -> str:
    """``text`` without its session headers (``[Session 3 · 8 May 2023]``): a session's date is when the
    facts under it were said, which every fact carries; in the ledger it would be a date with no fact."""
    lines = text.splitlines()
    said = [line for line in lines if header_date(line) is None]
    return text if len(said) == len(lines) else "\n".join(said)


def _message_texts(message: Message) -> list[str]:
    texts = [text_of(message.content)]
    if isinstance(message, AssistantMessage):
        texts.extend(f"{c.name}\n{_arguments_text(c.arguments)}" for c in message.tool_calls)
    return texts


def secrets_in(messages: Sequence[Message], *texts: str) -> frozenset[str]:
    """Every secret value in ``messages`` (content and tool-call arguments) and ``texts``, to scrub
    wherever it reappears (the ``known`` of :func:`~contextmem.redaction.redact_secrets`)."""
    every = [t for m in messages for t in _message_texts(m)] + list(texts)
    return frozenset(secret for text in every if text for secret in find_secrets(text))


def build_ledger(
    messages: Sequence[Message],
    previous: Ledger | None = None,
    *,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    known: Iterable[str] | None = None,
) -> Ledger:
    """The previous ledger merged with every identifier in ``messages`` (content and tool-call arguments).

    Pure and deterministic. Secrets are redacted before extraction, and a secret value found in any
    message is scrubbed from every message (a password pasted bare once and as ``DB_PASS=…`` later is
    caught both times); an entry of ``previous`` holding a secret is dropped. ``known``: the secrets
    already found (:func:`secrets_in`), to save finding them again. System messages are read too, but
    tool-call ids are not: they name a message pair, not anything the user or the task refers to.
    """
    ledger = previous if previous is not None else Ledger(max_entries=max_entries)
    texts = [(isinstance(m, UserMessage), _said(t)) for m in messages for t in _message_texts(m) if t]
    known = secrets_in(messages) if known is None else frozenset(known)
    kept = tuple(e for e in ledger.entries if redact_secrets(e.value, known) == e.value)
    if len(kept) != len(ledger.entries):  # an older ledger may hold what the detector now knows better
        ledger = replace(ledger, entries=kept)
    for from_user, text in texts:
        ledger = ledger.add(extract_identifiers(text, known), from_user=from_user)
    return ledger
