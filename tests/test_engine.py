import asyncio
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextmem.errors import ArchiveError, CompactionError, ContextOverflowError, LLMError
from contextmem.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from contextmem.testing import InMemorySessionStore, Reply, ScriptedLLM

from .engine_helpers import GOOD_SUMMARY, check_request, groups, make_engine
from .strategies import seeded_histories


async def drive(engine, history, *, compact_every: int = 0):
    """Feed a history through the engine the way an agent loop would, checking every request."""
    newest = None
    turn_no = 0
    for group in groups(history):
        if isinstance(group[0], UserMessage):
            if newest is not None:
                await engine.end_turn()
                turn_no += 1
                if compact_every and turn_no % compact_every == 0:
                    await engine.compact()
            newest = group[0]
        await engine.add(*group)
        request = await engine.build("You are a careful agent. 你是一个谨慎的助手。")
        check_request(engine, request, newest)
    await engine.end_turn()
    await engine.wait_idle()


@given(seeded_histories(max_turns=25), st.sampled_from(["none", "good", "junk", "error"]), st.integers(0, 4))
def test_any_session_stays_in_budget_and_loses_nothing(history, model, compact_every):
    llm = {
        "none": None,
        "good": ScriptedLLM(default=GOOD_SUMMARY),
        "junk": ScriptedLLM(default="Sure! Here is the summary."),
        "error": ScriptedLLM(default=LLMError("boom")),
    }[model]

    async def scenario():
        with tempfile.TemporaryDirectory() as tmp:
            engine = await make_engine(Path(tmp), llm=llm)
            await drive(engine, history, compact_every=compact_every)
            report = await engine.verify()
            assert report.lost == 0 and report.appended == len(history)
            live = {s.seq for s in await engine.store.messages("default", "s1", state="live")}
            in_files = {a.seq for a in engine.archive.read("s1")}
            assert live | in_files == set(range(1, len(history) + 1))  # every message: live or archived
            # compacting twice changes nothing the second time (the ladder is idempotent); the first
            # build may still give older results their tighter cut: a summary was applied meanwhile
            await engine.build("You are a careful agent. 你是一个谨慎的助手。")
            before = list(engine.history.messages)
            await engine.build("You are a careful agent. 你是一个谨慎的助手。")
            assert engine.history.messages == before

    asyncio.run(scenario())


async def test_huge_tool_output_is_offloaded_with_path_and_full_text(tmp_path):
    engine = await make_engine(tmp_path, window=20000, reserve=500)
    big = '{"rows":[' + ",".join(f'{{"id":{i},"name":"用户{i}"}}' for i in range(3000)) + "]}"  # one line
    call = ToolCall("call_1", "query_db", "{}")
    await engine.add(
        UserMessage("list users"), AssistantMessage(None, tool_calls=(call,)), ToolMessage("call_1", big)
    )
    await engine.add(AssistantMessage("There are 3000 users."))
    for i in range(3):  # age the result past pruning_recent_n
        await engine.add(
            UserMessage(f"next {i}"), AssistantMessage(None, tool_calls=(ToolCall(f"c{i}", "x", "{}"),))
        )
        await engine.add(ToolMessage(f"c{i}", "ok"), AssistantMessage("done"))
    events = []
    engine.subscribe(events.append)
    req = await engine.build()
    cut = next(m for m in req.messages if isinstance(m, ToolMessage) and m.tool_call_id == "call_1")
    assert len(cut.content.encode()) <= engine.settings.pruning_old_msg_max_bytes
    path = next(e.data["path"] for e in events if e.kind == "offload")
    assert path in cut.content and (tmp_path / path).read_text() == big
    assert cut.content.startswith('{"rows":[') and cut.content.rstrip().endswith("]}")
    assert (await engine.verify()).lost == 0
    archived = [a for a in engine.archive.read("s1") if a.reason == "offload"]
    assert archived and archived[0].message.content == big


async def test_offload_files_expire_after_retention(tmp_path):
    now = [1_000_000.0]
    from contextmem.budget import Window
    from contextmem.engine import ContextEngine

    from .engine_helpers import small_settings

    engine = await ContextEngine.open(
        "s1",
        store=InMemorySessionStore(),
        settings=small_settings(offload_retention_days=5),
        workspace_dir=tmp_path,
        window=Window(20000, 500),
        clock=lambda: now[0],
    )
    old = tmp_path / "tool_results" / "old.txt"
    old.parent.mkdir()
    old.write_text("x")
    import os

    os.utime(old, (now[0] - 6 * 86400, now[0] - 6 * 86400))
    fresh = tmp_path / "tool_results" / "fresh.txt"
    fresh.write_text("y")
    os.utime(fresh, (now[0] - 1 * 86400, now[0] - 1 * 86400))
    assert engine.cleanup_offloads() == 1
    assert not old.exists() and fresh.exists()


async def test_turn_trimming_drops_oldest_half_and_summarises(tmp_path):
    llm = ScriptedLLM(default=GOOD_SUMMARY)
    engine = await make_engine(
        tmp_path, llm=llm, window=50000, agent_max_context_turns=4, compact_message_threshold=1000
    )
    for i in range(5):
        await engine.add(UserMessage(f"question {i} about src/app_{i}.py"), AssistantMessage(f"answer {i}"))
    events = []
    engine.subscribe(events.append)
    await engine.build()
    first_user = next(m for m in engine.history.messages if isinstance(m, UserMessage))
    assert first_user.content == "question 2 about src/app_2.py"
    assert any(e.kind == "compaction_finished" and e.data["reason"] == "turn_trim" for e in events)
    # the extractive summary applies at once; the LLM's rewording of it is made in the background and
    # waits for the next break of the cached prefix (here: the next trim), so the prefix stays cached
    assert engine.summary is not None and "src/app_0.py" in engine.summary.render()
    await engine.wait_idle()
    assert engine.summary.source != "llm"
    assert "Do not restart the production database" not in (await engine.build()).messages[0].content
    for i in range(5, 8):
        await engine.add(UserMessage(f"question {i} about src/app_{i}.py"), AssistantMessage(f"answer {i}"))
    request = await engine.build()  # a trim: the held rewording rides along, the new trim extends it
    assert "src/app_0.py" in engine.summary.render() and "src/app_3.py" in engine.summary.render()
    assert "Do not restart the production database" in request.messages[0].content


async def test_async_summary_keeps_messages_until_ready_and_never_blocks(tmp_path):
    llm = ScriptedLLM(default=Reply(text=GOOD_SUMMARY, delay=0.3))
    engine = await make_engine(tmp_path, llm=llm, window=50000, compact_message_threshold=6)
    for i in range(5):
        await engine.add(UserMessage(f"q{i}"), AssistantMessage(f"a{i}"))
    await engine.end_turn()
    loop = asyncio.get_running_loop()
    t = loop.time()
    await engine.build()  # not blocked by the running summary
    assert loop.time() - t < 0.2
    assert len(engine.history) == 10  # still live until the summary is ready
    await engine.end_turn()  # a second trigger is coalesced, not a second task
    await engine.wait_idle()
    assert len(engine.history) < 10 and engine.summary.source == "llm"
    assert len(llm.requests) <= 2


@pytest.mark.parametrize(
    "failure",
    [
        LLMError("provider down"),
        Reply(text=GOOD_SUMMARY, delay=10),
        Reply(text=""),
        Reply(text="Sure! Here you go."),
    ],
    ids=["raises", "hangs", "empty", "chatty"],
)
async def test_summary_failures_fall_back_and_keep_the_previous_summary(tmp_path, failure):
    llm = ScriptedLLM.of(GOOD_SUMMARY, default=failure)
    engine = await make_engine(
        tmp_path, llm=llm, window=50000, compact_message_threshold=4, summary_timeout_seconds=0.2
    )
    await engine.add(UserMessage("deploy v2.3.1 to api.example.com"), AssistantMessage("deployed"))
    await engine.add(
        UserMessage("check"), AssistantMessage("ok"), UserMessage("more"), AssistantMessage("ok")
    )
    await engine.end_turn()
    await engine.wait_idle()
    first = engine.summary
    assert first is not None and first.source == "llm"
    events = []
    engine.subscribe(events.append)
    for i in range(4):
        await engine.add(UserMessage(f"error E{i}00 in worker-{i}"), AssistantMessage("noted"))
    await engine.end_turn()
    await engine.wait_idle()
    rendered = engine.summary.render()
    assert engine.summary.source == "extractive"
    assert "Do not restart the production database" in rendered  # the previous summary survived
    assert "v2.3.1" in rendered and "E000" in rendered
    assert any(e.kind == "summary_fallback" for e in events)
    assert (await engine.verify()).lost == 0


async def test_unwritable_archive_keeps_every_message_and_never_drops_a_turn(tmp_path):
    """Issue 31, attack 6: while the archive fails, each request carries every live message; once they
    no longer fit, build raises the ArchiveError rather than leave turns out without a summary."""
    engine = await make_engine(tmp_path, window=3000, reserve=200)
    (tmp_path / "dialog").write_text("in the way")  # a real failure: mkdir/open of dialog/ fail
    events = []
    engine.subscribe(events.append)
    for i in range(40):
        await engine.add(UserMessage(f"turn {i}: " + "数据 " * 40), AssistantMessage("ok " * 30))
        try:
            req = await engine.build("system")
        except ArchiveError as exc:
            assert str(tmp_path / "dialog") in str(exc) and str(exc).endswith(
                "(no link, no file in its place)."
            )
            break
        assert req.estimate.prompt + req.max_tokens <= 3000
        assert [m for m in req.messages if m.kind != "system"] == engine.history.messages
    else:
        raise AssertionError("the history outgrew the window, yet every build fit")
    assert len(engine.history) == 2 * (i + 1)  # nothing removed: the archive could not take it
    assert engine.stats().archive_error and str(tmp_path / "dialog") in engine.stats().archive_error
    assert any(e.kind == "archive_failed" for e in events)
    assert (await engine.verify()).lost == 0
    assert all(str(tmp_path / "dialog") in e.data["error"] for e in events if e.kind == "archive_failed")
    (tmp_path / "dialog").unlink()  # fixed: the next build compacts for real
    await engine.build("system")
    assert len(engine.history) < 80 and (await engine.verify()).lost == 0


async def test_overflow_ladder_is_bounded(tmp_path):
    engine = await make_engine(tmp_path, window=50000)
    for i in range(12):
        call = ToolCall(f"c{i}", "read", "{}")
        await engine.add(UserMessage(f"u{i} " + "x" * 3000), AssistantMessage(None, tool_calls=(call,)))
        await engine.add(ToolMessage(f"c{i}", "y" * 3000), AssistantMessage(f"a{i}"))
    events = []
    engine.subscribe(events.append)
    err = ContextOverflowError("maximum context length", limit=8000)
    r1 = await engine.handle_overflow(err, "sys")
    assert len([m for m in r1.messages if isinstance(m, UserMessage)]) <= 5
    assert any(e.kind == "overflow" and "u0" in e.data["summary"] for e in events)
    r2 = await engine.handle_overflow(err, "sys")
    assert [m.kind for m in r2.messages] == ["system", "user"]
    r3 = await engine.handle_overflow(err, "sys")
    assert [m.kind for m in r3.messages] == ["system"]
    with pytest.raises(CompactionError):
        await engine.handle_overflow(err, "sys")
    assert (await engine.verify()).lost == 0


async def test_compact_command_reports_count_and_summary(tmp_path):
    llm = ScriptedLLM(default=GOOD_SUMMARY)
    engine = await make_engine(tmp_path, llm=llm, window=50000)
    for i in range(6):
        await engine.add(UserMessage(f"q{i}"), AssistantMessage(f"a{i}"))
    result = await engine.compact("keep decisions only")
    assert result.compacted == 10 and "Key decisions" in result.summary
    assert "keep decisions only" in str(llm.requests[-1][-1].content)


async def test_clear_archives_everything_and_resets(tmp_path):
    engine = await make_engine(tmp_path, window=50000)
    await engine.add(UserMessage("remember port 8080"), AssistantMessage("ok"))
    events = []
    engine.subscribe(events.append)
    assert await engine.clear() == 2
    assert len(engine.history) == 0 and engine.summary is None
    assert any(e.kind == "cleared" and "8080" in e.data["summary"] for e in events)
    assert (await engine.verify()).archived == 2


async def test_summary_injection_into_first_user_message(tmp_path):
    engine = await make_engine(
        tmp_path, window=50000, summary_injection="first_user", agent_max_context_turns=2
    )
    for i in range(4):
        await engine.add(UserMessage(f"q{i} port 80{i}0"), AssistantMessage(f"a{i}"))
    req = await engine.build("sys")
    assert req.messages[0].content == "sys"
    kept_first = next(m for m in engine.history.messages if isinstance(m, UserMessage))
    sent_first = next(m for m in req.messages if isinstance(m, UserMessage))
    assert kept_first.content != "q0 port 8000"  # the oldest turn left the context...
    assert "8000" in engine.summary.render()  # ...into the summary...
    assert sent_first.content == f"{engine.summary.render()}\n\n{kept_first.content}"  # ...sent with the user
    assert "8000" not in kept_first.content  # injected into the request only, never into the session


async def test_restore_keeps_recent_turns_text_only(tmp_path):
    store = InMemorySessionStore()
    engine = await make_engine(tmp_path, store=store, window=50000)
    for i in range(10):
        call = ToolCall(f"c{i}", "t", "{}")
        await engine.add(UserMessage(f"q{i}"), AssistantMessage(None, tool_calls=(call,)))
        await engine.add(ToolMessage(f"c{i}", "r"), AssistantMessage(f"a{i}"))
    from contextmem.budget import Window
    from contextmem.engine import ContextEngine

    from .engine_helpers import small_settings

    again = await ContextEngine.open(
        "s1",
        restore=True,
        store=store,
        settings=small_settings(agent_max_context_turns=20),
        workspace_dir=tmp_path,
        window=Window(50000, 200),
    )
    assert [m.content for m in again.history.messages] == ["q7", "a7", "q8", "a8", "q9", "a9"]
    assert (await again.verify()).lost == 0


async def test_two_engines_on_one_session_never_lose_each_others_messages(tmp_path):
    """Two processes (here: two engines) sharing one session through the store: each one's
    compaction first takes the other's writes into account, so nothing is lost or archived twice."""
    store = InMemorySessionStore()
    a = await make_engine(tmp_path, store=store, window=3000)
    b = await make_engine(tmp_path, store=store, window=3000)
    for i in range(30):
        engine = a if i % 2 else b
        await engine.add(UserMessage(f"turn {i}: " + "内容 " * 60), AssistantMessage(f"reply {i} " * 20))
        await engine.build("sys")
    for engine in (a, b):
        await engine.build("sys")
        report = await engine.verify()
        assert report.lost == 0 and report.appended == 60
    live = [s.seq for s in await store.messages("default", "s1", state="live")]
    assert live == b.seqs or live == a.seqs  # whoever compacted last sees the store's live set


async def test_summary_requests_fit_a_small_model_window(tmp_path):
    """A local model reads 8k tokens per call: the previous summary, a chunk and the reply must fit."""
    llm = ScriptedLLM(default=GOOD_SUMMARY, context_window=3000)
    engine = await make_engine(tmp_path, llm=llm, window=60_000, summary_max_tokens=2000)
    for i in range(40):
        await engine.add(
            UserMessage(f"step {i}: " + "部署 nginx 配置 " * 40), AssistantMessage(f"done {i} " * 30)
        )
    await engine.compact()
    assert len(llm.requests) > 1  # the history was summarised in several chunks
    for request, max_tokens in zip(llm.requests, llm.request_max_tokens, strict=True):
        assert engine.counter.count_request(request) + (max_tokens or 0) <= 3000
    assert (await engine.verify()).lost == 0


async def test_a_window_learned_from_an_overflow_refits_the_summaries_and_tells_the_llm(tmp_path):
    """The provider states 3000 tokens in an overflow: the one fitter sizes the window, the reserve and
    the summary calls to it, and the LLM learns it through its declared method for later sessions."""
    llm = ScriptedLLM(default=GOOD_SUMMARY)
    engine = await make_engine(tmp_path, llm=llm, window=60_000, reserve=4000, summary_max_tokens=2000)
    for i in range(40):
        await engine.add(
            UserMessage(f"step {i}: " + "部署 nginx 配置 " * 40), AssistantMessage(f"done {i} " * 30)
        )
    await engine.handle_overflow(ContextOverflowError("exceed context window of 3000", limit=3000))
    assert (engine.window.context_window, engine.window.max_tokens) == (3000, 375)  # 4000 > half: an eighth
    assert llm.context_window == 3000
    await engine.compact()
    assert llm.requests
    for request, max_tokens in zip(llm.requests, llm.request_max_tokens, strict=True):
        assert engine.counter.count_request(request) + (max_tokens or 0) <= 3000
    assert (await engine.verify()).lost == 0


async def test_small_window_cuts_a_huge_current_result_instead_of_dropping_it(tmp_path):
    """A 105 KB tool result in the running turn of a 5k window is cut to fit (full text one read_file
    away), not dropped with its call — an agent that lost it would only call the tool again."""
    engine = await make_engine(tmp_path, window=5000, reserve=500, pruning_recent_msg_max_bytes=50_000)
    call = ToolCall("call_big", "fetch_logs", "{}")
    huge = "".join(f"2026-11-22 01:{i % 60:02d} worker-{i} ok latency={i}ms\n" for i in range(2500))
    await engine.add(UserMessage("why is the worker slow?"), AssistantMessage(None, tool_calls=(call,)))
    await engine.add(ToolMessage("call_big", huge))
    request = await engine.build("You are an SRE agent.")
    assert request.estimate.prompt + request.max_tokens <= 5000
    kept = [m for m in request.messages if isinstance(m, ToolMessage)]
    assert len(kept) == 1 and "tool_results/" in kept[0].content and len(kept[0].content) < len(huge)
    assert any(isinstance(m, AssistantMessage) and m.tool_calls for m in request.messages)
    assert (await engine.verify()).lost == 0


async def test_events_and_logs_carry_no_secrets(tmp_path, caplog):
    import logging

    engine = await make_engine(tmp_path, window=50000, agent_max_context_turns=2)
    events = []
    engine.subscribe(events.append)
    key = "sk-proj-" + "abcdEFGH1234567890" * 2
    for i in range(4):
        await engine.add(UserMessage(f"q{i}: deploy with api key {key} please"), AssistantMessage(f"a{i}"))
    with caplog.at_level(logging.INFO, logger="contextmem.engine"):
        await engine.build()
    finished = [e for e in events if e.kind == "compaction_finished"]
    assert finished and "[REDACTED]" in finished[0].data["digest"]
    assert key not in repr([e.data for e in events]) and key not in caplog.text
    assert "compaction_finished" in caplog.text
