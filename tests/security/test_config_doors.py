"""The doors of namespaces and settings, drawn hostile (issue 49: a property test per door).

Namespaces enter through settings, ``CONTEXTMEM_NAMESPACE``, the CLI's ``--namespace`` and every store
call; settings through keyword arguments, ``CONTEXTMEM_<KEY>`` variables, a JSON or TOML file and
``config set``. Each door either takes the value (typed; a namespace only when it follows the grammar,
and then its files stay under its directory) or refuses it with one :class:`ContextmemError` line that
names the key, has a Fix, never echoes a huge value whole and carries no terminal control.
"""

from __future__ import annotations

import functools
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from contextmem.cli.config import save_setting
from contextmem.cli.main import main
from contextmem.errors import ConfigError, ContextmemError
from contextmem.namespace import check_namespace
from contextmem.settings import Settings
from contextmem.testing import InMemorySessionStore
from contextmem.workspace import Workspace
from tests.security.doors import assert_one_line_error, hostile_text, huge, raw_exception, terminal_unsafe

KEYS = sorted(Settings.model_fields)
# An oracle of the grammar written apart from namespace.py's regular expression.
ALLOWED = set("abcdefghijklmnopqrstuvwxyz0123456789._-@")
LONGEST_ERROR = 600  # characters: a refusal names the value, never echoes it whole

# A namespace's grammar is narrow, so half the draws are near-misses of it: allowed characters with one
# hostile piece spliced in, upper case, a dot or '@' first, 65 characters.
near_namespaces = st.one_of(
    st.text(alphabet=sorted(ALLOWED), min_size=1, max_size=66),
    st.tuples(st.text(alphabet=sorted(ALLOWED), max_size=10), hostile_text(max_size=3)).map("".join),
    st.sampled_from(
        ["..", ".", "../x", "a/b", "a\\b", "A", "bob\x00", "bob\n", "%2e%2e", "ａｌｉｃｅ", "x" * 65]
    ),
)
namespaces = st.one_of(hostile_text(), near_namespaces)


def follows_grammar(name: str) -> bool:
    return 1 <= len(name) <= 64 and set(name) <= ALLOWED and name[0] not in "._-@"


def assert_refusal(exc: BaseException, key: str | None = None) -> None:
    """One typed line with a Fix, bounded, naming ``key`` when given."""
    assert_one_line_error(exc)
    message = str(exc)
    assert len(message) <= LONGEST_ERROR, f"{len(message)} characters: {message[:200]!r}"
    assert not raw_exception(message), message
    if key is not None:
        assert key in message, f"the error does not name {key!r}: {message!r}"


# --- A. namespaces ------------------------------------------------------------------------------


@given(namespaces)
def test_a_namespace_is_taken_exactly_when_it_follows_the_grammar(name: str) -> None:
    try:
        taken = check_namespace(name)
    except ContextmemError as exc:
        assert not follows_grammar(name), f"{name!r} follows the grammar but was refused"
        assert_refusal(exc, "namespace")
    else:
        assert follows_grammar(name) and taken == name, f"{name!r} was taken"


@given(namespaces)
def test_settings_and_the_environment_take_a_namespace_by_the_grammar_only(name: str) -> None:
    for door in (lambda: Settings(namespace=name), lambda: Settings.load(env={"CONTEXTMEM_NAMESPACE": name})):
        try:
            assert door().namespace == name and follows_grammar(name)
        except ContextmemError as exc:
            assert not follows_grammar(name)
            assert_refusal(exc, "namespace")


@given(namespaces)
def test_an_accepted_namespace_keeps_its_files_under_its_own_directory(name: str) -> None:
    root = Path("/nonexistent/ws")
    try:
        workspace = Workspace(root, name)
    except ContextmemError as exc:
        assert_refusal(exc, "namespace")
        return
    assert follows_grammar(name)
    inside = root if name == "default" else root / "namespaces" / name
    for path in (workspace.dir, workspace.core_file, workspace.daily_dir, workspace.dialog_dir):
        assert Path(path).is_relative_to(inside) and ".." not in Path(path).parts, path


@given(st.one_of(namespaces, st.integers(), st.none(), st.lists(st.text(), max_size=3)))
async def test_every_store_call_refuses_a_namespace_off_the_grammar(name: Any) -> None:
    store = InMemorySessionStore()
    calls = (
        lambda: store.open_session(name, "s1"),
        lambda: store.append(name, "s1", []),
        lambda: store.list_sessions(name),
    )
    for call in calls:
        try:
            await call()
        except ContextmemError as exc:
            assert not (isinstance(name, str) and follows_grammar(name))
            assert_refusal(exc, "namespace")
        else:
            assert isinstance(name, str) and follows_grammar(name), f"a store call took {name!r}"


# Pinned at 40 in every profile: each example runs the whole CLI (parser, settings, command) in-process.
@given(name=st.one_of(near_namespaces, hostile_text(surrogates=False)))
@hypothesis_settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_the_cli_namespace_option_is_taken_or_refused_in_one_line(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if "\x00" in name or name.startswith("-"):
        return  # no argv holds NUL; a leading dash is an option, argparse's own door
    monkeypatch.setenv("HOME", str(tmp_path))
    code = main(["--workspace", str(tmp_path / "ws"), "--namespace", name, "config", "get", "namespace"])
    out, err = capsys.readouterr()
    if code == 0:
        assert follows_grammar(name) and json.loads(out) == name
    else:
        assert not follows_grammar(name) and out == ""
        assert len(err.splitlines()) == 1 and "namespace" in err and "Fix:" in err, err
        assert not terminal_unsafe(err) and not raw_exception(err), err
    assert {p.name for p in tmp_path.iterdir()} <= {"ws"}  # nothing made beside the workspace


# --- B. settings ---------------------------------------------------------------------------------

nested = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), hostile_text(max_size=5)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
values = st.one_of(
    hostile_text(),
    hostile_text(max_size=5).map(lambda t: huge(t or "x", 200_000)),
    st.sampled_from([math.nan, math.inf, -math.inf, -1, 0, -0.0, 10**5000, -(10**400), 2**63, True, b"\xff"]),
    st.sampled_from(["nan", "inf", "-inf", "1e999", "-1", "0", "", " ", "none", "1_000", "0x10", "١٢"]),
    st.integers(),
    st.floats(),
    nested,
)
DEEP = functools.reduce(lambda inner, _: [inner], range(3_000), "deep")  # deeper than repr() can recurse


def assert_taken(settings: Settings, key: str) -> None:
    """An accepted value is typed, and saves and loads back as itself (stored exactly)."""
    value = getattr(settings, key)
    if isinstance(value, float):
        assert math.isfinite(value), f"{key} took {value!r}"
    text = json.dumps(settings.model_dump(mode="json"), ensure_ascii=False)
    text.encode("utf-8")  # what save() writes: a lone surrogate would fail here, raw
    assert not re.search(r"[\x00-\x1f\x7f-\x9f]", str(value)), f"{key} took {value!r}"


@given(st.sampled_from(KEYS), st.one_of(values, st.just(DEEP)))
def test_a_keyword_argument_is_typed_or_refused_in_one_line_naming_its_key(key: str, value: Any) -> None:
    try:
        settings = Settings(**{key: value})
    except ContextmemError as exc:
        assert_refusal(exc, key)
    else:
        assert_taken(settings, key)


@given(st.sampled_from(KEYS), st.one_of(hostile_text(), st.sampled_from(["nan", "inf", "", "-1", "1e999"])))
def test_an_environment_variable_is_typed_or_refused_in_one_line_naming_its_key(key: str, value: str) -> None:
    try:
        settings = Settings.load(env={f"CONTEXTMEM_{key.upper()}": value})
    except ContextmemError as exc:
        assert_refusal(exc, key)
    else:
        assert_taken(settings, key)


# Pinned at 60 in every profile: each example writes, reads and saves a settings file on disk.
@given(key=st.sampled_from(KEYS), value=values, suffix=st.sampled_from([".json", ".toml"]))
@hypothesis_settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_settings_file_value_is_typed_saved_exactly_or_refused_in_one_line(
    key: str, value: Any, suffix: str, tmp_path: Path
) -> None:
    path = tmp_path / f"settings{suffix}"
    if isinstance(value, int) and abs(value) > 10**4000:
        written = "9" * 5_000  # json.dumps cannot write it; a person's editor can
    elif suffix == ".json":
        written = json.dumps(value) if not isinstance(value, bytes) else "{"
    else:
        written = json.dumps(value) if isinstance(value, str) else json.dumps(str(value))
    text = f'{{"{key}": {written}}}' if suffix == ".json" else f"{key} = {written}\n"
    path.write_text(text, encoding="utf-8")
    try:
        settings = Settings.load(path, env={})
    except ContextmemError as exc:
        assert_refusal(exc)
        return
    assert_taken(settings, key)
    saved = tmp_path / "saved.json"
    settings.save(saved)
    assert Settings.load(saved, env={}).model_dump() == settings.model_dump()


@given(
    content=st.one_of(
        st.binary(max_size=80), hostile_text().map(lambda t: t.encode("utf-8", "surrogatepass"))
    )
)
@hypothesis_settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_settings_file_of_any_bytes_loads_or_is_refused_in_one_line(content: bytes, tmp_path: Path) -> None:
    for suffix in (".json", ".toml"):
        path = tmp_path / f"settings{suffix}"  # the same file each example: rewritten whole
        path.write_bytes(content)
        try:
            Settings.load(path, env={})
        except ContextmemError as exc:
            assert_refusal(exc)


@pytest.mark.parametrize(
    "content", [b"[" * 100_000, b"a = " + b"[" * 100_000, b"\xff\xfe{}", b'{"contextmem": 5}', b"[1]"]
)
@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_a_deep_binary_or_misshapen_settings_file_is_one_line(
    content: bytes, suffix: str, tmp_path: Path
) -> None:
    path = tmp_path / f"settings{suffix}"
    path.write_bytes(content)
    with pytest.raises(ConfigError) as caught:
        Settings.load(path, env={})
    assert_refusal(caught.value)


@pytest.mark.parametrize("key", ["store", "base_url"])
@pytest.mark.parametrize("junk", ["\x00", "\x1b[2J", "\ud800", "\n"])
def test_a_refused_url_setting_never_shows_its_password(key: str, junk: str) -> None:
    url = f"{'postgresql' if key == 'store' else 'https'}://agent:hunter2-quartz@db.example:5432/x{junk}"
    with pytest.raises(ConfigError) as caught:
        Settings(**{key: url})
    assert_refusal(caught.value, key)
    assert "hunter2-quartz" not in str(caught.value)


def test_several_bad_values_are_still_one_line_naming_each_key() -> None:
    with pytest.raises(ConfigError) as caught:
        Settings(image_tokens=-1, local_threads=0, summary_timeout_seconds=math.inf)
    for key in ("image_tokens", "local_threads", "summary_timeout_seconds"):
        assert_refusal(caught.value, key)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("model", "nonsense"),
        ("model", "openai:"),
        ("model", "scripted:foo"),
        ("workspace", ""),
        ("workspace", "  "),
        ("workspace", "ws\x00x"),
        ("model", "\udcff"),  # an argument of invalid UTF-8, as Python decodes argv
        ("store_retry_seconds", "inf"),
    ],
)
def test_config_set_refuses_what_would_fail_later_and_saves_nothing(
    key: str, value: str, tmp_path: Path
) -> None:
    path = tmp_path / "config.json"
    with pytest.raises(ConfigError) as caught:
        save_setting(path, key, value)
    assert_refusal(caught.value)
    assert not path.exists()


@pytest.mark.parametrize("value", ["local", "none", "openai:gpt-4o-mini", "anthropic:claude-x", "/m/q.gguf"])
def test_config_set_saves_every_kind_of_model_spec(value: str, tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    assert save_setting(path, "model", value).model == value
    assert Settings.load(path, env={}).model == value
