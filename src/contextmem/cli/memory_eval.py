"""``memory search --batch`` and ``memory eval``: many queries, one process, one model load.

Both read JSON Lines (``-``: stdin) through :func:`contextmem.jsonl.read_jsonl`, so a bad line is reported
as ``file:line: field: problem. Fix: ...``. The scoring is the library's
(:mod:`contextmem.eval.memory`); this module only reads, calls and prints.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from ..errors import JsonlLineError, MessageFormatError
from ..jsonl import read_jsonl, source_name
from .render import hits_table, json_line, shown, table

if TYPE_CHECKING:
    from ..eval.memory import EvalReport, LabelledQuery
    from ..memory import MemoryHit, MemoryIndex

__all__ = [
    "EVAL_HELP",
    "HIT_KEYS",
    "eval_report_text",
    "hit_record",
    "parse_ks",
    "read_labelled",
    "read_queries",
    "run_eval",
    "search_batch",
]

HIT_KEYS = ("path", "start_line", "end_line", "score", "snippet")

EVAL_HELP = """\
score memory search on a labelled set: recall@k, MRR, latency p50/p95.

LABELLED is JSON Lines ('-': stdin), one query per line:
  {"id": "q1", "query": "Who is my manager?", "relevant": ["memory/2026-01-05.md:3"]}
A relevant item is "PATH:LINE", "PATH:START-END", "PATH" (any hit of the file), or an object
{"path": PATH, "line": N} / {"path": PATH, "start_line": A, "end_line": B}. A hit counts when it is a
chunk of PATH covering those lines. recall@k: share of a query's relevant items covered by the top k
hits; MRR: 1/rank of the first covering hit within the top max(k); latency: each search call's wall time,
the query's embedding included.
"""


def hit_record(hit: MemoryHit) -> dict[str, Any]:
    """What ``memory search --json`` prints for a hit."""
    record = hit.to_dict()
    return {key: record[key] for key in HIT_KEYS}


def read_queries(source: str) -> list[tuple[str, str]]:
    """``(id, query)`` of each line ``{"id", "query"}`` of ``source`` (id defaults to the line number)."""
    out = []
    for number, entry in read_jsonl(source, what="query"):
        query = entry.get("query")
        if not isinstance(query, str):
            problem = f"has no string 'query': {json.dumps(entry, ensure_ascii=False)[:80]}"
            raise JsonlLineError(source_name(source), number, problem, 'write {"id": 1, "query": "..."}')
        out.append((str(entry.get("id", number)), query))
    return out


def read_labelled(source: str) -> list[LabelledQuery]:
    """The labelled queries of ``source`` (format: :mod:`contextmem.eval.memory`)."""
    from ..eval.memory import labelled_query

    out = []
    for number, entry in read_jsonl(source, what="labelled query"):
        try:
            out.append(labelled_query(entry, str(number)))
        except MessageFormatError as exc:
            raise JsonlLineError(source_name(source), number, exc.problem, exc.fix, path=exc.field) from None
    return out


def search_batch(index: MemoryIndex, args: argparse.Namespace) -> int:
    """One ``{"id", "hits"}`` line per query with ``--json``, else a hit table per query."""
    queries = read_queries(args.batch)
    with index:
        index.sync()
        for query_id, query in queries:
            hits = index.search(query, args.k, mode=args.mode, sync=False)
            if args.json:
                record = {"id": query_id, "hits": [hit_record(h) for h in hits]}
                print(json_line(record), flush=True)
            else:
                print(f"== {shown(f'{query_id}: {query}')}\n{hits_table(hits)}", flush=True)
    return 0


def parse_ks(text: str) -> tuple[int, ...]:
    """``"1,5,10"`` -> (1, 5, 10): the cut-offs of ``memory eval --k``."""
    try:
        ks = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        ks = ()
    if not ks or ks[0] < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a list of whole numbers >= 1. Fix: e.g. 1,5,10")
    return ks


def eval_report_text(report: EvalReport) -> str:
    rows = [(f"recall@{k}", f"{100 * v:.1f}") for k, v in report.recall.items()]
    rows += [
        ("MRR", f"{100 * report.mrr:.1f}"),
        ("latency p50", f"{report.latency_p50_ms:.1f} ms"),
        ("latency p95", f"{report.latency_p95_ms:.1f} ms"),
    ]
    missed = ""
    if report.missed:
        missed = f"\nmissed ({len(report.missed)}): {shown(', '.join(report.missed[:20]))}"
    return f"{report.queries} queries\n" + table(rows, ("metric", "value")) + missed


def run_eval(index: MemoryIndex, args: argparse.Namespace) -> int:
    from ..eval.memory import evaluate

    queries = read_labelled(args.labelled)
    with index:
        report = evaluate(index, queries, args.k, mode=args.mode)
    print(json_line(report.to_dict()) if args.json else eval_report_text(report))
    return 0
