"""The one secret detector for every derived sink: summaries, ledger, memory files, index, logs, events.

What is kept about a conversation outlives it (daily memory notes, the search index, stored
summaries), so an API key, token or password that scrolls past in a tool output must never be copied
there. :func:`redact_secrets` replaces each one with ``[REDACTED]``; :func:`find_secrets` lists the
values so they can be scrubbed later wherever they reappear, even with no telltale word around them
(``known=``); :func:`redact_data` does the same inside JSON-like event payloads.

Why our own table, and why it looks like this
---------------------------------------------
* detect-secrets (Yelp), measured side by side in ``bench/bench_redaction.py`` on the same labelled
  samples: it is line-oriented and reports values, not spans (for a private key only the ``BEGIN``
  line, leaving the key body); it misses Chinese phrasing, shell flags, most ``*_PASS``/``*_TOKEN`` env
  forms, GCP service-account ids and Azure account keys (caught 41 of 80 at best, vs 80 here); scanning
  line by line its entropy plugins also hit git SHAs and UUIDs, which the identifier ledger exists to
  keep; and it ran at 0.1-0.3 MB/s against 26 MB/s here (``bench/results/redaction.md``).
* gitleaks has the most complete list of key families, but it is Go. Our table follows its families
  and names each rule like a gitleaks rule id (``aws-access-key-id``, ``slack-webhook-url``...). The
  patterns are written here from the providers' documented key formats.

Every :class:`Rule` has an id, a compiled pattern, the literals it cannot match without (``hints``),
and what it replaces: the whole match (a provider token, a private-key block) or only the ``value``
group after a keyword, so ``DB_PASS=[REDACTED]`` still says which secret was there.

Rules for keyword assignments (``env``, shell flags, JSON, YAML, TOML, URLs, prose, Chinese)
---------------------------------------------------------------------------------------------
* A key *ends* with the keyword and may carry any prefix: ``MYSQL_ROOT_PASSWORD``, ``PGPASSWORD``,
  ``dbPassword``, ``"api_key"``. (``\\b`` never matches between ``_`` and a letter, so key patterns
  never rely on it.) ``max_tokens=4096``, ``tokens: 5000``, ``password_reset.html`` and
  ``src/auth/token.py`` are not keys: the keyword is not followed by an operator.
* Strong keywords (``password``, ``passwd``, ``passphrase``, ``secret``, ``pwd``, ``pass``) redact any
  non-empty value except a type or null word (``password: str``, ``secret=None``). ``pass`` and
  ``pwd`` stand alone only as ``pass=x`` / ``pwd=x``: ``PASS: test_x`` is a test report and ``PWD=``
  the working directory.
* Weak keywords (``token``, ``*_KEY``, ``apiKey``, ``credentials``, ``Bearer``) redact a value only
  when it looks like a secret (:func:`looks_secret`): at least 8 characters and not a plain lowercase
  word (``sort_key=customer_name``), a CONSTANT_NAME, a number (``max_token=128000``), a path or a
  ``$VAR``/``{{ ref }}``. A short or word-like secret behind a weak keyword can leak; that is the price
  of keeping ``key: id`` and ``token: 5000`` readable.
* Prose (``my password is hunter2``) redacts a value that is not a plain lowercase word, so "the
  password is required" survives. Chinese (密码/口令/密钥/令牌/私钥 + 是/为/：/=) redacts any value,
  which stops at the first Chinese character or punctuation.
* A private-key block (PEM, PGP, OpenSSH, SSH2) with no END line is redacted to the end of the text:
  what follows a truncated key is more of the key.

Placeholders (``password=<your password>``) may be redacted: harmless. Detection errs toward redacting.

Speed: this runs on every compaction over tool outputs up to 200 KB. Each rule is one pass, and runs
only when one of its hints occurs (keyword rules look at a lower-cased copy, so their patterns are
lower-case literals that the regex engine can search for quickly); matches of all rules are merged
into spans and the text is rebuilt once.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["REDACTED", "RULES", "Rule", "find_secrets", "looks_secret", "redact_data", "redact_secrets"]

REDACTED = "[REDACTED]"
MIN_KNOWN_CHARS = 4  # shorter values are not scrubbed everywhere: "abc" would eat ordinary words

Check = Callable[[str, re.Match[str]], bool]


@dataclass(frozen=True, slots=True)
class Rule:
    """One detector: ``pattern`` finds it, ``hints`` gate it, ``target`` says what is replaced.

    ``hints``: literals the pattern cannot match without; the rule is skipped unless one occurs.
    ``fold``: the pattern is written in lower case and runs over the lower-cased text (hints too).
    ``check(text, match)`` may veto a match (``text`` is the original); spans are the same in both.
    Invariant: a ``target="value"`` rule's pattern has a ``value`` group.
    """

    id: str
    pattern: re.Pattern[str]
    hints: tuple[str, ...]
    target: Literal["match", "value"] = "match"
    fold: bool = False
    check: Check | None = None


# --- value checks ---------------------------------------------------------------------------------

_NOT_A_VALUE = frozenset(
    {"none", "null", "nil", "true", "false", "str", "string", "int", "bool", "bytes", "undefined"}
    | {"optional", "secretstr", "required"}
)
VALUE_CAP = 1024
"""How much of an unquoted value a rule reads. A rule's check can veto a match and the search go on
from the next character, so an unbounded value would be read again from every "key=" of a long run
("key=key=…": 64k characters took 1.5 s, quadratic). A value that reaches the cap is no plain word, and
when it is taken it is taken to its end (:func:`_value_end`)."""
_WORDLIKE = re.compile(r"[a-z]+(?:[ _.-][a-z]+)*|[A-Z]+(?:_[A-Z]+)*|[0-9]+(?:\.[0-9]+)?")
_REFERENCE = re.compile(r"(?:\$|%|\{\{|<|/|\./|\.\./|~/|[A-Za-z]:\\|[a-z][a-z0-9+.-]*://)")


def _value(text: str, m: re.Match[str]) -> str:
    return text[m.start("value") : m.end("value")]


def looks_secret(value: str) -> bool:
    """Whether the value of a weak keyword (``token``, ``*_KEY``) looks like a credential.

    At least 8 characters, and not a lowercase word or identifier, a CONSTANT_NAME, a number (none of
    them :data:`VALUE_CAP` characters long), a path, a URL or a ``$VAR`` / ``{{ ref }}`` / ``<placeholder>``.
    """
    return len(value) >= 8 and not _plain_word(value) and not _REFERENCE.match(value)


def _plain_word(value: str) -> bool:
    return len(value) < VALUE_CAP and _WORDLIKE.fullmatch(value) is not None


def _strong(text: str, m: re.Match[str]) -> bool:
    return _value(text, m).lower() not in _NOT_A_VALUE


def _weak(text: str, m: re.Match[str]) -> bool:
    return looks_secret(_value(text, m))


def _password(text: str, m: re.Match[str]) -> bool:
    """A strong keyword's value; in prose ("the password is required") not a plain word."""
    if not (_strong(text, m) and _key_name(text, m)):
        return False
    return m.group("op").strip() not in ("is", "was") or not _plain_word(_value(text, m))


def _edge(text: str, m: re.Match[str]) -> bool:
    """The token does not continue a word on its left (``task-…`` is not ``sk-…``)."""
    start = m.start()
    return start == 0 or not (text[start - 1].isalnum() or text[start - 1] in "_-")


def _has_digit(text: str, m: re.Match[str]) -> bool:
    """Random keys carry digits; a long slug like ``sk-learn-tutorial-notes`` does not."""
    return _edge(text, m) and any(c.isdigit() for c in m.group(0))


_ANY_PREFIX = frozenset({"password", "passwd", "passphrase", "secret", "token", "credential", "credentials"})
_KEY_PREFIXES = ("api", "secret", "private", "access", "client", "master", "signing", "encryption", "account")


def _key_name(text: str, m: re.Match[str]) -> bool:
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
    if before and before in "_-.":
        return True
    if before.isalpha():
        if before.islower() and word[0].isupper():
            return True
        return key == "key" and text[max(0, start - 12) : start].lower().endswith(_KEY_PREFIXES)
    if key == "key":
        return (bool(before) and before in "?&") or text[max(0, start - 4) : start].lower() == "api "
    return word != "PWD" and ("=" in m.group("op") or (bool(before) and before in "\"'"))


# --- the table ------------------------------------------------------------------------------------

# A closing quote of the key, then = : := => (or, in prose, "is"/"was").
_OP = r"[\"'”]?(?P<op>[ \t]*(?::=|=>|[=:])[ \t]*|[ \t]+(?:is|was)[ \t]+)"
_QUOTE = r"[\"'“]?"
# The value: the whole text inside quotes, else up to whitespace or a separator. Never a private-key
# header: a block that starts after ``private_key =`` is left to the block rule, which takes it whole.
# An unquoted value is read :data:`VALUE_CAP` characters at a time (see there).
_VAL_RUN = r"[^\s\"'`,;]"
_VAL = (
    r"(?!-----begin|-----BEGIN)(?P<value>(?<=\")(?:[^\"\\\n]|\\.)+(?=\")|(?<=')[^'\n]+(?=')"
    rf"|(?<=“)[^”\n]+(?=”)|{_VAL_RUN}{{0,{VALUE_CAP - 1}}}[^\s\"'`,;.]|\.+)"  # not a sentence's full stop
)
_VALUE_REST = re.compile(rf"{_VAL_RUN}*")


def _rule(
    id: str,
    pattern: str,
    hints: Iterable[str],
    *,
    target: Literal["match", "value"] = "match",
    fold: bool = False,
    check: Check | None = None,
) -> Rule:
    if check in (_edge, _has_digit):
        pattern = _at_edge(pattern)
    return Rule(id, re.compile(pattern), tuple(hints), target, fold, check)


def _at_edge(pattern: str) -> str:
    """``pattern`` made to skip the starts :func:`_edge` vetoes (where a word goes on: ``task-sk-…``)
    rather than match there: each vetoed match sent the search on from the next character, to read the
    same long token again ("xsk-sk-sk-…": quadratic). The test goes after the pattern's literal opening,
    which keeps the regex engine's fast scan for it."""
    opening = re.match(r"[A-Za-z0-9_-]+(?![*+?{])", pattern)
    if opening is None:
        return pattern
    n = opening.end()
    return rf"{pattern[:n]}(?<![\w-].{{{n}}}){pattern[n:]}"


_B64 = r"[A-Za-z0-9_-]"
RULES: tuple[Rule, ...] = (
    # Private keys: PEM (RSA, EC, DSA, PKCS#8, ENCRYPTED), OpenSSH, PGP, SSH2; JSON-escaped too.
    _rule(
        "private-key",
        r"----(?:- ?| )BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)? ?-{4,5}"
        r"(?s:.*?)(?:-{4,5} ?END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)? ?-{4,5}|\Z)",
        ["BEGIN"],
    ),
    _rule(
        "putty-private-key",
        r"PuTTY-User-Key-File-\d+:(?s:.*?)(?:Private-MAC: [0-9a-fA-F]+|\Z)",
        ["PuTTY"],
    ),
    _rule("anthropic-api-key", rf"sk-ant-{_B64}{{20,}}", ["sk-"], check=_edge),  # sk- shared: one search
    # OpenAI (sk-, sk-proj-, sk-svcacct-, sk-admin-) and the providers that copied its format.
    _rule("openai-api-key", rf"sk-{_B64}{{20,}}", ["sk-"], check=_has_digit),
    _rule(
        "aws-access-key-id",
        r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}(?![A-Za-z0-9])",
        ["AKIA", "ASIA", "ABIA", "ACCA", "A3T"],
        check=_edge,
    ),
    _rule(
        "aws-secret-access-key",  # aws_secret_access_key = …, AWS_SECRET_ACCESS_KEY=…, "SecretAccessKey": …
        r"secret[_-]?access[_-]?key[\"']?[ \t]*(?::=|=>|[=:])?[ \t]*[\"']?"
        r"(?P<value>[a-z0-9/+=]{40})(?![a-z0-9/+=])",
        ["secret_access_key", "secretaccesskey", "secret-access-key"],
        target="value",
        fold=True,
    ),
    _rule("gcp-api-key", r"AIza[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])", ["AIza"], check=_edge),
    _rule(
        "gcp-service-account-key-id",  # "private_key_id": "…" (the key itself is a private-key block)
        rf"private_key_id{_OP}{_QUOTE}(?P<value>[a-z0-9]{{16,}})",
        ["private_key_id"],
        target="value",
        fold=True,
    ),
    _rule(
        "azure-storage-account-key",  # connection strings: AccountKey=…; SharedAccessKey=…
        r"(?:accountkey|sharedaccesskey)=(?P<value>[a-z0-9+/=]{20,})",
        ["accountkey=", "sharedaccesskey="],
        target="value",
        fold=True,
    ),
    _rule(
        "azure-sas-signature",
        r"[?&;]sig=(?P<value>[a-z0-9%+/=]{20,})",
        ["sig="],
        target="value",
        fold=True,
    ),
    _rule(
        "azure-ad-client-secret",
        r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,34}(?![A-Za-z0-9_~.-])",
        ["Q~"],
    ),
    _rule("stripe-secret-key", r"sk_(?:live|test)_[A-Za-z0-9]{10,}", ["sk_"], check=_edge),
    _rule("stripe-restricted-key", r"rk_(?:live|test)_[A-Za-z0-9]{10,}", ["rk_"], check=_edge),
    _rule("stripe-webhook-secret", r"whsec_[A-Za-z0-9+/=]{24,}", ["whsec_"], check=_edge),
    _rule(
        "github-token",  # personal, OAuth, user-to-server, server-to-server, refresh
        r"gh[pousr]_[A-Za-z0-9]{30,}",
        ["gh"],  # the pattern's own prefix: one search instead of five
        check=_edge,
    ),
    _rule("github-fine-grained-pat", r"github_pat_[A-Za-z0-9_]{22,}", ["github_pat_"], check=_edge),
    _rule(
        "gitlab-token",  # glpat- (personal), gldt- (deploy), glptt-, glrt-, glcbt-, glimt-, glft-, glsoat-…
        r"gl(?:pat|dt|ptt|rt|cbt|imt|ft|soat|oas|agent)-[A-Za-z0-9_-]{20,}",
        ["gl"],
        check=_edge,
    ),
    _rule("gitlab-runner-registration-token", r"GR1348941[A-Za-z0-9_-]{20,}", ["GR1348941"], check=_edge),
    _rule("slack-token", r"xox[abposre]-[A-Za-z0-9-]{10,}", ["xox"], check=_edge),
    _rule("slack-app-token", r"xapp-[A-Za-z0-9-]{20,}", ["xapp-"], check=_edge),
    _rule(
        "slack-webhook-url",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<value>[A-Za-z0-9/_+-]{10,})",
        ["hooks.slack.com"],
        target="value",
    ),
    _rule(
        "discord-webhook-url",
        r"discord(?:app)?\.com/api/webhooks/(?P<value>[0-9]+/[A-Za-z0-9_-]{20,})",
        ["discord"],
        target="value",
    ),
    _rule("huggingface-token", r"hf_[A-Za-z0-9]{30,}", ["hf_"], check=_edge),
    _rule("npm-token", r"npm_[A-Za-z0-9]{36}", ["npm_"], check=_edge),
    _rule("jwt", rf"eyJ{_B64}{{8,}}\.{_B64}{{8,}}\.{_B64}*", ["eyJ"], check=_edge),
    # Credentials in a URL: scheme://user:password@host (also redis://:password@host).
    _rule("url-credentials", r"://[^\s/:@]*:(?P<value>[^\s/@]+)@", ["://"], target="value"),
    _rule(
        "authorization-header",  # Authorization: Bearer …, Basic …, Token …, or a bare credential
        r"authorization[\"']?[ \t]*[:=][ \t]*[\"']?"
        r"(?:(?:bearer|basic|token|digest|negotiate|ntlm|apikey|sso-key|bot)[ \t]+)?(?P<value>[^\s\"',;]+)",
        ["authorization"],
        target="value",
        fold=True,
        check=_strong,
    ),
    _rule(
        "bearer-token",
        r"(?:bearer|basic)[ \t]+(?P<value>[a-z0-9._~+/=-]{8,})",
        ["bearer", "basic"],
        target="value",
        fold=True,
        check=_weak,
    ),
    _rule(
        "cookie-header",
        r"(?m:^|\s)(?:set-)?cookie:[ \t]*(?P<value>[^\n]+)",
        ["cookie:"],
        target="value",
        fold=True,
    ),
    _rule(
        "cli-password-flag",  # --password X, --password=X, --db-pass X, --client-secret X
        r"--(?:[a-z0-9]+-)*(?:password|passwd|passphrase|pass|pwd|secret)(?:[ \t]+|=)[\"']?(?!-)" + _VAL,
        ["--"],
        target="value",
        fold=True,
        check=_strong,
    ),
    _rule(
        "cli-token-flag",  # --token X, --api-key X, --auth-token=X
        r"--(?:[a-z0-9]+-)*(?:token|key|apikey|credentials?)(?:[ \t]+|=)[\"']?(?!-)" + _VAL,
        ["--"],
        target="value",
        fold=True,
        check=_weak,
    ),
    _rule(
        "mysql-cli-password",  # mysql -uroot -pS3cret (the value is glued to -p)
        r"mysql(?:dump|admin|import|sh)?[ \t][^\n|;&]*?(?<=[ \t])-p(?P<value>[^\s'\"-][^\s'\"]*)",
        ["mysql"],
        target="value",
    ),
    _rule(
        "netrc-password",
        r"machine[ \t]+\S+[ \t]+login[ \t]+\S+[ \t]+password[ \t]+(?P<value>\S+)",
        ["machine"],
        target="value",
    ),
    _rule(
        "generic-password",  # env, JSON, YAML, TOML, INI, kwargs, prose: DB_PASS=…, "pwd": …, password is …
        rf"(?P<key>password|passwd|passphrase|secret|pass|pwd){_OP}{_QUOTE}{_VAL}",
        ["pass", "pwd", "secret"],
        target="value",
        fold=True,
        check=_password,
    ),
    _rule(
        "generic-api-key",  # *_KEY, apiKey, "api key", *_TOKEN, access_token, credentials
        rf"(?P<key>key|token|credentials?){_OP}{_QUOTE}{_VAL}",
        ["key", "token", "credential"],
        target="value",
        fold=True,
        check=lambda text, m: _weak(text, m) and _key_name(text, m),
    ),
    _rule(
        "xml-secret-element",  # <password>…</password>, <apiKey>…</apiKey>
        r"<(?P<tag>[a-z0-9_.:-]*(?:password|passwd|secret|token|apikey|api_key))>(?P<value>[^<\n]+)</(?P=tag)>",
        ["</"],
        target="value",
        fold=True,
    ),
    _rule(
        "chinese-secret",  # 密码是 …、口令：…、密钥为 …、令牌=…、私钥 改成 …
        r"(?:密码|口令|密钥|秘钥|令牌|私钥|凭证|凭据)[ \t\u3000]*"
        r"(?:(?:是|为|改成了?|改为|设为|设置为|设成)[ \t\u3000]*[:：]?|[:：=])[ \t\u3000]*[\"'“「]?"
        r"(?P<value>[^\s，。；、,;：:“”「」'\"（）()\u3400-\u9fff\uff01-\uff0f]+)",
        ["密", "令", "钥", "凭"],
        target="value",
        check=_strong,
    ),
)


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
                    span = (span[0], _value_end(text, span[1]))
                yield span
                position = max(m.end(), m.start() + 1)
            else:  # a vetoed match must not hide a real one that starts inside it
                position = m.start() + 1


def _value_end(text: str, start: int) -> int:
    """Where an unquoted value read up to ``start`` (:data:`VALUE_CAP`) ends: the rest of its run, but
    not a sentence's full stop."""
    rest = _VALUE_REST.match(text, start)
    end = rest.end() if rest else start
    while end > start and text[end - 1] == ".":
        end -= 1
    return end


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
    bare, only where a keyword introduces it: scrubbing it everywhere would take ``/root/`` and "admin
    panel" with it. Idempotent; the text never grows except by the markers.
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
    return text


def _scrub_everywhere(secret: str) -> bool:
    return (
        len(secret) >= MIN_KNOWN_CHARS
        and REDACTED not in secret
        and (len(secret) >= 8 or not _WORDLIKE.fullmatch(secret))
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
