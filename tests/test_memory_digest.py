"""What leaves the context reaches daily memory as the fact list itself (SPEC M2, issue 17): bare dated
bullets a session per heading, found first by a question that names the day."""

from __future__ import annotations

import re
from datetime import datetime
from pathlib import Path

from contextmem.messages import Message, assistant, user
from contextmem.runtime import ContextMem
from contextmem.settings import Settings
from contextmem.summarize import Summarizer
from contextmem.summarize.digest import fact_digest
from contextmem.summarize.facts import facts_from_summary
from contextmem.testing import InMemorySessionStore, ScriptedLLM
from contextmem.tokens import MessageCounter, get_counter

COUNTER = MessageCounter(get_counter("auto"))
# Days written without a leading zero: no token of them can match the ``## HH:MM`` of an entry's heading.
TOLD = {
    "1 January 2022": "At the New Year's Eve party my classmates and I made paper lanterns.",
    "8 February 2022": "My grandfather gave me a gold-plated pocket watch for my birthday.",
    "4 March 2022": "We moved to a new city and I felt lonely at first.",
    "6 April 2022": "The toy robot from the birthday party broke the day I opened it.",
    "2 May 2022": "I found a white ping pong ball in the backyard under the hedge.",
    "9 June 2022": "We saw two red pandas climbing a tree at the zoo.",
}
KEY = "sk-proj-" + "abcdEFGH1234567890" * 2


def sessions() -> list[Message]:
    """One dated session per fact, each padded with the chit-chat a real one has."""
    out: list[Message] = []
    for n, (day, fact) in enumerate(TOLD.items(), 1):
        out += [
            user(f"[Session {n} · {day}]\nSomething I wanted to tell you: {fact}"),
            assistant("That sounds wonderful, thanks for telling me!"),
            user(
                f"What should I wear tomorrow? My deploy key is {KEY}"
                if n == 2
                else "What should I wear? The dress code is in invite.pdf."
            ),
            assistant("Something comfortable, you will look great."),
        ]
    return out


def test_the_digest_is_bare_dated_facts_a_session_per_heading() -> None:
    left = Summarizer(ScriptedLLM(), COUNTER, max_tokens=2000).extract(None, sessions())
    assert "(none)" in left.render() and "Identifiers" in left.render()  # what the view gets...
    digest = fact_digest(left.text, left.lang)
    assert "(none)" not in digest and "Identifiers" not in digest and "\n## " not in f"\n{digest}"
    headings = re.findall(r"^### (.+)$", digest, re.M)
    assert headings == list(TOLD)  # ...memory gets a heading per session date, in order
    bullets = [line for line in digest.splitlines() if line and not line.startswith("### ")]
    assert bullets and all(re.match(r"- \[\d \w+ 2022\] \S", line) for line in bullets)
    assert any(b.startswith("- [8 February 2022] ") and b.endswith(TOLD["8 February 2022"]) for b in bullets)
    # every fact the summary holds is a bullet of the digest
    assert len(bullets) == len(facts_from_summary(left.text, left.lang))


def test_facts_before_the_first_header_take_the_date_the_previous_summary_ended_on() -> None:
    previous = "## Critical context\n- [2022-01-01] Bart: We made lanterns.\n- [2022-01-18] Bart: A watch."
    summary = (
        "## Goal\n- (none)\n\n## Critical context\n- Bart: That flavour was awesome! Lisa: Indeed.\n"
        "- [2022-04-30] Bart: We moved to a new city."
    )
    digest = fact_digest(summary, "en", previous=previous)
    assert digest == (
        "### 2022-01-18\n- [2022-01-18] Bart: That flavour was awesome!\n- [2022-01-18] Lisa: Indeed.\n\n"
        "### 2022-04-30\n- [2022-04-30] Bart: We moved to a new city."
    )
    # with no date known, undated facts stand under their section, before the dated ones
    assert fact_digest(summary, "en").startswith("### Critical context\n- Bart: That flavour was awesome!")
    assert fact_digest("## Goal\n- (none)\n\n## Progress\n- (none)", "en") == ""


def test_a_redacted_value_at_the_start_of_a_fact_is_not_its_date() -> None:
    summary = "## Critical context\n- [REDACTED] is the deploy token.\n- [2022-04-30] Bart: We moved."
    digest = fact_digest(summary, "en")
    assert "### REDACTED" not in digest and "- [REDACTED] is the deploy token." in digest
    assert "### 2022-04-30\n- [2022-04-30] Bart: We moved." in digest


async def test_a_question_naming_the_day_finds_that_sessions_facts_first(tmp_path: Path) -> None:
    settings = Settings(workspace=tmp_path / "ws", agent_max_context_turns=2, context_window=20_000)
    runtime = await ContextMem.open(
        settings, llm=ScriptedLLM(default="not a summary"), store=InMemorySessionStore(), embedder="hash:384"
    )
    engine = await runtime.session("chat")
    await engine.add(*sessions())
    await engine.build("system")  # over 2 turns: the oldest leave, their digest goes to memory
    await engine.wait_idle()
    await runtime.flush()
    assert runtime.memory is not None
    daily = "\n".join(p.read_text() for p in (tmp_path / "ws" / "memory").glob("*.md"))
    assert "### 8 February 2022" in daily and "(none)" not in daily and "Identifiers" not in daily
    assert KEY not in daily and "[REDACTED]" in daily  # the writer's redaction still applies
    remembered = [day for day in TOLD if f"### {day}" in daily]  # the older half left the context
    assert len(remembered) >= 3
    for day in remembered:
        top = runtime.memory.search(f"What happened to Bart on {day}?", k=1)
        assert top and TOLD[day] in top[0].snippet, (day, top)
    await runtime.close()


async def test_a_cleared_session_goes_to_memory_as_its_facts_too(tmp_path: Path) -> None:
    settings = Settings(workspace=tmp_path / "ws", context_window=20_000)
    runtime = await ContextMem.open(settings, llm=None, store=InMemorySessionStore(), embedder="hash:384")
    engine = await runtime.session("chat")
    await engine.add(*sessions())
    await engine.clear()
    await runtime.flush()
    daily = "\n".join(p.read_text() for p in (tmp_path / "ws" / "memory").glob("*.md"))
    assert "### 8 February 2022" in daily and "(none)" not in daily and "Identifiers" not in daily
    await runtime.close()


async def test_a_memory_entry_goes_to_the_daily_file_of_the_runtimes_clock(tmp_path: Path) -> None:
    """A replay (or a test) runs on its own clock: the entry is filed, and headed, as written then."""
    settings = Settings(workspace=tmp_path / "ws", context_window=20_000)
    runtime = await ContextMem.open(settings, llm=None, store=InMemorySessionStore(), memory=False)
    runtime.clock = lambda: datetime(2022, 6, 9, 20, 15)
    engine = await runtime.session("chat")
    await engine.add(*sessions())
    await engine.clear()
    await runtime.flush()
    assert [p.name for p in (tmp_path / "ws" / "memory").glob("*.md")] == ["2022-06-09.md"]
    assert "## 20:15 chat: context cleared" in (tmp_path / "ws" / "memory" / "2022-06-09.md").read_text()
    await runtime.close()


def test_a_day_said_relative_to_the_session_is_written_in_the_entry() -> None:
    """Read months later, "yesterday" says nothing; the entry writes the day, as the session's date is
    written. The summary the model is sent keeps the words as they were."""
    summary = (
        "## Critical context\n"
        "- [14 March, 2024] Ingrid: I went to the pottery class yesterday. Tomas: Nice!\n"
        "- [2023年5月9日] 小林: 我上周六去了公园。"
    )
    assert fact_digest(summary, "en").splitlines() == [
        "### 14 March, 2024",
        "- [14 March, 2024] Ingrid: I went to the pottery class yesterday. (yesterday: 13 March, 2024)",
        "- [14 March, 2024] Tomas: Nice!",
        "",
        "### 2023年5月9日",
        "- [2023年5月9日] 小林: 我上周六去了公园。（上周六：2023年5月6日）",
    ]
