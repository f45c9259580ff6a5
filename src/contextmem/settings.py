"""Typed settings: every key, its default (from the seeds), and the one place that reads the environment.

Sources, lowest to highest precedence: defaults < a JSON or TOML file < ``CONTEXTMEM_*`` environment
variables < explicit overrides. :attr:`Settings.sources` records where each non-default value came
from, for ``/config``.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from .dsn import printable_store_url, redact_store_url
from .errors import ConfigError, brief
from .namespace import DEFAULT_NAMESPACE, check_namespace
from .settings_text import SECRET_URL_KEYS, cut, describe, read_settings_file, shown, unknown_setting
from .workspace import SESSIONS_FILE

__all__ = [
    "DEFAULT_OUTPUT_RESERVE",
    "ENV_PREFIX",
    "OTHER_VARIABLES",
    "UNSET_WORDS",
    "URL_SCHEMES",
    "Settings",
    "check_key",
    "unknown_key_message",
    "unknown_variables",
]

ENV_PREFIX = "CONTEXTMEM_"
DEFAULT_OUTPUT_RESERVE = 4096

# CONTEXTMEM_* variables that are not settings and are read elsewhere (the test suite's switches, in
# tests/pg.py, tests/local_model.py, tests/test_drill.py, tests/test_engine_crash.py,
# tests/test_store_sqlite.py): never warned about as misspellings.
OTHER_VARIABLES = frozenset(
    {
        "CONTEXTMEM_REQUIRE_PG",
        "CONTEXTMEM_PG_USER",
        "CONTEXTMEM_REQUIRE_LOCAL_LLM",
        "CONTEXTMEM_SKIP_LOCAL_LLM",
        "CONTEXTMEM_DRILL_SECONDS",
        "CONTEXTMEM_CRASH_KILLS",
        "CONTEXTMEM_STORE_LOAD",
        "CONTEXTMEM_REQUIRE_IPV6",
        "CONTEXTMEM_STRICT_SKIPS",
        "CONTEXTMEM_ALLOWED_SKIPS",
    }
)
# What ``config set KEY none`` (or a variable set to "") means for a setting whose default is "not set".
UNSET_WORDS = frozenset({"", "none", "null"})
URL_SCHEMES = ("http", "https")


class Settings(BaseModel):
    """All of contextmem's settings. Field docs are the reference; docs/configuration.md lists defaults."""

    # No NaN or infinity: a timeout of inf waits forever, and NaN passes no comparison (no range check).
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)

    # Where things live
    workspace: Path = Field(Path("~/.contextmem"), description="Memory files, dialog archive, tool results")
    store: str = Field("", description="sqlite:///path or postgresql://…; empty = SQLite in the workspace")
    namespace: str = Field(
        DEFAULT_NAMESPACE,
        description="tenant/user/agent owning sessions and memory: 1-64 of a-z 0-9 . _ - @",
    )

    # The session store's patience (PostgreSQL; SQLite's own busy timeout is its constructor's)
    store_connect_timeout: float = Field(
        10.0, gt=0, description="Seconds one connection attempt to the store may take"
    )
    store_statement_timeout: float = Field(
        30.0, gt=0, description="Seconds one statement may run before the server cancels it"
    )
    store_lock_timeout: float = Field(
        30.0, gt=0, description="Longest wait in seconds for a session's compaction lock or a row lock"
    )
    store_retry_seconds: float = Field(
        30.0,
        ge=0,
        description="How long an unreachable or restarting database is retried, with backoff, before "
        "StoreUnavailableError",
    )

    # The model
    model: str = Field(
        "local",
        description="'local', a path to a .gguf, 'openai:MODEL', 'anthropic:MODEL', or 'none' (no model)",
    )
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint for openai:MODEL")
    api_key_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$",
        description="Environment variable whose key goes to base_url (never the key itself)",
    )
    strict_server: bool = Field(
        False, description="llama.cpp-style servers: '' not null beside tool calls, explicit tool_choice"
    )
    local_threads: int = Field(
        2,
        ge=1,
        le=256,
        description="CPU threads the local model runs on; 1 where other work shares the cores (llama.cpp's "
        "threads wait for each other: a busy second core made its calls 2-3x slower at 2)",
    )
    context_window: int | None = Field(
        None, gt=0, description="The model's context window; else the model table"
    )
    max_tokens: int | None = Field(None, gt=0, description="Output reserve; alone it implies window = 4x")
    tokenizer: str = Field("auto", description="'auto', 'heuristic', 'o200k_base' or 'cl100k_base'")
    image_tokens: int = Field(765, ge=0, description="Flat token cost of one image")

    # Context budget (CowAgent / picoclaw / QwenPaw defaults)
    agent_max_context_tokens: int = Field(50_000, gt=0, description="Budget cap on the context window")
    agent_max_context_turns: int = Field(20, gt=0, description="Turns kept before turn trimming (C6)")
    agent_max_steps: int = Field(15, gt=0, description="Model steps per turn in the agent loop")
    compact_threshold_ratio: float = Field(
        0.8, gt=0, le=1, description="Summarise when history > ratio * window"
    )
    reserve_threshold_ratio: float = Field(0.1, ge=0, lt=1, description="Recent tokens kept when summarising")
    compact_message_threshold: int = Field(50, gt=0, description="Summarise when history has more messages")
    compact_target_ratio: float = Field(
        0.2, gt=0, le=1, description="Over budget, trim history to this share of it (one large step)"
    )

    # Tool-result offload (C5)
    pruning_recent_n: int = Field(2, ge=0, description="Recent tool results with the higher threshold")
    tool_result_budget_share: float = Field(
        0.125, gt=0, le=1, description="Most of the history budget one result of a past turn may keep"
    )
    pruning_recent_msg_max_bytes: int = Field(50_000, gt=0)
    pruning_old_msg_max_bytes: int = Field(3_000, gt=0)
    max_message_bytes: int = Field(
        1_048_576, gt=0, description="Largest message add() takes (UTF-8 bytes); a tool result 10x it"
    )
    historical_tool_result_max_chars: int = Field(20_000, gt=0, description="CowAgent head+tail rule")
    offload_retention_days: int = Field(5, ge=0)

    # Emergency (C11)
    emergency_max_chars: int = Field(10_000, gt=0)
    emergency_max_turns: int = Field(5, gt=0)

    # Summaries (C8) and task memory (C14)
    summary_injection: Literal["system", "first_user"] = "system"
    summary_max_tokens: int = Field(3_000, gt=0, description="Hard size budget of the running summary")
    summary_window_share: float = Field(
        0.35,
        gt=0,
        le=0.5,
        description="Most of the window the summary takes, unless summary_max_tokens is set",
    )
    summary_local_model: bool = Field(
        False,
        description="Let the local model write summaries; off: the extractive summary (as good, measured, "
        "and seconds instead of minutes on 2 cores). Hosted models always write them",
    )
    summary_model: str | None = Field(
        None,
        description="Model that writes summaries (e.g. openai:gpt-4o-mini, a cheaper one than the agent's); "
        "'none': extractive summaries; unset: the agent's model",
    )
    summary_timeout_seconds: float = Field(120.0, gt=0)
    summary_chunk_tokens: int = Field(6_000, gt=0, description="Most history tokens fed to one summary call")
    fold_task_memory: bool = Field(True, description="Fold a finished task's tool steps to its outcome")

    # Long-term memory (M2, M4) and sessions (S1)
    vector_weight: float = Field(0.7, ge=0, le=1)
    keyword_weight: float = Field(0.3, ge=0, le=1)
    sparse_weight: float = Field(
        0.3,
        ge=0,
        le=1,
        description="Weight of the embedder's sparse head in hybrid and vector search (0: not used)",
    )
    neighbour_weight: float = Field(
        0.5,
        ge=0,
        le=1,
        description="How much the chunks just before and after a memory chunk in its file count when it "
        "is searched (its context; 0: each chunk alone; a daily file's chunks stand alone)",
    )
    speaker_weight: float = Field(
        0.05,
        ge=0,
        le=1,
        description="Weight of a memory chunk said by the speaker a query names ('What did Ingrid say "
        "about…'; a name heading or a 'Name:' line; 0: not used)",
    )
    time_weight: float = Field(
        0.1,
        ge=0,
        le=1,
        description="Weight of a memory chunk that says when (a date, 'yesterday', 'last summer'), for a "
        "query that asks when ('When did…', 'What year…'; 0: not used)",
    )
    file_weight: float = Field(
        0.3,
        ge=0,
        le=1,
        description="Share of a note's chunk's score given by the best candidate of its file (a session "
        "that answers holds more than its best turn; 0: each chunk alone). Daily files' and MEMORY.md's "
        "entries stand alone",
    )
    unnamed_weight: float = Field(
        0.3,
        ge=0,
        le=1,
        description="Share of a memory query's encoding taken from the query without the speakers it "
        "names ('What books has Tim read?': Tim's own turns rarely say 'Tim'; the speaker rule still "
        "lifts them; 0: the query as asked)",
    )
    daily_half_life_days: float = Field(30.0, gt=0)
    daily_decay_floor: float = Field(
        0.8, ge=0, lt=1, description="Share of a daily memory's score that decay never takes (0: plain decay)"
    )
    daily_summary_time: str = Field("23:55", description="Local time of the daily memory summary, HH:MM")
    session_retention_days: int = Field(30, gt=0)
    tool_call_lease_seconds: float = Field(
        120.0,
        gt=0,
        description="Another writer's tool call with no result after this long is closed with an error "
        "result, so a crashed writer cannot hold the session",
    )

    _sources: dict[str, str] = PrivateAttr(default_factory=dict)

    if not TYPE_CHECKING:  # type checkers keep pydantic's typed keyword signature

        def __init__(self, **data: Any) -> None:
            """Validate ``data``; a library user constructing settings directly gets the same
            :class:`ConfigError` (with its Fix) as ``load``, ``parse``, the CLI and the environment."""
            try:
                super().__init__(**data)
            except ValidationError as exc:
                raise ConfigError(describe(exc, Settings.model_fields)) from None

    @field_validator("*", mode="before")
    @classmethod
    def _plain_text(cls, value: Any, info: ValidationInfo) -> Any:
        """No text setting holds a control character or a lone surrogate (invalid bytes of an argument or
        a variable): a path with NUL, or a value the settings file cannot encode, would fail later, raw.
        A namespace is left to its grammar, whose Fix says more."""
        text = str(value) if isinstance(value, str | Path) and info.field_name != "namespace" else ""
        if _UNPRINTABLE.search(text):
            raise ConfigError(
                f"got {shown(str(info.field_name), text)}: a control character or invalid Unicode "
                "(a lone surrogate). Fix: give plain text"
            )
        return value

    @field_validator("*")
    @classmethod
    def _bounded(cls, value: Any) -> Any:
        """Whole numbers fit in 64 bits: a 5,000-digit one is no count of anything, and JSON (``save``,
        ``config list``) cannot even write it."""
        if isinstance(value, int) and abs(value) >= 2**63:
            raise ConfigError(f"got {brief(value)}: too large. Fix: give a number below 2**63")
        return value

    @field_validator("workspace", mode="before")
    @classmethod
    def _check_workspace(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():  # Path("") is the current directory
            raise ConfigError(
                "an empty workspace would put memory files in whatever directory contextmem runs from. "
                "Fix: give a directory (e.g. ~/.contextmem), or `contextmem config unset workspace`"
            )
        return value

    @field_validator("base_url", "api_key_env", "context_window", "max_tokens", mode="before")
    @classmethod
    def _unset_words(cls, value: Any) -> Any:
        """``""``, ``none`` and ``null`` mean "not set" for a setting whose default is not set: never a
        URL named "none" that fails later with a connection error."""
        return None if isinstance(value, str) and value.strip().lower() in UNSET_WORDS else value

    @field_validator("base_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        if value is not None:
            parts = urlsplit(value)
            if parts.scheme not in URL_SCHEMES or not parts.netloc:
                raise ConfigError(
                    f"{printable_store_url(value)} is not an http(s) URL. "
                    "Fix: e.g. http://127.0.0.1:8080/v1, or "
                    "`contextmem config unset base_url`"
                )
        return value

    @field_validator("summary_model")
    @classmethod
    def _strip_summary_model(cls, value: str | None) -> str | None:
        """Stripped; the spec itself is checked where models are known (``config set``, and when the runtime
        opens: :func:`~contextmem.llm.registry.summary_llm`), as ``model`` is."""
        return value.strip() if value is not None else value

    @field_validator("namespace")
    @classmethod
    def _check_namespace(cls, value: str) -> str:
        return check_namespace(value)  # the one grammar: settings, CLI, env, files, MCP URLs, stores

    @field_validator("daily_summary_time")
    @classmethod
    def _check_time(cls, value: str) -> str:
        if not re.fullmatch(r"([01]\d|2[0-3]):[0-5]\d", value):
            raise ConfigError(f"got {cut(repr(value))}: not a 24-hour time. Fix: give HH:MM, e.g. '23:55'")
        return value

    @field_validator("tokenizer")
    @classmethod
    def _check_tokenizer(cls, value: str) -> str:
        if value not in ("auto", "heuristic", "o200k_base", "cl100k_base"):
            raise ConfigError(
                f"got {cut(repr(value))}: not a tokenizer. "
                "Fix: use 'auto', 'heuristic', 'o200k_base' or 'cl100k_base'"
            )
        return value

    @model_validator(mode="after")
    def _check_pairs(self) -> Settings:
        """Settings that bound each other: checked together, whichever was set last."""
        if self.reserve_threshold_ratio >= self.compact_threshold_ratio:
            raise ConfigError(
                f"reserve_threshold_ratio ({self.reserve_threshold_ratio}) must be below "
                f"compact_threshold_ratio ({self.compact_threshold_ratio}), or compaction frees nothing. "
                "Fix: change one of the values"
            )
        window, reserve = self.context_window, self.max_tokens
        if window is not None and reserve is not None and reserve >= window:  # else every request fails
            raise ConfigError(
                f"max_tokens ({reserve}) is not below context_window ({window}): the output reserve "
                "would leave no room for the prompt. Fix: lower max_tokens (--max-tokens N), e.g. to "
                f"{max(1, window // 8)}, or raise context_window"
            )
        return self

    # --- derived values ----------------------------------------------------------------------

    @property
    def workspace_path(self) -> Path:
        return self.workspace.expanduser()

    @property
    def store_url(self) -> str:
        """The session store: the ``store`` setting, else a SQLite file in the workspace."""
        return self.store or f"sqlite:///{self.workspace_path / SESSIONS_FILE}"

    def shown(self) -> dict[str, Any]:
        """The values as JSON, passwords in URLs masked: what ``config`` prints (the file keeps them)."""
        values = self.model_dump(mode="json")
        for key in SECRET_URL_KEYS:
            if isinstance(values[key], str):
                values[key] = redact_store_url(values[key])
        return values

    @property
    def sources(self) -> dict[str, str]:
        """Where each key's value came from: 'default', 'file:PATH', 'env:NAME' or 'override'."""
        return {name: self._sources.get(name, "default") for name in type(self).model_fields}

    # --- loading -----------------------------------------------------------------------------

    @classmethod
    def load(
        cls,
        path: str | Path | None = None,
        *,
        env: Mapping[str, str] | None = None,
        **overrides: Any,
    ) -> Settings:
        """Defaults < file (JSON or TOML) < ``CONTEXTMEM_*`` variables of ``env`` < ``overrides``.

        Unknown keys in the file or the overrides are errors; an unknown ``CONTEXTMEM_*`` variable is
        ignored with a warning naming the closest one (:func:`unknown_variables`), unless it is one of
        :data:`OTHER_VARIABLES`.
        """
        values: dict[str, Any] = {}
        sources: dict[str, str] = {}
        if path is not None:
            for key, value in read_settings_file(Path(path)).items():
                values[key] = value
                sources[key] = f"file:{path}"
        environ = os.environ if env is None else env
        for name, raw in environ.items():
            if not name.startswith(ENV_PREFIX):
                continue
            key = name[len(ENV_PREFIX) :].lower()
            if key not in cls.model_fields:
                continue  # unknown_variables() says so, once per process (the CLI loads settings twice)
            values[key] = raw
            sources[key] = f"env:{name}"
        for key, value in overrides.items():
            values[key] = value
            sources[key] = "override"
        settings = cls.parse(values)
        settings._sources = sources
        return settings

    @classmethod
    def parse(cls, values: Mapping[str, Any]) -> Settings:
        """Validate ``values``; every problem becomes one line of a :class:`ConfigError`."""
        return cls(**{str(k): v for k, v in values.items()})  # __init__ turns errors into one ConfigError

    def with_value(self, key: str, value: Any, source: str = "override") -> Settings:
        """A copy with ``key`` set (strings are coerced as from the environment), validated."""
        check_key(key)
        data = self.model_dump()
        data[key] = value
        updated = type(self).parse(data)
        updated._sources = {**self._sources, key: source}
        return updated

    def without(self, key: str) -> Settings:
        """A copy with ``key`` back at its default, as if never set (``config unset KEY``)."""
        check_key(key)
        data = self.model_dump(exclude={key})
        updated = type(self).parse(data)
        updated._sources = {k: v for k, v in self._sources.items() if k != key}
        return updated

    def save(self, path: str | Path) -> None:
        """Write the non-default values as JSON: atomically, durably, privately (0600; it may hold a
        ``base_url`` with credentials or a ``store`` DSN with a password)."""
        from .safefs import write_atomic_path

        data = self.model_dump(mode="json", exclude_defaults=True)
        write_atomic_path(path, (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))


_UNPRINTABLE = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def unknown_key_message(key: str) -> str:
    """``unknown setting 'x'. Fix: did you mean 'y'?`` — the closest key, not all of them."""
    return unknown_setting(key, Settings.model_fields)


def check_key(key: str | None) -> str:
    """``key`` if it names a setting, else a :class:`ConfigError` suggesting the closest one."""
    if key not in Settings.model_fields:
        raise ConfigError(unknown_key_message(str(key)))
    return key


def unknown_variables(env: Mapping[str, str] | None = None) -> list[str]:
    """One warning line per ``CONTEXTMEM_*`` variable that is neither a setting nor one of
    :data:`OTHER_VARIABLES` (a misspelling is otherwise silently ignored), naming the closest name."""
    environ = os.environ if env is None else env
    known = [ENV_PREFIX + key.upper() for key in Settings.model_fields] + sorted(OTHER_VARIABLES)
    lines = []
    for name in sorted(environ):
        if (
            not name.startswith(ENV_PREFIX)
            or name in known
            or name[len(ENV_PREFIX) :].lower() in (Settings.model_fields)
        ):
            continue
        close = difflib.get_close_matches(name.upper(), known, n=1, cutoff=0.75)
        hint = f"did you mean {close[0]}?" if close else "see `contextmem config list` for the settings"
        lines.append(f"warning: ignoring {cut(name)}: not a contextmem setting. Fix: {hint}")
    return lines
