"""The one definition of a line of a memory file (``contextmem.textlines``): it is exactly
``str.splitlines``' (issue 49: the note writer knew only ``\\n`` and ``\\r``, the readers every end), and
the writer's indentation keeps every character."""

from __future__ import annotations

from hypothesis import given

from contextmem.textlines import LINE_ENDS, MARKDOWN_LINE_ENDS, indent_after, lines, lines_with_ends
from tests.security.doors import LINE_BREAKS, hostile_text


def test_line_ends_are_exactly_those_str_splitlines_splits_on() -> None:
    splitting = [chr(c) for c in range(0x110000) if len(f"a{chr(c)}b".splitlines()) == 2]
    assert sorted(splitting) == sorted(end for end in LINE_ENDS if len(end) == 1)
    assert "a\r\nb".splitlines() == ["a", "b"] and "\r\n" in LINE_ENDS
    assert set(MARKDOWN_LINE_ENDS) < set(LINE_ENDS) and set(LINE_BREAKS) == set(LINE_ENDS)


@given(hostile_text())
def test_lines_with_ends_are_the_lines_and_give_the_text_back(text: str) -> None:
    cut = lines_with_ends(text)
    assert "".join(line + end for line, end in cut) == text
    assert [line for line, _ in cut] == lines(text) == text.splitlines()
    assert all(end in LINE_ENDS for _, end in cut[:-1])
    assert not cut or cut[-1][1] in (*LINE_ENDS, "")


@given(hostile_text())
def test_indent_after_adds_the_indent_before_every_later_line_and_nothing_else(text: str) -> None:
    for ends in (LINE_ENDS, tuple(e for e in LINE_ENDS if e not in MARKDOWN_LINE_ENDS)):
        cut, indented = lines_with_ends(text), lines_with_ends(indent_after(text, "  ", ends))
        assert [end for _, end in indented] == [end for _, end in cut]
        after = [False, *(end in ends for _, end in cut)][: len(cut)]
        for (line, _), (written, _), indent in zip(cut, indented, after, strict=True):
            assert written == ("  " + line if indent and line else line)
