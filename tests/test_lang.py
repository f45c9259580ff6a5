"""Language data as data: the algorithms read the tables of :mod:`contextmem.lang`, and nothing else.

A stub third language, registered through the public hook, changes what the summariser and the
save-claim check do without an algorithm module being edited; and every table of the built-in languages
is used (taking an entry out changes a result).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from contextmem import lang
from contextmem.agent.claims import unbacked_save_note
from contextmem.agent.task import TaskMemory
from contextmem.errors import ConfigError
from contextmem.lang import en, is_question, scripts, zh
from contextmem.lang.calendar import says_when
from contextmem.lang.dates import day_mentions, relative_days
from contextmem.memory import HashEmbedder, SqliteMemoryIndex
from contextmem.memory.text import query_days, query_month_days
from contextmem.memory.when import asks_when
from contextmem.messages import AssistantMessage, UserMessage
from contextmem.summarize import Summarizer, build_ledger, parse_sections
from contextmem.summarize.cues import DATE, PREFERENCE
from contextmem.summarize.extractive import extractive_summary
from contextmem.summarize.ledger import extract_identifiers
from contextmem.summarize.prompts import complete_sections, detect_language, summary_prompt
from contextmem.summarize.revise import revise
from contextmem.summarize.salience import (
    compress,
    content_tokens,
    header_date,
    names_something,
    salience,
    section_of,
    sentences,
    speaker_prefix,
    trim_clauses,
)
from contextmem.testing import ScriptedLLM
from contextmem.tokens import MessageCounter
from contextmem.tokens.heuristic import HeuristicCounter
from contextmem.workspace import Workspace

# A made-up language written with spaces between words, as English is.
XX = lang.Language(
    code="xx",
    whole_words=True,
    cues={"preference": r"zorba", "noted": r"kuna kuna", "constraint": r"vel"},
    stop_words=frozenset({"blorp"}),
    not_names=frozenset({"Yoo"}),
    fillers=(r"^(?:ayo)\b[\s,!]*",),
    months=(("Unomo",), ("Dumo",)),
    weekdays=(("lundi",),),  # written lower-case: not taken for a name
    day_phrases=(
        lang.DayPhrase(r"hiera", "days", "h", r"(?<![a-z])", r"(?![a-z])", days=1),
        lang.DayPhrase(
            r"(?P<n>\d{1,4}|ba|ko)\s+dinu\s+pas", "days_ago", r"\dbk", r"(?<![a-z])", r"(?![a-z])"
        ),
        lang.DayPhrase(r"pre\s+(?P<weekday>lundi)", "last_weekday", "p", r"(?<![a-z])", r"(?![a-z])"),
    ),
    number_words={"ba": 2, "ko": 3},
    written_dates=(r"(?<!\d)(?P<day>\d{1,2})\s+(?P<month>unomo|dumo)\s+(?P<year>\d{4})",),
    written_months=(r"(?<![a-z])(?P<month>unomo|dumo)\s+(?P<year>\d{4})",),
    date_spellings=(r"{d} {month} {y}",),
    save_claim=re.compile(r"\bmemzo\b"),
    not_saved_note="(xx: ne memzo)",
    letters="\u0370-\u03ff",  # written here in Greek letters, so its text is told from English
    letter_share=0.5,
    summary=lang.SummaryText(
        sections={
            "goal": "Celo",
            "constraints": "Limoj",
            "progress": "Progreso",
            "decisions": "Decidoj",
            "next": "Sekve",
            "context": "Kunteksto",
        },
        hints=dict.fromkeys(("goal", "constraints", "progress", "decisions", "next", "context"), "io"),
        hint=" <{}>",
        none="(nenio)",
        none_items=frozenset({"(nenio)", "nenio"}),
        none_replies=frozenset(),
        label_sep=" = ",
        joiner=" ",
        earlier="Antaue: ",
        system="Resumu en xx, sub {budget} signoj.",
        prompt_labels={
            "new": "Nova:",
            "ledger": "Identigiloj:",
            "draft": "Skizo:",
            "empty": "(malplena)",
            "extra": "Plie:",
            "fill": "Plenigu:",
        },
        title="Resumo de la frua konversacio:",
        archive="Arkivo:",
        ledger_title="Identigiloj (laux vorto):",
        ledger_labels=dict.fromkeys(("path", "url", "host", "email", "error", "id", "number", "name"), "ero"),
        error_words="erarkodo",
        units="zek",
        chatty="ayo",
        closer="gxis",
    ),
)


@pytest.fixture
def registered() -> Iterator[None]:
    """Every test leaves the registry as it found it (the same languages, in the same order)."""
    saved = lang.languages()
    try:
        yield
    finally:
        for language in lang.languages():
            lang.unregister(language.code)
        for language in saved:
            lang.register(language)


@pytest.fixture
def xx(registered: None) -> None:
    lang.register(XX)


def _replace(code: str, **changes: object) -> None:
    """Register a copy of the language ``code`` with ``changes``, in its place (order kept)."""
    saved = lang.languages()
    for language in saved:
        lang.unregister(language.code)
    for language in saved:
        lang.register(dataclasses.replace(language, **changes) if language.code == code else language)  # type: ignore[arg-type]


def _without(table: frozenset[str], entry: str) -> frozenset[str]:
    assert entry in table
    return table - {entry}


# --- a third language is one module, registered -----------------------------------------------------


def test_a_stub_language_cues_change_salience_and_sections(xx: None) -> None:
    rare: dict[str, float] = {}
    assert PREFERENCE.search("Mi zorba las pizzas.")
    lang.unregister("xx")
    before = salience("Mi zorba las pizzas kuna kuna.", rare)
    assert not PREFERENCE.search("Mi zorba las pizzas.")
    assert section_of("Vel tuka la porta.", from_user=True) == "context"
    lang.register(XX)
    assert salience("Mi zorba las pizzas kuna kuna.", rare) > before
    assert section_of("Vel tuka la porta.", from_user=True) == "constraints"


def test_a_stub_language_stop_words_fillers_and_not_names_are_read(xx: None) -> None:
    assert content_tokens("blorp pizzas") == ["pizzas"]
    assert compress("Ayo, the pizza came.") == "The pizza came."
    assert not names_something("Yoo went there")
    lang.unregister("xx")
    assert content_tokens("blorp pizzas") == ["blorp", "pizzas"]
    assert compress("Ayo, the pizza came.") == "Ayo, the pizza came."
    assert names_something("Yoo went there")


def test_a_stub_language_calendar_names_parse(xx: None) -> None:
    assert header_date("[Session 2 · 8 Unomo 2023]") == "8 Unomo 2023"
    assert DATE.search("Dumo 3, 2024")
    assert names_something("we met on lundi")
    lang.unregister("xx")
    assert header_date("[Session 2 · 8 Unomo 2023]") is None
    assert not names_something("we met on lundi")


def test_a_stub_language_save_claim_gets_its_note(xx: None) -> None:
    assert unbacked_save_note("Ok, memzo!", TaskMemory("keep it")) == "(xx: ne memzo)"
    lang.unregister("xx")
    assert unbacked_save_note("Ok, memzo!", TaskMemory("keep it")) is None


WED = date(2026, 3, 18)  # a Wednesday


def test_a_stub_language_relative_days_and_written_dates_are_read(xx: None) -> None:
    assert relative_days("hiera", WED) == {date(2026, 3, 17)}
    assert query_days("ko dinu pas?", WED) == {date(2026, 3, 15)}
    assert query_days("kio 12 dinu pas", WED) == {date(2026, 3, 6)}
    assert relative_days("pre lundi", WED) == {date(2026, 3, 16)}  # its weekday table: Monday
    assert query_days("8 dumo 2024") == {date(2024, 2, 8)}  # a written date needs no today
    assert query_days("8 dumo 2024 and 2024-02-09") == {date(2024, 2, 8), date(2024, 2, 9)}
    mentions = day_mentions([date(2024, 2, 8)])
    assert mentions is not None and mentions.search("on 8 Dumo 2024 we met")
    assert mentions.search("on 8 dum. 2024 we met") and not mentions.search("on 18 dumo 2024")
    assert day_mentions([date(2024, 3, 8)]) is not None  # a month its table lacks: no {month} spelling
    assert len(query_month_days("kio dumo 2024")) == 29 and query_month_days("8 dumo 2024") == frozenset()
    lang.unregister("xx")
    assert relative_days("hiera ko dinu pas, pre lundi", WED) == frozenset()
    assert query_days("8 dumo 2024") == frozenset()
    assert query_month_days("kio dumo 2024") == frozenset()
    mentions = day_mentions([date(2024, 2, 8)])
    assert mentions is not None and not mentions.search("on 8 Dumo 2024 we met")


def test_memory_search_reads_a_stub_languages_days(xx: None, tmp_path: Path) -> None:
    index = SqliteMemoryIndex(Workspace(tmp_path), HashEmbedder(64))
    index.workspace.ensure()
    for day in ("2026-03-15", "2026-03-16", "2026-03-17"):
        (index.workspace.daily_dir / f"{day}.md").write_text(f"# {day}\nwe walked by the river\n")
    assert index.search("ko dinu pas river", 1, today=WED)[0].path == "memory/2026-03-15.md"
    assert index.search("hiera river", 1, today=WED)[0].path == "memory/2026-03-17.md"
    lang.unregister("xx")
    assert index.search("ko dinu pas river", 1, today=WED)[0].path == "memory/2026-03-17.md"  # the newest


XX_TALK = [
    UserMessage("Σήμερα μετακομίσαμε στην Αθήνα. Η Μαρία πήρε 5 zek και erarkodo 42."),
    AssistantMessage("Πολύ ωραία, η Μαρία είναι χαρούμενη."),
]


def _summary_of(messages: list[UserMessage | AssistantMessage]) -> str:
    counter = HeuristicCounter()
    code = detect_language(messages)
    return extractive_summary(
        messages, previous=None, ledger=build_ledger(messages), lang=code, budget=400, counter=counter
    )


def test_a_stub_language_writes_summaries_with_its_texts(xx: None) -> None:
    """A conversation in the stub's letters is summarised with its headers, title, ledger and prompt."""
    assert detect_language(XX_TALK) == "xx"
    text = _summary_of(XX_TALK)
    assert text.startswith("## Celo\n") and "## Kunteksto" in text and "(nenio)" in text
    assert set(parse_sections(text)[1]) == {"goal", "constraints", "progress", "decisions", "next", "context"}
    summarizer = Summarizer(ScriptedLLM.of(default="Ayo! Here it is."), MessageCounter(HeuristicCounter()))
    rendered = summarizer.extract(None, XX_TALK).render()
    assert rendered.startswith("Resumo de la frua konversacio:\n## Celo")
    assert "Identigiloj (laux vorto):\n- ero = " in rendered
    system, user = summary_prompt(text, "user: ...", lang="xx", budget=99)
    assert system.content == "Resumu en xx, sub 99 signoj." and user.content.startswith("Nova:\n")
    assert complete_sections("## Celo\n- movi\n## Limoj\n- neniam", "en").startswith("## Celo\n- movi")
    sizing = {"ledger": build_ledger(XX_TALK), "lang": "xx", "budget": 300, "counter": HeuristicCounter()}
    assert revise("ayo, jen", text, previous=None, known=(), **sizing).problem.startswith("chatty reply")  # type: ignore[arg-type]
    assert ("5 zek", "number") in extract_identifiers("Ili pagis 5 zek; erarkodo 42")
    assert ("erarkodo 42", "error") in extract_identifiers("Ili pagis 5 zek; erarkodo 42")


def test_without_the_stub_its_text_is_summarised_in_the_default_language(xx: None) -> None:
    lang.unregister("xx")
    assert detect_language(XX_TALK) == "en"
    assert _summary_of(XX_TALK).startswith("## Goal\n")
    assert extract_identifiers("Ili pagis 5 zek; erarkodo 42") == []


def test_each_summary_text_entry_is_read(xx: None) -> None:
    """Taking an entry out of a summary table changes the result."""
    _replace("xx", letters="")
    assert detect_language(XX_TALK) == "en"
    _replace("zh", summary=dataclasses.replace(zh.CHINESE.summary, units="行|条|个|毫秒|分钟"))  # type: ignore[type-var]
    assert ("30秒", "number") not in extract_identifiers("耗时 30秒")
    _replace("zh", summary=zh.CHINESE.summary)
    assert ("30秒", "number") in extract_identifiers("耗时 30秒")
    sizing = {"ledger": build_ledger([]), "lang": "zh", "budget": 300, "counter": HeuristicCounter()}
    assert revise("好的，马上", "", previous=None, known=(), **sizing).problem.startswith("chatty")  # type: ignore[arg-type]
    _replace("zh", summary=dataclasses.replace(zh.CHINESE.summary, chatty="当然"))  # type: ignore[type-var]
    assert revise("好的，马上", "", previous=None, known=(), **sizing).problem.startswith("no sections")  # type: ignore[arg-type]


def test_a_language_is_registered_once(xx: None) -> None:
    with pytest.raises(ConfigError, match="'xx' is already registered"):
        lang.register(XX)
    lang.unregister("xx")
    with pytest.raises(ConfigError, match="'xx' is not registered"):
        lang.unregister("xx")


# --- every table of the built-in languages is used ---------------------------------------------------


@pytest.mark.parametrize(
    ("code", "kind", "sentence"),
    [
        ("en", "preference", "I love the blue mug."),
        ("zh", "preference", "我喜欢蓝色的杯子。"),
        ("en", "noted", "For the record, the mug is blue."),
        ("zh", "noted", "记一下，杯子是蓝色的。"),
        ("en", "event", "I adopted a cat last spring."),
        ("zh", "event", "我们参加了运动会。"),
        ("en", "error", "The upload failed again."),
        ("zh", "error", "上传失败了。"),
    ],
)
def test_each_cue_table_is_read_by_salience(registered: None, code: str, kind: str, sentence: str) -> None:
    rare: dict[str, float] = {}
    before = salience(sentence, rare)
    language = next(known for known in lang.languages() if known.code == code)
    _replace(code, cues={k: v for k, v in language.cues.items() if k != kind})
    assert salience(sentence, rare) < before


@pytest.mark.parametrize(
    ("code", "kind", "sentence", "from_user", "section"),
    [
        ("en", "constraint", "Never push to main.", True, "constraints"),
        ("zh", "constraint", "不要推送到主分支。", True, "constraints"),
        ("en", "progress", "The migration is done.", False, "progress"),
        ("zh", "progress", "迁移已经完成。", False, "progress"),
        ("en", "decision", "We decided on Postgres.", True, "decisions"),
        ("zh", "plan", "下一步部署到生产。", True, "next"),
    ],
)
def test_each_section_cue_table_is_read(
    registered: None, code: str, kind: str, sentence: str, from_user: bool, section: str
) -> None:
    assert section_of(sentence, from_user=from_user) == section
    language = next(known for known in lang.languages() if known.code == code)
    _replace(code, cues={k: v for k, v in language.cues.items() if k != kind})
    assert section_of(sentence, from_user=from_user) == "context"


def test_the_english_word_tables_are_read(registered: None) -> None:
    assert "the" not in content_tokens("the lanterns")
    assert not names_something("Anyway it rained")
    assert compress("Oh, the build passed haha") == "The build passed"
    assert header_date("Session 3, 8 May 2023") == "8 May 2023"
    assert is_question("Where did it go?")
    assert trim_clauses("We met Anna, it was fun, it was fun", {"fun": 0.5}) == "We met Anna."
    _replace(
        "en",
        question_mark="",
        full_stop="!",
        stop_words=_without(en.ENGLISH.stop_words, "the"),
        not_names=_without(en.ENGLISH.not_names, "Anyway"),
        fillers=(),
        laughter="",
        months=(),
        header_words=_without(en.ENGLISH.header_words, "session"),
    )
    assert "the" in content_tokens("the lanterns")
    assert names_something("Anyway it rained")
    assert compress("Oh, the build passed haha") == "Oh, the build passed haha"
    assert header_date("Session 3, 2023-05-08") is None
    assert not DATE.search("8 May 2023")
    assert not is_question("Where did it go?")
    assert trim_clauses("We met Anna, it was fun, it was fun", {"fun": 0.5}) == "We met Anna!"


def test_the_chinese_tables_are_read(registered: None) -> None:
    assert compress("哈哈，我到家了哈哈") == "我到家了"
    assert names_something("下周三见")  # a weekday of zh.WEEKDAYS, as a partial date
    assert speaker_prefix("王磊：我到了")[0] == "王磊"
    assert is_question("你去哪里了？")
    assert sentences("我到了。你呢？") == ["我到了。", "你呢？"]
    assert trim_clauses("我到了，很开心，很开心", {"很开": 0.5, "开心": 0.5}) == "我到了。"
    _replace(
        "zh",
        fillers=(),
        laughter="",
        partial_dates=(),
        speaker_name="",
        sentence_end="",
        clause_end="",
        question_mark="",
    )
    assert compress("哈哈，我到家了哈哈") == "哈哈，我到家了哈哈"
    assert not names_something("下周三见")
    assert speaker_prefix("王磊：我到了")[0] is None
    assert not is_question("你去哪里了？")
    assert sentences("我到了。你呢？") == ["我到了。你呢？"]
    assert trim_clauses("我到了，很开心，很开心", {"很开": 0.5, "开心": 0.5}) == "我到了，很开心，很开心"


@pytest.mark.parametrize(
    ("code", "reply"), [("en", "I've saved that to your memory."), ("zh", "我已经帮你记住了。")]
)
def test_each_save_claim_table_is_read(registered: None, code: str, reply: str) -> None:
    language = next(known for known in lang.languages() if known.code == code)
    assert unbacked_save_note(reply, TaskMemory("x")) == language.not_saved_note
    _replace(code, save_claim=None)
    assert unbacked_save_note(reply, TaskMemory("x")) is None


def test_each_date_table_is_read(registered: None) -> None:
    assert relative_days("three days ago; the day before yesterday", WED) == {
        date(2026, 3, 15),
        date(2026, 3, 16),
    }
    assert relative_days("上上周六", WED) == {date(2026, 3, 7)}
    assert relative_days("二十一天前", WED) == {date(2026, 2, 25)}
    assert query_days("2026年3月14日") == {date(2026, 3, 14)}
    mentions = day_mentions([date(2023, 5, 8)])
    assert mentions is not None and mentions.search("8 May 2023") and mentions.search("2023年5月8日")
    _replace(
        "en",
        number_words={k: v for k, v in en.ENGLISH.number_words.items() if k != "three"},
        day_phrases=en.ENGLISH.day_phrases[1:],
        date_spellings=(),
    )
    assert relative_days("three days ago; the day before yesterday", WED) == {
        date(2026, 3, 17)
    }  # "yesterday"
    _replace("zh", weeks_back={k: v for k, v in zh.CHINESE.weeks_back.items() if k != "上上"}, tens_word="")
    assert relative_days("上上周六", WED) == frozenset()
    assert relative_days("二十一天前", WED) == frozenset()
    assert query_days("2026年3月14日") == {date(2026, 3, 14)}
    _replace("zh", written_dates=())
    assert query_days("2026年3月14日") == {date(2026, 3, 14)}  # its month-day phrase carries the year too
    assert query_days("2026年3月14日", WED) == {date(2026, 3, 14)}
    _replace("zh", day_phrases=tuple(p for p in zh.CHINESE.day_phrases if p.kind != "month_day"))
    assert query_days("2026年3月14日") == frozenset()
    mentions = day_mentions([date(2023, 5, 8)])
    assert mentions is not None and not mentions.search("8 May 2023") and mentions.search("2023年5月8日")


def test_each_when_table_is_read(registered: None) -> None:
    assert asks_when("When did you move?") and asks_when("你什么时候搬的家？")
    assert says_when("two weeks ago") and says_when("back in May") and says_when("我们上周搬家了")
    _replace("en", when_questions=(), time_words=frozenset(), months=())
    assert not asks_when("When did you move?") and asks_when("你什么时候搬的家？")
    assert not says_when("two weeks ago") and not says_when("back in May")
    assert says_when("on Friday") and says_when("in 2021")  # its weekday table; a year in any language
    _replace("zh", when_questions=(), time_phrases=())
    assert not asks_when("你什么时候搬的家？") and not says_when("我们上周搬家了")
    assert says_when("我们去年搬家了")  # its partial dates
    _replace("zh", letters="")
    assert not says_when("我们去年搬家了")


# --- one definition of CJK ------------------------------------------------------------------------------


def test_the_script_classes_are_built_from_the_one_block_table() -> None:
    assert scripts.HAN_CHAR.fullmatch("王") and not scripts.HAN_CHAR.fullmatch("㐀")  # Extension A
    assert scripts.HAN_RUN.fullmatch("㐀王") and not scripts.HAN_RUN.fullmatch("か")
    assert scripts.CJK_LETTER_RUN.fullmatch("王かい한") and not scripts.CJK_LETTER_RUN.fullmatch("，")
    assert scripts.CJK_WIDE_CHAR.fullmatch("，") and scripts.CJK_WIDE_CHAR.fullmatch("㊀")
    assert not scripts.CJK_WIDE_CHAR.fullmatch("a")
    everything = {chr(c) for lo, hi in scripts.BLOCKS.values() for c in range(lo, hi + 1)}
    assert all(scripts.CJK_WIDE_CHAR.fullmatch(c) for c in everything)


def test_readers_of_cjk_follow_the_block_table() -> None:
    """Each reader counts by the classes of :mod:`contextmem.lang.scripts`: a character of a block the
    reader names counts, one outside it does not."""
    counter = HeuristicCounter()
    assert counter.count_text("，" * 100) > counter.count_text("," * 100)  # full-width: a wide char
    assert detect_language([UserMessage("豈" * 10)]) == "zh"  # a compatibility ideograph
    assert detect_language([UserMessage("か" * 10 + "a")]) == "en"  # kana is not Chinese
    assert set(zh.DIGITS) <= set(zh.NUMERALS)
