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
from pathlib import Path
from typing import Any

import pytest

from contextmem.messages import Message, text_of
from contextmem.redaction import redact_secrets
from contextmem.testing import ScriptedLLM
from tests.security.secret_sinks import leaks, sinks

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


async def test_held_out_secrets_reach_no_derived_sink(
    tmp_path: Path, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    samples = [(s["family"], s["text"], s["secrets"]) for s in CAUGHT]
    llm = ScriptedLLM(default=echo_summary)  # the summary repeats all it was sent: room for all of it
    texts = await sinks(
        tmp_path, store_url, caplog, samples, llm=llm, summary_max_tokens=4000, context_window=60_000
    )
    found = leaks(texts, samples)
    assert not found, f"{len(found)} leaks:\n" + "\n".join(found)


def test_each_known_miss_still_leaks() -> None:
    """The list of misses stays honest: a miss that is caught now must leave it (it is empty today)."""
    for text in sorted(KNOWN_MISSES):
        sample = next(s for s in HELDOUT if s["text"] == text)
        assert any(value in redact_secrets(text) for value in sample["secrets"]), (
            f"caught now: drop it from the list: {text[:60]!r}"
        )
