"""The summariser (C8): the model corrects the extractive draft; validation, fallback, size bound, secrets."""

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
from contextmem.summarize.prompts import (
    SECTION_KEYS,
    SECTION_TITLES,
    summary_template,
    unflatten,
    without_labels,
)
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


def correcting(
    messages: list[Message], reply: str, previous: Summary | None = None, *, max_tokens: int = 2000
) -> str:
    """What a model that corrects its draft writes: ``reply``'s items, then the draft's, section by
    section, under ``reply``'s headers."""
    draft = Summarizer(ScriptedLLM(), COUNTER, max_tokens=max_tokens).extract(previous, messages).text
    _, mine = parse_sections(reply)
    _, theirs = parse_sections(draft)
    headers = ZH_HEADERS if "## 目标" in reply else EN_HEADERS
    return "\n".join(
        f"## {title}\n{mine.get(key, '')}\n{theirs.get(key, '')}".rstrip()
        for key, title in zip(SECTION_KEYS, headers, strict=True)
        if key in mine
    )


def test_samples_are_valid_and_cover_both_languages() -> None:
    assert len(SAMPLES) >= 3
    assert {detect_language(load(name)) for name in SAMPLES} == {"en", "zh"}
    assert set(KEY_IDENTIFIERS) == set(SAMPLES)


# --- the model path -----------------------------------------------------------------------------


async def test_model_summary_is_used_with_the_deterministic_ledger() -> None:
    messages = load("en_deploy_debug")
    llm = ScriptedLLM.of(correcting(messages, EN_SUMMARY))
    summary = await Summarizer(llm, COUNTER).summarize(
        None, messages, archive_refs=["dialog/2026-11-22.jsonl lines 1-11"]
    )
    assert summary.source == "llm" and summary.fallback_reason is None
    _, written = parse_sections(EN_SUMMARY)
    _, got = parse_sections(summary.text)
    for key, body in written.items():  # the model's words, each in its section
        assert body in got[key]
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


async def test_the_prompt_holds_only_the_new_messages_the_ledger_and_the_draft() -> None:
    messages = load("en_deploy_debug")
    llm = ScriptedLLM.of(EN_SUMMARY)
    summarizer = Summarizer(llm, COUNTER)
    await summarizer.summarize(PREVIOUS, messages, instruction="keep requirements and decisions only")
    draft = summarizer.extract(PREVIOUS, messages)
    system, prompt = llm.requests[0]
    new, ledger, facts, extra, fill = text_of(prompt.content).split("\n\n", 4)
    assert new == "New part of the conversation:\n" + render_transcript(messages)
    assert ledger.startswith("Identifiers recorded so far") and ledger.endswith(draft.ledger.render("en"))
    assert "billing/stripe_client.py" in ledger  # the previous ledger's identifiers, merged
    # the draft — previous summary + new messages, extractively — as a flat list of facts
    assert facts.startswith("Draft of the new memory")
    assert "- Constraints: Never charge a customer twice." in facts
    assert "- Critical context: shell → KeyError: 'REDIS_URL'" in facts
    bullets = facts.splitlines()[1:]  # to reshape, the draft in half the budget: its most salient facts
    assert 0 < len(bullets) <= sum(1 for line in draft.text.splitlines() if line.startswith("- "))
    assert all(bullet.split(": ", 1)[1] in draft.text for bullet in bullets)
    assert extra.endswith("keep requirements and decisions only")
    assert fill.startswith("Now write the corrected memory") and fill.endswith(summary_template("en"))
    # the previous summary's text is not sent, in its template shape or otherwise
    assert PREVIOUS.text not in text_of(prompt.content)
    assert "## Goal\n- Migrate billing" not in text_of(prompt.content)
    rules = text_of(system.content)
    assert system.kind == "system" and "never talk to the user" in rules
    assert "character for character" in rules and "Correct the draft" in rules


def test_prompt_puts_rules_in_system_and_ends_the_user_message_with_the_template() -> None:
    for lang, headers in (("en", EN_HEADERS), ("zh", ZH_HEADERS)):
        system, prompt = summary_prompt("", "user: hi", lang=lang, budget=321)
        rules, body = text_of(system.content), text_of(prompt.content)
        assert isinstance(system, SystemMessage) and isinstance(prompt, UserMessage)
        assert "321" in rules and "user: hi" not in rules
        assert body.endswith(summary_template(lang))
        template = summary_template(lang)
        assert [line.removeprefix("## ") for line in template.splitlines()[::2]] == headers
        assert all(line.startswith("- ...") for line in template.splitlines()[1::2])
        # no ready-made answer for a small model to copy
        assert "(none)" not in rules + body and "（无）" not in rules + body
    _, body = summary_prompt("## Goal\n- old goal\n## Progress\n- (none)", "user: hi", lang="en", budget=100)
    # the draft goes in as a flat list of facts, not as a template filled in already
    assert "Draft of the new memory (one fact a line, with its section):\n- Goal: old goal\n\n" in text_of(
        body.content
    )


async def test_incremental_summary_accumulates_coverage_refs_and_ledger() -> None:
    deploy, pipeline = load("en_deploy_debug"), load("en_pipeline_secrets")
    first = await Summarizer(ScriptedLLM.of(correcting(deploy, EN_SUMMARY)), COUNTER).summarize(
        None, deploy, archive_refs=["dialog/d.jsonl lines 1-11"]
    )
    mine = (
        "## Goal\n- Stop the nightly ETL job dying with OOMKilled.\n## Constraints\n- Keep orders_daily's "
        "schema.\n## Progress\n- Chunked loading in pipeline/extract.py.\n## Key decisions\n- Chunked "
        "reads.\n## Next steps\n- Backfill two days.\n## Critical context\n- Peak memory near 2GB."
    )
    llm = ScriptedLLM.of(correcting(pipeline, mine, first))
    second = await Summarizer(llm, COUNTER).summarize(
        first, pipeline, archive_refs=["dialog/d.jsonl lines 12-18"]
    )
    assert second.messages_covered == first.messages_covered + len(pipeline)
    assert second.archive_refs == ("dialog/d.jsonl lines 1-18",)
    assert "/srv/cart/.env" in second.ledger and "OOMKilled" in second.ledger
    # the first summary reaches the second call through the draft
    assert "- Key decisions: Restore the missing setting" in text_of(llm.requests[0][-1].content)
    assert "Stop the nightly ETL job" in second.text and second.source == "llm"


async def test_a_reply_copying_the_previous_summary_is_not_accepted() -> None:
    messages = load("en_deploy_debug")
    summarizer = Summarizer(ScriptedLLM.of(PREVIOUS.text), COUNTER)
    summary = await summarizer.summarize(PREVIOUS, messages)
    assert summary.source == "extractive"
    assert summary.fallback_reason == "reply repeats the previous summary"
    assert summary.text == summarizer.extract(PREVIOUS, messages).text  # the draft, new facts and all
    assert "KeyError: 'REDIS_URL'" in summary.text
    assert_previous_kept(summary)
    # reworded a little, it is still a copy
    reworded = PREVIOUS.text.replace("- ", "* ").replace("monthly", "every month")
    again = await Summarizer(ScriptedLLM.of(reworded), COUNTER).summarize(PREVIOUS, messages)
    assert again.fallback_reason == "reply repeats the previous summary"


async def test_a_reply_keeping_the_draft_and_the_previous_facts_is_no_copy() -> None:
    messages = load("en_deploy_debug")
    draft = Summarizer(ScriptedLLM(), COUNTER).extract(PREVIOUS, messages).text
    summary = await Summarizer(ScriptedLLM.of(draft), COUNTER).summarize(PREVIOUS, messages)
    assert summary.source == "llm" and summary.text == draft


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


async def test_hanging_model_times_out_and_the_draft_is_the_summary() -> None:
    messages = load("en_deploy_debug")
    llm = ScriptedLLM.of(Reply(EN_SUMMARY, delay=5.0))
    loop = asyncio.get_running_loop()
    started = loop.time()
    summarizer = Summarizer(llm, COUNTER, timeout=0.05)
    summary = await summarizer.summarize(PREVIOUS, messages)
    assert loop.time() - started < 2.0
    assert summary.source == "extractive"
    assert "timed out" in (summary.fallback_reason or "")
    assert summary.text == summarizer.extract(PREVIOUS, messages).text
    assert_previous_kept(summary)
    assert "KeyError: 'REDIS_URL'" in summary.text  # and the new facts


JUNK = {
    "empty": "",
    "whitespace": "   \n ",
    "chatty only": "Sure! Here is the summary:",
    "greeting": "Hello! How can I help you today?",
    "chinese chatty": "好的，以下是摘要：",
    "bare none": "- (none)",
    "template echo": summary_template("en"),
    "template echo zh": summary_template("zh"),
    "all none": "\n".join(f"## {h}\n- (none)" for h in EN_HEADERS),
    "all dots": "\n".join(f"## {h}\n- ..." for h in ZH_HEADERS),
}


@pytest.mark.parametrize("junk", JUNK.values(), ids=list(JUNK))
async def test_junk_leaves_the_draft_without_a_retry(junk: str) -> None:
    messages = load("en_deploy_debug")
    llm = ScriptedLLM.of(junk, EN_SUMMARY)
    summarizer = Summarizer(llm, COUNTER)
    summary = await summarizer.summarize(PREVIOUS, messages)
    assert len(llm.requests) == 1
    assert summary.source == "extractive"
    assert summary.fallback_reason
    assert summary.text == summarizer.extract(PREVIOUS, messages).text
    assert_previous_kept(summary)


FIVE_SECTIONS = EN_SUMMARY[: EN_SUMMARY.index("## Critical context")].strip()


@pytest.mark.parametrize(
    "dropped", [[], ["context"], ["constraints", "context"], ["goal", "progress", "decisions", "next"]]
)
async def test_a_section_the_reply_lacks_is_the_drafts(dropped: list[str]) -> None:
    messages = load("en_deploy_debug")
    _, sections = parse_sections(EN_SUMMARY)
    complete = correcting(messages, EN_SUMMARY)
    reply = "\n".join(
        f"## {title}\n{body}"
        for (key, body), title in zip(parse_sections(complete)[1].items(), EN_HEADERS, strict=True)
        if key not in dropped
    )
    summarizer = Summarizer(ScriptedLLM.of(reply), COUNTER)
    summary = await summarizer.summarize(None, messages)
    _, draft = parse_sections(summarizer.extract(None, messages).text)
    assert summary.source == "llm"
    _, got = parse_sections(summary.text)
    assert list(got) == list(SECTION_KEYS)  # every header, in order
    for key in SECTION_KEYS:
        if key in dropped:  # the same facts; a fact the short draft had no room for is merged back first
            assert sorted(got[key].splitlines()) == sorted(draft[key].splitlines())
        else:
            assert sections[key] in got[key]


async def test_a_partly_filled_template_keeps_content_and_drops_placeholders() -> None:
    messages = load("zh_auth_refactor")
    summarizer = Summarizer(ScriptedLLM(), COUNTER)
    _, draft = parse_sections(summarizer.extract(None, messages).text)
    reply = (  # the draft's goal, progress, decisions and context; constraints and next steps left unfilled
        f"## 目标\n{draft['goal']}\n## 约束\n- ...（要求、限制和禁止做的事）\n## 进展\n{draft['progress']}\n"
        f"## 关键决策\n{draft['decisions']}\n## 下一步\n- ...\n## 关键上下文\n{draft['context']}\n"
    )
    summary = await Summarizer(ScriptedLLM.of(reply), COUNTER).summarize(None, messages)
    assert summary.source == "llm"
    assert "..." not in summary.text and "要求、限制" not in summary.text
    _, got = parse_sections(summary.text)
    for key in ("goal", "progress", "decisions", "context"):
        assert got[key] == draft[key]
    # emptied by the model: of the draft's constraints, the one naming an exact path comes back
    assert got["constraints"] == "- 必须兼容现有的 /api/v1/login 接口，不要改动数据库表 users。"
    assert "不要把私钥提交到仓库" in draft["constraints"]
    for header in ZH_HEADERS:
        assert f"## {header}\n" in summary.text


async def test_headers_follow_the_conversations_language_whatever_the_reply_used() -> None:
    messages = load("zh_ops_incident")
    summary = await Summarizer(ScriptedLLM.of(correcting(messages, FIVE_SECTIONS)), COUNTER).summarize(
        None, messages
    )
    assert summary.source == "llm" and summary.lang == "zh"
    assert [f"## {h}" in summary.text for h in ZH_HEADERS] == [True] * 6
    assert "Fix the staging checkout outage." in summary.text


async def test_chatty_wrapping_around_a_valid_summary_is_stripped() -> None:
    reply = f"Sure! Here is the updated summary:\n\n```markdown\n{EN_SUMMARY}\n```"
    llm = ScriptedLLM.of(f"Sure! Here is the updated summary:\n{EN_SUMMARY}\nLet me know if you need more.")
    messages = [user("Fix the staging checkout outage."), assistant("On it.")]
    sections = parse_sections(EN_SUMMARY)
    summary = await Summarizer(llm, COUNTER).summarize(None, messages)
    assert summary.source == "llm" and parse_sections(summary.text) == sections
    fenced = await Summarizer(ScriptedLLM.of(reply), COUNTER).summarize(None, messages)
    assert fenced.source == "llm" and parse_sections(fenced.text) == sections
    bare_fence = await Summarizer(ScriptedLLM.of(f"```\n{EN_SUMMARY}\n```"), COUNTER).summarize(
        None, messages
    )
    assert bare_fence.source == "llm" and parse_sections(bare_fence.text) == sections


def huge_summary(n: int = 400) -> str:
    return EN_SUMMARY.replace(
        "- The cart service runs again.", "\n".join(f"- step {i} done" for i in range(n))
    )


async def test_an_over_budget_reply_is_fitted_without_another_call() -> None:
    messages = load("en_deploy_debug")
    llm = ScriptedLLM.of(correcting(messages, huge_summary(), PREVIOUS, max_tokens=600), EN_SUMMARY)
    summary = await Summarizer(llm, COUNTER, max_tokens=600).summarize(PREVIOUS, messages)
    assert summary.source == "llm" and len(llm.requests) == 1
    assert COUNTER.count_text(summary.render()) <= 600
    _, got = parse_sections(summary.text)
    assert list(got) == list(SECTION_KEYS)
    # fitted by dropping the least salient whole facts, never by cutting one short
    assert "KeyError" in got["context"] and "…" not in summary.text


# --- facts the model drops ----------------------------------------------------------------------

TRIP = Summary(
    "## Goal\n- Plan the Lisbon trip.\n## Constraints\n- (none)\n## Progress\n"
    "- Flight LH1172 leaves Frankfurt at 09:40 on 14 June.\n- Ingrid lives in Paris near the Marais.\n"
    "## Key decisions\n- The trip budget is 500 EUR.\n## Next steps\n- Book the hotel.\n"
    "## Critical context\n- (none)",
    lang="en",
)
TRIP_NEWS: list[Message] = [
    user("Update: Ingrid moved to Berlin last month, to Kreuzberg."),
    assistant("Noted, Berlin it is."),
    user("And we decided to raise the trip budget to 700 EUR."),
    assistant("Budget raised to 700 EUR."),
]


async def test_stale_items_the_model_replaces_drop() -> None:
    reply = (
        "## Goal\n- Plan the Lisbon trip.\n## Constraints\n- (none)\n## Progress\n"
        "- Flight LH1172 leaves Frankfurt at 09:40 on 14 June.\n- Ingrid moved to Berlin (Kreuzberg).\n"
        "## Key decisions\n- The trip budget is 700 EUR.\n## Next steps\n- Book the hotel.\n"
        "## Critical context\n- (none)"
    )
    summarizer = Summarizer(ScriptedLLM.of(reply), COUNTER)
    draft = summarizer.extract(TRIP, TRIP_NEWS).text
    assert "500 EUR" in draft and "lives in Paris" in draft  # the extractive draft keeps both
    summary = await summarizer.summarize(TRIP, TRIP_NEWS)
    assert summary.source == "llm"
    assert "700 EUR" in summary.text and "Berlin" in summary.text
    assert "500 EUR" not in summary.text and "Paris" not in summary.text


async def test_the_model_sees_only_what_is_new_and_what_it_may_make_stale() -> None:
    """Issue 17: one short call — the new messages, the ledger, a draft of their facts and of the previous
    facts they touch; the rest of the previous summary is merged back without the model."""
    llm = ScriptedLLM.of(
        "## Progress\n- Ingrid moved to Berlin (Kreuzberg).\n## Key decisions\n- The trip budget is 700 EUR."
    )
    summarizer = Summarizer(llm, COUNTER, max_tokens=2000)
    summary = await summarizer.summarize(TRIP, TRIP_NEWS)
    prompt = text_of(llm.requests[0][-1].content)
    assert "Paris" in prompt and "500 EUR" in prompt  # what the new messages may make stale is shown...
    assert (
        "LH1172" not in prompt and "Book the hotel" not in prompt
    )  # ...nothing else of the previous summary
    assert llm.request_max_tokens[0] is not None and llm.request_max_tokens[0] < 2000 // 2
    assert summary.source == "llm"
    assert "LH1172" in summary.text and "Book the hotel." in summary.text  # merged back
    assert "Paris" not in summary.text and "500 EUR" not in summary.text  # the model's judgement holds
    assert "Berlin" in summary.text and "700 EUR" in summary.text


async def test_a_flat_list_reply_is_read_back_into_its_sections() -> None:
    """The 1.5B model wrote the corrected draft back as the flat ``- Section: fact`` list it was shown."""
    reply = "- Progress: Ingrid moved to Berlin (Kreuzberg).\n- Key decisions: The trip budget is 700 EUR."
    summary = await Summarizer(ScriptedLLM.of(reply), COUNTER).summarize(TRIP, TRIP_NEWS)
    assert summary.source == "llm", summary.fallback_reason
    _, got = parse_sections(summary.text)
    assert "Ingrid moved to Berlin (Kreuzberg)." in got["progress"] and "700 EUR" in got["decisions"]


def test_unflatten_reads_the_sections_a_flat_list_names_in_either_language() -> None:
    zh = unflatten("- 目标：修复发票\n- 进展：完成了 v4.2.1")
    assert zh == "## 目标\n- 修复发票\n\n## 进展\n- 完成了 v4.2.1"
    assert unflatten("- key decisions: use y\nsome line") == "## Key decisions\n- use y"
    assert unflatten("Note: nothing here names a section") == ""


def _copies_the_flat_draft(messages: list[Message]) -> str:
    """A small model that copies the flat draft it is shown, ``- Section: fact`` labels and all, under the
    template's headers (as the 1.5B model did)."""
    draft = text_of(messages[-1].content).split("with its section):\n", 1)[1].split("\n\n", 1)[0]
    titles = SECTION_TITLES["en"].values()
    by_title = {t: [line for line in draft.splitlines() if line.startswith(f"- {t}: ")] for t in titles}
    return "\n\n".join(f"## {t}\n" + "\n".join(lines or ["- (none)"]) for t, lines in by_title.items())


async def test_a_summary_of_a_summary_never_stacks_section_labels() -> None:
    """Issue 31: stored summaries held ``Critical context: Critical context: ...``, one more per round."""
    summarizer = Summarizer(ScriptedLLM.of(default=_copies_the_flat_draft), COUNTER)
    summary = None
    for i in range(3):
        news = [
            user(f"The error is KeyError: 'REDIS_URL{i}' in /srv/app{i}/config.py line {40 + i}."),
            assistant(f"Noted: /srv/app{i}/config.py needs REDIS_URL{i}. We decided to use port 84{i}3."),
        ]
        summary = await summarizer.summarize(summary, news)
        assert summary.source == "llm", summary.fallback_reason
    assert summary is not None
    items = [item for body in parse_sections(summary.text)[1].values() for item in body.splitlines()]
    assert all(i in summary.text for i in ("REDIS_URL0", "REDIS_URL2", "8403", "8423"))
    labels = tuple(f"- {t}:" for titles in SECTION_TITLES.values() for t in titles.values())
    assert [item for item in items if item.startswith(labels)] == []


def test_section_labels_ahead_of_an_item_are_dropped_in_either_language() -> None:
    assert without_labels("Critical context: Critical context: port 8443") == "port 8443"
    assert without_labels("key decisions: Progress: use y") == "use y"
    assert without_labels("关键上下文：关键上下文：端口 8443") == "端口 8443"
    assert without_labels("Critical context:") == "Critical context:"  # nothing but a label: kept
    assert without_labels("Note: the goal: ship") == "Note: the goal: ship"


async def test_facts_with_exact_values_the_model_lost_come_back() -> None:
    reply = (  # most of the draft, corrected; the flight, with its number and time, gone without a trace
        "## Goal\n- Plan the Lisbon trip.\n- Ingrid moved to Berlin last month (Kreuzberg).\n"
        "## Progress\n- Ingrid moved to Berlin.\n## Key decisions\n- We decided to raise the trip budget.\n"
        "## Next steps\n- Book the hotel."
    )
    summary = await Summarizer(ScriptedLLM.of(reply), COUNTER).summarize(TRIP, TRIP_NEWS)
    assert summary.source == "llm"
    _, got = parse_sections(summary.text)
    assert "Flight LH1172 leaves Frankfurt at 09:40 on 14 June." in got["progress"]
    assert "Paris" not in summary.text  # no exact value: the model's call
    assert "500 EUR" not in summary.text  # "raise the trip budget" replaced it


async def test_a_reply_that_drops_most_of_the_draft_gets_the_dropped_facts_back() -> None:
    # what the 1.5B and 0.5B models did: a summary of the new messages alone, as if there were no draft
    reply = "## Goal\n- Ingrid moved to Berlin.\n## Progress\n- Ingrid moved to Berlin."
    summary = await Summarizer(ScriptedLLM.of(reply), COUNTER).summarize(TRIP, TRIP_NEWS)
    assert summary.source == "llm"
    _, got = parse_sections(summary.text)
    # no exact value in them, but the model did not judge them: it ignored them
    assert "Plan the Lisbon trip." in got["goal"]
    assert "Ingrid lives in Paris near the Marais." in got["progress"]
    assert "Flight LH1172 leaves Frankfurt at 09:40 on 14 June." in got["progress"]
    assert "Book the hotel." in got["next"] and "700 EUR" in summary.text


async def test_with_a_compact_instruction_the_reply_is_taken_as_written() -> None:
    reply = "## Constraints\n- Never charge a customer twice.\n- Do not restart the production database."
    llm = ScriptedLLM.of(reply)
    summary = await Summarizer(llm, COUNTER, max_tokens=2000).summarize(
        PREVIOUS, load("en_deploy_debug"), instruction="keep the constraints only"
    )
    # the whole draft, shown and rewritten, in half the budget: one call holds it beside its chunk
    assert llm.request_max_tokens[0] is not None and llm.request_max_tokens[0] < 2000 * 1.25 / 2
    assert summary.source == "llm"
    _, got = parse_sections(summary.text)
    assert got["constraints"] == "- Never charge a customer twice.\n- Do not restart the production database."
    assert all(got[key] == "- (none)" for key in SECTION_KEYS if key != "constraints")  # nothing put back


# --- language -----------------------------------------------------------------------------------


async def test_chinese_conversation_gets_chinese_prompt_and_headers() -> None:
    messages = load("zh_auth_refactor")
    llm = ScriptedLLM.of(correcting(messages, ZH_SUMMARY))
    summary = await Summarizer(llm, COUNTER).summarize(None, messages)
    system, prompt = llm.requests[0]
    body = text_of(prompt.content)
    assert "请修订草稿" in text_of(system.content) and "逐字照抄" in text_of(system.content)
    assert body.startswith("新的对话内容：") and "新记忆的草稿" in body
    assert body.endswith(summary_template("zh"))
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
    messages = load("zh_ops_incident")
    summary = await Summarizer(ScriptedLLM.of(correcting(messages, EN_SUMMARY)), COUNTER).summarize(
        None, messages
    )
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
    llm = ScriptedLLM.of(correcting(messages, leaky))
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


# The profile's count, capped at 1,000: the bound is enforced by a final check-and-shrink loop, not
# planned, so a thousand histories exercise it well, and more would spend minutes for no more coverage.
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
