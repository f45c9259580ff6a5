"""The summariser (C8): LLM path, validation and retry, extractive fallback, size bound, secrets."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextmem.errors import ConfigError, LLMError, TransientLLMError
from contextmem.formats.openai import messages_from_openai
from contextmem.messages import (
    Message,
    SystemMessage,
    UserMessage,
    assistant,
    text_of,
    tool_call,
    tool_result,
    user,
)
from contextmem.summarize import (
    Ledger,
    Summarizer,
    Summary,
    detect_language,
    merge_archive_refs,
    parse_sections,
    render_transcript,
    summary_prompt,
)
from contextmem.summarize.prompts import SECTION_KEYS, summary_template
from contextmem.testing import Reply, ScriptedLLM
from contextmem.tokens import HeuristicCounter, MessageCounter, get_counter

from .strategies import histories

DATA = Path(__file__).parent / "data" / "conversations"
COUNTER = MessageCounter(get_counter("auto"))
EN_HEADERS = ["Goal", "Constraints", "Progress", "Key decisions", "Next steps", "Critical context"]
ZH_HEADERS = ["目标", "约束", "进展", "关键决策", "下一步", "关键上下文"]

# Identifiers a person would need to resume each sample, checked verbatim in render().
KEY_IDENTIFIERS = {
    "en_deploy_debug": [
        "https://staging.shopfront.io/checkout",
        "HTTP 502",
        "v2.3.1",
        "/etc/nginx/sites-enabled/prod.conf",
        "/srv/cart/.env",
        "KeyError",
        "9f3c2ab",
        "redis://cache.internal:6379/2",
        "ops@shopfront.io",
        "docs/deploy/checklist.md",
    ],
    "zh_auth_refactor": [
        "src/auth.ts",
        "src/middleware/session.ts",
        "/api/v1/login",
        "RS256",
        "docs/auth.md",
    ],
    "en_pipeline_secrets": [
        "OOMKilled",
        "16GB",
        "7d9f8e2a-41b3-4c5e-9a1f-0b2c3d4e5f60",
        r"C:\Users\dana\work\etl",
        "pipeline/run_nightly.py",
        "load_orders_frame()",
        "4be81f0c",
        "ValueError",
    ],
    "zh_ops_incident": ["ECONNREFUSED", "10.0.3.17:6379", "INC-4521", "/etc/pgbouncer/pgbouncer.ini", "800"],
}
SECRETS = [
    "sk-proj-Zx81kQm2Lw9Pq7Rt5Vy3Nb6Hc4Jd0Fg",
    "AKIAIOSFODNN7EXAMPLE",
    "Tr0ub4dor&3",
    "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "Qw3rty!2026",
]

EN_SUMMARY = """## Goal
- Fix the staging checkout outage.
## Constraints
- Do not restart the production database.
## Progress
- The cart service runs again.
## Key decisions
- Restore the missing setting instead of hard-coding a default.
## Next steps
- Update the deploy checklist.
## Critical context
- The crash was a missing environment variable."""

ZH_SUMMARY = """## 目标
- 把登录从 Session 改为 JWT。
## 约束
- 不改数据库表。
## 进展
- 测试全部通过。
## 关键决策
- 使用 RS256 签名。
## 下一步
- 修改中间件。
## 关键上下文
- 私钥不入库。"""

PREVIOUS = Summary(
    "## Goal\n- Migrate billing to the Stripe API version 2023-10-16.\n"
    "## Constraints\n- Never charge a customer twice.\n## Progress\n- Webhook handler written.\n"
    "## Key decisions\n- Idempotency keys on every charge.\n## Next steps\n- Backfill invoices.\n"
    "## Critical context\n- Webhook secret rotates monthly.",
    Ledger().add([("billing/stripe_client.py", "path")], from_user=True),
    ("dialog/2026-11-21.jsonl lines 1-40",),
    "llm",
    40,
)
PREVIOUS_FACTS = [
    "Migrate billing to the Stripe API",
    "Never charge a customer twice",
    "billing/stripe_client.py",
]


def load(name: str) -> list[Message]:
    lines = (DATA / f"{name}.jsonl").read_text(encoding="utf-8").splitlines()
    return messages_from_openai(json.loads(line) for line in lines if line.strip())


SAMPLES = sorted(p.stem for p in DATA.glob("*.jsonl"))


def sent_text(llm: ScriptedLLM) -> str:
    return "\n".join(text_of(m.content) for request in llm.requests for m in request)


def test_samples_are_valid_and_cover_both_languages() -> None:
    assert len(SAMPLES) >= 3
    assert {detect_language(load(name)) for name in SAMPLES} == {"en", "zh"}
    assert set(KEY_IDENTIFIERS) == set(SAMPLES)


# --- the model path -----------------------------------------------------------------------------


async def test_model_summary_is_used_with_the_deterministic_ledger() -> None:
    messages = load("en_deploy_debug")
    llm = ScriptedLLM.of(EN_SUMMARY)
    summary = await Summarizer(llm, COUNTER).summarize(
        None, messages, archive_refs=["dialog/2026-11-22.jsonl lines 1-11"]
    )
    assert summary.source == "llm" and summary.fallback_reason is None
    assert summary.text == EN_SUMMARY
    assert summary.messages_covered == len(messages)
    rendered = summary.render()
    for value in KEY_IDENTIFIERS["en_deploy_debug"]:  # the model paraphrased them all away
        assert value not in EN_SUMMARY
        assert value in rendered
    assert "dialog/2026-11-22.jsonl lines 1-11" in rendered and "read_file(path)" in rendered
    prompt = llm.requests[0][-1]
    assert "→ read_file(" in text_of(prompt.content)
    assert "user: Our staging site" in text_of(prompt.content)


@pytest.mark.parametrize("name", SAMPLES)
@pytest.mark.parametrize("model", ["llm", "failing"])
async def test_every_identifier_survives_in_render(name: str, model: str) -> None:
    llm = ScriptedLLM.of(EN_SUMMARY if model == "llm" else LLMError("down"))
    summary = await Summarizer(llm, COUNTER).summarize(None, load(name))
    rendered = summary.render()
    assert summary.ledger.values
    for value in summary.ledger.values:
        assert value in rendered
    for value in KEY_IDENTIFIERS[name]:
        assert value in rendered, value
    assert COUNTER.count_text(rendered) <= 2000


async def test_incremental_prompt_carries_previous_summary_new_messages_and_instruction() -> None:
    llm = ScriptedLLM.of(EN_SUMMARY)
    await Summarizer(llm, COUNTER).summarize(
        PREVIOUS, load("en_deploy_debug"), instruction="keep requirements and decisions only"
    )
    system, prompt = llm.requests[0]
    body = text_of(prompt.content)
    assert "Never charge a customer twice" in body  # previous summary
    assert "Our staging site" in body  # new messages
    assert body.index("Current summary") < body.index("New part") < body.index("keep requirements")
    assert body.index("keep requirements") < body.index("Fill in this template")
    for header in EN_HEADERS:
        assert f"## {header}" in body
    rules = text_of(system.content)
    assert system.kind == "system" and "never talk to the user" in rules
    assert "character for character" in rules and "Fold the new part" in rules


def test_prompt_puts_rules_in_system_and_ends_the_user_message_with_the_template() -> None:
    for lang, headers in (("en", EN_HEADERS), ("zh", ZH_HEADERS)):
        system, prompt = summary_prompt(None, "user: hi", lang=lang, budget=321)
        rules, body = text_of(system.content), text_of(prompt.content)
        assert isinstance(system, SystemMessage) and isinstance(prompt, UserMessage)
        assert "321" in rules and "user: hi" not in rules
        assert body.endswith(summary_template(lang))
        template = summary_template(lang)
        assert [line.removeprefix("## ") for line in template.splitlines()[::2]] == headers
        assert all(line.startswith("- ...") for line in template.splitlines()[1::2])
        # no ready-made answer for a small model to copy
        assert "(none)" not in rules + body and "（无）" not in rules + body
    _, body = summary_prompt("## Goal\n- old goal", "user: hi", lang="en", budget=100)
    # the previous summary goes in as a flat list of facts, not as a template filled in already
    assert text_of(body.content).startswith("Current summary:\n- Goal: old goal\n\nNew part")


async def test_incremental_summary_accumulates_coverage_refs_and_ledger() -> None:
    llm = ScriptedLLM.of(EN_SUMMARY, ZH_SUMMARY)
    summarizer = Summarizer(llm, COUNTER)
    first = await summarizer.summarize(
        None, load("en_deploy_debug"), archive_refs=["dialog/d.jsonl lines 1-11"]
    )
    second = await summarizer.summarize(
        first, load("en_pipeline_secrets"), archive_refs=["dialog/d.jsonl lines 12-18"]
    )
    assert second.messages_covered == first.messages_covered + len(load("en_pipeline_secrets"))
    assert second.archive_refs == ("dialog/d.jsonl lines 1-18",)
    assert "/srv/cart/.env" in second.ledger and "OOMKilled" in second.ledger
    assert "- Key decisions: Restore the missing setting" in text_of(llm.requests[1][-1].content)
    assert second.text == ZH_SUMMARY and len(llm.requests) == 2


async def test_a_reply_repeating_the_previous_summary_is_retried_on_the_new_part_and_merged() -> None:
    new_part = EN_SUMMARY.replace("Fix the staging checkout outage.", "Add REDIS_URL to the checklist.")
    llm = ScriptedLLM.of(PREVIOUS.text, new_part)
    summary = await Summarizer(llm, COUNTER).summarize(PREVIOUS, load("en_deploy_debug"))
    assert len(llm.requests) == 2
    first, retry = (text_of(request[-1].content) for request in llm.requests)
    assert "Never charge a customer twice" in first
    assert "Never charge a customer twice" not in retry and "Our staging site" in retry
    assert summary.source == "llm"
    _, sections = parse_sections(summary.text)
    assert sections["goal"] == (
        "- Migrate billing to the Stripe API version 2023-10-16.\n- Add REDIS_URL to the checklist."
    )
    assert sections["constraints"].startswith("- Never charge a customer twice.\n- Do not restart")
    assert_previous_kept(summary)


async def test_a_merge_over_budget_is_recompressed_once() -> None:
    llm = ScriptedLLM.of(PREVIOUS.text, huge_summary(), EN_SUMMARY)
    summary = await Summarizer(llm, COUNTER, max_tokens=600).summarize(PREVIOUS, load("en_deploy_debug"))
    assert len(llm.requests) == 3
    assert "too long" in text_of(llm.requests[2][-1].content)
    assert summary.source == "llm" and summary.text == EN_SUMMARY


async def test_a_repeated_summary_then_junk_falls_back() -> None:
    llm = ScriptedLLM.of(PREVIOUS.text, "Sure!", EN_SUMMARY)
    summary = await Summarizer(llm, COUNTER).summarize(PREVIOUS, load("en_deploy_debug"))
    assert len(llm.requests) == 2 and summary.source == "extractive"
    assert_previous_kept(summary)


async def test_no_new_messages_means_no_model_call() -> None:
    llm = ScriptedLLM()
    summary = await Summarizer(llm, COUNTER).summarize(PREVIOUS, [])
    assert llm.requests == []
    assert summary.text == PREVIOUS.text and summary.messages_covered == 40


# --- validation, retry and fallback -------------------------------------------------------------


def assert_previous_kept(summary: Summary) -> None:
    rendered = summary.render()
    for fact in PREVIOUS_FACTS:
        assert fact in rendered, fact
    assert "dialog/2026-11-21.jsonl lines 1-40" in rendered


async def test_failing_model_falls_back_and_keeps_the_previous_summary() -> None:
    llm = ScriptedLLM.of(TransientLLMError("503 from provider", status=503))
    summary = await Summarizer(llm, COUNTER).summarize(PREVIOUS, load("en_deploy_debug"))
    assert summary.source == "extractive"
    assert "TransientLLMError" in (summary.fallback_reason or "")
    assert len(llm.requests) == 1  # errors are not retried here; the adapter has its own policy
    assert_previous_kept(summary)
    _, sections = parse_sections(summary.text)
    assert list(sections) == ["goal", "constraints", "progress", "decisions", "next", "context"]
    assert "Our staging site" in sections["goal"]
    assert "must not restart the production database" in sections["constraints"]
    assert "Fixed: cart-api is running again" in sections["progress"]
    assert "decided to restore the variable" in sections["decisions"]
    assert "Next step: add REDIS_URL" in sections["next"]
    assert "KeyError: 'REDIS_URL'" in sections["context"]


async def test_hanging_model_times_out_and_falls_back() -> None:
    llm = ScriptedLLM.of(Reply(EN_SUMMARY, delay=5.0))
    loop = asyncio.get_running_loop()
    started = loop.time()
    summary = await Summarizer(llm, COUNTER, timeout=0.05).summarize(PREVIOUS, load("en_deploy_debug"))
    assert loop.time() - started < 2.0
    assert summary.source == "extractive"
    assert "timed out" in (summary.fallback_reason or "")
    assert_previous_kept(summary)


JUNK = {
    "empty": "",
    "whitespace": "   \n ",
    "chatty only": "Sure! Here is the summary:",
    "greeting": "Hello! How can I help you today?",
    "chinese chatty": "好的，以下是摘要：",
    "missing sections": "## Goal\n- Fix it.\n## Progress\n- Done.",
    "three sections": "## Goal\n- Fix it.\n## Progress\n- Done.\n## Next steps\n- Ship.",
    "bare none": "- (none)",
    "template echo": summary_template("en"),
    "template echo zh": summary_template("zh"),
    "all none": "\n".join(f"## {h}\n- (none)" for h in EN_HEADERS),
    "all dots": "\n".join(f"## {h}\n- ..." for h in ZH_HEADERS),
}


@pytest.mark.parametrize("junk", JUNK.values(), ids=list(JUNK))
async def test_junk_twice_falls_back_after_one_retry(junk: str) -> None:
    llm = ScriptedLLM.of(junk, junk)
    summary = await Summarizer(llm, COUNTER).summarize(PREVIOUS, load("en_deploy_debug"))
    assert len(llm.requests) == 2
    assert llm.requests[0] == llm.requests[1]  # the same prompt again
    assert summary.source == "extractive"
    assert summary.fallback_reason
    assert_previous_kept(summary)


FIVE_SECTIONS = EN_SUMMARY[: EN_SUMMARY.index("## Critical context")].strip()


@pytest.mark.parametrize("dropped", [[], ["context"], ["constraints", "context"], ["goal", "decisions"]])
async def test_four_or_more_sections_are_accepted_and_the_missing_say_none(dropped: list[str]) -> None:
    _, sections = parse_sections(EN_SUMMARY)
    reply = "\n".join(
        f"## {title}\n{sections[key]}"
        for key, title in zip(SECTION_KEYS, EN_HEADERS, strict=True)
        if key not in dropped
    )
    summary = await Summarizer(ScriptedLLM.of(reply), COUNTER).summarize(None, load("en_deploy_debug"))
    assert summary.source == "llm"
    _, got = parse_sections(summary.text)
    assert list(got) == list(SECTION_KEYS)  # every header, in order
    for key in SECTION_KEYS:
        assert got[key] == ("- (none)" if key in dropped else sections[key])
    if not dropped:
        assert summary.text == EN_SUMMARY  # a complete reply is kept as written


async def test_a_partly_filled_template_keeps_content_and_drops_placeholders() -> None:
    reply = (
        "## 目标\n- 把登录改为 JWT。\n## 约束\n- ...（要求、限制和禁止做的事）\n## 进展\n- 测试通过。\n"
        "## 关键决策\n- 使用 RS256。\n## 下一步\n- ...\n"
    )
    summary = await Summarizer(ScriptedLLM.of(reply), COUNTER).summarize(None, load("zh_auth_refactor"))
    assert summary.source == "llm"
    assert "..." not in summary.text and "要求、限制" not in summary.text
    _, got = parse_sections(summary.text)
    assert got == {
        "goal": "- 把登录改为 JWT。",
        "constraints": "- （无）",
        "progress": "- 测试通过。",
        "decisions": "- 使用 RS256。",
        "next": "- （无）",
        "context": "- （无）",
    }
    for header in ZH_HEADERS:
        assert f"## {header}\n" in summary.text


async def test_missing_sections_follow_the_reply_language() -> None:
    # English headers for a Chinese conversation are accepted; the filled-in headers match them
    summary = await Summarizer(ScriptedLLM.of(FIVE_SECTIONS), COUNTER).summarize(
        None, load("zh_ops_incident")
    )
    assert summary.source == "llm" and summary.lang == "zh"
    assert summary.text.endswith("## Critical context\n- (none)")


async def test_retry_once_then_valid_uses_the_model() -> None:
    llm = ScriptedLLM.of("Sure! Here is the summary:", EN_SUMMARY)
    summary = await Summarizer(llm, COUNTER).summarize(PREVIOUS, load("en_deploy_debug"))
    assert len(llm.requests) == 2
    assert summary.source == "llm" and summary.text == EN_SUMMARY


async def test_chatty_wrapping_around_a_valid_summary_is_stripped() -> None:
    reply = f"Sure! Here is the updated summary:\n\n```markdown\n{EN_SUMMARY}\n```"
    llm = ScriptedLLM.of(f"Sure! Here is the updated summary:\n{EN_SUMMARY}\nLet me know if you need more.")
    summary = await Summarizer(llm, COUNTER).summarize(None, load("en_deploy_debug"))
    assert summary.source == "llm" and summary.text == EN_SUMMARY
    fenced = await Summarizer(ScriptedLLM.of(reply), COUNTER).summarize(None, load("en_deploy_debug"))
    assert fenced.source == "llm" and fenced.text == EN_SUMMARY
    bare_fence = await Summarizer(ScriptedLLM.of(f"```\n{EN_SUMMARY}\n```"), COUNTER).summarize(
        None, load("en_deploy_debug")
    )
    assert bare_fence.source == "llm" and bare_fence.text == EN_SUMMARY


def huge_summary(n: int = 400) -> str:
    return EN_SUMMARY.replace(
        "- The cart service runs again.", "\n".join(f"- step {i} done" for i in range(n))
    )


async def test_over_budget_reply_is_recompressed_once() -> None:
    llm = ScriptedLLM.of(huge_summary(), EN_SUMMARY)
    summary = await Summarizer(llm, COUNTER, max_tokens=600).summarize(None, load("en_deploy_debug"))
    assert len(llm.requests) == 2
    system, prompt = llm.requests[1]
    recompress = text_of(prompt.content)
    assert "too long" in recompress and "step 399 done" in recompress
    assert recompress.endswith(summary_template("en"))
    assert "{" not in text_of(system.content) and "never talk to the user" in text_of(system.content)
    assert summary.source == "llm" and summary.text == EN_SUMMARY


async def test_over_budget_twice_keeps_the_models_words_trimmed_to_budget() -> None:
    llm = ScriptedLLM.of(huge_summary(), huge_summary())
    summary = await Summarizer(llm, COUNTER, max_tokens=600).summarize(PREVIOUS, load("en_deploy_debug"))
    assert summary.source == "llm" and len(llm.requests) == 2
    assert COUNTER.count_text(summary.render()) <= 600


# --- language -----------------------------------------------------------------------------------


async def test_chinese_conversation_gets_chinese_prompt_and_headers() -> None:
    messages = load("zh_auth_refactor")
    llm = ScriptedLLM.of(ZH_SUMMARY)
    summary = await Summarizer(llm, COUNTER).summarize(None, messages)
    system, prompt = llm.requests[0]
    body = text_of(prompt.content)
    assert "请逐步总结" in text_of(system.content) and "逐字照抄" in text_of(system.content)
    assert body.startswith("当前摘要：") and body.endswith(summary_template("zh"))
    for header in ZH_HEADERS:
        assert f"## {header}" in body
    assert summary.source == "llm" and summary.lang == "zh"
    assert summary.render().startswith("早期对话摘要")
    assert "关键标识（原样保留）" in summary.render()

    fallback = await Summarizer(ScriptedLLM.of(LLMError("x")), COUNTER).summarize(None, messages)
    _, sections = parse_sections(fallback.text)
    assert len(sections) == 6
    for header in ZH_HEADERS:
        assert f"## {header}\n" in fallback.text
    assert "不要改动数据库表 users" in sections["constraints"]
    assert "我决定使用 jsonwebtoken 库" in sections["decisions"]
    assert "接下来需要修改" in sections["next"]


async def test_english_headers_are_accepted_for_a_chinese_conversation() -> None:
    summary = await Summarizer(ScriptedLLM.of(EN_SUMMARY), COUNTER).summarize(None, load("zh_ops_incident"))
    assert summary.source == "llm"


def test_detect_language_by_share_of_cjk() -> None:
    assert detect_language([user("请修改src/auth.ts里的login函数")]) == "zh"
    assert detect_language([user("please fix src/auth.ts, see 文档")]) == "en"
    # tool output (English logs) does not decide the language of the conversation
    zh_with_logs = [
        user("看看日志"),
        assistant(tool_calls=[tool_call("c1", "shell")]),
        tool_result("c1", "x" * 500),
    ]
    assert detect_language(zh_with_logs) == "zh"
    assert detect_language([], previous="## 目标\n- 修复") == "zh"
    assert detect_language([]) == "en"


# --- secrets ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["en_pipeline_secrets", "zh_ops_incident"])
async def test_secrets_never_reach_the_model_the_ledger_or_the_summary(name: str) -> None:
    messages = load(name)
    raw = json.dumps([text_of(m.content) for m in messages], ensure_ascii=False) + str(messages)
    present = [s for s in SECRETS if s in raw]
    assert present  # the sample really contains secrets
    leaky = EN_SUMMARY.replace("- The crash was", f"- Key {present[0]} and password=hunter22. The crash was")
    llm = ScriptedLLM.of(leaky)
    with_model = await Summarizer(llm, COUNTER).summarize(None, messages)
    without = await Summarizer(ScriptedLLM.of(LLMError("x")), COUNTER).summarize(None, messages)
    for summary in (with_model, without):
        for secret in [*present, "hunter22"]:
            assert secret not in summary.render()
            assert all(secret not in v for v in summary.ledger.values)
    for secret in present:
        assert secret not in sent_text(llm)
    assert with_model.source == "llm"


# --- bounds -------------------------------------------------------------------------------------


@pytest.mark.parametrize("max_tokens", [64, 120, 400])
@pytest.mark.parametrize("name", SAMPLES)
async def test_render_fits_small_budgets(name: str, max_tokens: int) -> None:
    llm = ScriptedLLM.of(LLMError("x"))
    summary = await Summarizer(llm, COUNTER, max_tokens=max_tokens).summarize(PREVIOUS, load(name))
    assert COUNTER.count_text(summary.render()) <= max_tokens


HEURISTIC = MessageCounter(HeuristicCounter())


# The bound is enforced by a final check-and-shrink loop, not planned, so a thousand histories exercise
# it well; the CI profile's 10,000 would spend ten minutes here for no more coverage.
@settings(max_examples=min(settings.default.max_examples, 1000))
@given(
    history=histories(max_turns=8),
    max_tokens=st.integers(64, 3000),
    model=st.sampled_from(["error", "junk", "huge", "valid"]),
    previous_size=st.integers(0, 300),
)
def test_render_is_within_budget_for_any_history(
    history: list[Message], max_tokens: int, model: str, previous_size: int
) -> None:
    reply = {"error": LLMError("x"), "junk": "Sure!", "huge": huge_summary(600), "valid": EN_SUMMARY}[model]
    previous = Summary(
        "## Goal\n" + "\n".join(f"- fact {i} about src/mod_{i}.py" for i in range(previous_size)),
        Ledger().add([(f"src/mod_{i}.py", "path") for i in range(previous_size)]),
        tuple(f"dialog/2026-11-{i % 28 + 1:02d}.jsonl lines {i}-{i + 5}" for i in range(previous_size // 10)),
    )
    summarizer = Summarizer(ScriptedLLM(default=reply), HEURISTIC, max_tokens=max_tokens)
    summary = asyncio.run(summarizer.summarize(previous, history, archive_refs=["dialog/x.jsonl lines 1-9"]))
    assert HEURISTIC.count_text(summary.render()) <= max_tokens
    for value in summary.ledger.values:
        assert value in summary.render()


# --- pieces -------------------------------------------------------------------------------------


def test_transcript_renders_roles_tool_calls_and_cuts_tool_results_head_and_tail() -> None:
    log = "HEAD-LINE\n" + "noise\n" * 3000 + "TAIL-LINE"
    text = render_transcript(
        [
            user("run it"),
            assistant("ok", tool_calls=[tool_call("c1", "shell", {"cmd": "make test"})]),
            tool_result("c1", log, name="shell"),
        ],
        tool_result_chars=600,
    )
    assert "user: run it" in text and "assistant: ok" in text
    assert 'assistant: → shell({"cmd": "make test"})' in text
    assert "HEAD-LINE" in text and "TAIL-LINE" in text and "chars omitted" in text
    assert len(text) < 1000


def test_archive_refs_merge_spans_of_one_file() -> None:
    merged = merge_archive_refs(
        ["dialog/a.jsonl lines 1-10", "tool_results/c1.txt"],
        ["dialog/a.jsonl lines 11-30", "dialog/b.jsonl lines 1-2"],
    )
    assert merged == ("dialog/a.jsonl lines 1-30", "tool_results/c1.txt", "dialog/b.jsonl lines 1-2")


def test_extract_needs_no_model() -> None:
    summary = Summarizer(ScriptedLLM(), COUNTER).extract(PREVIOUS, load("zh_ops_incident"))
    assert summary.source == "extractive" and summary.lang == "zh"
    assert "/etc/pgbouncer/pgbouncer.ini" in summary.render()


def test_settings_are_validated() -> None:
    with pytest.raises(ConfigError, match="too small"):
        Summarizer(ScriptedLLM(), COUNTER, max_tokens=10)
    with pytest.raises(ConfigError, match="timeout"):
        Summarizer(ScriptedLLM(), COUNTER, timeout=0)
    with pytest.raises(ConfigError, match="ledger_share"):
        Summarizer(ScriptedLLM(), COUNTER, ledger_share=0.8, archive_share=0.3)


async def test_a_reply_slightly_over_budget_is_kept_and_trimmed_not_retried() -> None:
    counter = MessageCounter(get_counter())
    messages: list[Message] = [user("Move billing to PostgreSQL 16"), assistant("Planned for Monday.")]
    probe = Summarizer(ScriptedLLM(), counter, max_tokens=400)
    budget = probe._frame(None, messages, ()).text_budget
    filler = " ".join(f"step{i}" for i in range(400))
    body = "\n".join(
        f"## {t}\n- PostgreSQL 16 cutover on Monday" for t in ("Goal", "Constraints", "Progress")
    )
    body += "\n## Key decisions\n- Use pgloader\n## Next steps\n- Rehearse\n## Critical context\n- " + filler
    words = body.split(" ")
    while counter.count_text(" ".join(words)) > budget * 1.15:  # about 15% over budget
        words.pop()
    reply = " ".join(words)
    assert budget < counter.count_text(reply) <= budget * 1.25
    llm = ScriptedLLM.of(reply)
    summary = await Summarizer(llm, counter, max_tokens=400).summarize(None, messages)
    assert summary.source == "llm" and len(llm.requests) == 1  # no second call to re-compress
    assert counter.count_text(summary.render()) <= 400
