"""A cut keeps the lines that tell a failure wherever they stand (``contextmem.textcut.cut_keeping``).

The real logs of ``tests/data/logs`` were made on a development machine by ``make_logs.sh`` (pytest,
pip, gcc + make, node, java, bash, git and ls in the zh_CN locale); ``important.json`` names, for each,
the lines a reader of the cut must still see. All of them stand in the middle of their log.
"""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from contextmem.compaction.offload import NOTICE, OffloadLimit, head_tail
from contextmem.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from contextmem.summarize.facts import facts_from_messages
from contextmem.summarize.ledger import Ledger
from contextmem.summarize.prompts import render_transcript
from contextmem.textcut import MARGIN, cut_keeping, cut_middle, fits
from tests.security.doors import hostile_text, huge

LOGS = Path(__file__).parent / "data" / "logs"
IMPORTANT: dict[str, list[str]] = json.loads((LOGS / "important.json").read_text(encoding="utf-8"))
MARK = "\x00"  # never in the generated texts, so the notice can be found again in a cut
GAP = re.compile(r"\n\[… ([\d,]+) (lines?|characters?) omitted …\]\n")
PATH = "tool_results/s-1-call_1.txt"


def notice(omitted: int) -> str:
    return f"{MARK}{omitted}{MARK}"


def pieces_of(out: str) -> tuple[list[str], int | None, list[tuple[int, str]]]:
    """A cut taken apart: its verbatim pieces in order, what its notice says, and its gap markers."""
    if MARK not in out:
        return [out], None, []
    head, omitted, rest = out.split(MARK)
    parts = GAP.split(rest)  # piece, count, unit, piece, count, unit, ..., piece
    markers = [(int(parts[i].replace(",", "")), parts[i + 1]) for i in range(1, len(parts), 3)]
    return [head, *parts[0::3]], int(omitted), markers


def _oom_log(lines: int = 3600) -> str:
    rows = [
        f"2024-05-01T10:{i // 60 % 60:02d}:{i % 60:02d}Z INFO worker-3 batch {i} done in 12ms"
        for i in range(lines)
    ]
    rows[lines // 2] = "2024-05-01T10:25:00Z ERROR pod api-7f9c container main terminated: reason=OOMKilled"
    return "\n".join(rows) + "\n"


OOM_LINE = "ERROR pod api-7f9c container main terminated: reason=OOMKilled"


# --- the main test: real logs, the same budgets --------------------------------------------------


def test_every_important_line_of_the_real_logs_survives_the_offload_and_the_transcript_cuts() -> None:
    # Before: the head + tail cut kept 0 of these 12 lines at either budget (5 at 8,000 bytes).
    for name, lines in IMPORTANT.items():
        text = (LOGS / name).read_text(encoding="utf-8")
        offloaded = head_tail(text, OffloadLimit(3_000, 20_000), PATH)
        transcript = render_transcript([ToolMessage("c1", text, name="run")], tool_result_chars=1_500)
        assert len(offloaded.encode("utf-8")) <= 3_000 and PATH in offloaded
        for line in lines:
            assert line in offloaded, (name, line)
            assert line in transcript, (name, line)


def test_the_gap_markers_of_a_real_log_count_exactly_what_left() -> None:
    for name in IMPORTANT:
        text = (LOGS / name).read_text(encoding="utf-8")
        out = cut_keeping(text, notice, max_bytes=3_000)
        pieces, omitted, markers = pieces_of(out)
        assert omitted == len(text) - sum(map(len, pieces))
        spans, pos = [], 0
        for piece in pieces:
            start = text.index(piece, pos)  # the real logs' lines are unique: each piece is found once
            spans.append((start, start + len(piece)))
            pos = start + len(piece)
        assert spans[0][0] == 0 and spans[-1][1] == len(text)
        gaps = [text[a[1] : b[0]] for a, b in itertools.pairwise(spans)][1:]
        for gap, (count, unit) in zip(gaps, markers, strict=True):
            lines = gap.count("\n") + (not gap.endswith("\n"))
            assert count == (lines if unit.startswith("line") else len(gap)), (name, gap[:80])


def test_the_oom_line_of_a_200kb_log_reaches_the_view_the_summary_input_and_the_facts() -> None:
    log = _oom_log()
    assert len(log.encode()) > 190_000
    view = head_tail(log, OffloadLimit(3_000, 20_000), PATH)
    assert OOM_LINE in view and OOM_LINE not in cut_middle(log, notice, max_bytes=3_000)
    call = ToolCall("c1", "kubectl_logs", "{}")
    history = [UserMessage("why did api restart?"), AssistantMessage("", (call,)), ToolMessage("c1", view)]
    assert OOM_LINE in render_transcript(history)
    facts = facts_from_messages(history, Ledger(), ())
    assert any(OOM_LINE in fact.text for fact in facts)


def test_chinese_cue_lines_are_kept_as_english_ones_are() -> None:
    rows = [f"2024-05-01 12:00:{i % 60:02d} INFO 订单 {i} 已处理" for i in range(2000)]
    rows[900] = "2024-05-01 12:15:00 WARN 订单 900 支付失败：银行接口返回超时"
    rows[1300] = "ls: 无法访问 'data/x.csv': 没有那个文件或目录"
    out = cut_keeping("\n".join(rows), notice, max_bytes=3_000)
    assert rows[900] in out and rows[1300] in out


def test_repeats_of_one_shape_are_kept_once_and_leave_room_for_the_rare_line() -> None:
    rows = [f"INFO step {i}" for i in range(3000)]
    for i in range(500, 2500, 3):
        rows[i] = f"ERROR retry {i} of 2000: connection reset"
    rows[2000] = "Traceback (most recent call last):"
    out = cut_keeping("\n".join(rows), notice, max_chars=2_000)
    assert out.count("ERROR retry") == 1 and rows[2000] in out


def test_a_text_with_no_cue_in_its_middle_is_cut_as_before() -> None:
    text = "".join(f"row {i}: ok\n" for i in range(5000))
    for ratio in ((2, 1), (1, 1)):
        assert cut_keeping(text, notice, max_bytes=3_000, ratio=ratio) == cut_middle(
            text, notice, max_bytes=3_000, ratio=ratio
        )


def test_offload_notice_counts_every_omitted_character() -> None:
    log = _oom_log()
    view = head_tail(log, OffloadLimit(3_000, None), PATH)
    omitted = int(re.search(r"\[\.\.\. (\d+) of", view)[1])  # type: ignore[index]
    kept = GAP.sub("", view.replace(NOTICE.format(omitted=omitted, total=len(log), path=PATH), ""))
    assert omitted == len(log) - len(kept)


# --- bounds: a long line, many lines --------------------------------------------------------------


def test_a_10mb_line_and_200k_lines_are_cut_within_the_limit_with_their_cue_kept() -> None:
    # Bounded, not timed: a cue regex that backtracks would take minutes here, not a second.
    line = "x" * 5_000_000 + " OOMKilled " + "y" * 5_000_000
    out = cut_keeping(line, notice, max_bytes=3_000)
    assert fits(out, max_bytes=3_000) and "OOMKilled" in out
    many = "".join(f"ERROR worker {'abcdefg'[i % 7]} failed at step {i}\n" for i in range(200_000))
    out = cut_keeping(many, notice, max_bytes=3_000)
    assert fits(out, max_bytes=3_000) and out.count("failed at step") >= 7
    words = "ValueErro" * 1_200_000  # a cue's prefix everywhere, never the cue
    assert cut_keeping(words, notice, max_chars=2_000) == cut_middle(words, notice, max_chars=2_000)


# --- properties ------------------------------------------------------------------------------------

_filler = st.text(st.sampled_from("abd 0123.,\n中文数据"), max_size=3000)
_texts = st.text(st.characters(codec="utf-8", exclude_characters=MARK + "…"), max_size=600) | st.lists(
    st.sampled_from(
        ["ok 1\n", "ERROR x\n", "中文\n", "错误 2\n", "Traceback (most recent call last):\n", "a" * 90]
    ),
    max_size=200,
).map("".join)
_limits = st.none() | st.integers(0, 800)
_ratios = st.tuples(st.integers(1, 5), st.integers(1, 5))


@given(_texts, _limits, _limits, _ratios)
def test_a_cut_fits_and_keeps_verbatim_pieces_in_order_with_exact_notice(
    text: str, max_chars: int | None, max_bytes: int | None, ratio: tuple[int, int]
) -> None:
    out = cut_keeping(text, notice, max_chars=max_chars, max_bytes=max_bytes, ratio=ratio)
    assert fits(out, max_chars=max_chars, max_bytes=max_bytes)
    assert cut_keeping(out, notice, max_chars=max_chars, max_bytes=max_bytes, ratio=ratio) == out
    if fits(text, max_chars=max_chars, max_bytes=max_bytes):
        assert out == text
        return
    pieces, omitted, markers = pieces_of(out)
    if omitted is None:  # not even the notice fits: the longest head that fits
        assert text.startswith(out)
        return
    pos = 0
    for piece in pieces:
        found = text.find(piece, pos)
        assert found >= 0, piece
        pos = found + len(piece)
    assert text.startswith(pieces[0]) and text.endswith(pieces[-1])
    assert omitted == len(text) - sum(map(len, pieces)) >= 1
    assert len(markers) == len(pieces) - 2


@given(
    _filler, _filler, st.text(st.sampled_from("abd 0123中文"), max_size=120), st.integers(400, 4000), _ratios
)
def test_a_cue_line_that_fits_its_share_is_kept(
    before: str, after: str, words: str, max_chars: int, ratio: tuple[int, int]
) -> None:
    line = f"FATAL {words}\n"
    text = f"{before}\n{line}{after}"
    out = cut_keeping(text, notice, max_chars=max_chars, ratio=ratio)
    keep = max_chars - len(notice(len(text))) - MARGIN
    marker = len(f"\n[… {len(text):,} characters omitted …]\n")
    if len(text) > max_chars and len(line) + marker <= keep // 2 // 2 - marker:
        assert line in out


@given(hostile_text(max_size=40), st.integers(0, 3000), st.integers(0, 3000))
def test_hostile_tool_output_is_cut_to_its_limit_with_whole_code_points(
    seed: str, max_chars: int, max_bytes: int
) -> None:
    text = huge(seed + "\nERROR " + seed + "\n", 20_000)
    limit = OffloadLimit(max(max_bytes, 1), max_chars or None)
    for out in (
        cut_keeping(text, notice, max_chars=limit.max_chars, max_bytes=limit.max_bytes),
        head_tail(text, limit, PATH),
    ):
        assert fits(out, max_chars=limit.max_chars, max_bytes=limit.max_bytes)
        assert len(out.encode("utf-8", "surrogatepass")) == sum(
            len(c.encode("utf-8", "surrogatepass")) for c in out
        )
