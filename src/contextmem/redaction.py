"""The one secret detector for every derived sink: summaries, ledger, memory files, index, logs, events.

What is kept about a conversation outlives it (daily memory notes, the search index, stored
summaries), so an API key, token or password that scrolls past in a tool output must never be copied
there. :func:`redact_secrets` replaces each one with ``[REDACTED]``; :func:`find_secrets` lists the
values so they can be scrubbed later wherever they reappear, even with no telltale word around them
(``known=``); :func:`redact_data` does the same inside JSON-like event payloads.

The rule table and what each rule means: :mod:`contextmem.secret_rules`. Beside it runs a maintained
rule set (betterleaks, :mod:`contextmem.secret_scanner`) for the provider token formats a hand-kept
table cannot keep up with; the union of both sets of spans is redacted.

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
from .secret_scanner import scanner_spans

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


_KEY_END = re.compile(r"-{4,5} ?END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)? ?-{4,5}")
_B64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
_KEY_TAIL_REACH = 16_384  # a 16k-bit RSA key is about 12 KB of base64


def _key_tails(text: str) -> Iterator[tuple[int, int]]:
    """The second half of a private key pasted alone (base64 lines, then its END line): from the first
    of those lines to the END line. The whole block, BEGIN line included, is the ``private-key`` rule's.

    The base64 is read backwards from the END line, a whitespace-separated run at a time (a literal
    ``\\n`` of a JSON string separates too): every run but the last at least 16 characters, so the
    words of a sentence before the key ("the rest:") stop it. Each walk stops at the previous END line
    and reads at most :data:`_KEY_TAIL_REACH` characters, so repeated END lines cost linear time.
    """
    if "END" not in text:
        return
    for m in _KEY_END.finditer(text):
        start = position = m.start()
        floor = max(0, position - _KEY_TAIL_REACH)
        runs = longest = 0
        while position > floor:
            gap = position
            while gap > floor and (text[gap - 1].isspace() or _escaped_newline(text, gap)):
                gap -= 2 if _escaped_newline(text, gap) else 1
            run = gap
            while run > floor and text[run - 1] in _B64_CHARS and not _escaped_newline(text, run):
                run -= 1
            if run == gap or (runs and gap - run < 16):
                break
            if run > floor and not (text[run - 1].isspace() or _escaped_newline(text, run)):
                break  # the end of a word, not a line of the key
            runs, longest = runs + 1, max(longest, gap - run)
            start = position = run
        if longest >= 16:
            yield start, m.end()


def _escaped_newline(text: str, end: int) -> bool:
    return end >= 2 and text[end - 2 : end] == "\\n"


def _adds(text: str, span: tuple[int, int], ours: list[tuple[int, int]]) -> bool:
    """Whether a span of the scanner is redacted beside ours. Not when it holds one of ours: some of its
    rules report a whole assignment (``…;SharedAccessKeyName=root;SharedAccessKey=…``, a whole webhook
    URL) where our table finds the value in it and keeps the key name. Not over a marker: that would
    cut one in half, and redacting twice would change the text again."""
    start, end = span
    if start >= end or _overlaps_marker(text, start, end):
        return False
    return not any(start <= a and b <= end for a, b in ours)


def _overlaps_marker(text: str, start: int, end: int) -> bool:
    window = text.find(REDACTED, max(0, start - len(REDACTED) + 1), end + len(REDACTED) - 1)
    return window != -1 and window < end


def _merged(text: str, scanner: bool = True) -> list[tuple[int, int]]:
    """The spans to replace, sorted, overlapping ones merged (each becomes one marker)."""
    spans = [*_matches(text), *_key_tails(text)]
    if scanner:
        spans += [s for s in scanner_spans(text) if _adds(text, s, spans)]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


MAX_PASSES = 4


def redact_secrets(text: str, known: Iterable[str] = (), *, scanner: bool = True) -> str:
    """``text`` with every secret replaced by ``[REDACTED]`` (``known``: values found earlier).

    ``known`` are secret values found before (:func:`find_secrets`) to scrub wherever they appear,
    even with no telltale word around them, e.g. a password a model repeats on its own. A known value
    that is a plain word or number under 8 characters (``admin``, ``root``, ``1234``) is not scrubbed
    bare, only where a keyword introduces it, operator or not (``password admin``: a ``.netrc`` read a
    line at a time): scrubbing it everywhere would take ``/root/`` and "admin panel" with it.
    Idempotent; the text never grows except by the markers. ``scanner=False``: our own table alone,
    without the maintained rule set (for measuring one against the other).
    """
    # A replacement can complete a pattern that the secret it replaced interrupted (a multi-line key
    # block as a URL's password: ``://u:password=[REDACTED]@h``), so passes repeat until nothing changes;
    # each pass that changes anything shortens the text or adds a marker, so this ends in a few passes.
    # The maintained rule set runs in the first pass only: its rules are provider token shapes, which a
    # marker never completes (and it costs as much as our whole table).
    for first in [True] + [False] * (MAX_PASSES - 1):
        spans = _merged(text, scanner and first)
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


def find_secrets(text: str, *, scanner: bool = True) -> set[str]:
    """The secret values in ``text`` that :func:`redact_secrets` would remove (at least 4 characters)."""
    found = {text[start:end] for start, end in _merged(text, scanner)}
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
