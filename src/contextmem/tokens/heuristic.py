"""A CJK-aware token estimate for when no real tokenizer fits the model.

Fitted by least squares against o200k_base on English and Chinese dialogue, Python code, JSON, logs
and agent transcripts with tool output, then scaled up 4% so it errs toward over-counting: over-counting
wastes a little budget, under-counting overflows the window. ``bench/bench_tokens.py`` re-measures the
error. A character rule is badly wrong for Chinese (chars/4 under-counts it by ~60%) because a Chinese
character is most often a token of its own, while an English word of ~4.5 letters is one token; and
numbers split into groups of at most three digits, each a token, with the space before them one more.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..lang.scripts import CJK_WIDE_CHAR

__all__ = ["HeuristicCounter"]

_PUNCT = re.compile(r"[!-/:-@\[-`{-~]")
_SPACE = re.compile(r"\s")
_DIGIT = re.compile(r"\d")
_DIGIT_GROUP = re.compile(r"\d{1,3}")
_SPACE_BEFORE_DIGIT = re.compile(r"\s(?=\d)")


@dataclass(frozen=True, slots=True)
class HeuristicCounter:
    """A linear estimate over character classes (weights per class, fitted; see the module doc)."""

    name: str = "heuristic"
    cjk: float = 0.807
    punct: float = 0.755
    space: float = 0.028
    digit_group: float = 0.875
    space_before_digit: float = 2.878
    other_byte: float = 0.23

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        cjk = len(CJK_WIDE_CHAR.findall(text))
        punct = len(_PUNCT.findall(text))
        space = len(_SPACE.findall(text))
        digits = len(_DIGIT.findall(text))
        groups = len(_DIGIT_GROUP.findall(text))
        space_digit = len(_SPACE_BEFORE_DIGIT.findall(text))
        # CJK characters are 3 UTF-8 bytes each; what remains is mostly letters.
        other = len(text.encode("utf-8", "surrogatepass")) - 3 * cjk - punct - space - digits
        estimate = (
            self.cjk * cjk
            + self.punct * punct
            + self.space * (space - space_digit)
            + self.digit_group * groups
            + self.space_before_digit * space_digit
            + self.other_byte * max(other, 0)
        )
        return max(1, round(estimate))
