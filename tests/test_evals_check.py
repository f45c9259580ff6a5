"""``make evals-check`` (evals/check.py): a figure that drops beyond its noise fails, in one line with a Fix.

The figures themselves are re-run by ``make evals-check``, not here (a minute or more); these tests check
the comparison on planted values, and that the committed figures name every figure the check produces.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evals.check import COST, GROUPS, HEADLINE, PERCENT, ZERO, compare, main


def test_a_drop_beyond_the_noise_fails_naming_the_figure_both_values_and_the_fix() -> None:
    now = {"cache seed 1: cache ratio %": (77.0, PERCENT)}
    (line,) = compare({"cache seed 1: cache ratio %": 78.06}, now)
    assert line.startswith("cache seed 1: cache ratio % dropped: committed 78.06, now 77")
    assert "Fix:" in line and "\n" not in line


def test_a_move_within_the_noise_or_an_improvement_passes() -> None:
    assert compare({"ratio": 78.06}, {"ratio": (77.7, PERCENT)}) == []
    assert compare({"ratio": 78.06}, {"ratio": (90.0, PERCENT)}) == []
    assert compare({"billed": 2649.0}, {"billed": (2670.0, COST)}) == []  # +0.8%, under 1%
    assert compare({"billed": 2649.0}, {"billed": (1000.0, COST)}) == []


def test_a_cost_that_rises_beyond_its_noise_fails() -> None:
    """The regression this gate exists for: a long session's cost doubling."""
    (line,) = compare({"billed": 2649.0}, {"billed": (5298.0, COST)})
    assert "committed 2,649, now 5,298" in line


def test_a_count_that_must_stay_zero_fails_at_one() -> None:
    assert compare({"over": 0}, {"over": (1, ZERO)}) != []


def test_a_figure_with_no_committed_value_fails_with_the_command_that_writes_it() -> None:
    (line,) = compare({}, {"new figure": (1.0, PERCENT)})
    assert "python -m evals.check --write" in line


def test_main_fails_on_a_planted_committed_value_above_what_the_code_gives(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(GROUPS, "cache", (lambda: {"cache ratio %": (78.06, PERCENT)}, None))
    headline = tmp_path / "headline.json"
    headline.write_text(json.dumps({"figures": {"cache ratio %": 90.0}}), encoding="utf-8")
    assert main(["--only", "cache", "--headline", str(headline)]) == 1
    assert "cache ratio % dropped: committed 90, now 78.06" in capsys.readouterr().err
    assert main(["--only", "cache", "--headline", str(headline), "--write"]) == 0
    assert main(["--only", "cache", "--headline", str(headline)]) == 0
    assert json.loads(headline.read_text("utf-8"))["engine"]  # the stamp


def test_the_committed_figures_are_stamped_and_cover_every_group() -> None:
    doc = json.loads(HEADLINE.read_text("utf-8"))
    assert {"date", "machine", "cores", "load_average", "engine", "command"} <= set(doc)
    groups = {"cache", "current turn", "compaction", "locomo"}
    assert {g for g in groups if any(name.startswith(g) for name in doc["figures"])} == groups
