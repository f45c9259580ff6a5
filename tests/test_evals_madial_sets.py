"""The MADial-derived compaction sets: told as people tell news, and a held-out set that shares nothing
with the dev set (issue 50, items 2 and 3). Built here from invented MADial-shaped data, not the
benchmark's."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from evals.datasets import compaction
from evals.datasets.compaction import first_person

SAM = [  # user 1 (he): the dev set
    ("2022-03-01", "Sam and his dad went swimming together, which made him very happy."),
    ("2022-03-05", "Dad gave Sam a red kite, and Sam was thrilled."),
    ("2022-03-09", "Sam is building a birdhouse with his cousin Leo and feels proud."),
    ("2022-03-14", "Sam baked banana bread for the school fair."),
    ("2022-03-20", "Sam lost his blue scarf at the skating rink."),
    ("2022-04-02", "Sam and Leo planted tomatoes in the community garden."),
    ("2022-04-11", "Sam watched a meteor shower from the hilltop."),
    ("2022-04-19", "Sam won a chess match against his uncle."),
    ("2022-05-03", "Sam visited the aquarium and saw a giant octopus."),
    ("2022-05-17", "Sam repaired an old radio in the garage."),
    ("2022-05-30", "Sam sang in the spring choir concert."),
    ("2022-06-08", "Sam and his classmates painted a mural on the library wall."),
]
MIA = [  # user 2 (she): the held-out set
    ("2022-03-05", "Mia and her aunt went to the harbour to watch the sailing boats."),
    ("2022-03-21", "Mia is learning the flute and feels nervous before lessons."),
    ("2022-04-04", "The teacher praised Mia for her poem about winter foxes."),
    ("2022-04-27", "Mia found a tiny hedgehog under the hedge, and she was delighted."),
    ("2022-05-13", "Mia planted tomatoes in the community garden."),  # also one of Sam's answers
]
ZH = {"Sam": "他", "Mia": "她"}


def write_madial(root: Path) -> None:
    """MADial-Bench's layout (``en/``, ``ch/``: a dialogue file and a memory file, JSON per line)."""
    for folder, lang in (("en", "en"), ("ch", "zh")):
        (root / folder).mkdir(parents=True)
        dialogues, memories = [], {}
        for user_id, (name, events) in enumerate((("Sam", SAM), ("Mia", MIA)), start=1):
            for n in range(3):
                lines = ["<BOD>\n", f'<{name}>: "I have a question number {n}."\n']
                lines += ['<Assistant>: "Sure, ask away."\n', f'<{name}>: "Thanks a lot."\n', "<EOD>\n"]
                dialogues.append(
                    {"dialogue": lines, "test-turn": [1], "relevant-id": [1], "user-id": user_id}
                )
            for day, event in events:
                text = (
                    event
                    if lang == "en"
                    else f"{name}和{ZH[name]}的朋友一起在{day}做了手工，{ZH[name]}很开心。"
                )
                memories[str(len(memories) + 1)] = {"time": day, "scene": "", "emotion": "", "event": text}
        prefix = "MADial-Bench-en" if lang == "en" else "MADial-Bench-zh"
        (root / folder / f"{prefix}-dialogue.json").write_text(
            "\n".join(json.dumps(d) for d in dialogues) + "\n", encoding="utf-8"
        )
        (root / folder / f"{prefix}-memory.json").write_text(
            "\n".join(json.dumps({k: v}, ensure_ascii=False) for k, v in memories.items()) + "\n",
            encoding="utf-8",
        )


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data, out = tmp_path_factory.mktemp("madial"), tmp_path_factory.mktemp("sets")
    write_madial(data)
    saved, compaction.MADIAL = compaction.MADIAL, data
    try:
        compaction.build_all(out)
    finally:
        compaction.MADIAL = saved
    return out


def qa(folder: Path) -> list[dict[str, str]]:
    return [json.loads(x) for p in sorted(folder.glob("*.qa.jsonl")) for x in p.read_text().splitlines() if x]


def test_the_held_out_set_shares_no_user_memory_or_answer_with_the_dev_set(built: Path) -> None:
    """Every held-out draw used to tell the tuned draw's users and memories again (310-314 of ~375
    answers identical); the held-out set is now MADial's other user, and asks no answer the dev set asks
    (Mia's tomatoes are not asked: Sam's set asks them)."""
    dev, held = built / "madial", built / "madial-heldout"
    assert {p.name for p in dev.glob("*.jsonl")} == {
        f"{x}_madial_user1{e}" for x in ("en", "zh") for e in (".jsonl", ".qa.jsonl")
    }
    assert {p.stem.split(".")[0] for p in held.glob("*.jsonl")} == {"en_madial_user2", "zh_madial_user2"}
    dev_text = " ".join(p.read_text() for p in dev.glob("*.jsonl"))
    assert "Mia" not in dev_text and "Sam" not in " ".join(p.read_text() for p in held.glob("*.jsonl"))
    asked = {q["answer"].lower() for q in qa(dev)}
    assert qa(held) and not [q for q in qa(held) if q["answer"].lower() in asked]


def test_a_memory_is_told_in_varied_ways_not_after_one_fixed_lead_in(built: Path) -> None:
    """The generator put "Oh, something I wanted to tell you:" before every memory, and the language
    tables learnt to strip exactly that phrase (66.9% -> 50.0% of the answers kept without it)."""
    messages = [
        json.loads(x)["content"]
        for x in (built / "madial" / "en_madial_user1.jsonl").read_text().splitlines()
    ]
    openings = set()
    told = [
        json.loads(x)["told"]
        for x in (built / "madial" / "en_madial_user1.qa.jsonl").read_text().split("\n")
        if x
    ]
    for q in told:
        said = next(m for m in messages if q in m).split("\n")[-1]
        openings.add(said[: said.index(q)].strip())
    assert "" in openings and len(openings) >= 3
    assert not any("something I wanted to tell you" in m for m in messages)
    assert not [m for m in messages if re.search(r"(?:^|\n|[.?!,] )I and ", m)]


@pytest.mark.parametrize(
    ("event", "he", "told"),
    [
        (
            "Sam and his dad went swimming together, which made him very happy.",
            True,
            (
                "My dad and I went swimming together, which made me very happy.",
                "Me and my dad went swimming together, which made me very happy.",
            ),
        ),
        (
            "Dad gave Sam a red kite, and Sam was thrilled.",
            True,
            ("Dad gave me a red kite, and I was thrilled.",),
        ),
        (
            "Mia is learning the flute with her aunt and feels nervous.",
            False,
            ("I am learning the flute with my aunt and feel nervous.",),
        ),
        (
            "The teacher praised Mia for her poem, which made her feel proud.",
            False,
            ("The teacher praised me for my poem, which made me feel proud.",),
        ),
    ],
)
def test_an_event_is_put_in_the_first_person_as_a_person_says_it(
    event: str, he: bool, told: tuple[str, ...]
) -> None:
    """Not "I and his dad went swimming, which made him very happy": the user's name became "I" and
    nothing else changed (and the English event cue learnt "I and X")."""
    user = "Sam" if he else "Mia"
    assert {first_person(event, user, False, random.Random(seed), he) for seed in range(20)} == set(told)


def test_a_chinese_event_is_put_in_the_first_person() -> None:
    assert first_person("Sam和他的爸爸去游泳，他很开心。", "Sam", True) == "我和我的爸爸去游泳，我很开心。"
    assert (
        first_person("Mia和其他同学一起画画，她们都很开心。", "Mia", True)
        == "我和其他同学一起画画，她们都很开心。"
    )
