"""Prompt-cache metrics of a replay (issue 15): the prefix a request shares with the previous one."""

import json

import pytest

from contextmem.cli.main import main
from contextmem.errors import MessageFormatError
from contextmem.eval.prompt_cache import CACHE_READ_PRICE, CallCache, compare, tally, wire_request
from contextmem.eval.replay import load_tools
from contextmem.formats.openai import from_openai
from contextmem.messages import AssistantMessage, SystemMessage, ToolCall, ToolMessage, ToolSpec, UserMessage
from contextmem.settings import Settings
from contextmem.tokens import MessageCounter, get_counter
from evals.datasets import agent_transcript

COUNTER = MessageCounter(get_counter("auto"))
TOOLS = (
    ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),
)
SYSTEM = SystemMessage("You are a coding agent.")
CALL = ToolCall("c1", "read_file", '{"path": "a.py"}')
U1, U2, U3 = UserMessage("read a.py"), UserMessage("and now b.py 请看 b.py"), UserMessage("thanks")
ASK = AssistantMessage(None, tool_calls=(CALL,))
RESULT = ToolMessage("c1", "def a():\n    return 1\n" * 50)
REPLY = AssistantMessage("a.py defines a() which returns 1.")


def wire(*messages, tools=TOOLS):
    return wire_request(messages, tools, COUNTER)


def test_the_first_call_has_no_prefix():
    call = compare(None, wire(SYSTEM, U1))
    assert call == CallCache(wire(SYSTEM, U1).prompt, 0, "first") and not call.appended


def test_an_append_only_request_shares_the_whole_previous_request():
    before = wire(SYSTEM, U1, ASK, RESULT)
    after = wire(SYSTEM, U1, ASK, RESULT, REPLY, U2)
    call = compare(before, after)
    assert call.appended and call.kind == "append"
    assert call.shared == before.prompt and call.prompt == after.prompt > before.prompt
    assert call.billed == pytest.approx(after.prompt - before.prompt + CACHE_READ_PRICE * before.prompt)


def test_a_rewritten_tool_result_breaks_the_prefix_at_that_message():
    before = wire(SYSTEM, U1, ASK, RESULT, REPLY, U2)
    cut = ToolMessage("c1", "def a():\n[... offloaded to tool_results/c1.txt ...]")
    call = compare(before, wire(SYSTEM, U1, ASK, cut, REPLY, U2))
    assert call.kind == "tool_result_rewritten" and not call.appended
    assert call.shared == wire(SYSTEM, U1, ASK).prompt


def test_a_changed_system_message_shares_only_the_tools():
    before = wire(SYSTEM, U1, ASK, RESULT)
    summary = SystemMessage("You are a coding agent.\n\nSummary so far: read a.py.")
    call = compare(before, wire(summary, RESULT, REPLY, U2))
    assert call.kind == "system" and call.shared == COUNTER.count_tools(TOOLS) > 0


def test_changed_tools_share_nothing():
    call = compare(wire(SYSTEM, U1), wire(SYSTEM, U1, ASK, tools=()))
    assert call.kind == "tools" and call.shared == 0


def test_messages_gone_from_the_front_are_a_trim():
    before = wire(SYSTEM, U1, ASK, RESULT, REPLY, U2)
    assert compare(before, wire(SYSTEM, U2, REPLY, U3)).kind == "trimmed"
    assert compare(before, wire(SYSTEM)).kind == "trimmed"  # everything after the system prompt dropped


def test_a_summary_prepended_to_the_first_user_message():
    before = wire(SYSTEM, U1, ASK, RESULT)
    first = UserMessage("Summary so far: nothing.\n\nread a.py")
    call = compare(before, wire(SYSTEM, first, ASK, RESULT, REPLY))
    assert call.kind == "summary_first_user" and call.shared == wire(SYSTEM).prompt


def test_tally_counts_breaks_by_reason_and_bills_hits_at_the_cache_price():
    calls = [CallCache(100, 0, "first"), CallCache(120, 100, "append"), CallCache(130, 20, "system")]
    t = tally(calls)
    assert (t.calls, t.prompt, t.shared, t.appended) == (3, 350, 120, 1)
    assert t.breaks == {"system": 1}
    assert t.billed == pytest.approx(350 - 120 + CACHE_READ_PRICE * 120)
    assert t.cache_ratio == pytest.approx(120 / 350)
    assert t.to_dict()["breaks"] == {"system": 1}


def test_load_tools_names_a_bad_entry(tmp_path):
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([TOOLS[0].to_openai(), TOOLS[0].to_anthropic(), {"function": "bare"}]))
    with pytest.raises(MessageFormatError, match=r"tools\[2\]"):
        load_tools(path)
    path.write_text(json.dumps([TOOLS[0].to_openai(), TOOLS[0].to_anthropic()]))
    assert load_tools(path) == [TOOLS[0], TOOLS[0]]


def test_the_generator_is_deterministic_and_plants_each_needle_once():
    a, b = agent_transcript.generate(40, seed=3), agent_transcript.generate(40, seed=3)
    assert a == b and a != agent_transcript.generate(40, seed=4)
    text = "\n".join(json.dumps(m, ensure_ascii=False) for m in a.messages)
    assert len(a.facts) == 20 and all(f.turn <= 30 for f in a.facts)
    assert all(text.count(f.needle) == 1 for f in a.facts)
    assert {"user", "tool"} == {f.where for f in a.facts}


def replay_argv(tmp, path, dump):
    """``contextmem replay`` of ``path`` at an 8k window into a workspace of its own, dumping to ``dump``."""
    tools = agent_transcript.sidecars(path)[1]
    argv = ["--workspace", str(tmp / dump.stem), "replay", str(path), "--context-window", "8000"]
    return [*argv, "--tools", str(tools), "--dump-requests", str(dump)]


@pytest.fixture(scope="module")
def transcript(tmp_path_factory):
    """A 40-turn generated transcript."""
    path = tmp_path_factory.mktemp("cache") / "t.jsonl"
    agent_transcript.write(path, agent_transcript.generate(40, seed=5))
    return path


def test_a_generated_transcript_replays_with_nothing_lost_and_cache_figures(transcript, tmp_path, capsys):
    path, dump = transcript, tmp_path / "requests.jsonl"
    assert main([*replay_argv(tmp_path, path, dump), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["lost"] == 0
    cache = report["cache"]
    calls = sum(1 for line in path.read_text().splitlines() if json.loads(line)["role"] == "assistant")
    assert (
        cache["calls"] == calls == len(report["calls"]) == sum(t["cache"]["calls"] for t in report["turns"])
    )
    assert 0 < cache["shared_tokens"] < cache["prompt_tokens"] and 0 < cache["cache_ratio"] < 1
    assert cache["appended"] + sum(cache["breaks"].values()) == calls - 1  # all but the first call
    assert report["calls"][0]["kind"] == "first" and report["turns"][0]["cache"]["calls"] >= 1

    # The dump holds every request as sent; the metric recomputed from it gives the same figures.
    lines = [json.loads(line) for line in dump.read_text(encoding="utf-8").splitlines()]
    assert [x["call"] for x in lines] == list(range(1, calls + 1))
    tools = [
        ToolSpec(t["function"]["name"], t["function"]["description"], t["function"]["parameters"])
        for t in lines[0]["tools"]
    ]
    counter = MessageCounter(get_counter(Settings().tokenizer))
    previous = None
    for line, figures in zip(lines, report["calls"], strict=True):
        request = wire_request([from_openai(m) for m in line["messages"]], tools, counter)
        call = compare(previous, request)
        assert (call.prompt, call.shared, call.kind) == (
            figures["prompt"],
            figures["shared"],
            figures["kind"],
        )
        previous = request


def test_the_text_report_shows_the_cache_per_turn_and_in_total(transcript, tmp_path, capsys):
    assert main(replay_argv(tmp_path, transcript, tmp_path / "requests.jsonl")) == 0
    out = capsys.readouterr().out
    assert "· cache " in out
    for row in ("prefix shared (cache ratio)", "billed-equivalent per call", "prefix breaks (by reason)"):
        assert row in out
    assert out.strip().endswith("lost: 0")


def test_first_sent_counts_each_message_a_request_carries_that_the_one_before_did_not():
    from bench.bench_cache import first_sent

    first = wire(SYSTEM, U1, ASK, RESULT)
    appended = wire(SYSTEM, U1, ASK, RESULT, REPLY, U2)
    cut = ToolMessage("c1", "def a():\n[... offloaded to tool_results/c1.txt ...]")
    rewritten = wire(SYSTEM, U1, ASK, cut, REPLY, U2, U3)
    tokens = dict(
        zip(rewritten.keys + appended.keys, rewritten.message_tokens + appended.message_tokens, strict=True)
    )
    expected = sum(first.message_tokens) + tokens[appended.keys[4]] + tokens[appended.keys[5]]
    expected += tokens[rewritten.keys[3]] + tokens[rewritten.keys[6]]  # the cut form is sent anew
    assert first_sent([first, appended, rewritten]) == expected
    # a message sent two requests ago and dropped from the one before counts again: no cache holds it
    assert first_sent([first, wire(SYSTEM, U1), first]) == sum(first.message_tokens) * 2 - sum(
        wire(SYSTEM, U1).message_tokens
    )


def test_the_cost_harnesses_take_a_setting_checked_as_config_set_checks_it():
    from bench.bench_cache import with_settings
    from contextmem.settings import Settings

    base = Settings(context_window=16_000)
    assert with_settings(base, ["pruning_recent_msg_max_bytes = 4000"]).pruning_recent_msg_max_bytes == 4000
    assert with_settings(base, []) == base
    for bad, said in (
        ("nonsense=1", "unknown setting"),
        ("tokenizer", "not KEY=VALUE"),
        ("max_tokens=-1", "--set"),
    ):
        with pytest.raises(SystemExit) as caught:
            with_settings(base, [bad])
        assert said in str(caught.value) and "Fix:" in str(caught.value)
