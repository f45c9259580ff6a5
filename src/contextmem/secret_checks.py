"""What a secret value looks like: the checks the rules of :mod:`contextmem.secret_rules` run on a match.

A check takes the original text and the rule's match and may veto it (``password: str`` is a type, not a
password; ``monkey=`` names no key). Pure functions over strings; the rule table beside them says which
rule runs which check.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

__all__ = [
    "VALUE_CAP",
    "Check",
    "bot_id_before",
    "edge",
    "has_digit",
    "key_name",
    "looks_secret",
    "password",
    "pgpass_host",
    "plain_word",
    "quantity",
    "strong",
    "weak",
    "weak_key",
]

Check = Callable[[str, re.Match[str]], bool]


_NOT_A_VALUE = frozenset(
    {"none", "null", "nil", "true", "false", "str", "string", "int", "bool", "bytes", "undefined"}
    | {"optional", "secretstr", "required", "yes", "no"}
)
VALUE_CAP = 1024
"""How much of an unquoted value a rule reads. A rule's check can veto a match and the search go on
from the next character, so an unbounded value would be read again from every "key=" of a long run
("key=key=…": 64k characters took 1.5 s, quadratic). A value that reaches the cap is no plain word, and
when it is taken it is taken to its end (:func:`value_end`)."""
_WORDLIKE = re.compile(r"[a-z]+(?:[ _.-][a-z]+)*|[A-Z]+(?:_[A-Z]+)*|[0-9]+(?:\.[0-9]+)?")
_REFERENCE = re.compile(r"(?:\$|%|\{\{|<|/|\./|\.\./|~/|[A-Za-z]:\\|[a-z][a-z0-9+.-]*://)")


def _value(text: str, m: re.Match[str]) -> str:
    return text[m.start("value") : m.end("value")]


def looks_secret(value: str) -> bool:
    """Whether the value of a weak keyword (``token``, ``*_KEY``) looks like a credential.

    At least 8 characters, and not a lowercase word or identifier, a CONSTANT_NAME, a number (none of
    them :data:`VALUE_CAP` characters long), a path, a URL or a ``$VAR`` / ``{{ ref }}`` / ``<placeholder>``.
    """
    return len(value) >= 8 and not plain_word(value) and not _REFERENCE.match(value)


def plain_word(value: str) -> bool:
    """A lowercase word or identifier, a CONSTANT_NAME or a number, shorter than :data:`VALUE_CAP`."""
    return len(value) < VALUE_CAP and _WORDLIKE.fullmatch(value) is not None


def strong(text: str, m: re.Match[str]) -> bool:
    # "(using password: YES)": MySQL's error says whether a password was sent, not which
    return _value(text, m).lower().rstrip(")]}") not in _NOT_A_VALUE


def weak(text: str, m: re.Match[str]) -> bool:
    return looks_secret(_value(text, m))


def weak_key(text: str, m: re.Match[str]) -> bool:
    return weak(text, m) and key_name(text, m)


def password(text: str, m: re.Match[str]) -> bool:
    """A strong keyword's value; in prose ("the password is required") not a plain word."""
    if not (strong(text, m) and key_name(text, m)):
        return False
    return m.group("op").strip() not in ("is", "was") or not plain_word(_value(text, m))


def edge(text: str, m: re.Match[str]) -> bool:
    """The token does not continue a word on its left (``task-…`` is not ``sk-…``)."""
    start = m.start()
    return start == 0 or not (text[start - 1].isalnum() or text[start - 1] in "_-")


def has_digit(text: str, m: re.Match[str]) -> bool:
    """Random keys carry digits; a long slug like ``sk-learn-tutorial-notes`` does not."""
    return edge(text, m) and any(c.isdigit() for c in m.group(0))


_BOT_ID = re.compile(r"(?<![A-Za-z0-9_-])[0-9]{6,12}\Z")


def bot_id_before(text: str, m: re.Match[str]) -> bool:
    """A Telegram bot token's secret follows its bot id: 6 to 12 digits that start a word."""
    return _BOT_ID.search(text, max(0, m.start() - 13), m.start()) is not None


_PGPASS_HOST = re.compile(r"(?:^|(?<=\n))[ \t]*(?:[-*+>][ \t]+)?(?=[^\s:]*[A-Za-z.*_-])[^\s:#][^\s:]*\Z")


def pgpass_host(text: str, m: re.Match[str]) -> bool:
    """A ``.pgpass`` line starts with its host: the whole line before the first colon (after an indent or
    a list bullet, as pasted into notes), a name, an address or ``*``, not a number ("12:30:45:67:89" is
    a time)."""
    return _PGPASS_HOST.search(text, max(0, m.start() - 256), m.start()) is not None


_NUMBER_UNIT = re.compile(r"[0-9]+(?:\.[0-9]+)?(?P<unit>[A-Za-z]*)")


def quantity(text: str, m: re.Match[str], units: Iterable[str]) -> bool:
    """A number followed by a unit ("RSA 密钥为 4096 位", "4096bit"): a size, not a secret."""
    number = _NUMBER_UNIT.fullmatch(_value(text, m))
    if number is None:
        return False
    after = number.group("unit") or text[m.end("value") : m.end("value") + 8].lstrip(" \t\u3000")
    return any(after.startswith(unit) for unit in units)


_ANY_PREFIX = frozenset({"password", "passwd", "passphrase", "secret", "token", "credential", "credentials"})
_SUFFIX_ONLY = frozenset({"ak", "sk", "pat"})  # HUAWEICLOUD_SDK_SK, ADO_PAT; never a bare `pat = …`
_KEY_PREFIXES = ("api", "secret", "private", "access", "client", "master", "signing", "encryption", "account")


def key_name(text: str, m: re.Match[str]) -> bool:
    """Whether the ``key`` group names a credential, judged on the original text around it.

    ``password``, ``secret``, ``token`` take any prefix (``PGPASSWORD``, ``GITHUB_TOKEN``). ``key``,
    ``pass`` and ``pwd`` need a separator (``API_KEY``, ``DB_PASS``, ``x-api-key``) or a camel hump
    (``apiKey``, ``dbPass``) before them: ``monkey`` and ``bypass`` are not credentials. Glued
    prefixes are known ones only (``apikey``, ``secretkey``). Alone, ``key`` counts as a URL parameter
    (``?key=``) or in ``API key``; ``pass``/``pwd`` as ``pass=x`` or a quoted ``"pwd":`` (not
    ``PASS: test_x`` in a test report, not the ``PWD=`` working directory).
    """
    start, end = m.span("key")
    word = text[start:end]
    key = word.lower()
    if key in _ANY_PREFIX:
        return True
    before = text[start - 1] if start else ""
    if key in _SUFFIX_ONLY:  # an env name (HUAWEICLOUD_SDK_SK, ADO_PAT) or a quoted `ado_pat = "…"`
        quoted = text[m.start("value") - 1 : m.start("value")] in ("'", '"')
        return bool(before) and before in "_-" and (word.isupper() or (key == "pat" and quoted))
    if before and before in "_-.":
        return True
    if before.isalpha():
        if before.islower() and word[0].isupper():
            return True
        return key == "key" and text[max(0, start - 12) : start].lower().endswith(_KEY_PREFIXES)
    if key == "key":
        return (bool(before) and before in "?&") or text[max(0, start - 4) : start].lower() == "api "
    return word != "PWD" and ("=" in m.group("op") or (bool(before) and before in "\"'"))
