import gzip
import hashlib
import importlib.resources
from collections import OrderedDict

import pytest
import tiktoken
from hypothesis import given, settings
from hypothesis import strategies as st

from contextmem.errors import TokenizerError
from contextmem.llm.base import ToolSpec
from contextmem.messages import (
    AssistantMessage,
    ImagePart,
    TextPart,
    ToolMessage,
    UserMessage,
    tool_call,
    user,
)
from contextmem.tokens import (
    Calibration,
    HeuristicCounter,
    MessageCounter,
    TiktokenCounter,
    get_counter,
    tiktoken_backend,
)
from contextmem.tokens.counter import MESSAGE_OVERHEAD
from contextmem.tokens.tiktoken_backend import (
    CORE_PIECE_CHARS,
    LINEAR_ABOVE_CHARS,
    core_pieces,
    count_linear,
    load_encoding,
)
from tests.security.doors import hostile_text, huge

SAMPLES = [
    "The quick brown fox jumps over the lazy dog.",
    "请帮我把数据库迁移到 PostgreSQL 16，并保留 src/db/schema.sql 的索引。",
    "def f(x):\n    return {'a': [1, 2, 3], \"b\": None}  # comment\n",
    '{"id": "call_9f8", "args": {"path": "/tmp/x.txt", "n": 12345}}',
    "Mixed 中英文 text with emoji 🎉 and <|endoftext|> in it",
    "",
    "   \n\n\t  ",
]


@pytest.fixture(scope="module")
def tiktoken_own(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tiktoken.Encoding]:
    """tiktoken's *own* encodings, made to load offline by pre-filling its cache with verified files."""
    cache = tmp_path_factory.mktemp("tiktoken-cache")
    out = {}
    for name in ("o200k_base", "cl100k_base"):
        url = f"https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
        data = gzip.decompress(
            (importlib.resources.files("bpe_openai") / "data" / f"{name}.tiktoken.gz").read_bytes()
        )
        (cache / hashlib.sha1(url.encode()).hexdigest()).write_bytes(data)
    mp = pytest.MonkeyPatch()
    mp.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    try:
        for name in ("o200k_base", "cl100k_base"):
            out[name] = tiktoken.get_encoding(name)
    finally:
        mp.undo()
    return out


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_real_backend_matches_tiktoken_exactly_on_samples(tiktoken_own, encoding):
    ours = TiktokenCounter(encoding)
    for text in SAMPLES:
        assert ours.count_text(text) == len(tiktoken_own[encoding].encode_ordinary(text)), text


@given(st.text(max_size=300))
def test_real_backend_matches_tiktoken_exactly_on_any_text(tiktoken_own, text):
    assert TiktokenCounter("o200k_base").count_text(text) == len(
        tiktoken_own["o200k_base"].encode_ordinary(text)
    )


def test_unknown_tokenizer_is_a_typed_error_with_fix():
    with pytest.raises(TokenizerError, match="Fix"):
        get_counter("gpt2-nonsense")


def test_auto_counter_is_real_tokenizer_here():
    assert get_counter("auto").name == "o200k_base"


@pytest.mark.parametrize(
    ("text", "lo", "hi"),
    [
        ("The quick brown fox jumps over the lazy dog. " * 20, 0.8, 1.3),
        ("请帮我把数据库迁移到新的服务器上并检查日志。" * 20, 0.8, 1.3),
    ],
)
def test_heuristic_is_close_to_real_counts_in_both_languages(text, lo, hi):
    real = TiktokenCounter().count_text(text)
    assert lo * real <= HeuristicCounter().count_text(text) <= hi * real


def test_heuristic_counts_chinese_far_above_chars_over_four():
    text = "上下文窗口管理与长期记忆" * 50
    assert HeuristicCounter().count_text(text) > len(text) / 4 * 2


def test_message_count_covers_every_part():
    mc = MessageCounter(TiktokenCounter())
    base = mc.count_message(AssistantMessage("done"))
    with_reasoning = mc.count_message(AssistantMessage("done", reasoning="because the tests passed"))
    call = tool_call("call_abc123", "read_file", {"path": "src/app.py"})
    with_call = mc.count_message(AssistantMessage("done", tool_calls=(call,)))
    assert with_reasoning > base
    assert with_call >= base + mc.count_text(call.id) + mc.count_text(call.name) + mc.count_text(
        call.arguments
    )
    result = ToolMessage("call_abc123", "ok")
    assert mc.count_message(result) == MESSAGE_OVERHEAD + mc.count_text("ok") + mc.count_text("call_abc123")
    img = UserMessage((TextPart("look"), ImagePart("https://x/y.png"), ImagePart("https://x/z.png")))
    assert mc.count_message(img) == MESSAGE_OVERHEAD + mc.count_text("look") + 2 * mc.image_tokens


def test_tool_definitions_are_counted_with_schema():
    mc = MessageCounter(TiktokenCounter())
    small = ToolSpec("search", "Search memory")
    big = ToolSpec(
        "search",
        "Search memory",
        {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "what to look for"},
                "k": {"type": "integer"},
            },
        },
    )
    assert 0 < mc.count_tools([small]) < mc.count_tools([big])
    assert mc.count_tools([small, big]) == mc.count_tools([small]) + mc.count_tools([big])


class CountingTokenizer:
    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    def count_text(self, text: str) -> int:
        self.calls += 1
        return len(text)


def test_growing_history_costs_only_new_messages():
    tok = CountingTokenizer()
    mc = MessageCounter(tok)
    history = [user(f"message {i}") for i in range(100)]
    mc.count_messages(history)
    first = tok.calls
    history.append(user("one more"))
    mc.count_messages(history)
    assert tok.calls - first == 1


def test_cache_is_bounded():
    mc = MessageCounter(CountingTokenizer(), cache_size=10)
    for i in range(50):
        mc.count_message(user(str(i)))
    assert len(mc._cache) == 10


def test_calibration_learns_provider_ratio_and_clamps():
    cal = Calibration()
    assert cal.apply(1000) == 1000
    for _ in range(20):
        cal = cal.observe(estimated=1000, reported=1300)
    assert 1290 <= cal.apply(1000) <= 1310
    wild = Calibration().observe(estimated=100, reported=100_000)
    assert wild.ratio == wild.high
    assert Calibration().observe(0, 500) == Calibration()


# --- long text: counted in linear time, and still exactly ----------------------------------------------


# Pinned at 150 in every profile: each example is counted by both engines, in two encodings.
@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@settings(max_examples=150, deadline=None)
@given(text=hostile_text(max_size=120))
def test_linear_count_is_tiktokens_own_on_any_text(tiktoken_own, encoding, text):
    """The linear counter gives tiktoken's own count on every text: surrogates, controls, special-token
    text, every category (so whichever side of the bound a text falls, its count is the same)."""
    text += " <|endoftext|>"
    assert count_linear(encoding, text) == len(tiktoken_own[encoding].encode_ordinary(text))


# Pinned at 12 in every profile: each example counts a run past 65,536 characters with tiktoken too.
@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@settings(max_examples=12, deadline=None)
@given(
    run=st.text(st.characters(blacklist_categories=()), min_size=1, max_size=3),
    around=hostile_text(max_size=10),
)
def test_a_long_unbroken_run_is_counted_exactly(tiktoken_own, encoding, run, around):
    """A run past the bound (one word of one repeated piece: the pathological case) counts as tiktoken."""
    text = around + huge(run, LINEAR_ABOVE_CHARS + 1) + around
    assert TiktokenCounter(encoding).count_text(text) == len(tiktoken_own[encoding].encode_ordinary(text))


def test_tiktoken_never_sees_a_text_past_the_bound(monkeypatch):
    """The quadratic path is bounded: tiktoken is only handed texts of at most LINEAR_ABOVE_CHARS (a 3 MB
    one-word text goes to the linear counter), and the count is still the exact one."""
    encoding = load_encoding("o200k_base")
    seen: list[int] = []
    real = encoding.encode_ordinary

    def spy(text: str) -> list[int]:
        seen.append(len(text))
        return real(text)

    monkeypatch.setattr(encoding, "encode_ordinary", spy)
    counter = TiktokenCounter("o200k_base")
    assert counter.count_text("a" * 3_000_000) == 375_000  # "aaaaaaaa" is one o200k token
    assert counter.count_text("ok") == 1
    assert seen and max(seen) <= LINEAR_ABOVE_CHARS


# --- long text reaches the Rust core a piece at a time (it holds the GIL while it counts) -----------------

# Characters around the places core_pieces cuts: spaces, line ends, letters, digits, marks, look-alikes.
NEAR_CUTS = [" ", "\n", "\r", "\t", "\u00a0", "\u3000", "\u2028", "\x1c", "a", "Z", "5", "\u00b2", "_",
             "'", "s", ".", "/", "\u0301", "\u4e2d", "\ud800", "\udc00", "\U0001f389"]  # fmt: skip


# Pinned at 200 in every profile: each example is counted by both engines, in two encodings.
@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@settings(max_examples=200, deadline=None)
@given(
    text=st.lists(
        st.one_of(st.text(st.sampled_from(NEAR_CUTS), max_size=12), hostile_text(max_size=12)), max_size=10
    ).map("".join),
    size=st.integers(min_value=1, max_value=12),
)
def test_the_pieces_of_a_text_count_as_the_whole(tiktoken_own, encoding, text, size):
    """core_pieces cuts only where the pre-tokeniser ends a piece anyway: the counts of the parts add up
    to tiktoken's count of the whole, on any text, cut as finely as it may be."""
    parts = core_pieces(text, size)
    assert "".join(parts) == text and all(parts[:-1])
    assert sum(count_linear(encoding, p) for p in parts) == len(tiktoken_own[encoding].encode_ordinary(text))


def test_the_rust_core_counts_a_big_result_a_piece_at_a_time(monkeypatch):
    """A 2 MB tool result of log lines reaches the Rust core (which holds the GIL while it counts) in
    pieces of about CORE_PIECE_CHARS, not in one call; the count is the one of the whole."""
    line = "2026-11-29T02:00:00Z worker-7 GET /api/v2/invoices?page=%d 200 12ms trace=%08x\n"
    text = "".join(line % (n, n * 2654435761 % 2**32) for n in range(26_000))
    whole = count_linear("o200k_base", text)
    real = tiktoken_backend._linear_core("o200k_base")
    seen = _spy_core(monkeypatch)  # counted afresh, not remembered
    assert count_linear("o200k_base", text) == whole == real.count(text)
    assert len(text) > 2_000_000 and len(seen) > 20
    assert max(seen) <= CORE_PIECE_CHARS + len(line)


def _spy_core(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The Rust core's calls from now on (the lengths of the pieces it is handed), with an empty memo."""
    real = tiktoken_backend._linear_core("o200k_base")
    seen: list[int] = []

    class Spy:
        def count(self, piece: str) -> int:
            seen.append(len(piece))
            return int(real.count(piece))

    monkeypatch.setattr(tiktoken_backend, "_linear_core", lambda name: Spy())
    monkeypatch.setattr(tiktoken_backend, "_big_counts", OrderedDict())
    return seen


def test_a_big_text_counted_before_is_not_counted_again(monkeypatch):
    """A stored session is counted anew each time it is loaded (an MCP server's context_stats loads it on
    every call): a big text the process counted before is found by its digest, not handed to the core
    again; a text that differs by one character is counted."""
    seen = _spy_core(monkeypatch)
    line = "2026-11-29T02:00:00Z worker-7 GET /api/v2/invoices?page=%d 200 12ms\n"
    text = "".join(line % n for n in range(3000))
    assert len(text) > LINEAR_ABOVE_CHARS
    first = count_linear("o200k_base", text)
    calls = len(seen)
    assert calls > 0
    assert TiktokenCounter("o200k_base").count_text(text) == first
    assert len(seen) == calls  # remembered
    count_linear("cl100k_base", text)
    assert len(seen) > calls  # another encoding: counted, not given o200k_base's count
    calls = len(seen)
    other = text[:-2] + "9\n"
    assert count_linear("o200k_base", other) == len(load_encoding("o200k_base").encode_ordinary(other))
    assert len(seen) > calls


def test_the_count_memo_is_bounded(monkeypatch):
    """The memo keeps BIG_COUNTS entries at most (the least recently used leave first), digests, not texts."""
    _spy_core(monkeypatch)
    monkeypatch.setattr(tiktoken_backend, "BIG_COUNTS", 3)
    texts = [f"{i} " + "ab " * (LINEAR_ABOVE_CHARS // 3 + 1) for i in range(5)]
    for text in texts:
        count_linear("o200k_base", text)
    memo = tiktoken_backend._big_counts
    assert len(memo) == 3
    assert all(len(key[2]) == 16 and isinstance(key[2], bytes) for key in memo)  # 128-bit digests


# Pinned at 10 in every profile: each example counts two texts past 65,536 characters with tiktoken too.
@settings(max_examples=10, deadline=None)
@given(first=hostile_text(max_size=40), second=hostile_text(max_size=40))
def test_the_count_memo_never_gives_a_text_anothers_count(tiktoken_own, first, second):
    """Two big texts that differ only in a hostile part (surrogates, controls, look-alikes), counted one
    after the other: each gets its own exact count, whichever was remembered first."""
    tiktoken_backend._big_counts.clear()
    filler = "word " * (LINEAR_ABOVE_CHARS // 5 + 1)
    for text in (filler + first, filler + second, filler + first):
        assert count_linear("o200k_base", text) == len(tiktoken_own["o200k_base"].encode_ordinary(text))


def test_one_long_word_is_not_scanned_for_a_cut_to_its_end(monkeypatch):
    """Past a window with no place to cut, the search jumps to the next space or newline (str.find),
    instead of running the pattern over the whole word (0.3 s over 9 MB: four times the count itself)."""
    real = tiktoken_backend._CUT
    scanned: list[int] = []

    class Spy:
        def search(self, text: str, pos: int, endpos: int = 2**62) -> object:
            scanned.append(min(endpos, len(text)) - pos)
            return real.search(text, pos, endpos)

    monkeypatch.setattr(tiktoken_backend, "_CUT", Spy())
    text = "k" * (6 * CORE_PIECE_CHARS) + " tail"
    assert core_pieces(text) == [text[: 6 * CORE_PIECE_CHARS], " tail"]
    assert sum(scanned) <= 2 * CORE_PIECE_CHARS
