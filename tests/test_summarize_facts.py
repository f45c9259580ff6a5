"""The extractive compactor selects facts, not lines (issue 17): salience, dates, speakers, dedupe, budget."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from contextmem.messages import Message, UserMessage, assistant, tool_result, user
from contextmem.summarize import Summarizer, build_ledger, parse_sections
from contextmem.summarize.extractive import extractive_summary
from contextmem.summarize.facts import compact_facts, facts_from_messages, facts_from_summary
from contextmem.summarize.prompts import SECTION_TITLES, detect_language
from contextmem.summarize.recall import every_nth, kept_answers, most_recent
from contextmem.summarize.salience import compress, header_date, rarity, salience, speaker_prefix
from contextmem.testing import ScriptedLLM
from contextmem.tokens import MessageCounter, get_counter

COUNTER = MessageCounter(get_counter("auto"))
CHAT = [
    "How was your weekend?",
    "That's amazing!",
    "Haha that sounds about right.",
    "Work has been absolutely nonstop.",
    "Talk soon!",
    "最近好吗？",
    "太棒了！",
    "哈哈，很像你会做的事。",
]
FACTS = [
    "We adopted a puppy last weekend, her name is Biscuit.",
    "My sister Priya is flying in from Lisbon on 14 June.",
    "I ran 21 kilometres on Sunday, a new record for me.",
    "Honestly my favourite band is still Khruangbin.",
    "I'm going to sign up for the pottery class next month.",
    "我们上周末领养了一只橘猫，名字叫年糕。",
    "我打算十月和王芳一起去杭州。",
    "说实话我最喜欢的乐队还是万能青年旅店。",
]


def summarize(messages: list[Message], budget: int = 400, previous: str | None = None) -> str:
    ledger = build_ledger(messages)
    lang = detect_language(messages)
    return extractive_summary(
        messages, previous=previous, ledger=ledger, lang=lang, budget=budget, counter=COUNTER
    )


def chat(*texts: str) -> list[Message]:
    return [user(t) if i % 2 == 0 else assistant(t) for i, t in enumerate(texts)]


# --- salience -------------------------------------------------------------------------------------


def test_facts_outscore_chit_chat_in_both_languages() -> None:
    rare = rarity(CHAT + FACTS)
    best_chat = max(salience(compress(s), rare) for s in CHAT)
    for fact in FACTS:
        assert salience(compress(fact), rare) > best_chat, fact


def test_compress_strips_fillers_and_never_rewords() -> None:
    assert compress("Oh wow, haha we adopted a puppy! 🐶") == "We adopted a puppy!"
    assert compress("哈哈哈，我们领养了一只橘猫。") == "我们领养了一只橘猫。"
    assert compress("ok: 2 lines appended") == "ok: 2 lines appended"  # a label, not a filler


def test_session_headers_and_speakers() -> None:
    assert header_date("[Session 3 · 8 May 2023]") == "8 May 2023"
    assert header_date("DATE: 1:56 pm on 8 May, 2023") == "8 May, 2023"
    assert header_date("[对话 3 · 2023-05-08]") == "2023-05-08"
    assert header_date("My sister arrives on 8 May 2023 and stays with us for the whole summer long.") is None
    assert speaker_prefix("Caroline: I went to the support group.") == (
        "Caroline",
        "I went to the support group.",
    )
    assert speaker_prefix("Fixed: it works", {"Caroline"}) == (None, "Fixed: it works")


# --- the summary ----------------------------------------------------------------------------------


def test_salient_facts_are_kept_over_chit_chat_under_a_tight_budget() -> None:
    messages = chat(*(CHAT * 6), *FACTS[:5], *(CHAT * 6))
    text = summarize(messages, budget=160)
    for fact in ("Biscuit", "Priya", "Lisbon", "21 kilometres", "Khruangbin"):
        assert fact in text, (fact, text)
    assert "Talk soon!" not in text


def test_facts_are_dated_and_attributed() -> None:
    messages: list[Message] = [
        user("Caroline: [Session 1 · 8 May 2023]\nI went to the LGBTQ support group yesterday."),
        assistant("Melanie: That's great! I painted a lake sunrise last year."),
        user("Caroline: Thanks Mel!"),
        assistant("Melanie: Talk soon!"),
    ]
    _, sections = parse_sections(summarize(messages))
    body = "\n".join(sections.values())
    assert "[8 May 2023] Caroline: I went to the LGBTQ support group yesterday." in body
    assert "Melanie: " in body and "lake sunrise" in body


def test_the_session_date_carries_into_the_next_batch() -> None:
    first = [user("A: [Session 4 · 2023-05-08]\nWe adopted a puppy named Biscuit."), assistant("B: Cute!")]
    previous = summarize(first)
    later = chat("A: My sister Priya is flying in from Lisbon.", "B: Lovely.")
    assert "[2023-05-08]" in summarize(later, previous=previous).split("Priya")[0].rsplit("\n", 1)[-1]


def test_a_tool_outcome_is_kept_verbatim_and_errors_go_to_context() -> None:
    messages: list[Message] = [
        user("Please restart cart-api."),
        tool_result("call_1", "ok: 2 lines appended to /srv/cart/.env\nKeyError: 'REDIS_URL'"),
    ]
    _, sections = parse_sections(summarize(messages))
    assert "KeyError: 'REDIS_URL'" in sections["context"]
    assert "Please restart cart-api." in sections["goal"]


def test_near_duplicates_merge_into_the_newest() -> None:
    messages = chat(
        "Hi!",
        "Hey.",
        "We adopted a puppy named Biscuit.",
        "Cute!",
        "So yes, we adopted a puppy named Biscuit last weekend at the shelter.",
        "Aww!",
    )
    text = summarize(messages)
    assert text.count("Biscuit") == 1 and "at the shelter" in text


def test_chinese_conversations_get_chinese_headers() -> None:
    text = summarize(chat(*FACTS[5:], *CHAT[5:]))
    assert text.startswith(f"## {SECTION_TITLES['zh']['goal']}")
    assert "年糕" in text and "万能青年旅店" in text


def test_previous_facts_come_back_as_facts_with_their_date_and_speaker() -> None:
    previous = (
        "## Critical context\n- [8 May 2023] Caroline: A went home. B stayed. Melanie: C left.\n"
        "- [9 May 2023] Caroline: D. Melanie: E."
    )
    facts = facts_from_summary(previous, "en")
    assert [(f.text, f.speaker, f.date) for f in facts] == [
        ("A went home.", "Caroline", "8 May 2023"),
        ("B stayed.", "Caroline", "8 May 2023"),
        ("C left.", "Melanie", "8 May 2023"),
        ("D.", "Caroline", "9 May 2023"),
        ("E.", "Melanie", "9 May 2023"),
    ]
    assert all(not f.new and f.order < 0 for f in facts)


def test_the_summarizer_extract_path_uses_the_compactor() -> None:
    messages = chat(*(CHAT * 4), *FACTS[:3])
    summary = Summarizer(ScriptedLLM(), COUNTER, max_tokens=400).extract(None, messages)
    assert summary.source == "extractive" and "Biscuit" in summary.render()


def test_secrets_never_reach_the_facts() -> None:
    messages = chat("My password is Tr0ub4dor&3 and the key is sk-proj-Zx81kQm2Lw9Pq7Rt5Vy3Nb6Hc4Jd0Fg", "ok")
    text = summarize(messages)
    assert "Tr0ub4dor&3" not in text and "sk-proj-Zx81kQm2Lw9Pq7Rt5Vy3Nb6Hc4Jd0Fg" not in text


# --- properties -------------------------------------------------------------------------------------

sentence = st.sampled_from(CHAT + FACTS)


@settings(max_examples=60, deadline=None)
@given(st.lists(sentence, min_size=1, max_size=30), st.integers(64, 600), st.booleans())
def test_the_summary_never_exceeds_its_budget(texts: list[str], budget: int, twice: bool) -> None:
    messages = chat(*texts)
    text = summarize(messages, budget=budget)
    if twice:  # re-compressing a summary into the next one stays within budget too
        text = summarize(messages, budget=budget, previous=text)
    assert COUNTER.count_text(text) <= budget


@settings(max_examples=40, deadline=None)
@given(st.lists(sentence, min_size=1, max_size=20), st.lists(st.sampled_from(FACTS), min_size=1, max_size=3))
def test_the_newest_most_salient_fact_survives_re_compression(old: list[str], new: list[str]) -> None:
    budget = 200
    previous = summarize(chat(*(old * 3)), budget=budget)
    messages = chat(*new)
    ledger = build_ledger(messages)
    lang = detect_language(messages)
    text = compact_facts(
        messages, previous=previous, ledger=ledger, lang=lang, budget=budget, counter=COUNTER, known=()
    )
    rare = rarity([*new, *old])
    fresh = facts_from_messages(messages, ledger, ())
    best = max(fresh, key=lambda f: (salience(f.text, rare), f.order))
    assert best.text in text


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from(FACTS[:5] + CHAT[:5]), min_size=2, max_size=12))
def test_output_language_follows_the_input(texts: list[str]) -> None:
    assert summarize(chat(*texts)).startswith(f"## {SECTION_TITLES['en']['goal']}")
    zh = [t for t in FACTS + CHAT if any("\u4e00" <= c <= "\u9fff" for c in t)]
    assert summarize(chat(*zh)).startswith(f"## {SECTION_TITLES['zh']['goal']}")


@settings(max_examples=30, deadline=None)
@given(st.lists(sentence, min_size=1, max_size=12))
def test_ledger_identifiers_are_never_dropped_from_the_render(texts: list[str]) -> None:
    messages = [*chat(*texts), user("Deploy v2.3.1 to https://staging.shopfront.io and check /srv/cart/.env")]
    summary = Summarizer(ScriptedLLM(), COUNTER, max_tokens=2000).extract(None, messages)
    for value in summary.ledger.values:
        assert value in summary.render()
    assert "/srv/cart/.env" in summary.ledger.values


# --- the measurement ----------------------------------------------------------------------------------


def test_kept_answers_and_the_baselines() -> None:
    messages: list[Message] = [UserMessage(f"fact number {i} is Answer{i}") for i in range(10)]
    assert kept_answers("x ANSWER3\n  and answer4", ["answer3", "Answer4", "answer5", ""], 7).kept == 2
    text, tokens = most_recent(messages, COUNTER.count_text(messages[-1].content) * 2, COUNTER)  # type: ignore[arg-type]
    assert "Answer9" in text and "Answer8" in text and "Answer7" not in text
    budget = sum(COUNTER.count_text(f"fact number {i} is Answer{i}") for i in (9, 6, 3, 0))
    text, tokens = every_nth(messages, budget, COUNTER)
    assert tokens <= budget and "Answer9" in text and "Answer6" in text and "Answer8" not in text


async def test_eval_compaction_replays_with_no_model_and_scores_the_view() -> None:
    from contextmem.cli.eval_compaction import evaluate
    from contextmem.settings import Settings

    texts = [f"A: [Session {i} · 2023-05-{i + 1:02d}]\nWe adopted a puppy named Pup{i}." for i in range(25)]
    transcript = chat(*(t for text in texts for t in (text, "B: " + CHAT[2], "A: " + CHAT[3], "B: Cute!")))
    result = await evaluate(Settings(context_window=3000), transcript, [f"Pup{i}" for i in range(25)])
    assert result.lost == 0 and result.view.tokens <= 3000
    assert result.view.kept > result.recent.kept


def test_a_sentence_with_a_date_is_a_fact_not_a_session_header() -> None:
    text = summarize([user("The release train leaves on 2026-12-03"), assistant("Noted.")])
    assert "The release train leaves on 2026-12-03" in text
