import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextmem.budget import (
    CountedHistory,
    Window,
    allowed_cuts,
    fit_cut,
    is_over_budget,
    resolve_window,
    safe_cut,
    turn_starts,
)
from contextmem.errors import BudgetExceededError
from contextmem.messages import UserMessage, orphan_tool_messages, validate_history
from contextmem.tokens import HeuristicCounter, MessageCounter, TiktokenCounter

from .conftest import HISTORY_EXAMPLES
from .strategies import histories, seeded_histories

COUNTER = MessageCounter(HeuristicCounter())


@given(histories())
def test_generated_histories_are_valid(history):
    validate_history(history)
    assert orphan_tool_messages(history) == []


@settings(max_examples=HISTORY_EXAMPLES)
@given(
    seeded_histories(), st.integers(-5, 400), st.sampled_from(["nearest", "down", "up"]), st.integers(0, 6000)
)
def test_cuts_and_fitting_keep_every_invariant(history, target, direction, budget):
    """On each generated history: every cut lands on a turn boundary and orphans no tool pair, kept
    messages keep their order, and fitting to a budget yields <= budget or a typed error."""
    validate_history(history)
    cut = safe_cut(history, target, direction=direction)
    assert cut in allowed_cuts(history)
    assert cut == 0 or cut == len(history) or isinstance(history[cut], UserMessage)
    assert orphan_tool_messages(history[cut:]) == []
    assert orphan_tool_messages(history[:cut]) == []
    clamped = min(max(target, 0), len(history))
    if direction == "down":
        assert cut <= clamped
    if direction == "up":
        assert cut >= clamped

    counts = COUNTER.count_messages(history)
    starts = turn_starts(history)
    try:
        cut = fit_cut(history, counts, budget)
    except BudgetExceededError as exc:
        assert sum(counts[starts[-1] :]) > budget
        assert exc.needed == sum(counts[starts[-1] :])
        return
    kept = history[cut:]
    assert sum(counts[cut:]) <= budget
    assert kept == history[len(history) - len(kept) :]  # order preserved: a suffix, untouched
    assert orphan_tool_messages(kept) == []
    if starts:
        assert cut <= starts[-1]  # the newest user message is kept
    earlier = [c for c in allowed_cuts(history) if c < cut]
    if earlier:  # minimal: one allowed cut earlier would not fit
        assert sum(counts[earlier[-1] :]) > budget


@given(histories(), st.integers(0, 6000), st.integers(0, 30))
def test_incremental_history_agrees_with_pure_functions(history, budget, drop_target):
    ch = CountedHistory(COUNTER, history)
    assert ch.total == sum(COUNTER.count_messages(history))
    assert ch.starts == turn_starts(history)
    try:
        expected = fit_cut(history, COUNTER.count_messages(history), budget)
    except BudgetExceededError:
        with pytest.raises(BudgetExceededError):
            ch.fit_cut(budget)
    else:
        assert ch.fit_cut(budget) == expected
    cut = safe_cut(history, drop_target, direction="down")
    dropped = ch.drop_before(cut)
    assert dropped + ch.messages == history
    assert ch.total == sum(COUNTER.count_messages(history[cut:]))
    assert ch.starts == turn_starts(history[cut:])


def test_drop_before_refuses_a_cut_inside_a_turn():
    ch = CountedHistory(COUNTER, [UserMessage("a"), UserMessage("b")])
    from contextmem.messages import AssistantMessage

    ch.append(AssistantMessage("x"))
    with pytest.raises(ValueError, match="safe_cut"):
        ch.drop_before(2)


def test_history_budget_formula():
    w = Window(context_window=50_000, max_tokens=4_000)
    assert w.history_budget(system=1_000, summary=500, tool_defs=2_000) == 42_500
    assert is_over_budget(46_001, 4_000, 50_000)
    assert not is_over_budget(46_000, 4_000, 50_000)


@pytest.mark.parametrize(
    ("kw", "window", "reserve"),
    [
        ({"max_tokens": 8192}, 32768, 8192),  # picoclaw: only max_tokens -> 4x
        ({"context_window": 100_000, "max_tokens": 2000}, 100_000, 2000),
        ({"model": "openai:gpt-4o-2024-08-06"}, 128_000, 4096),
        ({"model": "Qwen/Qwen2.5-72B-Instruct"}, 32_768, 4096),
        ({"model": "claude-sonnet-4-5", "cap": 50_000}, 50_000, 4096),  # cap bounds a big window
        ({"model": "unknown-model", "cap": 50_000}, 50_000, 4096),
        ({"model": "gpt-4"}, 8192, 4096),
        ({"context_window": 1000}, 1000, 500),  # reserve never takes over half the window
    ],
)
def test_resolve_window(kw, window, reserve):
    assert resolve_window(**kw) == Window(window, reserve)


def test_resolve_window_needs_something():
    with pytest.raises(ValueError):
        resolve_window()


def test_real_counter_per_request_estimate_is_consistent():
    mc = MessageCounter(TiktokenCounter())
    h = [UserMessage("你好，帮我总结一下今天的会议"), UserMessage("and in English too")]
    assert mc.count_request(h) == sum(mc.count_messages(h)) + 3


@given(st.integers(16, 49_000), st.integers(1, 100_000), st.booleans())  # under the 50,000 cap
def test_a_proven_window_bounds_what_the_user_set_and_keeps_half_for_the_prompt(
    limit: int, reply: int, user_set: bool
) -> None:
    """An overflow that states the window (``proven``) is fitted by the one fitter: the window becomes the
    stated one even over the user's larger setting, and the reserve follows the one rule for a reply."""
    from contextmem.budget import fit_window, output_reserve
    from contextmem.settings import Settings

    if user_set:  # a reserve at or over the window the user set is refused when set (test_cli_errors)
        reply = min(reply, limit + 999)
    chosen = Settings.load(env={}, context_window=limit + 1000, max_tokens=reply) if user_set else Settings()
    fit = fit_window(chosen, limit, reply, proven=True)
    assert fit.window.context_window == limit
    assert fit.window.max_tokens == output_reserve(limit, reply)
    assert fit.window.max_tokens == reply if reply < limit // 2 else fit.window.max_tokens == limit // 8
    assert fit.window.max_tokens <= limit // 2  # the prompt keeps at least half
    unproven = fit_window(chosen, limit, reply)
    assert unproven.window.context_window == (limit + 1000 if user_set else limit)  # the user's wins there


def test_a_window_the_user_set_below_the_model_s_reply_takes_a_reserve_that_fits_it() -> None:
    """The fitted reserve written into the settings is the one the window takes: the model's own reply
    (1,024 of an 8,192 window) would not fit a window of 1,000 that the user set, and the settings
    refuse a reserve at or over the window."""
    from contextmem.budget import fit_settings
    from contextmem.settings import Settings

    class Model:
        context_window, max_tokens, name = 8192, 4096, "a model"

    fitted = fit_settings(Settings.load(env={}, context_window=1000), Model())
    assert (fitted.context_window, fitted.max_tokens) == (1000, 500)
    assert fit_settings(Settings.load(env={}), Model()).max_tokens == 1024  # the model's reply, as before
