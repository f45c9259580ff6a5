"""The identifier ledger: exact extraction (English and Chinese), secret redaction, bounds and eviction."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextmem.messages import assistant, tool_call, tool_result, user
from contextmem.summarize import Ledger, LedgerEntry, build_ledger, extract_identifiers, redact_secrets
from contextmem.summarize.ledger import REDACTED
from contextmem.tokens import HeuristicCounter


def kinds(text: str) -> dict[str, str]:
    return dict(extract_identifiers(text))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("edit src/auth.ts now", {"src/auth.ts": "path"}),
        ("see /etc/nginx/nginx.conf.", {"/etc/nginx/nginx.conf": "path"}),
        (r"open C:\Users\dev\app.py please", {r"C:\Users\dev\app.py": "path"}),
        ("docs at https://example.com/a/b?x=1.", {"https://example.com/a/b?x=1": "url"}),
        ("mail bob@corp.io", {"bob@corp.io": "email"}),
        ("upstream 127.0.0.1:8081 down", {"127.0.0.1:8081": "host"}),
        ("got HTTP 502 then ECONNREFUSED", {"HTTP 502": "error", "ECONNREFUSED": "error"}),
        ("raised ValueError; pod OOMKilled; code E1234", {"ValueError": "error", "OOMKilled": "error"}),
        ("release v2.3.1 with 16GB and pi 3.14", {"v2.3.1": "number", "16GB": "number", "3.14": "number"}),
        ("status 502 on port 8080", {"502": "number", "8080": "number"}),
        ("call `load_user` in UserService", {"load_user": "name", "UserService": "name"}),
        ("fix get_user_by_id() and getUserById", {"get_user_by_id()": "name", "getUserById": "name"}),
        ("commit 9f3c2ab broke it", {"9f3c2ab": "id"}),
        ("job 7d9f8e2a-41b3-4c5e-9a1f-0b2c3d4e5f60", {"7d9f8e2a-41b3-4c5e-9a1f-0b2c3d4e5f60": "id"}),
        ("result of call_k1x9a and INC-4521", {"call_k1x9a": "id", "INC-4521": "id"}),
        ("archive dialog/2026-11-22.jsonl", {"dialog/2026-11-22.jsonl": "path"}),
        # Chinese: identifiers touch CJK characters with no space between
        ("请修改src/auth.ts里的函数", {"src/auth.ts": "path"}),
        (
            "内存占用16GB，超时30秒，报ECONNREFUSED错误",
            {"16GB": "number", "30秒": "number", "ECONNREFUSED": "error"},
        ),
        ("部署到https://api.example.com/v1/chat，返回HTTP 502。", {"https://api.example.com/v1/chat": "url"}),
        ("项目“星火计划”的工单ORD-88231", {"星火计划": "name", "ORD-88231": "id"}),
    ],
)
def test_extracts_exact_identifiers(text: str, expected: dict[str, str]) -> None:
    found = kinds(text)
    for value, kind in expected.items():
        assert found.get(value) == kind, (value, found)


@pytest.mark.parametrize("text", ["and/or", "TCP/IP", "input/output", "an ERROR occurred", "it is 42"])
def test_does_not_take_plain_words(text: str) -> None:
    assert extract_identifiers(text) == []


def test_a_span_is_taken_once_by_its_most_specific_kind() -> None:
    found = kinds("read dialog/2026-11-22.jsonl and https://x.io/v2.3.1/src/a.py")
    assert "2026-11-22" not in found  # part of the path
    assert "v2.3.1" not in found and "src/a.py" not in found  # part of the URL


SECRETS = [
    ("key sk-proj-Zx81kQm2Lw9Pq7Rt5Vy3Nb6Hc4Jd0Fg here", "sk-proj-Zx81kQm2Lw9Pq7Rt5Vy3Nb6Hc4Jd0Fg"),
    ("aws AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("token ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"),
    ("Authorization: Bearer abcDEF123456789xyz", "abcDEF123456789xyz"),
    ("login with password=Tr0ub4dor&3 now", "Tr0ub4dor&3"),
    ('{"api_key": "k-9981-zzqq"}', "k-9981-zzqq"),
    ("postgres://etl:s3cr3tPW@db.internal:5432/app", "s3cr3tPW"),
    ("数据库密码是 Qw3rty!2026 ，别外传", "Qw3rty!2026"),
    ("密钥：abcd-1234-efgh", "abcd-1234-efgh"),
    (
        "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dBjftJeZ4CVPmB92K27uhbUJU1p1r",
        "eyJhbGciOiJIUzI1NiJ9",
    ),
    ("-----BEGIN RSA PRIVATE KEY-----\nMIIEow\n-----END RSA PRIVATE KEY-----", "MIIEow"),
]


@pytest.mark.parametrize(("text", "secret"), SECRETS)
def test_secrets_are_redacted_and_never_extracted(text: str, secret: str) -> None:
    redacted = redact_secrets(text)
    assert secret not in redacted
    assert REDACTED in redacted
    assert all(secret not in value for value, _ in extract_identifiers(text))


def test_redaction_keeps_the_context_word_and_the_rest_of_a_url() -> None:
    assert redact_secrets("password=hunter22 ok") == f"password={REDACTED} ok"
    url = dict(extract_identifiers("db postgres://etl:s3cr3tPW@db.internal:5432/app up"))
    assert f"postgres://etl:{REDACTED}@db.internal:5432/app" in url


def test_add_dedupes_and_moves_a_re_mention_to_the_end() -> None:
    ledger = Ledger().add([("a.py", "path"), ("b.py", "path")]).add([("a.py", "path")])
    assert ledger.values == ("b.py", "a.py")
    assert len(ledger) == 2 and "a.py" in ledger


def test_from_user_is_sticky() -> None:
    ledger = Ledger().add([("a.py", "path")], from_user=True).add([("a.py", "path")])
    assert ledger.entries == (LedgerEntry("a.py", "path", True),)


def test_eviction_drops_oldest_non_user_entries_first_then_oldest_user_entries() -> None:
    ledger = Ledger(max_entries=3)
    ledger = ledger.add([("u1", "name")], from_user=True)
    ledger = ledger.add([("a1", "name"), ("a2", "name")])
    ledger = ledger.add([("u2", "name")], from_user=True)
    assert ledger.values == ("u1", "a2", "u2")  # a1: oldest assistant-only entry
    ledger = ledger.add([("u3", "name")], from_user=True)
    assert ledger.values == ("u1", "u2", "u3")  # a2 goes before any user entry
    ledger = ledger.add([("u4", "name")], from_user=True)
    assert ledger.values == ("u2", "u3", "u4")  # all from the user: the oldest goes


def test_merge_counts_the_newer_ledger_as_more_recent() -> None:
    old = Ledger().add([("x", "name")], from_user=True).add([("y", "name")])
    new = Ledger().add([("x", "name"), ("z", "name")])
    merged = old.merge(new)
    assert merged.values == ("y", "x", "z")
    assert next(e for e in merged if e.value == "x").from_user


def test_fit_respects_the_budget_and_the_eviction_order() -> None:
    counter = HeuristicCounter()
    ledger = Ledger().add([(f"src/module_{i}.py", "path") for i in range(40)])
    ledger = ledger.add([("keep_me_from_user", "name")], from_user=True)
    fitted = ledger.fit(counter, 60)
    assert counter.count_text(fitted.render()) <= 60
    assert 0 < len(fitted) < len(ledger)
    assert "keep_me_from_user" in fitted
    assert fitted.values[-2] == "src/module_39.py"  # the newest non-user entries survive
    assert ledger.fit(counter, 0).render() == ""


def test_render_is_compact_and_localised() -> None:
    ledger = Ledger().add([("src/a.ts", "path"), ("ECONNREFUSED", "error"), ("src/b.ts", "path")])
    assert ledger.render() == "Identifiers (verbatim):\n- paths: src/a.ts, src/b.ts\n- errors: ECONNREFUSED"
    assert "- 路径：src/a.ts, src/b.ts" in ledger.render("zh")
    assert Ledger().render() == ""


def test_a_session_header_is_no_identifier_but_a_date_said_in_a_sentence_is() -> None:
    """A session's date is every fact's date under it; alone in the ledger it is a date with no fact
    (measured: 55 of the 148 answers the MADial dev set "kept" were header dates listed bare)."""
    messages = [
        user("[Session 3 · 2023-05-08]\nThe release train leaves on 2026-12-03."),
        assistant("DATE: 10:15 am on 14 March, 2024\nNoted."),
        user("[第4次会话 · 2023年5月9日]\n部署在2026-12-04。"),
    ]
    assert build_ledger(messages).values == ("2026-12-03", "2026-12-04")


def test_build_ledger_reads_tool_call_arguments_and_marks_user_entries() -> None:
    messages = [
        user("fix src/auth.ts"),
        assistant(
            tool_calls=[
                tool_call("call_1", "edit_file", {"path": "/srv/.env", "text": "A=1\nURL=redis://c:6379/2"})
            ]
        ),
        tool_result("call_1", "ok: wrote /srv/.env"),
    ]
    ledger = build_ledger(messages)
    assert {"src/auth.ts", "/srv/.env", "redis://c:6379/2", "edit_file"} <= set(ledger.values)
    assert "call_1" not in ledger  # tool-call ids name a message pair, not a thing
    assert next(e for e in ledger if e.value == "src/auth.ts").from_user
    previous = Ledger().add([("OLD_FLAG", "name")])
    assert build_ledger(messages, previous).values[0] == "OLD_FLAG"


_chunks = st.sampled_from(
    [
        "src/auth.ts",
        " ",
        "\n",
        "你好",
        "ECONNREFUSED",
        "v1.2.3",
        "`x_y`",
        "https://a.io/p",
        "password=",
        "sk-",
    ]
)


@given(st.lists(_chunks | st.text(max_size=30), max_size=20).map("".join))
def test_every_identifier_is_verbatim_text_of_the_redacted_input(text: str) -> None:
    redacted = redact_secrets(text)
    for value, _ in extract_identifiers(text):
        assert value in redacted
        assert value.strip() == value and value


@given(st.lists(st.tuples(st.text(min_size=1, max_size=5), st.booleans()), max_size=60), st.integers(1, 10))
def test_ledger_never_exceeds_its_bound(items: list[tuple[str, bool]], bound: int) -> None:
    ledger = Ledger(max_entries=bound)
    for value, from_user in items:
        ledger = ledger.add([(value, "name")], from_user=from_user)
    assert len(ledger) <= bound
    assert len(set(ledger.values)) == len(ledger)


@pytest.mark.parametrize("unit", ["a.", "1.", "a-", "A.", "a+"])
@pytest.mark.parametrize("tail", ["://x", "@b.io", "()", ".com"])
def test_a_long_run_of_one_shape_is_read_once_not_once_per_character(unit: str, tail: str) -> None:
    """An attack: 100k characters of "a.a.a.…" (no space) made the URL, e-mail, host and dotted-call
    patterns scan the rest of the run from every letter — 10 s for 32k characters, quadratic. Their
    repeated parts are bounded now (a scheme ≤ 32 characters, an e-mail's local part ≤ 64, a host ≤ 10
    labels of ≤ 63, a call ≤ 9 dotted names), so this test takes a fraction of a second; it has no
    timer, but before the fix it ran for minutes."""
    text = unit * 50_000 + tail
    found = extract_identifiers(text)
    assert all(len(value) <= 200 for value, _ in found)  # MAX_IDENTIFIER_CHARS: nothing unbounded


def test_the_bounds_still_take_real_identifiers_whole() -> None:
    assert kinds("db at pg-1.eu-west-1.billing.internal:5433") == {
        "pg-1.eu-west-1.billing.internal:5433": "host"
    }
    assert kinds("mail " + "x" * 64 + "@corp.io")["x" * 64 + "@corp.io"] == "email"
    assert kinds("call app.services.billing.retry() now") == {"app.services.billing.retry()": "name"}
