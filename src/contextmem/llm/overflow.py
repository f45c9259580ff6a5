"""Recognise a provider saying "this request is longer than my context window".

Every provider words it differently (OpenAI and Azure send ``code: context_length_exceeded``, Anthropic
"prompt is too long: N tokens > M maximum", Gemini "The input token count (N) exceeds the maximum number
of tokens allowed (M)", DashScope "Range of input length should be [1, M]", Zhipu business code ``1261``
"Prompt 超长", llama.cpp ``exceed_context_size_error`` with ``n_ctx``, ...), so the knowledge lives in
this one module and every adapter asks :func:`classify_overflow` (or :func:`raise_for_overflow`).

The decision, strongest signal first, is pure (no I/O):

1. a status that is never an overflow (401/402/403/404/429) or a code that names a rate limit, quota,
   auth or content-filter failure: **not** an overflow;
2. a code that names an overflow (``context_length_exceeded``, ``1261``, ...) or HTTP 413: overflow;
3. words of a rate limit / quota / auth / content filter, or a complaint about ``max_tokens`` that does
   not mention the context or the input: **not** an overflow;
4. overflow wording, in English or Chinese: overflow.

Step 3 is what keeps "tokens per min (TPM): Limit 30000, Requested 45000" and
"max_tokens: 100000 > 64000" out: retrying or compacting would not fix them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import AuthenticationError, ContextOverflowError, RateLimitError, TransientLLMError

__all__ = ["OverflowInfo", "classify_overflow", "is_overflow", "raise_for_overflow", "to_error"]


@dataclass(frozen=True, slots=True)
class OverflowInfo:
    """What the provider said about an overflow.

    ``limit`` is the context window the provider stated and ``requested`` the size it counted (input,
    or input plus ``max_tokens`` where the provider adds them), both in tokens and ``None`` when the
    provider did not say. ``reason`` names the signal that decided, for logs and tests.
    """

    limit: int | None
    requested: int | None
    provider: str | None
    reason: str


# -- signals --------------------------------------------------------------------------------------------

_NEVER_STATUSES = frozenset({401, 402, 403, 404, 429})
_TOO_LARGE_STATUS = 413

_OVERFLOW_CODES = frozenset(
    {
        "context_length_exceeded",  # OpenAI, Azure OpenAI, DeepSeek and most OpenAI-compatible servers
        "model_context_window_exceeded",  # Zhipu / z.ai
        "context_window_exceeded",
        "exceed_context_size_error",  # llama.cpp server
        "request_too_large",  # Anthropic 413
        "tokens_too_long",
        "1261",  # Zhipu business code: "Prompt 超长"
    }
)
_REFUSED_CODES = frozenset(
    {
        "rate_limit_exceeded",
        "rate_limit_error",
        "rate_limit_reached_error",
        "insufficient_quota",
        "exceeded_current_quota_error",
        "resource_exhausted",
        "overloaded_error",
        "authentication_error",
        "permission_error",
        "invalid_api_key",
        "invalidapikey",
        "unauthenticated",
        "permission_denied",
        "content_filter",
        "datainspectionfailed",
        "model_not_found",
        "throttling",
        "throttling.ratequota",
        "throttling.allocationquota",
        "1113",  # Zhipu: account in arrears
        "1301",  # Zhipu: unsafe content
        "1302",  # Zhipu: concurrency too high
        "1303",  # Zhipu: request frequency too high
        "1304",  # Zhipu: daily call limit
        "1305",  # Zhipu: too much traffic
    }
)

_I = re.IGNORECASE
_REFUSED_WORDS = re.compile(
    r"rate[ _-]?limit|too many requests|per (?:min|minute|second|hour|day)\b|\b(?:tpm|rpm|tpd|rpd|rps)\b"
    r"|quota|throttl|resource (?:has been )?exhausted|overloaded|insufficient (?:balance|funds)|billing"
    r"|api[ _-]?key|unauthori[sz]ed|authenticat|permission|content[ _]?(?:filter|management)"
    r"|inappropriate|safety system"
    r"|频繁|频率|每分钟|每秒|并发|限流|访问量|额度|配额|余额|欠费|鉴权|身份验证|认证失败|敏感|不安全",
    _I,
)
_MAX_TOKENS_WORDS = re.compile(
    r"max[_ ]?(?:completion[_ ]|output[_ ]|new[_ ])?tokens|maxoutputtokens|output tokens|completion tokens"
    r"|最大输出|输出长度",
    _I,
)
_CONTEXT_WORDS = re.compile(r"context|上下文|输入|input (?:length|tokens?)|prompt|提示", _I)

_OVERFLOW_WORDS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, _I))
    for name, pattern in (
        ("context length exceeded", r"context[ _-]?(?:length|window)[ _-]?exceeded"),
        ("maximum context length", r"max(?:imum)?\.? context (?:length|size|window)"),
        (
            "exceeds the context",
            r"exceed(?:s|ed)? (?:the )?(?:available |model'?s )?context (?:size|limit|length|window)",
        ),
        ("context window full", r"context window (?:is )?(?:full|exceeds)"),
        ("longer than the context", r"longer than the (?:model'?s )?context (?:length|window|size)"),
        ("configured context size", r"configured context size"),
        ("prompt/input too long", r"\b(?:prompt|input)\b.{0,40}?\btoo (?:long|large)\b"),
        ("token count exceeds", r"(?:input|prompt) token count.{0,40}?(?:exceeds|only supports up to)"),
        ("exceeds maximum tokens", r"exceeds? the maximum number of tokens"),
        ("input length exceeds", r"input (?:length|tokens?) (?:exceeds?|exceeded)"),
        ("model token limit", r"exceeded (?:the )?model(?:'s)? token limit|token limit exceeded"),
        ("range of input length", r"range of input length should be"),
        ("reduce the messages", r"reduce the length of the messages"),
        ("too many tokens", r"too many tokens"),
        ("payload too large", r"payload size exceeds the limit|request entity too large"),
        ("超出/超过…长度", r"超(?:出|过)了?(?:模型)?(?:的)?(?:允许的)?(?:最大)?(?:上下文)?(?:长度|窗口)"),
        ("上下文长度", r"上下文(?:长度|窗口)?.{0,12}?(?:超|溢出|已满|不足|过长)"),
        (
            "输入长度超过",
            r"(?:输入|请求|提示词?|prompt|文本|消息|对话)\s*(?:的)?\s*(?:长度|内容|token\s*数?量?|tokens?)?"
            r"\s*(?:已)?(?:超过|超出|过长|超长|太长)",
        ),
        ("token 数超过", r"tokens?\s*(?:数|数量)?.{0,6}?(?:超过|超出).{0,8}?(?:上下文|模型|最大|上限)"),
    )
)

_N = r"(\d[\d,]*)"
_FIGURES: tuple[tuple[re.Pattern[str], tuple[str, ...]], ...] = tuple(
    (re.compile(pattern.replace("{N}", _N), _I), roles)
    for pattern, roles in (
        (r"prompt is too long: {N} tokens > {N}", ("requested", "limit")),
        (r"exceed context limit: {N} \+ {N} > {N}", ("requested", "requested", "limit")),
        (
            r"input token count \(?{N}\)? exceeds the maximum number of tokens allowed \(?{N}",
            ("requested", "limit"),
        ),
        (r"input token count is {N} but (?:the )?model only supports up to {N}", ("requested", "limit")),
        (r"request \({N} tokens\) exceeds the available context size \({N}", ("requested", "limit")),
        (r"\({N} tokens\) is too long and exceeds limit of {N}", ("requested", "limit")),
        (
            r"total length {N}\) is too long to fit into the model \(context length {N}",
            ("requested", "limit"),
        ),
        (r"prompt contains {N} tokens.{0,40}?too large for model with {N}", ("requested", "limit")),
        (r"requested tokens \({N}\) exceed context window of {N}", ("requested", "limit")),
        (r"prompt has {N} tokens?, but the configured context size is {N}", ("requested", "limit")),
        (r"input \({N} tokens\) is longer than the model'?s context length \({N}", ("requested", "limit")),
        (r"configured limit of {N} tokens\. your messages resulted in {N}", ("limit", "requested")),
        (r"maximum context length is {N}", ("limit",)),
        (r"exceeds the maximum number of tokens allowed \(?{N}", ("limit",)),
        (r"exceeded model token limit:? {N}", ("limit",)),
        (r"range of input length should be \[\s*\d+\s*,\s*{N}\s*\]", ("limit",)),
        (
            r"(?:you requested|resulted in|your request has|your prompt has) {N}(?: input)? tokens",
            ("requested",),
        ),
        (r"(?:最大|上限|限制为?|窗口为?)(?:上下文)?(?:长度)?\s*[:：为是]?\s*{N}", ("limit",)),
        (r"(?:当前|实际|请求了?|输入了?)(?:长度|token数?)?\s*[:：为是]?\s*{N}", ("requested",)),
        (r"context (?:length|size|window)(?: of| is)? \(?{N}", ("limit",)),
    )
)

_CODE_KEYS = frozenset({"code", "type", "status", "error_code", "errorcode", "error_type", "err_code"})
_LIMIT_KEYS = frozenset({"n_ctx", "context_length", "max_context_length", "context_window"})
_REQUESTED_KEYS = frozenset({"n_prompt_tokens", "prompt_tokens", "requested_tokens"})
_MAX_DEPTH = 6
_NEVER_OVERFLOW = (RateLimitError, TransientLLMError, AuthenticationError)


# -- the decision ---------------------------------------------------------------------------------------


def classify_overflow(
    *,
    status: int | None,
    body: Mapping[str, Any] | str | None,
    message: str | None = None,
    provider: str | None = None,
) -> OverflowInfo | None:
    """Return :class:`OverflowInfo` if this error response is a context-window overflow, else ``None``.

    ``body`` is the provider's error body, parsed (``Mapping``) or raw (``str``: JSON or plain text);
    ``message`` is any extra text, e.g. ``str(sdk_exception)``. Never raises on odd input.
    """
    facts = _Facts()
    facts.read(body, 0)
    if message:
        facts.read(message, 0)
    text = "\n".join(facts.texts)
    codes = {code.lower() for code in facts.codes}

    if status in _NEVER_STATUSES or codes & _REFUSED_CODES:
        return None
    reason: str | None = None
    hit_codes = sorted(codes & _OVERFLOW_CODES)
    if hit_codes:
        reason = f"code {hit_codes[0]}"
    elif status == _TOO_LARGE_STATUS:
        reason = "status 413"
    elif _REFUSED_WORDS.search(text) or (_MAX_TOKENS_WORDS.search(text) and not _CONTEXT_WORDS.search(text)):
        return None
    else:
        reason = next((f"message: {name}" for name, pattern in _OVERFLOW_WORDS if pattern.search(text)), None)
        if reason is None:
            return None
    limit, requested = _figures(text)
    return OverflowInfo(
        limit=facts.limit if facts.limit is not None else limit,
        requested=facts.requested if facts.requested is not None else requested,
        provider=provider,
        reason=reason,
    )


def to_error(
    info: OverflowInfo, *, message: str = "", status: int | None = None, provider: str | None = None
) -> ContextOverflowError:
    """Build the :class:`ContextOverflowError` an adapter raises for ``info``; the message says the fix."""
    who = provider or info.provider or ""
    stated = f"limit {info.limit} tokens" if info.limit is not None else "limit not stated"
    asked = f", requested {info.requested}" if info.requested is not None else ""
    detail = f": {message}" if message else ""
    text = (
        f"{who or 'the provider'} rejected the request as longer than the context window "
        f"({stated}{asked}; {info.reason}){detail}. "
        "Fix: compact the history or lower max_tokens; if the window is smaller than configured, "
        "set agent_max_context_tokens below the stated limit."
    )
    return ContextOverflowError(text, provider=who, status=status, limit=info.limit)


def raise_for_overflow(
    *,
    status: int | None,
    body: Mapping[str, Any] | str | None,
    message: str | None = None,
    provider: str | None = None,
) -> None:
    """Raise :class:`ContextOverflowError` if the response is an overflow; return quietly otherwise."""
    info = classify_overflow(status=status, body=body, message=message, provider=provider)
    if info is not None:
        raise to_error(info, message=message or "", status=status, provider=provider)


def is_overflow(exc: BaseException) -> bool:
    """Whether ``exc`` (ours, a provider SDK's, or one wrapping either) reports a context overflow.

    :class:`ContextOverflowError` is one; our rate-limit, transient and auth errors never are. Anything
    else (an SDK error, our ``BadRequestError``) is read like a response: ``status_code``/``status``,
    ``body`` and ``str(exc)``, following ``__cause__`` a few levels.
    """
    seen: BaseException | None = exc
    for _ in range(_MAX_DEPTH):
        if seen is None:
            return False
        if isinstance(seen, ContextOverflowError):
            return True
        if isinstance(seen, _NEVER_OVERFLOW):
            return False  # adapters classified these already; their text may still say "tokens"
        if _reads_as_overflow(seen):
            return True
        seen = seen.__cause__
    return False


def _reads_as_overflow(exc: BaseException) -> bool:
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int):
        status = getattr(exc, "status", None)
    body = getattr(exc, "body", None)
    if not isinstance(body, Mapping | str):
        body = None
    info = classify_overflow(status=status if isinstance(status, int) else None, body=body, message=str(exc))
    return info is not None


# -- reading bodies -------------------------------------------------------------------------------------


class _Facts:
    """Codes, texts and stated numbers gathered from a body of any shape (nested, JSON in strings)."""

    def __init__(self) -> None:
        self.codes: list[str] = []
        self.texts: list[str] = []
        self.limit: int | None = None
        self.requested: int | None = None

    def read(self, value: object, depth: int, key: str = "") -> None:
        if depth > _MAX_DEPTH:
            return
        if isinstance(value, str):
            self._read_text(value, depth, key)
        elif isinstance(value, bool):
            return
        elif isinstance(value, int):
            self._read_number(value, key)
        elif isinstance(value, Mapping):
            for child_key, child in value.items():
                self.read(child, depth + 1, str(child_key).lower())
        elif isinstance(value, Sequence):
            for child in value:
                self.read(child, depth + 1, key)

    def _read_text(self, value: str, depth: int, key: str) -> None:
        stripped = value.strip()
        if stripped[:1] in ("{", "["):
            try:
                parsed = json.loads(stripped)
            except ValueError:
                parsed = None
            if parsed is not None:
                self.read(parsed, depth + 1, key)
                return
        if key in _CODE_KEYS:
            self.codes.append(stripped)
        if not key.endswith("id"):
            self.texts.append(value)

    def _read_number(self, value: int, key: str) -> None:
        if key in _CODE_KEYS:
            self.codes.append(str(value))
        elif key in _LIMIT_KEYS and self.limit is None:
            self.limit = value
        elif key in _REQUESTED_KEYS and self.requested is None:
            self.requested = value


def _figures(text: str) -> tuple[int | None, int | None]:
    """The window and the requested size stated in ``text``: first statement of each wins."""
    limit: int | None = None
    requested: int | None = None
    for pattern, roles in _FIGURES:
        match = pattern.search(text)
        if match is None:
            continue
        numbers = [int(group.replace(",", "")) for group in match.groups()]
        found_limit = [n for n, role in zip(numbers, roles, strict=True) if role == "limit"]
        found_requested = [n for n, role in zip(numbers, roles, strict=True) if role == "requested"]
        if limit is None and found_limit:
            limit = found_limit[0]
        if requested is None and found_requested:
            requested = sum(found_requested)
        if limit is not None and requested is not None:
            break
    return limit, requested
