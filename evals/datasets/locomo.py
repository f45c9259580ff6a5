"""LoCoMo's dev conversations, read at run time from ``../shared/data/locomo-dev`` (never copied here).

LoCoMo (Maharana et al., ACL 2024), CC BY-NC 4.0: six of its ten long multi-session conversations
(``locomo_dev.json``). The other four are the held-out test; nothing here reads them.

:func:`conversations` gives each conversation's sessions (date, turns) and questions. Evidence is
normalised where the file spells it loosely (``D:11:26``, ``D30:05``, several ids in one string); an id
that names no turn is dropped, and a question left with no evidence is kept for answer checks but not
for retrieval.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

__all__ = ["DATA", "Conversation", "Question", "Session", "Turn", "conversations"]

DATA = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo-dev" / "locomo_dev.json"
_ID_RE = re.compile(r"D:?(\d+):0*(\d+)")


@dataclass(frozen=True, slots=True)
class Turn:
    dia_id: str  # "D3:7": session 3, turn 7
    speaker: str
    text: str
    caption: str | None  # what a shared photo shows (the authors' BLIP caption)


@dataclass(frozen=True, slots=True)
class Session:
    number: int
    when: str  # as written: "7:48 pm on 21 May, 2023"
    day: date
    turns: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class Question:
    question: str
    answer: str | None  # None for the adversarial category (5): it has no answer
    evidence: tuple[str, ...]
    category: int  # 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial


@dataclass(frozen=True, slots=True)
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    sessions: tuple[Session, ...]
    questions: tuple[Question, ...]

    @property
    def turns(self) -> list[Turn]:
        return [t for s in self.sessions for t in s.turns]


def _session(number: int, when: str, turns: list[dict[str, Any]]) -> Session:
    day = datetime.strptime(when.split(" on ", 1)[1], "%d %B, %Y").date()
    return Session(
        number,
        when,
        day,
        tuple(Turn(t["dia_id"], t["speaker"], t["text"], t.get("blip_caption")) for t in turns),
    )


def _evidence(raw: list[str], known: set[str]) -> tuple[str, ...]:
    ids = [f"D{s}:{t}" for item in raw for s, t in _ID_RE.findall(item)]
    return tuple(dict.fromkeys(i for i in ids if i in known))


def conversations(path: Path = DATA) -> list[Conversation]:
    """The conversations of ``path`` (default: the dev set), in file order."""
    out = []
    for item in json.loads(path.read_text(encoding="utf-8")):
        conv = item["conversation"]
        numbers = sorted(int(k.split("_")[1]) for k in conv if re.fullmatch(r"session_\d+", k))
        sessions = tuple(_session(n, conv[f"session_{n}_date_time"], conv[f"session_{n}"]) for n in numbers)
        known = {t.dia_id for s in sessions for t in s.turns}
        questions = tuple(
            Question(
                q["question"],
                None if "answer" not in q else str(q["answer"]),
                _evidence(q["evidence"], known),
                int(q["category"]),
            )
            for q in item["qa"]
        )
        out.append(
            Conversation(item["sample_id"], (conv["speaker_a"], conv["speaker_b"]), sessions, questions)
        )
    return out
