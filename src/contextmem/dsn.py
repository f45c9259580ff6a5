"""A store URL or libpq DSN as it may be shown: the one place that takes its password out.

A store URL reaches error messages, log lines and the terminal (``--store``, ``CONTEXTMEM_STORE``, the
``store`` setting, ``ContextMem.open``), and it may carry a password in any of libpq's places:
``scheme://user:PASSWORD@host/db``, ``?password=…`` (or ``sslpassword``, …), ``password=…`` of a
``key=value`` DSN, or a mistyped URL (``postgress://…``, ``postgresql//…``) nobody parses at all.
:func:`printable_store_url` is what every message shows instead: the same URL with ``***`` for each
secret, host, port and database kept so the error stays useful, as a ``repr`` (controls escaped) cut
to about 80 characters. :func:`scrub_store_secrets` takes the same secrets out of a driver's message,
which can echo a piece of the DSN (psycopg: ``invalid percent-encoded token: "…"``).

The reading is deliberately wider than libpq's: the user information runs to the *last* ``@`` (libpq
stops at the first ``@`` or ``/``), a query from its first secret parameter to its end is secret, and
an unparsable ``key=value`` remainder is secret. Showing too little is an inconvenience; showing a
password typed with an unencoded ``@`` or ``&`` is a leak. :func:`store_url_password` gives the
password as this reading sees it, so the PostgreSQL store can refuse a URL libpq reads differently.
"""

from __future__ import annotations

import re
from typing import NamedTuple
from urllib.parse import unquote

from .errors import brief

__all__ = ["MASK", "printable_store_url", "redact_store_url", "scrub_store_secrets", "store_url_password"]

MASK = "***"
MIN_SCRUBBED_CHARS = 4
"""A shorter secret is not replaced in running text (it would eat ordinary letters), only where the
driver quotes it whole."""

_SECRET_KEY = re.compile(r"pass|pwd|secret|token|auth", re.IGNORECASE)
_KEYWORD_START = re.compile(r"\s*[A-Za-z_][\w.-]*\s*=")
_LEAD = re.compile(r"[A-Za-z][\w+.-]*:?/*")  # the scheme of a mistyped URL: "postgresql//", "pg:/"
_LEFTOVER = re.compile(
    r"(?i)((?:pass\w*|pwd|secret\w*|token\w*)\s*=\s*)(?!\*\*\*(?:\s|&|$))('[^']*'?|[^\s&]+)"
)


class _Read(NamedTuple):
    shown: str  # the text with each secret replaced by MASK
    secrets: list[str]  # the secret regions, as written
    password: str | None  # the userinfo password, percent-decoded, when the URL has one


def printable_store_url(url: str) -> str:
    """``url`` without its passwords, as a printable ``repr`` of about 80 characters, for messages."""
    return brief(redact_store_url(url))


def redact_store_url(url: str) -> str:
    """``url`` with each password replaced by ``***``, whole (a setting's value as ``config`` shows it)."""
    return _read(url).shown


def store_url_password(url: str) -> str | None:
    """The password of a ``scheme://user:password@host`` URL as read here (to the last ``@``, decoded);
    ``None`` when it has none."""
    return _read(url).password


def scrub_store_secrets(text: str, url: str) -> str:
    """``text`` (a driver's message about ``url``) with ``url``'s secrets replaced by ``***``: each one
    whole, decoded or not, and every double-quoted fragment that is a piece of one."""
    forms = {form for secret in _read(url).secrets for form in _forms(secret)}
    for form in sorted(forms, key=len, reverse=True):
        if len(form) >= MIN_SCRUBBED_CHARS:
            text = text.replace(form, MASK)

    def quoted(m: re.Match[str]) -> str:
        piece = m.group(1)
        return f'"{MASK}"' if piece and any(_overlap(piece, form) for form in forms) else m.group(0)

    return re.sub(r'"([^"]*)"', quoted, text)


def _overlap(piece: str, form: str) -> bool:
    """``piece`` is part of ``form``, or holds a run of it as long as a scrubbed secret (a driver quotes
    a secret's tail together with the host that follows it)."""
    if piece in form:
        return True
    n = MIN_SCRUBBED_CHARS
    return any(piece[i : i + n] in form for i in range(len(piece) - n + 1))


def _forms(secret: str) -> set[str]:
    """A secret as written, percent-decoded, and without a DSN value's quotes and backslashes."""
    unquoted = secret[1:-1] if len(secret) >= 2 and secret[0] == secret[-1] == "'" else secret
    forms = {secret, unquote(secret), unquote(secret.replace("+", " ")), _unescape(unquoted)}
    return {f for form in forms for f in (form, " ".join(form.split())) if f}  # as written, as one line


def _unescape(value: str) -> str:
    return re.sub(r"\\(.)", r"\1", value)


def _read(url: str) -> _Read:
    if _KEYWORD_START.match(url):  # never a URL: a scheme is followed by ':'
        read = _read_keywords(url)
    elif "://" in url:
        scheme, _, rest = url.partition("://")
        read = _read_uri(scheme + "://", rest)
    else:  # neither: a mistyped URL (postgresql//app:pw@h/db) or a bare word
        lead = m.group(0) if (m := _LEAD.match(url)) else ""
        read = _read_uri(lead, url[len(lead) :])
    # A net under the readers: any password=… left in what is shown (a DSN inside a URL, say).
    leftover = [m.group(2) for m in _LEFTOVER.finditer(read.shown)]
    if leftover:
        shown = _LEFTOVER.sub(rf"\g<1>{MASK}", read.shown)
        read = read._replace(shown=shown, secrets=read.secrets + leftover)
    return read


def _read_uri(lead: str, rest: str) -> _Read:
    secrets: list[str] = []
    password = None
    at = rest.rfind("@")
    if ":" not in rest[: max(at, 0)]:  # a user alone: its '@' is the first, before any path or query
        at = rest.find("@")
        at = -1 if "/" in rest[: max(at, 0)] or "?" in rest[: max(at, 0)] else at
    shown_user = ""
    if at >= 0 and not rest.startswith("/"):  # a path's '@' (sqlite:///home/a@b/x.db) is no userinfo
        user, colon, secret = rest[:at].partition(":")
        if colon:
            secrets.append(secret)
            password = unquote(secret)
            shown_user = f"{user}:{MASK}@"
        elif lead.endswith("://"):
            shown_user = f"{user}@"
        else:  # no scheme to tell a user from a password: hide it
            secrets.append(user)
            shown_user = f"{MASK}@"
        rest = rest[at + 1 :]
    where, question, query = rest.partition("?")
    if not question:
        return _Read(lead + shown_user + where, secrets, password)
    params = query.split("&")
    for i, param in enumerate(params):
        key, equals, _ = param.partition("=")
        if _SECRET_KEY.search(unquote(key)):  # the rest of the query may be the value's unencoded tail
            secrets.append("&".join(params[i:])[len(key) + len(equals) :])
            params = [*params[:i], f"{key}={MASK}"]
            break
    return _Read(lead + shown_user + where + "?" + "&".join(params), secrets, password)


_PAIR = re.compile(r"\s*([A-Za-z_][\w.-]*)\s*=\s*('(?:[^'\\]|\\.)*'|(?:[^\s'\\]|\\.)+)(?=\s|$)")


def _read_keywords(dsn: str) -> _Read:
    """A libpq ``key=value`` DSN, pair by pair; what cannot be read is secret if it names one."""
    shown: list[str] = []
    secrets: list[str] = []
    position = 0
    while (m := _PAIR.match(dsn, position)) is not None:
        key, value = m.group(1), m.group(2)
        if _SECRET_KEY.search(key):
            secrets.append(value)
            shown.append(f"{key}={MASK}")
        elif "://" in value or "=" in value:  # a URL or DSN as dbname: libpq expands it
            inner = _read(_unescape(value.strip("'")))
            secrets += inner.secrets
            shown.append(f"{key}={inner.shown}")
        else:
            shown.append(f"{key}={value}")
        position = m.end()
    leftover = dsn[position:].strip()
    if leftover and (secrets or _SECRET_KEY.search(leftover)):
        secrets.append(leftover)
        leftover = MASK
    return _Read(" ".join([*shown, leftover] if leftover else shown), secrets, None)
