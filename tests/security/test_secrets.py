"""Secrets never reach long-term memory (issue 12, point 4): the detector, its negatives, and the sinks.

Every sample below is synthetic: shaped like the provider's documented format, never a live credential.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextmem.errors import LLMError
from contextmem.messages import Message, assistant, text_of, tool_call, tool_result, user
from contextmem.redaction import REDACTED, RULES, VALUE_CAP, find_secrets, redact_data, redact_secrets
from contextmem.summarize import (
    Ledger,
    Summarizer,
    build_ledger,
    extractive_summary,
    render_transcript,
)
from contextmem.summarize import find_secrets as summarize_find_secrets
from contextmem.summarize import redact_secrets as summarize_redact_secrets
from contextmem.testing import ScriptedLLM
from contextmem.tokens import MessageCounter, get_counter

COUNTER = MessageCounter(get_counter("auto"))

PEM_BODY = "MIIEowIBAAKCAQEA7bq9xQm3Zk1nV0Rr2fLp8sT4uWcYhJ0gK5aD6eN7"
PGP_BLOCK = (
    "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBGV0c2VjcmV0a2V5Ym9keQ8aFq2Lm9Zx\n=Qw7T\n"
    "-----END PGP PRIVATE KEY BLOCK-----"
)

# (text, secret that must vanish, word that must survive or None for whole-match rules)
POSITIVE: list[tuple[str, str, str | None]] = [
    # providers
    ("key sk-proj-Zx81kQm2Lw9Pq7Rt5Vy3Nb6Hc4Jd0Fg here", "Zx81kQm2Lw9Pq7Rt5Vy3Nb6Hc4Jd0Fg", "key"),
    (
        "OPENAI_API_KEY=sk-4f9XbQ2mLk8Zp7Wv1Rt6Yh3Nc5Jd0Ga",
        "4f9XbQ2mLk8Zp7Wv1Rt6Yh3Nc5Jd0Ga",
        "OPENAI_API_KEY",
    ),
    ("use sk-ant-api03-Qx7Lm2Pk9Zw4Rt8Vy1Nb5Hc3Jd6Fg0AaBb-CcDd", "Qx7Lm2Pk9Zw4Rt8Vy1Nb5Hc3Jd6Fg0", "use"),
    ("aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE", "aws"),
    ("session ASIAY34FZKBOKMUTVV7A", "ASIAY34FZKBOKMUTVV7A", "session"),
    (
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "aws_secret_access_key",
    ),
    (
        '{"SecretAccessKey": "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY"}',
        "je7MtGbClwBF/2Zp9Utk/h3yCo8nvbEXAMPLEKEY",
        "SecretAccessKey",
    ),
    ("aws configure set aws_secret_access_key wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "bPxRfiCY", "set"),
    ("maps AIzaSyDq3x9-Lw8Kp2Rt7Vy4Nb6Hc1Jd5Fg0QaZ", "AIzaSyDq3x9-Lw8Kp2Rt7Vy4Nb6Hc1Jd5Fg0QaZ", "maps"),
    (
        '"private_key_id": "2f9c4e1a7b3d8f6e0a5c9b2d4f7e1a3c5b8d0e6f",',
        "2f9c4e1a7b3d8f6e0a5c9b",
        "private_key_id",
    ),
    (
        '"private_key": "-----BEGIN PRIVATE KEY-----\\n'
        + PEM_BODY
        + '\\n-----END PRIVATE KEY-----\\n", "x": 1',
        PEM_BODY,
        '"x": 1',
    ),
    (
        "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4Zm9vYmE9PQ==;"
        "EndpointSuffix=core.windows.net",
        "Zm9vYmFyYmF6cXV4Zm9vYmFyYmF6cXV4",
        "AccountName=acme;AccountKey=",
    ),
    (
        "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=root;"
        "SharedAccessKey=q7Lm2Pk9Zw4Rt8Vy1Nb5Hc3Jd6Fg0AaBbCcDd=",
        "q7Lm2Pk9Zw4Rt8Vy1Nb5",
        "SharedAccessKey=",
    ),
    (
        "AZURE_CLIENT_SECRET=Xk81Q~7dLm2Pk9Zw4Rt8Vy1Nb5Hc3Jd6Fg0AaBb",
        "7dLm2Pk9Zw4Rt8Vy1Nb5",
        "AZURE_CLIENT_SECRET",
    ),
    ("secret Xk81Q~7dLm2Pk9Zw4Rt8Vy1Nb5Hc3Jd6Fg0AaBb in a log", "7dLm2Pk9Zw4Rt8Vy1Nb5", "in a log"),
    ("blob?sv=2022-11-02&sig=Qx7Lm2Pk9Zw4Rt8Vy1Nb5Hc3%2BJd6Fg0%3D&se=x", "Qx7Lm2Pk9Zw4Rt8Vy1Nb5", "sig="),
    ("charge with sk_live_51H8xyzABCDEF0123456789abcdefGHIJ", "51H8xyzABCDEF0123456789", "charge with"),
    ("STRIPE_KEY=sk_test_4eC39HqLyjWDarjtT1zdp7dc", "4eC39HqLyjWDarjtT1zdp7dc", "STRIPE_KEY"),
    ("rk_live_51H8xyzRESTRICTED0123456789ab", "RESTRICTED0123456789", None),
    ("whsec_Qx7Lm2Pk9Zw4Rt8Vy1Nb5Hc3Jd6Fg0Aa", "Qx7Lm2Pk9Zw4Rt8Vy1Nb5", None),
    ("token ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "token"),
    ("gho_16C7e42F292c6912E7710c838347Ae178B4a and more", "16C7e42F292c6912E7710c838347Ae178B4a", "and more"),
    ("ghs_Zx81kQm2Lw9Pq7Rt5Vy3Nb6Hc4Jd0FgAaBb", "Zx81kQm2Lw9Pq7Rt5Vy3Nb6Hc4Jd0FgAaBb", None),
    (
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV",
        "11ABCDEFG0123456789_abcdefghijklmnop",
        None,
    ),
    ("GITLAB_TOKEN: glpat-xY9zAbCdEfGh12345678", "xY9zAbCdEfGh12345678", "GITLAB_TOKEN"),
    ("deploy with gldt-Qx7Lm2Pk9Zw4Rt8Vy1Nb5", "Qx7Lm2Pk9Zw4Rt8Vy1Nb5", "deploy with"),
    ("runner GR1348941Qx7Lm2Pk9Zw4Rt8Vy1Nb5", "Qx7Lm2Pk9Zw4Rt8Vy1Nb5", "runner"),
    ("bot xoxb-2048-1024-Qx7Lm2Pk9Zw4Rt8Vy1Nb5", "Qx7Lm2Pk9Zw4Rt8Vy1Nb5", "bot"),
    ("user xoxp-2048-1024-4096-Qx7Lm2Pk9Zw4", "Qx7Lm2Pk9Zw4", "user"),
    (
        "post to https://hooks.slack.com/services/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",
        "Qx7Lm2Pk9Zw4Rt8Vy1Nb5Hc3",
        "https://hooks.slack.com/services/",
    ),
    ("HF_TOKEN=hf_QxLmPkZwRtVyNbHcJdFgAaBbCcDdEeFfGgHh", "QxLmPkZwRtVyNbHcJdFgAaBbCcDdEeFfGgHh", "HF_TOKEN"),
    (
        "//registry.npmjs.org/:_authToken=npm_Qx7Lm2Pk9Zw4Rt8Vy1Nb5Hc3Jd6Fg0AaBbCc",
        "Qx7Lm2Pk9Zw4Rt8Vy1Nb5",
        None,
    ),
    (
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r",
        "eyJzdWIiOiIxMjM0NTY3ODkwIn0",
        "jwt",
    ),
    # headers
    ("Authorization: Bearer abcDEF123456789xyz", "abcDEF123456789xyz", "Authorization: Bearer"),
    ("-H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='", "dXNlcjpwYXNzd29yZA==", "Authorization: Basic"),
    ("Authorization: Token 9f8e7d6c5b4a", "9f8e7d6c5b4a", "Authorization: Token"),
    ("Cookie: session=Qx7Lm2Pk9Zw4; csrftoken=abc", "Qx7Lm2Pk9Zw4", "Cookie:"),
    # private keys
    ("-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY + "\n-----END RSA PRIVATE KEY-----\nok", PEM_BODY, "ok"),
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\n-----END OPENSSH PRIVATE KEY-----",
        "b3Blbn",
        None,
    ),
    ("-----BEGIN EC PRIVATE KEY-----\n" + PEM_BODY + "\n[output truncated]", PEM_BODY, None),
    (PGP_BLOCK, "lQOYBGV0c2VjcmV0a2V5Ym9keQ8aFq2Lm9Zx", None),
    (
        "---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----\nP2/56wAAAi4AAAA3\n"
        "---- END SSH2 ENCRYPTED PRIVATE KEY ----",
        "P2/56w",
        None,
    ),
    # env assignments
    ("MYSQL_ROOT_PASSWORD=hunter2secret", "hunter2secret", "MYSQL_ROOT_PASSWORD"),
    ('export MYSQL_ROOT_PASSWORD="hunter2secret"', "hunter2secret", "export MYSQL_ROOT_PASSWORD"),
    ("DB_PASS=s3cr3tpass", "s3cr3tpass", "DB_PASS"),
    ("PGPASSWORD=pgs3cret psql -h db", "pgs3cret", "PGPASSWORD"),
    ("MYSQL_PWD=Zq7xW2pL", "Zq7xW2pL", "MYSQL_PWD"),
    ("JWT_SECRET=correct-horse-battery", "correct-horse-battery", "JWT_SECRET"),
    ("SLACK_BOT_TOKEN=T0k3nValue42", "T0k3nValue42", "SLACK_BOT_TOKEN"),
    ("SENDGRID_API_KEY=SG.Qx7Lm2Pk9Zw4.Rt8Vy1Nb5Hc3", "Qx7Lm2Pk9Zw4", "SENDGRID_API_KEY"),
    ("login with password=Tr0ub4dor&3 now", "Tr0ub4dor&3", "password"),
    ("connect(user='bob', pass='Zq7-xW2pL')", "Zq7-xW2pL", "pass"),
    ("host=db port=5432 dbname=app password=s3cret sslmode=require", "s3cret", "sslmode=require"),
    # shell flags
    ("mysql --password hunter2pw -h db", "hunter2pw", "--password"),
    ("mysqldump --password=hunter2pw app", "hunter2pw", "--password="),
    ("mysql -uroot -pS3cretPW -P 3306 app", "S3cretPW", "-uroot"),
    ("gh auth login --token Qx7Lm2Pk9Zw4Rt8", "Qx7Lm2Pk9Zw4Rt8", "--token"),
    ("cli --api-key ZZa8s7d6f5g4 --verbose", "ZZa8s7d6f5g4", "--verbose"),
    ("vault --client-secret 'Zq7 xW2 pL9'", "Zq7 xW2 pL9", "--client-secret"),
    # JSON, YAML, TOML, XML, netrc
    ('{"password": "p@ss word!", "user": "bob"}', "p@ss word!", '"user": "bob"'),
    ('{"api_key": "k-9981-zzqq"}', "k-9981-zzqq", "api_key"),
    ('{"access_token": "ya29.a0AfH6SMBx7Lm2Pk9Zw4"}', "a0AfH6SMBx7Lm2Pk9Zw4", "access_token"),
    ("db:\n  password: hunter2\n  host: db", "hunter2", "host: db"),
    ('[database]\npassword = "toml-S3cret"', "toml-S3cret", "password ="),
    ("apiKey: 'AbCdEf123456'", "AbCdEf123456", "apiKey"),
    ("X-Api-Key: AbCdEf1234567", "AbCdEf1234567", "X-Api-Key"),
    ("<password>xmlS3cret</password>", "xmlS3cret", "</password>"),
    ("machine api.example.com login bob password n3tRcPw", "n3tRcPw", "login bob password"),
    # URLs and prose
    ("postgres://etl:s3cr3tPW@db.internal:5432/app", "s3cr3tPW", "@db.internal:5432/app"),
    ("redis://:p4ssw0rd@cache:6379/0", "p4ssw0rd", "redis://"),
    ("my password is Summer2024!.", "Summer2024!", "my password is"),
    ("The API key is Qx7Lm2Pk9Zw4, keep it safe", "Qx7Lm2Pk9Zw4", "keep it safe"),
    # Chinese
    ("数据库密码是 Qw3rty!2026 ，别外传", "Qw3rty!2026", "别外传"),
    ("密钥：abcd-1234-efgh", "abcd-1234-efgh", "密钥"),
    ("密码 ： abc123 请保管", "abc123", "请保管"),
    ("root 的口令为hunter2。", "hunter2", "口令为"),
    ("令牌=tok_9a8b7c6d", "tok_9a8b7c6d", "令牌"),
    ("私钥是“Zq7xW2pL9”", "Zq7xW2pL9", "私钥"),
    ("把 Redis 密码改成了 R3dis!pw，然后重启", "R3dis!pw", "然后重启"),
    ("API 令牌为 Qx7Lm2Pk9Zw4", "Qx7Lm2Pk9Zw4", "API"),
    ("服务器密码是 20240615 ，记得改", "20240615", "记得改"),  # a number with no unit after it stays a value
]


@pytest.mark.parametrize(("text", "secret", "keep"), POSITIVE)
def test_every_family_and_form_is_redacted(text: str, secret: str, keep: str | None) -> None:
    redacted = redact_secrets(text)
    assert secret not in redacted
    assert REDACTED in redacted
    if keep is not None:
        assert keep in redacted
    assert any(secret in found for found in find_secrets(text))


NEGATIVE = [
    "commit 9f3c2ab1d4e5f6a7b8c9d0e1f2a3b4c5d6e7f8a9 reverted",
    "request 7d9f8e2a-41b3-4c5e-9a1f-0b2c3d4e5f60 failed",
    "edit src/auth/token.py and templates/password_reset.html",
    "max_tokens=4096",
    "the token budget is 8000",
    "tokens: 5000",
    "token: 5000",
    "sort_key=name",
    "partition_key=customer_region",
    "primary_key: id",
    "monkey=banana12345",
    "reset your password in settings",
    "the password is required",
    "password:",
    'password: ""',
    "password: str",
    "secret=None",
    "got ECONNREFUSED then HTTP 503 on v1.2.3",
    "PASS: tests/test_auth.sh",
    "PWD=/home/bob/project",
    "OLDPWD=/home/bob",
    "bypass=1",
    "private_key: /etc/ssl/private/server.key",
    "API_KEY=${OPENAI_API_KEY}",
    "-----BEGIN PUBLIC KEY-----\nMIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8A\n-----END PUBLIC KEY-----",
    "pip install scikit-learn; task-runner-for-the-nightly-build-v2",
    "desk-lamp-and-chair-and-table-set ok",
    "Bearer authentication is used",
    "use https://example.com/a/b?x=1 and ssh://git@github.com/acme/app",
    "请修改src/auth.ts，密码是必填项",
    "请在设置中重置密码",
    "let key = 'user_id'",
    # issue 31: a number with its unit is a size, not a secret; MySQL's error says whether one was sent
    "我们的 RSA 密钥为 4096 位",
    "密钥长度为 2048 比特，令牌为 16 个字符",
    "ERROR 1045 (28000): Access denied for user 'root'@'localhost' (using password: YES)",
]


@pytest.mark.parametrize("text", NEGATIVE)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_secrets(text) == text
    assert find_secrets(text) == set()


def test_the_rule_table_is_well_formed() -> None:
    ids = [rule.id for rule in RULES]
    assert len(ids) == len(set(ids))
    for rule in RULES:
        assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", rule.id), rule.id
        assert rule.hints, rule.id  # every rule is gated by a cheap literal pre-check
        assert ("value" in rule.pattern.groupindex) == (rule.target == "value"), rule.id
        if rule.fold:
            assert all(hint == hint.lower() for hint in rule.hints), rule.id


@pytest.mark.parametrize("unit", ["key=", "akey=", "xoxb-", "glpat-", "sk-", "eyJ", "github_pat_"])
def test_a_long_run_of_vetoed_matches_is_read_once_not_once_per_match(unit: str) -> None:
    """An attack: "x" + "key=key=…" (or "sk-sk-…", "eyJeyJ…") made every rule whose check vetoes a
    match read the rest of the run again from the next one: 64k characters took 0.3-1.5 s, quadratic,
    and a megabyte minutes. Vetoed starts are now skipped by the pattern itself, and an unquoted value
    is read at most VALUE_CAP characters at a time; 200k characters take milliseconds. No timer here:
    before the fix this test ran for minutes."""
    text = "x" + unit * (200_000 // len(unit))
    once = redact_secrets(text)
    assert redact_secrets(once) == once and len(once) <= len(text)


def test_a_value_longer_than_the_cap_is_taken_whole() -> None:
    """A value is read VALUE_CAP characters at a time; a longer one is still redacted to its end (and
    counts as no plain word, whatever its first VALUE_CAP characters are)."""
    long = "A1b2" * (VALUE_CAP // 2)
    assert redact_secrets(f"API_KEY={long}. Next") == f"API_KEY={REDACTED}. Next"
    assert redact_secrets(f"api_key={'a' * VALUE_CAP}x1 ok") == f"api_key={REDACTED} ok"
    assert redact_secrets(f"token {long} and task-sk-{long}") == f"token {long} and task-sk-{long}"


def test_the_summarize_package_re_exports_the_one_detector() -> None:
    assert summarize_redact_secrets is redact_secrets
    assert summarize_find_secrets is find_secrets


def test_a_private_key_cut_off_is_redacted_to_the_end_and_text_after_a_block_survives() -> None:
    cut = "before\n-----BEGIN RSA PRIVATE KEY-----\n" + PEM_BODY + "\nmore key material"
    assert redact_secrets(cut) == f"before\n{REDACTED}"
    assert redact_secrets(f"{PGP_BLOCK}\nafter the block") == f"{REDACTED}\nafter the block"


def test_known_values_are_scrubbed_bare_but_plain_short_words_are_not() -> None:
    known = find_secrets("DB_PASS=hunter2secret and password: admin")
    assert known == {"hunter2secret", "admin"}
    assert redact_secrets("I typed hunter2secret", known) == f"I typed {REDACTED}"
    # "admin" is redacted where a keyword introduces it, but not everywhere: paths would go with it
    assert redact_secrets("open /admin/users", known) == "open /admin/users"


def test_a_short_known_value_is_scrubbed_after_its_keyword_on_another_line() -> None:
    """A .netrc split over lines, read back a line at a time (memory_get): the file's secrets are known,
    and "qwerty" is a plain word, so it goes only where a keyword introduces it."""
    known = find_secrets("machine example.com\nlogin daniel\npassword qwerty\n")
    assert known == {"qwerty"}
    assert redact_secrets("password qwerty", known) == f"password {REDACTED}"
    assert redact_secrets("a qwerty keyboard", known) == "a qwerty keyboard"


def test_redact_data_redacts_values_under_secret_keys_and_inside_strings() -> None:
    payload = {
        "password": "x y",
        "DB_PASS": "abc",
        "sort_key": "name",
        "note": "token=Qx7Lm2Pk9Zw4 ok",
        "nested": [{"access_token": "Qx7Lm2Pk9Zw4Rt"}, ("sk-proj-Zx81kQm2Lw9Pq7Rt5Vy3Nb6",)],
        "count": 3,
    }
    assert redact_data(payload) == {
        "password": REDACTED,
        "DB_PASS": REDACTED,
        "sort_key": "name",
        "note": f"token={REDACTED} ok",
        "nested": [{"access_token": REDACTED}, (REDACTED,)],
        "count": 3,
    }


# --- the issue's strings through the summariser, end to end ---------------------------------------

ISSUE_SECRETS = [
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "hunter2secret",
    "s3cr3tpass",
    "sk_live_51H8xyzABCDEF0123456789abcdefGHIJ",
    "Pa55-flag-value",
    "lQOYBGV0c2VjcmV0a2V5Ym9keQ8aFq2Lm9Zx",
    "Qw3rty!2026",
]


def issue_conversation() -> list[Message]:
    return [
        user("Deploy fails. Config has MYSQL_ROOT_PASSWORD=hunter2secret and DB_PASS=s3cr3tpass, fix it."),
        assistant(
            "Checking the credentials file.",
            tool_calls=[tool_call("c1", "shell", {"cmd": "mysql --password Pa55-flag-value -e 'select 1'"})],
        ),
        tool_result(
            "c1",
            "[default]\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
            "ERROR 1045 (28000): Access denied for user root, DB_PASS=s3cr3tpass\n"
            "stripe error: invalid key sk_live_51H8xyzABCDEF0123456789abcdefGHIJ\n" + PGP_BLOCK,
        ),
        assistant("Fixed: rotated hunter2secret. We decided to move keys to the vault. Next: redeploy."),
        user("数据库密码是 Qw3rty!2026 ，必须不要写进日志"),
    ]


def assert_clean(text: str) -> None:
    for secret in ISSUE_SECRETS:
        assert secret not in text
    assert "PGP PRIVATE KEY" not in text


def test_the_issue_secrets_never_reach_the_extractive_summary_or_its_ledger() -> None:
    messages = issue_conversation()
    summary = Summarizer(ScriptedLLM.of(), COUNTER, max_tokens=2000).extract(None, messages)
    rendered = summary.render()
    assert_clean(rendered)
    assert_clean("\n".join(summary.ledger.values))
    # the summary still says what happened: the goal line and the error line are there, redacted
    assert f"MYSQL_ROOT_PASSWORD={REDACTED}" in rendered
    assert "ERROR 1045 (28000)" in rendered
    assert summary.source == "extractive"


async def test_a_failing_model_falls_back_without_leaking_and_nothing_leaked_into_the_prompt() -> None:
    llm = ScriptedLLM.of(LLMError("down"))
    summary = await Summarizer(llm, COUNTER).summarize(None, issue_conversation())
    assert summary.source == "extractive"
    assert_clean(summary.render())
    sent = "\n".join(text_of(m.content) for request in llm.requests for m in request)
    assert "DB_PASS" in sent  # the prompt was built from the messages
    assert_clean(sent)


async def test_what_the_model_returns_is_redacted_before_it_is_kept() -> None:
    reply = (
        "## Goal\n- Fix the deploy; password hunter2secret, key sk_live_51H8xyzABCDEF0123456789abcdefGHIJ"
        "\n## Constraints\n- export MYSQL_ROOT_PASSWORD=hunter2secret"
        "\n## Progress\n- token ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8 used"
        "\n## Key decisions\n- Vault.\n## Next steps\n- Redeploy.\n## Critical context\n- 1045"
    )
    summary = await Summarizer(ScriptedLLM.of(reply), COUNTER).summarize(None, issue_conversation())
    assert summary.source == "llm"
    assert_clean(summary.render())
    assert "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8" not in summary.render()
    assert "Vault." in summary.render()


async def test_a_previous_summary_from_an_older_detector_is_cleaned() -> None:
    previous = Summarizer(ScriptedLLM.of(), COUNTER).extract(None, [user("fix src/app.py")])
    leaky = type(previous)(
        "## Goal\n- Fix it. DB_PASS=s3cr3tpass",
        Ledger().add([("src/app.py", "path"), ("sk_live_51H8xyzABCDEF0123456789abcdefGHIJ", "id")]),
    )
    summary = await Summarizer(ScriptedLLM.of(LLMError("x")), COUNTER).summarize(leaky, [user("continue")])
    assert_clean(summary.render())
    assert "src/app.py" in summary.ledger


def test_a_secret_seen_once_with_its_keyword_is_scrubbed_where_it_reappears_bare() -> None:
    messages = [user("DB_PASS=Zq7xW2pL9v"), assistant("Logged in as bob with Zq7xW2pL9v at db.internal.")]
    ledger = build_ledger(messages)
    text = extractive_summary(messages, previous=None, ledger=ledger, lang="en", budget=500, counter=COUNTER)
    assert "Zq7xW2pL9v" not in text
    assert "Zq7xW2pL9v" not in render_transcript(messages)
    assert all("Zq7xW2pL9v" not in v for v in ledger.values)
    assert "db.internal" in ledger


def test_the_transcript_is_redacted_before_long_texts_are_cut() -> None:
    secret = "Zq7xW2pL9vKk3Mn8Bb4Cc5Dd6Ee7Ff8Gg9Hh0Jj1"
    output = "x" * 990 + " DB_PASS=" + secret + " " + "y" * 600  # the cut falls inside the value
    transcript = render_transcript([tool_result("c1", output)], tool_result_chars=1500)
    assert "chars omitted" in transcript
    assert not any(secret[i : i + 8] in transcript for i in range(len(secret) - 7))


# --- properties -------------------------------------------------------------------------------------

_pieces = st.sampled_from(
    [
        "password=",
        "DB_PASS=",
        " is ",
        "sk-",
        "sk_live_",
        "AKIA",
        "ghp_",
        "-----BEGIN RSA PRIVATE KEY-----\n",
        "-----END RSA PRIVATE KEY-----",
        "://u:",
        "@h",
        "密码是",
        "：",
        '"',
        "'",
        " ",
        "\n",
        "Bearer ",
        "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
        REDACTED,
        "=",
        ".",
        # issue 49: what the maintained rule set finds, a key's second half, a .pgpass line
        "PMAK-0a1b2c3d4e5f60718293a4b5-c6d7e8f90a1b2c3d4e5f60718293a4b5c6",
        "shpat_",
        "0a1b2c3d4e5f60718293a4b5c6d7e8f9",
        "\\n",
        ":5432:",
        "h.example",
        ":",
        "\x00",
        "\ud800",
    ]
)


@given(st.lists(_pieces | st.text(max_size=12), max_size=25).map("".join))
def test_redaction_is_idempotent_and_only_the_markers_add_length(text: str) -> None:
    once = redact_secrets(text)
    assert redact_secrets(once) == once
    markers = once.count(REDACTED) - text.count(REDACTED)
    assert len(once) <= len(text) + max(0, markers) * len(REDACTED)
    assert not find_secrets(once)
