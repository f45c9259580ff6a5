"""The one secret detector for every derived sink: summaries, ledger, memory files, index, logs, events.

What is kept about a conversation outlives it (daily memory notes, the search index, stored
summaries), so an API key, token or password that scrolls past in a tool output must never be copied
there. :func:`redact_secrets` replaces each one with ``[REDACTED]``; :func:`find_secrets` lists the
values so they can be scrubbed later wherever they reappear, even with no telltale word around them
(``known=``); :func:`redact_data` does the same inside JSON-like event payloads.

The rule table and what each rule means: :mod:`contextmem.secret_rules`.

Speed: this runs on every compaction over tool outputs up to 200 KB. Each rule is one pass, and runs
only when one of its hints occurs (keyword rules look at a lower-cased copy, so their patterns are
lower-case literals that the regex engine can search for quickly); matches of all rules are merged
into spans and the text is rebuilt once.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from .secret_rules import RULES, VALUE_CAP, Rule, looks_secret, plain_word, value_end

__all__ = [
    "REDACTED",
    "RULES",
    "VALUE_CAP",
    "Rule",
    "find_secrets",
    "looks_secret",
    "redact_data",
    "redact_secrets",
]

REDACTED = "[REDACTED]"
MIN_KNOWN_CHARS = 4  # shorter values are not scrubbed everywhere: "abc" would eat ordinary words


# --- the engine -----------------------------------------------------------------------------------


@functools.cache
def _ignorecase(pattern: re.Pattern[str]) -> re.Pattern[str]:
    return re.compile(pattern.pattern, pattern.flags | re.IGNORECASE)


def _matches(text: str) -> Iterator[tuple[int, int]]:
    """``(start, end)`` of every span to replace, rule by rule (unsorted, may overlap)."""
    lower = text.lower()
    same = len(lower) == len(text)  # lower() keeps offsets for all but a few exotic characters
    present: dict[tuple[str, bool], bool] = {}
    for rule in RULES:
        haystack = lower if rule.fold else text
        for hint in rule.hints:
            key = (hint, rule.fold)
            if key not in present:
                present[key] = hint in haystack
            if present[key]:
                break
        else:
            if rule.hints:
                continue
        if rule.fold and not same:
            pattern, haystack = _ignorecase(rule.pattern), text
        else:
            pattern = rule.pattern
        position = 0
        while (m := pattern.search(haystack, position)) is not None:
            span = m.span("value") if rule.target == "value" else m.span()
            if (
                span[0] < span[1]
                and not text.startswith(REDACTED, span[0])  # already redacted
                and (rule.check is None or rule.check(text, m))
            ):
                if rule.target == "value" and span[1] - span[0] >= VALUE_CAP:
                    span = (span[0], value_end(text, span[1]))
                yield span
                position = max(m.end(), m.start() + 1)
            else:  # a vetoed match must not hide a real one that starts inside it
                position = m.start() + 1


def _merged(text: str) -> list[tuple[int, int]]:
    """The spans to replace, sorted, overlapping ones merged (each becomes one marker)."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(_matches(text)):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


MAX_PASSES = 4


def redact_secrets(text: str, known: Iterable[str] = ()) -> str:
    """``text`` with every secret replaced by ``[REDACTED]`` (``known``: values found earlier).

    ``known`` are secret values found before (:func:`find_secrets`) to scrub wherever they appear,
    even with no telltale word around them, e.g. a password a model repeats on its own. A known value
    that is a plain word or number under 8 characters (``admin``, ``root``, ``1234``) is not scrubbed
    bare, only where a keyword introduces it, operator or not (``password admin``: a ``.netrc`` read a
    line at a time): scrubbing it everywhere would take ``/root/`` and "admin panel" with it.
    Idempotent; the text never grows except by the markers.
    """
    # A replacement can complete a pattern that the secret it replaced interrupted (a multi-line key
    # block as a URL's password: ``://u:password=[REDACTED]@h``), so passes repeat until nothing changes;
    # each pass that changes anything shortens the text or adds a marker, so this ends in a few passes.
    for _ in range(MAX_PASSES):
        spans = _merged(text)
        if not spans:
            break
        out: list[str] = []
        position = 0
        for start, end in spans:
            out.append(text[position:start])
            out.append(REDACTED)
            position = end
        out.append(text[position:])
        redacted = "".join(out)
        if redacted == text:
            break
        text = redacted
    for secret in sorted(set(known), key=len, reverse=True):
        if _scrub_everywhere(secret):
            text = text.replace(secret, REDACTED)
        elif len(secret) >= MIN_KNOWN_CHARS and REDACTED not in secret and secret in text:
            text = _scrub_after_keyword(text, secret)
    return text


_KEYWORDS = r"password|passwd|passphrase|secret|token|key|pass|pwd|密码|口令|密钥"


@functools.lru_cache(maxsize=256)
def _after_keyword(secret: str) -> re.Pattern[str]:
    """A short known value where a keyword introduces it with no operator: a ``.netrc`` split over lines
    and read back one line at a time (``password qwerty``), the value found in the whole file."""
    return re.compile(rf"(?<=[ \t]){re.escape(secret)}(?![\w-])")


_KEYWORD_AT_END = re.compile(rf"(?:{_KEYWORDS})\Z")


def _scrub_after_keyword(text: str, secret: str) -> str:
    def scrub(m: re.Match[str]) -> str:
        words = text[max(0, m.start() - 16) : m.start()].rstrip(" \t").lower()
        return REDACTED if _KEYWORD_AT_END.search(words) else m.group()

    return _after_keyword(secret).sub(scrub, text)


def _scrub_everywhere(secret: str) -> bool:
    return (
        len(secret) >= MIN_KNOWN_CHARS
        and REDACTED not in secret
        and (len(secret) >= 8 or not plain_word(secret))
    )


def find_secrets(text: str) -> set[str]:
    """The secret values in ``text`` that :func:`redact_secrets` would remove (at least 4 characters)."""
    found = {text[start:end] for start, end in _merged(text)}
    return {s for s in found if len(s) >= MIN_KNOWN_CHARS and REDACTED not in s}


def redact_data(value: Any) -> Any:
    """A copy of a JSON-like value (str, list, tuple, dict, numbers) with every string redacted.

    Keys are kept. A string under a key that names a secret (``{"password": "x"}``, ``{"DB_PASS": …}``)
    is replaced whole, judged as the text ``"key": "value"`` would be.
    """
    if isinstance(value, str):
        return redact_secrets(value)
    if isinstance(value, dict):
        return {k: _redact_item(k, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(redact_data(v) for v in value)
    return value


def _redact_item(key: Any, value: Any) -> Any:
    if not (isinstance(key, str) and isinstance(value, str)):
        return redact_data(value)
    head = f'{json.dumps(key, ensure_ascii=False)}: "'
    if redact_secrets(f'{head}{value}"').startswith(head + REDACTED):
        return REDACTED
    return redact_secrets(value)
