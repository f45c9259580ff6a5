"""The property tests' example counts are what tests/conftest.py says they are.

conftest.py says the profile's count applies to every property test but those that pin a number, and
that each pin says why in a comment just above it. This checks the second half.
"""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
PINNED = re.compile(r"max_examples=\d")


def unexplained_pins(source: str) -> list[int]:
    """Line numbers (1-based) of ``max_examples=<number>`` without a ``# Pinned at <number>`` comment
    among the lines just above it (the decorators of the same test)."""
    lines = source.splitlines()
    bad = []
    for i, line in enumerate(lines):
        found = PINNED.search(line)
        if found is None or line.lstrip().startswith("#"):
            continue
        number = re.match(r"max_examples=([\d_]+)", line[found.start() :])
        assert number is not None
        above = []
        for prev in reversed(lines[:i]):
            if not prev.strip() or not prev.lstrip().startswith(("@", "#")):
                break
            above.append(prev)
        if not any(f"# Pinned at {number.group(1)} in every profile:" in a for a in above):
            bad.append(i + 1)
    return bad


def test_every_pinned_example_count_says_why() -> None:
    bad = {
        path.name: unexplained_pins(path.read_text(encoding="utf-8"))
        for path in TESTS.rglob("test_*.py")
        if path.name != Path(__file__).name
    }
    assert {name: lines for name, lines in bad.items() if lines} == {}


def test_a_pin_without_its_reason_is_caught() -> None:
    explained = "# Pinned at 40 in every profile: slow.\n@given(st.integers())\n@settings(max_examples=40)\n"
    assert unexplained_pins(explained) == []
    assert unexplained_pins("@settings(max_examples=40)\n") == [1]
    assert unexplained_pins("# Pinned at 30 in every profile: slow.\n@settings(max_examples=40)\n") == [2]
    assert unexplained_pins("# why\n\n@settings(max_examples=40)\n") == [3]  # a blank line ends the block
    assert unexplained_pins("@settings(max_examples=HISTORY_EXAMPLES)\n") == []  # the profile's own count
