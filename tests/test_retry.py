"""Retries: transient errors retried with bounded, jittered backoff; the rest raised on first sight."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextmem.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigError,
    ContextOverflowError,
    LLMError,
    RateLimitError,
    TransientLLMError,
)
from contextmem.llm.retry import (
    RetryPolicy,
    backoff_delay,
    call_with_retries,
    is_retryable,
    parse_retry_after,
)


class FakeTime:
    """A clock that only moves when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


class Flaky:
    """Fails with the given errors in order, then answers ``"ok"``; counts calls."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "ok"


def run(
    fn: Callable[[], Awaitable[str]], time: FakeTime, policy: RetryPolicy | None = None, draw: float = 0.0
) -> Awaitable[str]:
    return call_with_retries(
        fn, policy or RetryPolicy(), sleep=time.sleep, clock=time.clock, rand=lambda: draw
    )


async def test_transient_errors_are_retried_then_succeed() -> None:
    time = FakeTime()
    fn = Flaky(RateLimitError("429", status=429), TransientLLMError("503", status=503))
    assert await run(fn, time) == "ok"
    assert fn.calls == 3
    assert time.sleeps == [0.5, 1.0]  # draw 0: no jitter taken off


async def test_gives_up_after_max_attempts_with_the_last_error() -> None:
    time = FakeTime()
    errors = [TransientLLMError(f"attempt {n}") for n in range(1, 10)]
    fn = Flaky(*errors)
    with pytest.raises(TransientLLMError) as caught:
        await run(fn, time)
    assert fn.calls == 4
    assert caught.value is errors[3]
    assert time.sleeps == [0.5, 1.0, 2.0]


async def test_backoff_is_capped_at_max_delay() -> None:
    time = FakeTime()
    fn = Flaky(*[RateLimitError("429") for _ in range(7)])
    policy = RetryPolicy(max_attempts=8, max_total_time=1000)
    assert await run(fn, time, policy) == "ok"
    assert time.sleeps == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0]


@pytest.mark.parametrize(
    "error",
    [
        ContextOverflowError("over the window", limit=8192),
        AuthenticationError("bad key", status=401),
        BadRequestError("bad field", status=400),
        LLMError("unclassified"),
        ValueError("a bug, not a provider failure"),
    ],
    ids=lambda e: type(e).__name__,
)
async def test_never_retried_errors_are_called_exactly_once(error: BaseException) -> None:
    time = FakeTime()
    fn = Flaky(error)
    with pytest.raises(type(error)) as caught:
        await run(fn, time)
    assert caught.value is error
    assert fn.calls == 1
    assert time.sleeps == []


async def test_retry_after_replaces_the_backoff() -> None:
    time = FakeTime()
    limited = RateLimitError("429", status=429)
    limited.retry_after = 3  # type: ignore[attr-defined]
    header = RateLimitError("429", status=429)
    header.retry_after = "0.25"  # type: ignore[attr-defined]
    fn = Flaky(limited, header)
    assert await run(fn, time) == "ok"
    assert time.sleeps == [3.0, 0.25]


async def test_retry_after_can_be_ignored() -> None:
    time = FakeTime()
    limited = RateLimitError("429")
    limited.retry_after = 3  # type: ignore[attr-defined]
    assert await run(Flaky(limited), time, RetryPolicy(honour_retry_after=False)) == "ok"
    assert time.sleeps == [0.5]


async def test_a_wait_past_the_time_budget_gives_up_without_sleeping() -> None:
    time = FakeTime()
    limited = RateLimitError("429")
    limited.retry_after = 120  # type: ignore[attr-defined]
    fn = Flaky(limited)
    with pytest.raises(RateLimitError):
        await run(fn, time, RetryPolicy(max_total_time=60))
    assert fn.calls == 1
    assert time.sleeps == []


async def test_total_time_bounds_the_retries() -> None:
    time = FakeTime()
    fn = Flaky(*[TransientLLMError("503") for _ in range(10)])
    policy = RetryPolicy(max_attempts=10, initial_delay=1.0, max_delay=8.0, max_total_time=10.0)
    with pytest.raises(TransientLLMError):
        await run(fn, time, policy)
    assert time.sleeps == [1.0, 2.0, 4.0]  # the next 8 s sleep would end at 15 s > 10 s
    assert fn.calls == 4
    assert time.now <= policy.max_total_time


async def test_jitter_is_applied_within_bounds() -> None:
    time = FakeTime()
    fn = Flaky(RateLimitError("429"), RateLimitError("429"))
    assert await run(fn, time, draw=0.999) == "ok"
    assert time.sleeps == [pytest.approx(0.5 * (1 - 0.5 * 0.999)), pytest.approx(1.0 * (1 - 0.5 * 0.999))]


@given(
    retry_number=st.integers(min_value=1, max_value=30),
    draw=st.floats(min_value=0.0, max_value=1.0, exclude_max=True),
    jitter=st.floats(min_value=0.0, max_value=1.0),
    initial=st.floats(min_value=0.0, max_value=5.0),
    cap=st.floats(min_value=5.0, max_value=60.0),
)
def test_jitter_stays_within_bounds(
    retry_number: int, draw: float, jitter: float, initial: float, cap: float
) -> None:
    policy = RetryPolicy(initial_delay=initial, max_delay=cap, jitter=jitter)
    base = min(cap, initial * 2.0 ** (retry_number - 1))
    delay = backoff_delay(policy, retry_number, draw)
    assert base * (1 - jitter) - 1e-9 <= delay <= base + 1e-9
    assert 0 <= delay <= cap + 1e-9


async def test_real_random_jitter_stays_within_bounds() -> None:
    time = FakeTime()
    fn = Flaky(*[TransientLLMError("503") for _ in range(3)])
    assert await call_with_retries(fn, sleep=time.sleep, clock=time.clock) == "ok"
    for retry_number, slept in enumerate(time.sleeps, start=1):
        base = min(8.0, 0.5 * 2 ** (retry_number - 1))
        assert base / 2 <= slept <= base


def test_defaults_match_the_brief() -> None:
    policy = RetryPolicy()
    assert (policy.max_attempts, policy.initial_delay, policy.max_delay) == (4, 0.5, 8.0)


@pytest.mark.parametrize(
    "bad",
    [
        {"max_attempts": 0},
        {"initial_delay": -1.0},
        {"max_delay": 0.1},
        {"jitter": 1.5},
        {"multiplier": 0.5},
        {"max_total_time": 0.0},
        {"max_total_time": float("inf")},
    ],
)
def test_policy_rejects_nonsense_with_a_fix(bad: dict[str, float]) -> None:
    with pytest.raises(ConfigError, match=r"Fix:"):
        RetryPolicy(**bad)  # type: ignore[arg-type]


def test_is_retryable() -> None:
    assert is_retryable(RateLimitError("429"))
    assert is_retryable(TransientLLMError("timeout"))
    assert not is_retryable(ContextOverflowError("over"))
    assert not is_retryable(AuthenticationError("key"))
    assert not is_retryable(BadRequestError("field"))
    assert not is_retryable(TimeoutError())


def test_parse_retry_after() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(1.5) == 1.5
    assert parse_retry_after(-3) == 0.0
    assert parse_retry_after("Wed, 01 Jan 2025 12:00:30 GMT", now=now) == 30.0
    assert parse_retry_after("Wed, 01 Jan 2025 11:00:00 GMT", now=now) == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None
    assert parse_retry_after(True) is None
    assert parse_retry_after("nan") is None
