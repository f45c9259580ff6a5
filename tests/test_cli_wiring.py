"""The command line reads the parts the agent uses: every command gets them from ``ContextMem.open``.

Before, ``memory index|search`` built a SQLite index in the workspace even when the store (and so the
agent's memory index) was PostgreSQL: the CLI searched a different index than the agent wrote.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from contextmem.cli.main import main
from contextmem.runtime import ContextMem
from contextmem.settings import Settings
from contextmem.workspace import INDEX_FILE
from tests.pg import pg_dsn  # noqa: F401  (a fixture)


def test_memory_commands_use_the_agents_index_on_postgresql(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    pg_dsn: str,  # noqa: F811
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "MEMORY.md").write_text("- The billing database moved to port 5433.\n", encoding="utf-8")
    common = ["--workspace", str(ws), "--store", pg_dsn, "--embedder", "hash:384"]
    assert main([*common, "memory", "index"]) == 0
    assert main([*common, "memory", "search", "billing database port", "--k", "1", "--json"]) == 0
    out = capsys.readouterr().out
    hits = json.loads(out.strip().splitlines()[-1])
    assert [h["path"] for h in hits] == ["MEMORY.md"] and "5433" in hits[0]["snippet"]
    assert not (ws / INDEX_FILE).exists(), "the CLI built an index of its own beside the agent's"

    async def agents_view() -> dict[str, int]:
        settings = Settings(workspace=str(ws), store=pg_dsn)
        runtime = await ContextMem.open(settings, llm="none", embedder="hash:384")
        assert runtime.memory is not None
        with runtime.memory as index:
            stats = dict(index.stats())
        await runtime.close()
        return stats

    stats = asyncio.run(agents_view())
    assert stats.get("chunks") == 1, stats  # what the CLI indexed is in the agent's index
