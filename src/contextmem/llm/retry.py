"""Retrying model calls that failed for a passing reason, and only those.

:class:`~contextmem.errors.RateLimitError` and :class:`~contextmem.errors.TransientLLMError` are retried
with capped exponential backoff and jitter; everything else is raised at once. In particular a
:class:`~contextmem.errors.ContextOverflowError` is never retried here: the same request would overflow
again, and recovering from it (compaction) belongs to the engine, not to a retry loop.

The loop itself is tenacity's. Bounds: at most ``max_attempts`` calls, and no sleep that would end past
``max_total_time`` seconds after the first call. When the provider said how long to wait, adapters set
``exc.retry_after`` (seconds, or the raw ``Retry-After`` header) on the error they raise, and that wait
replaces the backoff.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar, cast

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.stop import stop_base

from ..errors import (
    AuthenticationError,
    BadRequestError,
    ConfigError,
    ContextOverflowError,
    RateLimitError,
    TransientLLMError,
)
from ..logs import get_logger

__all__ = [
    "DEFAULT_RETRY_POLICY",
    "RetryPolicy",
    "backoff_delay",
    "call_with_retries",
    "is_retryable",
    "parse_retry_after",
    "retry_after_of",
]

T = TypeVar("T")
logger = get_logger(__name__)

_RETRYABLE = (RateLimitError, TransientLLMError)
_NEVER_RETRIED = (ContextOverflowError, AuthenticationError, BadRequestError)


def _require(ok: bool, name: str, value: object, fix: str) -> None:
    if not ok or (isinstance(value, float) and not math.isfinite(value)):
        raise ConfigError(f"RetryPolicy.{name}={value!r} is out of range. Fix: {fix}.")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard to retry a transient failure.

    The n-th retry waits ``min(max_delay, initial_delay * multiplier**(n-1))`` reduced by a random share
    of at most ``jitter`` (so with ``jitter=0.5`` the wait lies in ``[base/2, base]``), unless the
    error carries a ``retry_after``. ``max_attempts`` counts calls, the first one included.
    """

    max_attempts: int = 4
    initial_delay: float = 0.5
    max_delay: float = 8.0
    multiplier: float = 2.0
    jitter: float = 0.5
    max_total_time: float = 60.0
    honour_retry_after: bool = True

    def __post_init__(self) -> None:
        _require(self.max_attempts >= 1, "max_attempts", self.max_attempts, "use 1 (no retries) or more")
        _require(self.initial_delay >= 0, "initial_delay", self.initial_delay, "use 0 seconds or more")
        _require(self.max_delay >= self.initial_delay, "max_delay", self.max_delay, "use >= initial_delay")
        _require(self.multiplier >= 1, "multiplier", self.multiplier, "use 1 (constant) or more")
        _require(0 <= self.jitter <= 1, "jitter", self.jitter, "use a share between 0 and 1")
        _require(self.max_total_time > 0, "max_total_time", self.max_total_time, "use a positive number")


DEFAULT_RETRY_POLICY = RetryPolicy()


def is_retryable(exc: BaseException) -> bool:
    """Whether ``exc`` is worth another try: rate limits and transient failures, never the others."""
    return isinstance(exc, _RETRYABLE) and not isinstance(exc, _NEVER_RETRIED)


def backoff_delay(policy: RetryPolicy, retry_number: int, draw: float) -> float:
    """The wait before retry ``retry_number`` (1 = after the first failure); ``draw`` is in ``[0, 1)``."""
    base = min(policy.max_delay, policy.initial_delay * policy.multiplier ** (retry_number - 1))
    return base * (1.0 - policy.jitter * draw)


def parse_retry_after(value: object, *, now: datetime | None = None) -> float | None:
    """Seconds to wait from a ``Retry-After`` value (seconds or an HTTP date); ``None`` if unreadable."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        try:
            seconds = float(value.strip())
        except ValueError:
            try:
                when = parsedate_to_datetime(value.strip())
            except (TypeError, ValueError):
                return None
            if when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            seconds = (when - (now or datetime.now(UTC))).total_seconds()
    else:
        return None
    return max(0.0, seconds) if math.isfinite(seconds) else None


def retry_after_of(exc: BaseException | None) -> float | None:
    """The wait the provider asked for, read from the optional ``retry_after`` attribute of ``exc``."""
    return parse_retry_after(getattr(exc, "retry_after", None))


class _OutOfTime(stop_base):
    """Stop when the next sleep would end after the total-time budget (measured on ``clock``)."""

    def __init__(self, budget: float, clock: Callable[[], float]) -> None:
        self.budget = budget
        self.clock = clock
        self.start = clock()

    def __call__(self, retry_state: RetryCallState) -> bool:
        return self.clock() - self.start + retry_state.upcoming_sleep > self.budget


async def call_with_retries(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy = DEFAULT_RETRY_POLICY,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
    rand: Callable[[], float] = random.random,
) -> T:
    """Await ``fn()``; on a retryable error wait and call it again, within ``policy``'s bounds.

    Raises the last error unchanged when attempts or time run out, and any non-retryable error
    (overflow, auth, bad request, or anything not from :mod:`contextmem.errors`) on first sight.
    ``sleep``, ``clock`` and ``rand`` are injectable so tests never wait.
    """

    def wait(retry_state: RetryCallState) -> float:
        error = retry_state.outcome.exception() if retry_state.outcome else None
        asked = retry_after_of(error) if policy.honour_retry_after else None
        if asked is not None:
            return asked
        return backoff_delay(policy, retry_state.attempt_number, rand())

    def log(retry_state: RetryCallState) -> None:
        error = retry_state.outcome.exception() if retry_state.outcome else None
        logger.warning(
            "model call failed (attempt %d of %d): %s; retrying in %.2fs",
            retry_state.attempt_number,
            policy.max_attempts,
            error,
            retry_state.upcoming_sleep,
        )

    async def attempt() -> T:
        return await fn()

    retrying = AsyncRetrying(
        stop=stop_after_attempt(policy.max_attempts) | _OutOfTime(policy.max_total_time, clock),
        wait=wait,
        retry=retry_if_exception(is_retryable),
        sleep=sleep,
        before_sleep=log,
        reraise=True,
    )
    return cast(T, await retrying(attempt))
