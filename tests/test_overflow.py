"""Overflow classification against real-format provider error payloads (tests/data/overflow_payloads.json)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextmem.errors import (
    AuthenticationError,
    BadRequestError,
    ContextOverflowError,
    LLMError,
    RateLimitError,
    TransientLLMError,
)
from contextmem.llm.overflow import OverflowInfo, classify_overflow, is_overflow, raise_for_overflow, to_error

PAYLOADS: dict[str, list[dict[str, Any]]] = json.loads(
    (Path(__file__).parent / "data" / "overflow_payloads.json").read_text(encoding="utf-8")
)
OVERFLOW = PAYLOADS["overflow"]
NOT_OVERFLOW = PAYLOADS["not_overflow"]
REQUIRED_PROVIDERS = {
    "openai",
    "azure",
    "anthropic",
    "gemini",
    "deepseek",
    "dashscope",
    "moonshot",
    "zhipu",
    "ollama",
    "vllm",
    "llamacpp",
}


def _classify(row: dict[str, Any], **override: Any) -> OverflowInfo | None:
    args = {
        "status": row["status"],
        "body": row["body"],
        "message": row.get("message"),
        "provider": row["provider"],
    }
    return classify_overflow(**(args | override))


def _has_chinese(row: dict[str, Any]) -> bool:
    text = json.dumps(row, ensure_ascii=False)
    return any("\u4e00" <= ch <= "\u9fff" for ch in text)


def test_the_table_is_wide_enough() -> None:
    assert len(OVERFLOW) >= 40
    assert len(NOT_OVERFLOW) >= 15
    assert {row["provider"] for row in OVERFLOW} >= REQUIRED_PROVIDERS
    assert sum(_has_chinese(row) for row in OVERFLOW) >= 8
    assert sum(_has_chinese(row) for row in NOT_OVERFLOW) >= 6
    ids = [row["id"] for row in OVERFLOW + NOT_OVERFLOW]
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("row", OVERFLOW, ids=[row["id"] for row in OVERFLOW])
def test_overflow_payload_is_recognised_with_its_figures(row: dict[str, Any]) -> None:
    info = _classify(row)
    assert info is not None, row["id"]
    assert info.limit == row["limit"]
    assert info.requested == row["requested"]
    assert info.provider == row["provider"]
    assert info.reason


@pytest.mark.parametrize("row", NOT_OVERFLOW, ids=[row["id"] for row in NOT_OVERFLOW])
def test_non_overflow_payload_is_not_recognised(row: dict[str, Any]) -> None:
    assert _classify(row) is None, row["why"]


@pytest.mark.parametrize("row", NOT_OVERFLOW, ids=[row["id"] for row in NOT_OVERFLOW])
def test_non_overflow_payload_is_refused_on_its_body_alone(row: dict[str, Any]) -> None:
    """Streams and proxies lose the status: the body's codes and words must still refuse."""
    assert _classify(row, status=None) is None


@pytest.mark.parametrize("row", OVERFLOW, ids=[row["id"] for row in OVERFLOW])
def test_a_429_is_never_an_overflow(row: dict[str, Any]) -> None:
    assert _classify(row, status=429) is None


def test_raw_text_body_and_message_only_are_read() -> None:
    text = "This model's maximum context length is 32768 tokens. However, you requested 33000 tokens."
    from_body = classify_overflow(status=400, body=text)
    from_message = classify_overflow(status=None, body=None, message=text)
    assert from_body == from_message == OverflowInfo(32768, 33000, None, "message: maximum context length")


def test_numbers_with_thousands_separators() -> None:
    info = classify_overflow(status=400, body=None, message="maximum context length is 1,048,576 tokens")
    assert info is not None
    assert info.limit == 1_048_576


def test_nothing_to_read_is_not_an_overflow() -> None:
    assert classify_overflow(status=None, body=None) is None
    assert classify_overflow(status=400, body="") is None
    assert classify_overflow(status=400, body="{not json") is None
    assert classify_overflow(status=500, body={"error": {"message": "Internal server error"}}) is None


def test_413_without_a_body_is_an_overflow() -> None:
    info = classify_overflow(status=413, body=None, provider="anthropic")
    assert info == OverflowInfo(None, None, "anthropic", "status 413")


def test_raise_for_overflow_raises_our_error_with_the_stated_limit() -> None:
    row = next(row for row in OVERFLOW if row["id"] == "anthropic-prompt-too-long")
    with pytest.raises(ContextOverflowError) as caught:
        raise_for_overflow(status=400, body=row["body"], provider="anthropic")
    error = caught.value
    assert (error.limit, error.status, error.provider) == (200000, 400, "anthropic")
    assert "200000" in str(error)
    assert "208497" in str(error)
    assert "Fix:" in str(error)


def test_raise_for_overflow_is_quiet_for_other_errors() -> None:
    for row in NOT_OVERFLOW:
        raise_for_overflow(status=row["status"], body=row["body"], message=row.get("message"))


def test_to_error_without_figures_says_so() -> None:
    error = to_error(
        OverflowInfo(None, None, None, "code 1261"), message="Prompt 超长", status=400, provider="zhipu"
    )
    assert error.limit is None
    assert error.provider == "zhipu"
    assert "limit not stated" in str(error)
    assert "Prompt 超长" in str(error)


def _openai_error(
    cls: type[openai.APIStatusError], status: int, payload: dict[str, Any]
) -> openai.APIStatusError:
    response = httpx.Response(
        status, request=httpx.Request("POST", "https://api.openai.com/v1/chat/completions"), json=payload
    )
    return cls(f"Error code: {status} - {payload!r}", response=response, body=payload["error"])


def test_is_overflow_reads_provider_sdk_exceptions() -> None:
    overflow = next(row for row in OVERFLOW if row["id"] == "openai-chat-messages")
    rate = next(row for row in NOT_OVERFLOW if row["id"] == "openai-429-tpm")
    assert is_overflow(_openai_error(openai.BadRequestError, 400, overflow["body"]))
    assert not is_overflow(_openai_error(openai.RateLimitError, 429, rate["body"]))

    claude = next(row for row in OVERFLOW if row["id"] == "anthropic-prompt-too-long")
    response = httpx.Response(
        400, request=httpx.Request("POST", "https://api.anthropic.com/v1/messages"), json=claude["body"]
    )
    assert is_overflow(anthropic.BadRequestError("Error code: 400", response=response, body=claude["body"]))


def test_is_overflow_on_our_own_tree() -> None:
    assert is_overflow(ContextOverflowError("over", limit=8192))
    assert not is_overflow(RateLimitError("maximum context length is 8192 tokens"))
    assert not is_overflow(TransientLLMError("upstream timeout"))
    assert not is_overflow(AuthenticationError("bad key", status=401))
    assert is_overflow(BadRequestError("prompt is too long: 9000 tokens > 8192 maximum", status=400))
    assert not is_overflow(BadRequestError("max_tokens must be less than or equal to 8192", status=400))
    assert is_overflow(LLMError("upstream said: the input length exceeds the context length"))


def test_is_overflow_follows_the_cause_chain() -> None:
    try:
        try:
            raise ValueError("the request exceeds the available context size, try increasing it")
        except ValueError as inner:
            raise RuntimeError("agent step failed") from inner
    except RuntimeError as outer:
        assert is_overflow(outer)
    assert not is_overflow(RuntimeError("agent step failed"))


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)


@given(
    status=st.none() | st.integers(min_value=100, max_value=599),
    body=st.none() | st.text(max_size=200) | st.dictionaries(st.text(max_size=10), _JSON, max_size=5),
    message=st.none() | st.text(max_size=200),
)
def test_classify_never_raises(status: int | None, body: Any, message: str | None) -> None:
    info = classify_overflow(status=status, body=body, message=message)
    assert info is None or isinstance(info, OverflowInfo)
    if status == 429:
        assert info is None
