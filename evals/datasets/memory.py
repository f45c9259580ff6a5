"""A memory-search dev set of multi-section daily files with labelled evidence lines.

Built from the compaction dev sets (``<set>/<name>.jsonl`` of :func:`evals.datasets.compaction_sets`:
long multi-session conversations whose first user message of a session starts with
``[Session N · DATE]`` / ``[对话 N · DATE]``; ``<name>.qa.jsonl``: ``{"question", "answer"}`` with the
answer verbatim in the conversation).
Each conversation becomes one workspace laid out as contextmem's memory writer lays it out
(:func:`contextmem.memory.append_daily`): one daily file ``memory/YYYY-MM-DD.md`` per session date
(sessions of the same day follow each other in it), one entry ``## HH:MM`` per :data:`EXCHANGES`
exchanges, its body the turns as ``speaker: text`` lines, entries separated by a blank line.

Each question becomes one labelled query (the question verbatim) in the format ``contextmem memory eval``
reads (:mod:`contextmem.eval.memory`): ``{"id", "query", "relevant": ["PATH:LINE", ...]}``, relevant =
the lines holding the evidence:

* ``madial`` "What happened to X on DATE?" (answer: a span of the event): the line of that day's file
  where the user tells the event and that holds the answer (else every line of that file holding it).
* ``madial`` "When did this happen to X: EVENT?" (answer: the date): the line of the answer's day file
  where the user tells that event (of that day's telling lines, the one sharing most words with the
  question).
* ``synthetic`` (answer: a name, place, thing...): of the lines holding the answer, the one sharing most
  words with the question (the latest on a tie: a fact stated again is an update).

The same question asked twice of one conversation (two memories of one day) is one query with both
answers' lines. Output, per conversation ``NAME`` of set ``SET``::

    OUT/SET/NAME/memory/YYYY-MM-DD.md     the workspace (namespace "default")
    OUT/SET/NAME.jsonl                    the labelled queries

``--turns`` writes the held-out benchmark's layout instead (every turn its own ``## HH:MM`` section, so
every turn is one chunk) to ``OUT/SET-turns/``; ``--sets`` takes any compaction dev set,
the held-out one included (``madial-heldout``, MADial's other user, held out since the split).

Not built from LoCoMo (the held-out benchmark). Deterministic. :func:`evals.datasets.memory_sets` builds
the daily sets and the turn sets (:data:`TURN_SETS`) on first use into ``evals/.cache/``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path

SETS = ("madial", "synthetic")
TURN_SETS = ("madial", "synthetic", "madial-heldout", "synthetic-redraw1")
EXCHANGES = 3  # user + assistant exchanges per ``## HH:MM`` entry
_HEADER_RE = re.compile(r"^(?P<speaker>[^\[\n]*?:\s*)?\[(?:Session|对话) (?P<n>\d+) · (?P<when>[^\]]+)\]\n")
_WORD_RE = re.compile(r"[\w’']+|[\u4e00-\u9fff]")


def parse_day(text: str) -> date:
    """``2022-01-01``, ``6 August 2023`` or ``2023年8月6日``."""
    text = text.strip()
    if m := re.fullmatch(r"(\d{4})年(\d{1,2})月(\d{1,2})日", text):
        return date(int(m[1]), int(m[2]), int(m[3]))
    for form in ("%Y-%m-%d", "%d %B %Y"):
        try:
            return datetime.strptime(text, form).date()
        except ValueError:
            continue
    raise ValueError(f"session date {text!r} is not understood")


@dataclass
class Workspace:
    """The daily files of one conversation: day -> lines, and where each line came from."""

    days: dict[date, list[str]] = field(default_factory=dict)

    def path(self, day: date) -> str:
        return f"memory/{day.isoformat()}.md"

    def lines(self) -> list[tuple[str, int, str]]:
        """``(path, line number, text)`` of every line of every file."""
        return [(self.path(d), n, t) for d, ls in self.days.items() for n, t in enumerate(ls, start=1)]


def build_workspace(messages: list[dict[str, str]], turns_per_entry: int = 2 * EXCHANGES) -> Workspace:
    """Sessions -> daily files: per session, entries ``## HH:MM`` of ``turns_per_entry`` turns each
    (:data:`EXCHANGES` exchanges; 1 is the held-out benchmark's layout, every turn a section)."""
    sessions: list[tuple[date, list[str]]] = []
    for message in messages:
        content = message["content"]
        if message["role"] == "user" and (m := _HEADER_RE.match(content)):
            sessions.append((parse_day(m["when"]), []))
            content = (m["speaker"] or "") + content[m.end() :]
        speaker = "" if re.match(r"^[^:\s]{1,20}: ", content) else f"{message['role']}: "
        sessions[-1][1].append(speaker + " ".join(content.split()))
    ws = Workspace()
    earlier: dict[date, int] = {}  # sessions already written to a day's file
    for day, turns in sessions:
        lines = ws.days.setdefault(day, [])
        hour = min(23, 9 + 2 * earlier.get(day, 0))
        earlier[day] = earlier.get(day, 0) + 1
        step = 1 if turns_per_entry == 1 else 5  # minutes between entries
        for n, start in enumerate(range(0, len(turns), turns_per_entry)):
            if lines:
                lines.append("")
            lines += [f"## {hour:02d}:{min(59, step * n):02d}", "", *turns[start : start + turns_per_entry]]
    return ws


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD_RE.findall(text)}


def _best(lines: list[tuple[str, int, str]], question: str) -> list[tuple[str, int, str]]:
    """The line sharing most words with ``question`` (the latest on a tie)."""
    if not lines:
        return []
    asked = _words(question)
    return [max(reversed(lines), key=lambda x: len(asked & _words(x[2])))]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def evidence(
    ws: Workspace, question: str, answer: str, kind: str, told: Sequence[str] = ()
) -> list[tuple[str, int, str]]:
    """The labelled lines of one question (see the module docstring); ``told``: the conversation's
    tellings of its memories (the ``told`` of its MADial questions, as the generator wrote them)."""
    everything = ws.lines()
    tellings = [_norm(t) for t in told]

    def tells(text: str) -> bool:
        return any(t in _norm(text) for t in tellings)

    holding = [x for x in everything if _norm(answer) in _norm(x[2])]
    if kind == "synthetic":
        return _best(holding, question)
    try:
        day = date.fromisoformat(answer)  # "When did this happen": the telling line of that day
    except ValueError:
        day = None
    if day is not None:
        told_there = [x for x in everything if x[0] == ws.path(day) and tells(x[2])]
        return _best(told_there, question)
    asked = re.search(r"\d{4}-\d{2}-\d{2}", question)
    if asked is None:
        return holding
    that_day = [x for x in holding if x[0] == ws.path(date.fromisoformat(asked[0]))]
    told_there = [x for x in that_day if tells(x[2])]
    return told_there or that_day


def build(
    kind: str, source: Path, out: Path, turns_per_entry: int = 2 * EXCHANGES
) -> tuple[int, int, int, int]:
    """Write one conversation's workspace and labelled set; (files, lines, queries, dropped questions)."""
    messages = [json.loads(x) for x in source.read_text(encoding="utf-8").splitlines() if x.strip()]
    qa_file = source.with_name(source.name.replace(".jsonl", ".qa.jsonl"))
    qa = [json.loads(x) for x in qa_file.read_text(encoding="utf-8").splitlines() if x.strip()]
    ws = build_workspace(messages, turns_per_entry)
    root = out / source.stem
    shutil.rmtree(root, ignore_errors=True)
    (root / "memory").mkdir(parents=True)
    for day, lines in ws.days.items():
        (root / ws.path(day)).write_text("\n".join(lines) + "\n", encoding="utf-8")
    queries: dict[str, list[str]] = {}
    dropped = 0
    told = sorted({item["told"] for item in qa if item.get("told")})
    for item in qa:
        found = evidence(ws, item["question"], item["answer"], kind.partition("-")[0], told)
        if not found:
            dropped += 1
            continue
        relevant = queries.setdefault(item["question"], [])
        relevant += [f"{p}:{n}" for p, n, _ in found if f"{p}:{n}" not in relevant]
    rows = [
        json.dumps({"id": f"{source.stem}-{i}", "query": q, "relevant": r}, ensure_ascii=False)
        for i, (q, r) in enumerate(queries.items())
    ]
    (out / f"{source.stem}.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return len(ws.days), sum(len(ls) for ls in ws.days.values()), len(rows), dropped


def build_sets(source: Path, out: Path, sets: Sequence[str], *, turns: bool = False) -> None:
    """Each compaction set of ``sets`` in ``source`` -> ``out/SET`` (``out/SET-turns`` with ``turns``)."""
    for kind in sets:
        folder = out / (f"{kind}-turns" if turns else kind)
        folder.mkdir(parents=True, exist_ok=True)
        for conversation in sorted((source / kind).glob("*.jsonl")):
            if conversation.name.endswith(".qa.jsonl"):
                continue
            files, lines, queries, dropped = build(kind, conversation, folder, 1 if turns else 2 * EXCHANGES)
            print(
                f"{folder.name}/{conversation.stem}: {files} files, {lines} lines, {queries} queries, "
                f"{dropped} dropped"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", type=Path, help="the folder to write")
    parser.add_argument(
        "--sets", nargs="*", default=list(SETS), help="compaction dev sets (default: %(default)s)"
    )
    parser.add_argument(
        "--turns", action="store_true", help="every turn its own section (written to SET-turns)"
    )
    args = parser.parse_args()
    from evals.datasets import compaction_sets

    build_sets(compaction_sets(), args.out, args.sets, turns=args.turns)


if __name__ == "__main__":
    main()
