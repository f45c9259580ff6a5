"""Labelled-set scoring (recall@k, MRR, latency) and the CLI's ``memory search --batch`` / ``memory eval``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from contextmem.cli.main import main
from contextmem.errors import MessageFormatError
from contextmem.eval.memory import (
    LabelledQuery,
    QueryResult,
    Relevant,
    labelled_query,
    parse_relevant,
    score,
)
from contextmem.memory import MemoryHit


def _hit(path: str, start: int, end: int) -> MemoryHit:
    return MemoryHit(path, start, end, 1.0, "", "default", "core")


def test_relevant_items_in_every_form() -> None:
    assert parse_relevant("memory/2026-01-05.md:3") == Relevant("memory/2026-01-05.md", 3, 3)
    assert parse_relevant("MEMORY.md:2-9") == Relevant("MEMORY.md", 2, 9)
    assert parse_relevant("MEMORY.md") == Relevant("MEMORY.md")
    assert parse_relevant("notes:draft.md") == Relevant("notes:draft.md")  # not a line number: all path
    assert parse_relevant({"path": "MEMORY.md", "line": 4}) == Relevant("MEMORY.md", 4, 4)
    assert parse_relevant({"path": "a.md", "start_line": 2, "end_line": 5}) == Relevant("a.md", 2, 5)
    for bad in ({"line": 3}, {"path": "a.md", "line": 0}, {"path": "a.md", "line": True}, 7, ":3"):
        with pytest.raises(MessageFormatError):
            parse_relevant(bad)
    with pytest.raises(MessageFormatError, match="relevant"):
        labelled_query({"query": "x", "relevant": []}, "1")
    assert labelled_query({"query": "x", "relevant": ["a.md"]}, "7").id == "7"


def test_a_hit_counts_when_it_covers_a_relevant_line() -> None:
    assert Relevant("a.md", 3, 3).covered_by(_hit("a.md", 1, 4))
    assert not Relevant("a.md", 5, 5).covered_by(_hit("a.md", 1, 4))
    assert not Relevant("a.md", 3, 3).covered_by(_hit("b.md", 1, 4))
    assert Relevant("a.md", 4, 8).covered_by(_hit("a.md", 1, 4))
    assert Relevant("a.md").covered_by(_hit("a.md", 40, 41))


def test_recall_mrr_and_latency_are_averaged_over_queries() -> None:
    two = LabelledQuery("two", "q", (Relevant("a.md", 1, 1), Relevant("b.md", 9, 9)))
    miss = LabelledQuery("miss", "q", (Relevant("c.md", 1, 1),))
    results = [
        QueryResult(two, [_hit("x.md", 1, 2), _hit("a.md", 1, 3), _hit("b.md", 8, 9)], 0.010),
        QueryResult(miss, [_hit("x.md", 1, 2)], 0.030),
    ]
    report = score(results, (1, 2, 3))
    assert report.queries == 2
    assert report.recall == {1: 0.0, 2: pytest.approx(0.25), 3: pytest.approx(0.5)}
    assert report.mrr == pytest.approx(0.25)  # 1/2 for the first query, 0 for the second
    assert report.latency_p50_ms == pytest.approx(20.0)
    assert report.missed == ["miss"]
    assert report.to_dict()["recall@3"] == 0.5


def _workspace(tmp_path: Path) -> list[str]:
    (tmp_path / "memory").mkdir()
    (tmp_path / "MEMORY.md").write_text("# Core memory\n\n- The billing database moved to port 5433.\n")
    (tmp_path / "memory" / "2026-01-05.md").write_text("## 10:00\n\n订单服务内存上限调到 1536Mi。\n")
    return ["--workspace", str(tmp_path), "--embedder", "hash"]


def test_batch_search_prints_one_result_line_per_query(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = _workspace(tmp_path)
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "a", "query": "billing database port"}\n\n{"id": 2, "query": "内存上限"}\n')
    assert main([*common, "memory", "search", "--batch", str(queries), "--k", "1", "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["id"] for x in lines] == ["a", "2"]
    assert lines[0]["hits"][0]["path"] == "MEMORY.md" and "5433" in lines[0]["hits"][0]["snippet"]
    assert lines[1]["hits"][0]["path"] == "memory/2026-01-05.md"


def test_batch_errors_name_the_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = _workspace(tmp_path)
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "a", "query": "port"}\n{"id": "b"}\n')
    assert main([*common, "memory", "search", "--batch", str(queries), "--json"]) == 2
    assert f"{queries}:2:" in capsys.readouterr().err
    assert main([*common, "memory", "search", "port", "--batch", str(queries)]) == 2
    assert "not both" in capsys.readouterr().err


def test_eval_scores_a_labelled_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    common = _workspace(tmp_path)
    labelled = tmp_path / "l.jsonl"
    labelled.write_text(
        '{"id": "port", "query": "billing database port", "relevant": ["MEMORY.md:3"]}\n'
        '{"id": "mem", "query": "内存上限", "relevant": [{"path": "memory/2026-01-05.md", "line": 3}]}\n'
        '{"id": "none", "query": "billing database port", "relevant": ["memory/2026-01-05.md:1"]}\n'
    )
    assert main([*common, "memory", "eval", str(labelled), "--k", "1,5", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["queries"] == 3 and report["recall@1"] == pytest.approx(2 / 3, abs=1e-4)
    assert report["missed"] == [] and report["latency_p95_ms"] >= report["latency_p50_ms"] >= 0
    assert main([*common, "memory", "eval", str(labelled)]) == 0
    assert "recall@10" in capsys.readouterr().out
    labelled.write_text('{"id": "x", "query": "port", "relevant": [{"path": "MEMORY.md", "line": -1}]}\n')
    assert main([*common, "memory", "eval", str(labelled)]) == 2
    assert f"{labelled}:1: relevant[0].line" in capsys.readouterr().err
    assert main([*common, "memory", "eval", str(labelled), "--k", "0,x"]) == 2  # a usage error: one line
    assert "Fix: e.g. 1,5,10" in capsys.readouterr().err
