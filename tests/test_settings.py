import json

import pytest

from contextmem.errors import ConfigError
from contextmem.models import lookup_model
from contextmem.settings import Settings, unknown_variables


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


@pytest.mark.parametrize("word", ["", "none", "null", " None "])
def test_an_unset_word_means_not_set_never_a_url(word):
    assert Settings.parse({"base_url": word}).base_url is None
    assert Settings.parse({"context_window": word}).context_window is None
    assert Settings.load(env={"CONTEXTMEM_BASE_URL": word}).base_url is None


@pytest.mark.parametrize("url", ["localhost:8080", "ftp://host/v1", "http://", "none:8080"])
def test_base_url_is_checked_when_set(url):
    with pytest.raises(ConfigError, match=r"is not an http\(s\) URL\. Fix: .*config unset base_url"):
        Settings().with_value("base_url", url)
    assert Settings().with_value("base_url", "https://api.example.com/v1").base_url


def test_a_mistyped_key_gets_the_closest_name_not_every_key():
    with pytest.raises(ConfigError) as exc:
        Settings().with_value("summary_max_token", 3)
    assert str(exc.value) == "unknown setting 'summary_max_token'. Fix: did you mean 'summary_max_tokens'?"
    with pytest.raises(ConfigError) as exc:
        Settings.parse({"summary_max_token": 3})
    assert "did you mean 'summary_max_tokens'?" in str(exc.value) and "agent_max_steps" not in str(exc.value)


def test_an_out_of_range_value_says_what_would_do():
    with pytest.raises(ConfigError) as exc:
        Settings(context_window=-1)
    assert str(exc.value).endswith("Fix: set context_window to a number greater than 0")


def test_without_takes_a_value_back_to_its_default():
    s = Settings().with_value("base_url", "http://127.0.0.1:8080/v1", "file:x")
    back = s.without("base_url")
    assert back.base_url is None and back.sources["base_url"] == "default"


def test_a_misspelled_variable_is_named_with_the_closest_one_and_known_switches_are_not():
    env = {
        "CONTEXTMEM_SUMARY_MAX_TOKENS": "1",
        "CONTEXTMEM_MODEL": "none",
        "CONTEXTMEM_REQUIRE_PG": "1",  # a test switch read in tests/pg.py, not a setting
        "CONTEXTMEM_SKIP_LOCAL_LLM": "1",
        "OTHER": "x",
    }
    assert unknown_variables(env) == [
        "warning: ignoring CONTEXTMEM_SUMARY_MAX_TOKENS: not a contextmem setting. "
        "Fix: did you mean CONTEXTMEM_SUMMARY_MAX_TOKENS?"
    ]


def test_every_contextmem_variable_the_repository_reads_is_known():
    """A new CONTEXTMEM_* switch read somewhere (tests, tools, bench, evals) must join OTHER_VARIABLES, or
    every run with it set would warn."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    names = set()
    for folder in ("src", "tests", "tools", "bench", "evals", "examples", ".ci"):
        for path in (root / folder).rglob("*"):
            if path.is_file() and path.suffix in (".py", "") and "__pycache__" not in path.parts:
                names |= set(re.findall(r"CONTEXTMEM_[A-Z0-9_]*[A-Z0-9]", path.read_text(errors="ignore")))
    names -= {"CONTEXTMEM_SUMARY_MAX_TOKENS"}  # the misspelling the test above makes on purpose
    assert names and unknown_variables(dict.fromkeys(names, "1")) == []
