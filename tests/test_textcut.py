"""The one head + tail cutter (``contextmem.textcut``) and its three users keep its contract."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from contextmem.compaction.offload import NOTICE, OffloadLimit, head_tail
from contextmem.compaction.plans import plan_emergency
from contextmem.messages import ToolMessage, UserMessage, text_of
from contextmem.summarize.prompts import render_transcript
from contextmem.textcut import cut_middle, fits

MARK = "\x00"  # never in the generated texts, so the notice can be found again in a cut
texts = st.text(st.characters(codec="utf-8", exclude_characters=MARK), max_size=400) | st.text(
    st.sampled_from("a\n中🙂é"), max_size=400
)
limits = st.none() | st.integers(0, 500)
ratios = st.tuples(st.integers(1, 5), st.integers(1, 5))


def notice(omitted: int) -> str:
    return f"{MARK}{omitted}{MARK}"


@given(texts, limits, limits, ratios)
def test_a_cut_always_fits_and_cutting_again_changes_nothing(
    text: str, max_chars: int | None, max_bytes: int | None, ratio: tuple[int, int]
) -> None:
    out = cut_middle(text, notice, max_chars=max_chars, max_bytes=max_bytes, ratio=ratio)
    assert fits(out, max_chars=max_chars, max_bytes=max_bytes)
    assert len(out.encode("utf-8")) == sum(len(c.encode("utf-8")) for c in out)  # whole code points only
    assert cut_middle(out, notice, max_chars=max_chars, max_bytes=max_bytes, ratio=ratio) == out
    if fits(text, max_chars=max_chars, max_bytes=max_bytes):
        assert out == text


@given(texts, limits, limits, ratios)
def test_a_cut_keeps_head_and_tail_verbatim_in_its_ratio_around_the_notice(
    text: str, max_chars: int | None, max_bytes: int | None, ratio: tuple[int, int]
) -> None:
    out = cut_middle(text, notice, max_chars=max_chars, max_bytes=max_bytes, ratio=ratio)
    if out == text:
        return
    if MARK not in out:  # the limit could not hold even the notice: the longest head that fits
        assert text.startswith(out)
        assert not fits(notice(len(text)), max_chars=max_chars, max_bytes=max_bytes)
        assert not fits(text[: len(out) + 1], max_chars=max_chars, max_bytes=max_bytes)
        return
    head, omitted, tail = out.split(MARK)
    keep = len(head) + len(tail)
    assert text.startswith(head) and text.endswith(tail)
    assert int(omitted) == len(text) - keep >= 1
    assert len(head) == keep * ratio[0] // sum(ratio)


def test_a_byte_limit_counts_utf8_and_never_splits_a_character() -> None:
    text = "🙂" * 1000  # 4 bytes each
    out = cut_middle(text, notice, max_bytes=400)
    head, _, tail = out.split(MARK)
    assert len(out.encode("utf-8")) <= 400 and set(head + tail) == {"🙂"}
    assert len(head) == (len(head) + len(tail)) * 2 // 3 and len(head + tail) > 80


# --- the three users ----------------------------------------------------------------------------


def test_offload_cuts_are_unchanged_by_the_move_to_textcut() -> None:
    # Pinned from the offload's own cutter before it moved: same head, tail and notice.
    for text, limit, head, tail in [
        ("0123456789" * 3000, OffloadLimit(2000, None), 1233, 617),
        ("日本語🙂" * 2000, OffloadLimit(3000, 1500), 516, 259),
    ]:
        out = head_tail(text, limit, "tool_results/a.txt")
        omitted = len(text) - head - tail
        assert out == (
            text[:head]
            + NOTICE.format(omitted=omitted, total=len(text), path="tool_results/a.txt")
            + text[-tail:]
        )


def test_transcript_cuts_fit_their_limit_notice_included() -> None:
    # The transcript used to keep ``limit`` characters and add the notice on top of them.
    log = "HEAD " + "x" * 5000 + " TAIL"
    body = render_transcript([UserMessage(log)], message_chars=600).removeprefix("user: ")
    cut = re.fullmatch(r"(HEAD x*)\n…\[(\d+) chars omitted\]…\n(x* TAIL)", body)
    assert cut is not None and len(body) <= 600
    head, omitted, tail = cut.groups()
    assert int(omitted) == len(log) - len(head) - len(tail)
    assert len(head) == (len(head) + len(tail)) * 2 // 3


def test_emergency_caps_fit_even_a_tiny_limit() -> None:
    # A limit under 80 characters used to make the head and tail overlap: longer than the text itself.
    history = [UserMessage("a" * 100 + "b" * 100)]
    for max_chars in (10, 60, 120, 10_000):
        plan = plan_emergency(history, 1, max_chars=max_chars, max_turns=5)
        capped = plan.rewrite.get(0, history[0])
        text = text_of(capped.content)
        assert len(text) <= max(max_chars, 200)
        if max_chars < 200:
            assert len(text) <= max_chars and text.startswith("a")
        if max_chars == 120:
            assert "characters cut in an emergency" in text and text.endswith("b")


def test_emergency_caps_keep_head_and_tail_alike() -> None:
    result = ToolMessage("c1", "H" * 20_000 + "T" * 20_000)
    plan = plan_emergency([UserMessage("go"), result], 1, max_chars=10_000, max_turns=5)
    text = text_of(plan.rewrite[1].content)
    assert len(text) <= 10_000
    assert text.count("H") == text.count("T") > 4_900
