"""Issue 49, item 10: secrets of every named form reach no sink. One table, every sink, both backends.

The table (:data:`SAMPLES`) holds two kinds of rows:

* forms named by the attack round, with values invented here in each provider's documented shape
  (fixed-prefix tokens: Postman ``PMAK-``, Groq ``gsk_``, Anthropic admin, OpenAI project keys, Linear,
  Notion, Airtable, Shopify, Supabase, Vercel, Doppler, Pulumi, Databricks, Atlassian and more) and
  structural forms (a ``.pgpass`` line, the second half of a PEM key pasted alone, a ``.env`` file, a
  docker ``config.json`` auth, a kubeconfig ``client-key-data``, a git credential URL);
* the documented examples of kingfisher's own rules in ``evals/data/secrets/heldout_kingfisher.json``
  (held out: neither rule set was written from them), less the ones the union still misses, listed in
  :data:`KNOWN_MISSES` with the reason (a test checks each still leaks, so the list cannot go stale).
  betterleaks, the rule set we adopted, ships no examples of its own in its wheel (its rules are
  compiled into the Go library), so none of its examples can be used here.

All samples go through one runtime per backend (SQLite, PostgreSQL with ``CONTEXTMEM_REQUIRE_PG=1``),
with no model (``llm="none"``: extractive summaries): as user messages and tool outputs that compaction
summarises into the summary and the daily entry, through ``memory_write``, and typed by hand into a memory
file. Then each value is searched in every sink: memory files, the index's own rows (the SQLite file's
bytes, or every ``cm_memory_*`` row in PostgreSQL), ``memory_search`` snippets, ``memory_get``, the
summary, events and log records.
"""

from __future__ import annotations

import base64
import json
import logging
import random
import string
from pathlib import Path
from typing import Any

import pytest

from contextmem.redaction import redact_secrets
from tests.security.secret_sinks import leaks, sinks

LOWER_HEX = "0123456789abcdef"
ALNUM = string.ascii_letters + string.digits
B64 = ALNUM + "+/"


def fake(alphabet: str, n: int, seed: str) -> str:
    """``n`` characters of ``alphabet``, the same every run; a digit and both cases when it has them."""
    rng = random.Random(seed)
    while True:
        value = "".join(rng.choice(alphabet) for _ in range(n))
        kinds = [
            set(alphabet) & set(k) for k in (string.digits, string.ascii_lowercase, string.ascii_uppercase)
        ]
        if all(set(value) & kind for kind in kinds if kind and n >= 12):
            return value


# (form, token) in each provider's documented shape, values invented here.
TOKENS: list[tuple[str, str]] = [
    ("postman", f"PMAK-{fake(LOWER_HEX, 24, 'pm1')}-{fake(LOWER_HEX, 34, 'pm2')}"),
    ("groq", f"gsk_{fake(ALNUM, 52, 'groq')}"),
    ("anthropic-admin", f"sk-ant-admin01-{fake(ALNUM + '_-', 93, 'ant')}AA"),
    ("openai-project", f"sk-proj-{fake(ALNUM, 74, 'oa1')}T3BlbkFJ{fake(ALNUM, 74, 'oa2')}"),
    ("linear", f"lin_api_{fake(ALNUM, 40, 'lin')}"),
    ("notion-legacy", f"secret_{fake(ALNUM, 43, 'notion1')}"),
    ("notion", f"ntn_{fake(string.digits, 11, 'n2')}{fake(ALNUM, 35, 'n3')}"),
    ("airtable", f"pat{fake(ALNUM, 14, 'at1')}.{fake(LOWER_HEX, 64, 'at2')}"),
    ("shopify", f"shpat_{fake(LOWER_HEX, 32, 'shop')}"),
    ("supabase", f"sbp_{fake(LOWER_HEX, 40, 'supa')}"),
    ("vercel", f"vcp_{fake(ALNUM, 56, 'vercel')}"),
    ("doppler", f"dp.pt.{fake(string.ascii_lowercase + string.digits, 43, 'doppler')}"),
    ("pulumi", f"pul-{fake(LOWER_HEX, 40, 'pulumi')}"),
    ("databricks", f"dapi{fake(LOWER_HEX, 32, 'dbx')}"),
    ("atlassian", f"ATATT3xFfGF0{fake(ALNUM + '_-', 180, 'atl')}={fake('0123456789ABCDEF', 8, 'atl2')}"),
    ("openrouter", f"sk-or-v1-{fake(LOWER_HEX, 64, 'or')}"),
    ("perplexity", f"pplx-{fake(ALNUM, 48, 'pplx')}"),
    ("replicate", f"r8_{fake(ALNUM, 37, 'r8')}"),
    ("xai", f"xai-{fake(ALNUM, 80, 'xai')}"),
    ("planetscale", f"pscale_tkn_{fake(ALNUM, 43, 'ps')}"),
    ("digitalocean", f"dop_v1_{fake(LOWER_HEX, 64, 'do')}"),
    ("render", f"rnd_{fake(ALNUM, 28, 'render')}"),
    ("figma", f"figd_{fake(ALNUM, 40, 'figma')}"),
    ("posthog", f"phx_{fake(ALNUM, 43, 'posthog')}"),
    ("brevo", f"xkeysib-{fake(LOWER_HEX, 64, 'bv1')}-{fake(ALNUM, 16, 'bv2')}"),
]

KEY_LINES = [fake(B64, 64, f"pem{i}") for i in range(4)] + [fake(B64, 20, "pem-last") + "=="]
ENV_VALUES = [fake(ALNUM + "!#%", 18, "env1"), f"sk_live_{fake(ALNUM, 24, 'env2')}", fake(ALNUM, 40, "env3")]
DOCKER_AUTH = base64.b64encode(f"deploy:{fake(ALNUM, 20, 'docker')}".encode()).decode()
KUBE_KEY = base64.b64encode(("-----BEGIN RSA PRIVATE KEY-----\n" + fake(B64, 120, "kube")).encode()).decode()
PGPASS = fake(ALNUM + "&!", 16, "pgpass")
GIT_TOKEN = fake(ALNUM, 32, "gitcred")

STRUCTURAL: list[tuple[str, str, list[str]]] = [
    ("pgpass", f"db.internal.example:5432:orders:app_user:{PGPASS}", [PGPASS]),
    (
        "pem-second-half",  # what is left of a key pasted over two messages
        "\n".join(KEY_LINES) + "\n-----END RSA PRIVATE KEY-----",
        KEY_LINES[:4],
    ),
    (
        "dotenv",
        f"APP_ENV=production\nDB_PASSWORD={ENV_VALUES[0]}\nSTRIPE_API_KEY={ENV_VALUES[1]}\n"
        f"SESSION_SECRET={ENV_VALUES[2]}\n",
        ENV_VALUES,
    ),
    (
        "docker-config",
        json.dumps({"auths": {"registry.example.com": {"auth": DOCKER_AUTH}}}, indent=2),
        [DOCKER_AUTH],
    ),
    (
        "kubeconfig",
        f"users:\n- name: admin\n  user:\n    client-certificate-data: LS0tLS1CRUdJTg==\n"
        f"    client-key-data: {KUBE_KEY}\n",
        [KUBE_KEY],
    ),
    ("git-credentials", f"https://ci-bot:{GIT_TOKEN}@git.example.com", [GIT_TOKEN]),
]

HELDOUT: list[dict[str, Any]] = json.loads(
    (Path(__file__).resolve().parents[2] / "evals/data/secrets/heldout_kingfisher.json").read_text("utf-8")
)["samples"]
# Held-out forms the union still misses, each with why; a test checks each still leaks.
KNOWN_MISSES = {
    "asana :'20c2F0d03201af478ca1aBE9515A1A4FEfb'": "a service name and a colon, no key word",
    "asana_pat = 1/1248440223456784:d3d7e52e5c4a5d4c9bc424d2d882324d": "`pat` alone is not a key name",
    "CCIPRJ_GHFzqc7fRZ2GviZQ7hbdeb_9f54ac82eef4bb69a8fece88199a7414f32d8b36": "no rule for the prefix",
    "key_8c5a7657fc397e114def1b51dd520410ad50ece61e30b64261ff369ab275ef29": "no rule for Cursor keys",
    "key_86aed0092d14dd6aae4e8ad107d52f760c5efa4bc3753730ca6983babc2b1072": "no rule for Cursor keys",
    "key_d9ba91e29d81f1bf2085b55b06f5ac43885749005cff565bee7f406ca2e2f3f9": "no rule for Cursor keys",
    "codacyACCESS_KEY k1l2m3n4o5p6q7r8s9t0": "a key name glued to the service, no operator",
    "ATCTT3xFfGN0Repo7_Token9-AbCdEfGhJkLmN2PqR5Repo7_Token9-AbCdEfGhJkLmN2PqR5Repo7_Token9-AbCdEfGhJk"
    "LmN2PqR5=BC67283D": "no rule for Bitbucket access tokens",
    "ATBBAb3dE5fG7hJ9kL2mN4pQ6rS8AD6D34F4": "no rule for Bitbucket app passwords",
}

SAMPLES: list[tuple[str, str, list[str]]] = (
    [(form, f"for {form} use {token} from now on", [token]) for form, token in TOKENS]
    + STRUCTURAL
    + [
        (f"kingfisher:{s['family']}", s["text"], s["secrets"])
        for s in HELDOUT
        if s["text"] not in KNOWN_MISSES
    ]
)


async def test_every_named_form_reaches_no_sink(
    tmp_path: Path, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    found = leaks(await sinks(tmp_path, store_url, caplog, SAMPLES), SAMPLES)
    assert not found, f"{len(found)} leaks:\n" + "\n".join(found)


@pytest.mark.parametrize(("form", "text", "values"), SAMPLES, ids=[s[0] for s in SAMPLES])
def test_each_form_is_redacted_and_stays_redacted(form: str, text: str, values: list[str]) -> None:
    once = redact_secrets(text)
    assert not [v for v in values if v in once], form
    assert redact_secrets(once) == once


@pytest.mark.parametrize("text", sorted(KNOWN_MISSES))
def test_each_known_miss_still_leaks(text: str) -> None:
    sample = next(s for s in HELDOUT if s["text"] == text)
    assert any(v in redact_secrets(text) for v in sample["secrets"]), "caught now: drop it from the list"


# --- log lines that print raw exceptions ----------------------------------------------------------


def test_a_logged_exception_holding_a_secret_is_redacted(caplog: pytest.LogCaptureFixture) -> None:
    from contextmem.engine.core import logger  # a real package logger, as the engine logs a failure

    token = TOKENS[0][1]
    caplog.set_level(logging.DEBUG, logger="contextmem")
    try:
        raise ConnectionError(f"upstream refused postgres://app:{PGPASS}@db/x with key {token}")
    except ConnectionError:
        logger.exception("sync failed for %s", f"Authorization: Bearer {GIT_TOKEN}")
    logger.warning("stack with %s", token, stack_info=True)
    record = caplog.records[0]
    assert record.exc_info is not None  # the exception's type is still there for handlers
    for value in (token, PGPASS, GIT_TOKEN):
        assert value not in caplog.text
        assert all(value not in r.getMessage() and value not in (r.exc_text or "") for r in caplog.records)
    assert "ConnectionError" in caplog.text and "[REDACTED]" in caplog.text


def test_every_package_logger_redacts() -> None:
    """Each module's logger redacts: a logger's filters do not run for its children's records."""
    import importlib
    import pkgutil

    import contextmem

    loggers: dict[str, logging.Logger] = {}
    for module in pkgutil.walk_packages(contextmem.__path__, "contextmem."):
        if module.name.endswith("__main__"):
            continue
        try:
            mod = importlib.import_module(module.name)
        except ImportError:  # an extra that is not installed
            continue
        loggers |= {v.name: v for v in vars(mod).values() if isinstance(v, logging.Logger)}
    assert len(loggers) >= 6, sorted(loggers)
    token = TOKENS[0][1]
    leaking = []
    for name, logger in sorted(loggers.items()):
        record = logger.makeRecord(name, logging.ERROR, __file__, 1, "failed: %s", (token,), None)
        logger.filter(record)
        if token in record.getMessage():
            leaking.append(name)
    assert not leaking, leaking
