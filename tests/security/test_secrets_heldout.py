"""Attack 4 of issue 31: secrets in forms our rules were not written from reach no derived sink.

The samples are ``evals/data/secrets/heldout.json``: texts copied verbatim from sources we did not write
(the documented examples of another rule set's rules, a provider's and curl's documentation), each with
the credential values in it. One conversation carries all of them, in user messages and tool outputs, and
also a memory file a person typed by hand; then every derived sink is read back and searched for each
value: the stored summary (written by a scripted model that repeats everything it was sent), daily
memory, ``memory_write`` files, the index and its snippets, ``memory_get``, events and logs. On SQLite and
on PostgreSQL. On main before issue 31, 29 of the 89 values (13 families) leaked: 193 (sink, value)
pairs, each of them in daily memory, the index, memory_get, events and logs, most in the summary.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from contextmem.engine import EngineEvent
from contextmem.messages import Message, assistant, text_of, tool_call, tool_result, user
from contextmem.redaction import redact_secrets
from contextmem.runtime import ContextMem
from contextmem.settings import Settings
from contextmem.testing import ScriptedLLM

HELDOUT: list[dict[str, Any]] = json.loads(
    (Path(__file__).resolve().parents[2] / "evals/data/secrets/heldout.json").read_text(encoding="utf-8")
)["samples"]

# Forms we knowingly do not catch, each with why; the last test checks each still leaks, so an entry
# cannot outlive the miss it explains.
KNOWN_MISSES: dict[str, str] = {}  # the last one (a bare Postmark UUID) is caught by betterleaks' rules
CAUGHT = [s for s in HELDOUT if s["text"] not in KNOWN_MISSES]


def echo_summary(messages: list[Message]) -> str:
    """A summary model at its worst: it repeats, in the summary's own sections, all it was sent."""
    sent = "\n".join(
        f"- {line}" for m in messages for line in text_of(m.content).splitlines() if line.strip()
    )
    return f"## Goal\n{sent}\n## Constraints\n- none\n## Progress\n- done\n## Key decisions\n- none\n" + (
        "## Next steps\n- none\n## Critical context\n- none"
    )


async def sinks(tmp_path: Path, store_url: str, caplog: pytest.LogCaptureFixture) -> dict[str, str]:
    """Run every held-out sample through a runtime; the text of each derived sink, by name."""
    caplog.set_level(logging.DEBUG, logger="contextmem")
    settings = Settings(
        workspace=tmp_path / "ws",
        store=store_url,
        agent_max_context_turns=2,
        summary_max_tokens=4000,
        context_window=60_000,
    )
    runtime = await ContextMem.open(settings, llm=ScriptedLLM(default=echo_summary), embedder="hash:384")
    events: list[EngineEvent] = []
    engine = await runtime.session("attack-4")
    engine.subscribe(events.append)
    for i, sample in enumerate(HELDOUT):
        await engine.add(
            user(f"Here is my config, why does it fail?\n{sample['text']}"),
            assistant("Let me look.", tool_calls=[tool_call(f"c{i}", "shell", {"cmd": "cat config"})]),
            tool_result(f"c{i}", f"$ cat config\n{sample['text']}\nexit 0"),
            assistant("The file reads fine."),
        )
    for i in range(4):  # the turns above leave the context: summary, digest, daily memory
        await engine.add(user(f"and now something else {i}"), assistant(f"ok {i}"))
    await engine.build("system")
    await engine.compact()
    await engine.wait_idle()
    await runtime.flush()

    tools = runtime.tools
    written = [tools.memory_write(s["text"], target) for s in HELDOUT for target in ("daily", "core")]
    hand_typed = "\n".join(f"- {s['text']}" for s in HELDOUT)  # a person pasting config into their notes
    core = runtime.workspace.core_file
    core.write_text(core.read_text(encoding="utf-8") + "\n" + hand_typed + "\n", encoding="utf-8")

    queries = [s["family"] for s in HELDOUT] + [v for s in HELDOUT for v in s["secrets"]]
    assert runtime.memory is not None
    hits = [h for q in queries for h in runtime.memory.search(q, k=5)]
    searched = [tools.memory_search(q) for q in queries]
    files = [core, *sorted(runtime.workspace.daily_dir.glob("*.md"))]
    got = [tools.memory_get(f.relative_to(runtime.workspace.root).as_posix(), 1, 100_000) for f in files]
    state = await runtime.store.open_session(settings.namespace, "attack-4")
    await runtime.close()
    daily = "\n".join(f.read_text(encoding="utf-8") for f in sorted(runtime.workspace.daily_dir.glob("*.md")))
    assert hits and engine.summary is not None and state.summary  # every sink was reached
    return {
        "summary": engine.summary.render(),
        "stored summary": state.summary,
        "daily memory and memory_write files": daily
        + "\n".join(written)
        + core.read_text(encoding="utf-8").replace(hand_typed, ""),
        "index snippets": "\n".join(h.snippet for h in hits) + "\n".join(searched),
        "memory_get": "\n".join(got),
        "events": "\n".join(repr(e.data) for e in events),
        "logs": "\n".join(record.getMessage() for record in caplog.records),
    }


async def test_held_out_secrets_reach_no_derived_sink(
    tmp_path: Path, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    texts = await sinks(tmp_path, store_url, caplog)
    leaks = sorted(
        f"{name}: {s['family']} {value[:12]}… ({s['source'][:60]})"
        for s in CAUGHT
        for value in s["secrets"]
        for name, text in texts.items()
        if value in text
    )
    assert not leaks, f"{len(leaks)} leaks:\n" + "\n".join(leaks)


@pytest.mark.parametrize("text", sorted(KNOWN_MISSES))
def test_each_known_miss_still_leaks(text: str) -> None:
    sample = next(s for s in HELDOUT if s["text"] == text)
    assert any(value in redact_secrets(text) for value in sample["secrets"]), (
        "caught now: drop it from the list"
    )
