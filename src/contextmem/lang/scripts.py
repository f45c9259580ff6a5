"""The one definition of CJK: the Unicode blocks of the scripts written without spaces between words.

Each reader names the blocks it means, because they mean different things by "CJK": a Chinese name is
made of basic Han ideographs (:data:`HAN`); Chinese text for keywords and bigrams also reads Extension A
(:data:`HAN_EXTENDED`); telling the conversation's language reads the compatibility ideographs too
(:data:`IDEOGRAPHS`); keyword search splits every script written without spaces, kana and hangul
included (:data:`CJK_LETTERS`); and a token estimate counts every wide character, CJK punctuation and
full-width forms included, as about one token (:data:`CJK_WIDE`). All of them are built here, from
:data:`BLOCKS`, and nowhere else.
"""

from __future__ import annotations

import re

__all__ = [
    "BLOCKS",
    "CJK_LETTERS",
    "CJK_LETTER_RUN",
    "CJK_WIDE",
    "CJK_WIDE_CHAR",
    "HAN",
    "HAN_CHAR",
    "HAN_EXTENDED",
    "HAN_RUN",
    "HAN_WITH_SYMBOLS",
    "IDEOGRAPHS",
    "IDEOGRAPH_CHAR",
    "char_class",
]

BLOCKS: dict[str, tuple[int, int]] = {
    "cjk_radicals": (0x2E80, 0x2FFF),  # radicals, Kangxi radicals, ideographic description characters
    "cjk_punctuation": (0x3000, 0x303F),  # 、。「」 and the ideographic space
    "kana": (0x3040, 0x30FF),  # hiragana, katakana
    "cjk_other": (0x3100, 0x33FF),  # bopomofo, compatibility jamo, kanbun, strokes, enclosed, squared
    "han_ext_a": (0x3400, 0x4DBF),  # CJK Unified Ideographs Extension A
    "yijing": (0x4DC0, 0x4DFF),  # Yijing hexagram symbols, between Extension A and the basic block
    "han": (0x4E00, 0x9FFF),  # CJK Unified Ideographs: the basic block
    "hangul": (0xAC00, 0xD7AF),  # hangul syllables
    "han_compat": (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
    "fullwidth": (0xFF00, 0xFFEF),  # half- and full-width forms: ，！？ and full-width Latin
}
"""Named blocks (first, last code point, inclusive)."""


def char_class(*blocks: str) -> str:
    """The body of a regex character class holding ``blocks`` (names in :data:`BLOCKS`)."""
    return "".join(f"\\u{BLOCKS[name][0]:04x}-\\u{BLOCKS[name][1]:04x}" for name in blocks)


HAN = char_class("han")
"""Basic Han ideographs: what a Chinese name (王磊) or a request's Chinese characters are counted in."""
HAN_EXTENDED = char_class("han_ext_a", "han")
"""Han ideographs with Extension A: Chinese text, split into character bigrams for salience."""
HAN_WITH_SYMBOLS = char_class("han_ext_a", "yijing", "han")
"""Extension A through the basic block without a gap: what a Chinese secret value cannot run into."""
IDEOGRAPHS = char_class("han_ext_a", "han", "han_compat")
"""Every Han ideograph: the share of them in a conversation tells its language."""
CJK_LETTERS = char_class("han_ext_a", "han", "han_compat", "kana", "hangul")
"""Letters of the scripts written without spaces: a keyword index splits their runs itself."""
CJK_WIDE = char_class(*BLOCKS)
"""Every wide character, punctuation and full-width forms included: about one token each."""

HAN_CHAR = re.compile(f"[{HAN}]")
HAN_RUN = re.compile(f"[{HAN_EXTENDED}]+")
IDEOGRAPH_CHAR = re.compile(f"[{IDEOGRAPHS}]")
CJK_LETTER_RUN = re.compile(f"[{CJK_LETTERS}]+")
CJK_WIDE_CHAR = re.compile(f"[{CJK_WIDE}]")
