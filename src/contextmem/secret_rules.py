"""The secret detectors: what each rule finds and the checks that veto a match (used by
:mod:`contextmem.redaction`, which runs them).

Why our own table, and why it looks like this
---------------------------------------------
* detect-secrets (Yelp), measured side by side in ``bench/bench_redaction.py`` on the same labelled
  samples: it is line-oriented and reports values, not spans (for a private key only the ``BEGIN``
  line, leaving the key body); it misses Chinese phrasing, shell flags, most ``*_PASS``/``*_TOKEN`` env
  forms, GCP service-account ids and Azure account keys (caught 41 of 80 at best, vs 80 here); scanning
  line by line its entropy plugins also hit git SHAs and UUIDs, which the identifier ledger exists to
  keep; and it ran at 0.1-0.3 MB/s against 26 MB/s here (``bench/results/redaction.md``).
* gitleaks has the most complete list of key families. Our table follows its families and names each
  rule like a gitleaks rule id (``aws-access-key-id``, ``slack-webhook-url``...), written here from the
  providers' documented key formats. Its successor's rules (betterleaks, a core
  dependency, :mod:`contextmem.secret_scanner`) run beside this table, for the provider formats a
  hand-kept table cannot keep up with; this table keeps what those rules lack: the keyword forms
  below, Chinese, ``.netrc``, ``.pgpass``, half-pasted keys, and spans that keep the key name.

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
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

from .lang.scripts import HAN_WITH_SYMBOLS
from .secret_tables import CHINESE, PROVIDER_TOKENS

__all__ = ["RULES", "VALUE_CAP", "Check", "Rule", "looks_secret", "plain_word", "value_end"]

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


def _strong(text: str, m: re.Match[str]) -> bool:
    # "(using password: YES)": MySQL's error says whether a password was sent, not which
    return _value(text, m).lower().rstrip(")]}") not in _NOT_A_VALUE


def _weak(text: str, m: re.Match[str]) -> bool:
    return looks_secret(_value(text, m))


def _weak_key(text: str, m: re.Match[str]) -> bool:
    return _weak(text, m) and _key_name(text, m)


def _password(text: str, m: re.Match[str]) -> bool:
    """A strong keyword's value; in prose ("the password is required") not a plain word."""
    if not (_strong(text, m) and _key_name(text, m)):
        return False
    return m.group("op").strip() not in ("is", "was") or not plain_word(_value(text, m))


def _edge(text: str, m: re.Match[str]) -> bool:
    """The token does not continue a word on its left (``task-…`` is not ``sk-…``)."""
    start = m.start()
    return start == 0 or not (text[start - 1].isalnum() or text[start - 1] in "_-")


def _has_digit(text: str, m: re.Match[str]) -> bool:
    """Random keys carry digits; a long slug like ``sk-learn-tutorial-notes`` does not."""
    return _edge(text, m) and any(c.isdigit() for c in m.group(0))


_BOT_ID = re.compile(r"(?<![A-Za-z0-9_-])[0-9]{6,12}\Z")


def _bot_id_before(text: str, m: re.Match[str]) -> bool:
    """A Telegram bot token's secret follows its bot id: 6 to 12 digits that start a word."""
    return _BOT_ID.search(text, max(0, m.start() - 13), m.start()) is not None


_PGPASS_HOST = re.compile(r"(?:^|(?<=\n))[ \t]*(?:[-*+>][ \t]+)?(?=[^\s:]*[A-Za-z.*_-])[^\s:#][^\s:]*\Z")


def _pgpass_host(text: str, m: re.Match[str]) -> bool:
    """A ``.pgpass`` line starts with its host: the whole line before the first colon (after an indent or
    a list bullet, as pasted into notes), a name, an address or ``*``, not a number ("12:30:45:67:89" is
    a time)."""
    return _PGPASS_HOST.search(text, max(0, m.start() - 256), m.start()) is not None


_NUMBER_UNIT = re.compile(r"[0-9]+(?:\.[0-9]+)?(?P<unit>[A-Za-z]*)")


def _quantity(text: str, m: re.Match[str], units: Iterable[str]) -> bool:
    """A number followed by a unit ("RSA 密钥为 4096 位", "4096bit"): a size, not a secret."""
    number = _NUMBER_UNIT.fullmatch(_value(text, m))
    if number is None:
        return False
    after = number.group("unit") or text[m.end("value") : m.end("value") + 8].lstrip(" \t\u3000")
    return any(after.startswith(unit) for unit in units)


_ANY_PREFIX = frozenset({"password", "passwd", "passphrase", "secret", "token", "credential", "credentials"})
_SUFFIX_ONLY = frozenset({"ak", "sk", "pat"})  # HUAWEICLOUD_SDK_SK, ADO_PAT; never a bare `pat = …`
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


def value_end(text: str, start: int) -> int:
    """Where an unquoted value read up to ``start`` (:data:`VALUE_CAP`) ends: the rest of its run, but
    not a sentence's full stop."""
    rest = _VALUE_REST.match(text, start)
    end = rest.end() if rest else start
    while end > start and text[end - 1] == ".":
        end -= 1
    return end


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
    # SaaS, cloud and registry tokens of a documented fixed shape: secret_tables.PROVIDER_TOKENS.
    *(
        _rule(id, pattern, hints, check=_edge if check == "edge" else _has_digit)
        for id, pattern, hints, check in PROVIDER_TOKENS
    ),
    _rule(  # Telegram Bot API, "Authorizing your bot": <bot id>:<35-character secret>
        "telegram-bot-token",  # the search starts at the colon, which is quick; the id is checked after
        r":(?P<value>[A-Za-z0-9_-]{35})(?![A-Za-z0-9_-])",
        [":"],
        target="value",
        check=_bot_id_before,
    ),
    _rule(
        "vault-unseal-key",  # `vault operator init` prints "Unseal Key 1: …"; `vault operator unseal …`
        r"unseal(?:[ \t]+key(?:[ \t]+[0-9]+)?)?:?[ \t]+(?P<value>[a-z0-9+/]{43,44}={0,2})(?![a-z0-9+/=])",
        ["unseal"],
        target="value",
        fold=True,
    ),
    # A key as a URL's user: a Sentry DSN (https://<public key>@o1.ingest.sentry.io/1), Sentry's docs.
    _rule("url-key-user", r"://(?P<value>[0-9a-f]{32,64})(?=[:@])", ["://"], target="value"),
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
        "netrc-password",  # curl's and GNU inetutils' docs: tokens split by spaces, tabs or newlines
        r"machine[ \t\n]+\S+(?:[ \t\n]+(?:login|account)[ \t\n]+\S+)*[ \t\n]+password[ \t\n]+(?P<value>\S+)",
        ["machine"],
        target="value",
        check=_strong,
    ),
    _rule(  # PostgreSQL docs, "The Password File": hostname:port:database:username:password per line
        "pgpass-line",  # the search starts at ":port:", which is quick; the host is checked after
        r":(?:[0-9]{1,5}|\*):(?:[^\s:\\]|\\.)+:(?:[^\s:\\]|\\.)+:(?P<value>(?:[^\s:\\]|\\.)+)"
        r"(?=[ \t\r]*(?m:$))",  # a field holds ":" and "\" only escaped, "\:"
        [":"],
        target="value",
        check=lambda text, m: _pgpass_host(text, m) and _strong(text, m),
    ),
    _rule(  # kubeconfig (Kubernetes docs, "Organizing Cluster Access"): the client key, base64 PEM
        "kubeconfig-key-data",
        r"key-data[\"']?[ \t]*:[ \t]*[\"']?(?P<value>[a-z0-9+/=]{16,})",
        ["key-data"],
        target="value",
        fold=True,
    ),
    _rule(  # Docker docs, "docker login": ~/.docker/config.json keeps "auth": base64(user:password)
        "docker-config-auth",
        r"\"auth\"[ \t]*:[ \t]*\"(?P<value>[A-Za-z0-9+/=]{8,})\"",
        ['"auth"'],
        target="value",
    ),
    _rule(
        "env-default",  # env('TWILIO_API_KEY', '…'), os.getenv("DB_PASSWORD", "…"): a secret as the default
        r"(?:getenv|env|environ\.get|fetch)\([ \t]*[\"']"
        r"(?P<key>[a-z0-9_.-]*(?:key|token|secret|password|passwd|pass|pwd))"
        r"[\"'][ \t]*,[ \t]*[\"'](?P<value>[^\"'\n]+)[\"']",
        ["env(", "environ.get(", "fetch("],
        target="value",
        fold=True,
        check=_weak,
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
        check=_weak_key,
    ),
    _rule(
        "env-suffix-key",  # HUAWEICLOUD_SDK_AK / _SK (Huawei Cloud SDK docs), BCE AK/SK, ADO_PAT
        rf"[_-](?P<key>ak|sk|pat){_OP}{_QUOTE}{_VAL}",
        ["_ak", "_sk", "_pat"],
        target="value",
        fold=True,
        check=_weak_key,
    ),
    _rule(
        "secret-id",  # HashiCorp Vault AppRole docs: secret_id
        rf"(?P<key>secret[_-]?id){_OP}{_QUOTE}{_VAL}",
        ["secret"],
        target="value",
        fold=True,
        check=_weak,
    ),
    _rule(
        "xml-secret-element",  # <password>…</password>, <apiKey>…</apiKey>
        r"<(?P<tag>[a-z0-9_.:-]*(?:password|passwd|secret|token|apikey|api_key))>(?P<value>[^<\n]+)</(?P=tag)>",
        ["</"],
        target="value",
        fold=True,
    ),
    _rule(
        "chinese-secret",  # 密码是 …、口令：…、密钥为 …、令牌=…、私钥 改成 … (words: secret_tables.CHINESE)
        rf"(?:{'|'.join(CHINESE.nouns)})[ \t\u3000]*"
        rf"(?:(?:{'|'.join(CHINESE.verbs)})[ \t\u3000]*[:：]?|[:：=])[ \t\u3000]*[\"'“「]?"
        rf"(?P<value>[^\s，。；、,;：:“”「」'\"（）(){HAN_WITH_SYMBOLS}\uff01-\uff0f]+)",
        sorted({noun[-1] for noun in CHINESE.nouns}),
        target="value",
        check=lambda text, m: _strong(text, m) and not _quantity(text, m, CHINESE.units),
    ),
)
