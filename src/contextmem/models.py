"""Known models and their real context windows (C1), overridable by settings.

Looked up by the longest matching prefix of the model name, after dropping a provider prefix
(``openai:``, ``anthropic:``) and any ``org/`` path, case-insensitively, so ``openai:gpt-4o-2024-08-06``
and ``Qwen/Qwen2.5-72B-Instruct`` both resolve. Windows are the providers' published input+output
context sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MODEL_TABLE", "ModelInfo", "lookup_model"]


@dataclass(frozen=True, slots=True)
class ModelInfo:
    context_window: int
    max_output: int
    encoding: str = "o200k_base"  # the closest real tokenizer we ship; calibration corrects the rest


_K = 1024
MODEL_TABLE: dict[str, ModelInfo] = {
    # OpenAI
    "gpt-5": ModelInfo(400_000, 128_000),
    "gpt-4.1": ModelInfo(1_047_576, 32_768),
    "gpt-4o": ModelInfo(128_000, 16_384),
    "gpt-4-turbo": ModelInfo(128_000, 4_096, "cl100k_base"),
    "gpt-4": ModelInfo(8_192, 8_192, "cl100k_base"),
    "gpt-3.5-turbo": ModelInfo(16_385, 4_096, "cl100k_base"),
    "o1": ModelInfo(200_000, 100_000),
    "o3": ModelInfo(200_000, 100_000),
    "o4-mini": ModelInfo(200_000, 100_000),
    # Anthropic
    "claude-opus-4": ModelInfo(200_000, 32_000),
    "claude-sonnet-4": ModelInfo(200_000, 64_000),
    "claude-haiku-4": ModelInfo(200_000, 64_000),
    "claude-3-7-sonnet": ModelInfo(200_000, 64_000),
    "claude-3-5": ModelInfo(200_000, 8_192),
    "claude-3": ModelInfo(200_000, 4_096),
    # Google
    "gemini-2.5": ModelInfo(1_048_576, 65_536),
    "gemini-2.0": ModelInfo(1_048_576, 8_192),
    "gemini-1.5-pro": ModelInfo(2_097_152, 8_192),
    "gemini-1.5-flash": ModelInfo(1_048_576, 8_192),
    # DeepSeek
    "deepseek-chat": ModelInfo(128_000, 8_192),
    "deepseek-reasoner": ModelInfo(128_000, 64_000),
    "deepseek-v3": ModelInfo(128_000, 8_192),
    "deepseek-r1": ModelInfo(128_000, 32_768),
    # Qwen / DashScope
    "qwen-max": ModelInfo(32_768, 8_192),
    "qwen-plus": ModelInfo(131_072, 8_192),
    "qwen-turbo": ModelInfo(1_000_000, 8_192),
    "qwen-long": ModelInfo(10_000_000, 8_192),
    "qwen3": ModelInfo(131_072, 8_192),
    "qwen2.5": ModelInfo(32_768, 8_192),
    # Moonshot / Kimi
    "kimi-k2": ModelInfo(131_072, 16_384),
    "moonshot-v1-8k": ModelInfo(8_192, 4_096),
    "moonshot-v1-32k": ModelInfo(32_768, 4_096),
    "moonshot-v1-128k": ModelInfo(131_072, 4_096),
    # Zhipu / GLM
    "glm-4.5": ModelInfo(131_072, 98_304),
    "glm-4": ModelInfo(128_000, 4_096),
    # Meta Llama
    "llama-4": ModelInfo(1_048_576, 8_192),
    "llama-3.3": ModelInfo(131_072, 8_192),
    "llama-3.2": ModelInfo(131_072, 8_192),
    "llama-3.1": ModelInfo(131_072, 8_192),
    "llama-3": ModelInfo(8_192, 4_096),
    "llama3.1": ModelInfo(131_072, 8_192),
    "llama3": ModelInfo(8_192, 4_096),
}


def _normalise(model: str) -> str:
    name = model.strip().lower()
    if ":" in name and not name.startswith(("/", ".")):
        name = name.split(":", 1)[1]
    return name.rsplit("/", 1)[-1]


def lookup_model(model: str, overrides: dict[str, ModelInfo] | None = None) -> ModelInfo | None:
    """The info of the longest table key that prefixes ``model``; ``overrides`` win over the table."""
    name = _normalise(model)
    table = {**MODEL_TABLE, **{k.lower(): v for k, v in (overrides or {}).items()}}
    best = max((k for k in table if name.startswith(k)), key=len, default=None)
    return table[best] if best is not None else None
