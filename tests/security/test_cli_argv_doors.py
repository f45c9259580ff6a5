"""Two doors of the command line, drawn hostile: a tool definitions file (``replay --tools FILE``) and a
mistyped command or option (argparse's refusal, with the closest name when there is one).

A tools file of any bytes is read into tool specs or refused with one :class:`ContextmemError` line that
names the file and has a Fix; a mistyped word is refused with one line on stderr, with a Fix, that a
terminal prints as text (no control, no line break of its own).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from contextmem.cli.main import main
from contextmem.errors import MessageFormatError
from contextmem.eval.replay import load_tools
from tests.security.doors import assert_one_line_error, hostile_text, raw_exception, terminal_unsafe

tool_like = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), hostile_text(max_size=6)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["type", "function", "name", "parameters", "input_schema"]), inner),
    ),
    max_leaves=8,
)
contents = st.one_of(
    st.binary(max_size=200),
    hostile_text().map(lambda t: t.encode("utf-8", "surrogatepass")),
    tool_like.map(lambda v: json.dumps(v).encode()),
    st.integers(1, 3_000).map(lambda n: b"[" * n + b"]" * n),  # nested past what JSON reads
)


# Pinned at 60 in every profile: each example writes a file and reads it back.
@given(content=contents)
@hypothesis_settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_tools_file_of_any_bytes_is_read_or_refused_in_one_line_naming_it(
    content: bytes, tmp_path: Path
) -> None:
    path = tmp_path / "tools.json"
    path.write_bytes(content)
    try:
        specs = load_tools(path)
    except MessageFormatError as exc:
        assert_one_line_error(exc)
        assert str(path) in str(exc) and not raw_exception(str(exc)), str(exc)
    else:
        assert isinstance(json.loads(content.decode("utf-8-sig")), list) and len(specs) >= 0


def test_a_tools_file_named_with_terminal_controls_is_named_printably(tmp_path: Path) -> None:
    path = tmp_path / "tools\x1b[2J\u202e.json"
    path.write_text("not json")
    with pytest.raises(MessageFormatError) as refused:
        load_tools(path)
    assert_one_line_error(refused.value)


# Pinned at 40 in every profile: each example runs the whole parser in-process.
@given(word=hostile_text(max_size=12, surrogates=False), as_option=st.booleans())
@hypothesis_settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_mistyped_word_is_refused_in_one_printable_line_with_a_fix(
    word: str, as_option: bool, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    if "\x00" in word or word.startswith("-") or not word.strip():
        return  # no argv holds NUL; a leading dash is an option of its own; an empty one is no word
    argv = ["sessions", "list", f"--{word}"] if as_option else [word]
    if not as_option and word in ("chat", "ask", "demo", "replay", "eval", "mcp", "count", "config"):
        return
    code = main(["--workspace", str(tmp_path / "ws"), *argv])
    out, err = capsys.readouterr()
    assert code == 2 and out == "", (out, err)
    assert len(err.splitlines()) == 1 and "Fix:" in err and err.endswith("\n"), repr(err)
    assert not terminal_unsafe(err) and not raw_exception(err), repr(err)
