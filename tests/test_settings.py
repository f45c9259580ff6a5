import json

import pytest

from contextmem.errors import ConfigError
from contextmem.models import lookup_model
from contextmem.settings import Settings


def test_defaults_match_the_seeds():
    s = Settings()
    assert (s.agent_max_context_tokens, s.agent_max_context_turns, s.agent_max_steps) == (50_000, 20, 15)
    assert (s.compact_threshold_ratio, s.reserve_threshold_ratio) == (0.8, 0.1)
    assert (s.pruning_recent_n, s.pruning_recent_msg_max_bytes, s.pruning_old_msg_max_bytes) == (
        2,
        50_000,
        3_000,
    )
    assert (s.offload_retention_days, s.historical_tool_result_max_chars) == (5, 20_000)
    assert (s.emergency_max_chars, s.emergency_max_turns) == (10_000, 5)
    assert (s.vector_weight, s.keyword_weight, s.daily_half_life_days) == (0.7, 0.3, 30)
    assert (s.session_retention_days, s.daily_summary_time) == (30, "23:55")


def test_precedence_file_then_env_then_override(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('agent_max_context_turns = 30\nmodel = "openai:gpt-4o"\nagent_max_steps = 9\n')
    env = {"CONTEXTMEM_AGENT_MAX_CONTEXT_TURNS": "40", "OTHER": "x", "CONTEXTMEM_REQUIRE_PG": "1"}
    s = Settings.load(f, env=env, agent_max_steps=3)
    assert s.agent_max_context_turns == 40 and s.model == "openai:gpt-4o" and s.agent_max_steps == 3
    src = s.sources
    assert src["agent_max_context_turns"] == "env:CONTEXTMEM_AGENT_MAX_CONTEXT_TURNS"
    assert src["model"] == f"file:{f}"
    assert src["agent_max_steps"] == "override"
    assert src["workspace"] == "default"


def test_json_file_and_contextmem_section(tmp_path):
    f = tmp_path / "c.json"
    f.write_text(json.dumps({"contextmem": {"pruning_recent_n": 4}}))
    assert Settings.load(f, env={}).pruning_recent_n == 4


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"agent_max_context_turns": 0}, "agent_max_context_turns: got 0"),
        ({"agent_max_context_turns": "many"}, "'many'"),
        ({"compact_threshold_ratio": 0.05}, "reserve_threshold_ratio"),
        ({"daily_summary_time": "25:00"}, "HH:MM"),
        ({"tokenizer": "gpt2"}, "tokenizer"),
        ({"max_context": 1}, "unknown setting 'max_context'"),
    ],
)
def test_invalid_settings_raise_one_clear_error(values, needle):
    with pytest.raises(ConfigError) as exc:
        Settings.parse(values)
    assert needle in str(exc.value)


def test_bad_file_is_a_config_error(tmp_path):
    f = tmp_path / "c.toml"
    f.write_text("this is = = not toml")
    with pytest.raises(ConfigError, match="not valid TOML"):
        Settings.load(f, env={})
    with pytest.raises(ConfigError, match="cannot read"):
        Settings.load(tmp_path / "missing.json", env={})


def test_with_value_validates_and_save_persists(tmp_path):
    s = Settings().with_value("agent_max_context_turns", "4", source="/config")
    assert s.agent_max_context_turns == 4 and s.sources["agent_max_context_turns"] == "/config"
    with pytest.raises(ConfigError):
        s.with_value("agent_max_context_turns", "-1")
    with pytest.raises(ConfigError, match="unknown setting"):
        s.with_value("nope", 1)
    path = tmp_path / "ws" / "config.json"
    s.save(path)
    assert json.loads(path.read_text()) == {"agent_max_context_turns": 4}
    assert Settings.load(path, env={}).agent_max_context_turns == 4


def test_model_table_lookup():
    assert lookup_model("deepseek-chat").context_window == 128_000
    assert lookup_model("anthropic:claude-sonnet-4-20250514").context_window == 200_000
    assert lookup_model("moonshot-v1-32k").context_window == 32_768
    assert lookup_model("glm-4.5-air").context_window == 131_072
    assert lookup_model("gpt-4o-mini").context_window == 128_000
    assert lookup_model("gpt-4.1-mini").context_window == 1_047_576
    assert lookup_model("llama-3.1-8b-instruct").context_window == 131_072
    assert lookup_model("gemini-2.5-pro").context_window == 1_048_576
    assert lookup_model("totally-unknown") is None
    from contextmem.models import ModelInfo

    assert lookup_model("gpt-4o", {"gpt-4o": ModelInfo(1000, 100)}).context_window == 1000


def test_summary_local_model_is_off_by_default_and_set_from_the_environment():
    assert Settings().summary_local_model is False
    on = Settings.load(env={"CONTEXTMEM_SUMMARY_LOCAL_MODEL": "1"})
    assert (
        on.summary_local_model is True
        and on.sources["summary_local_model"] == "env:CONTEXTMEM_SUMMARY_LOCAL_MODEL"
    )
    assert Settings.load(env={"CONTEXTMEM_SUMMARY_LOCAL_MODEL": "false"}).summary_local_model is False
    with pytest.raises(ConfigError, match="summary_local_model"):
        Settings.load(env={"CONTEXTMEM_SUMMARY_LOCAL_MODEL": "sometimes"})
