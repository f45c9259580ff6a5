"""``contextmem.eval``, the evaluations users run on their own data: one module each, all listed, each
with its ``__all__``, and importable with the core dependencies only."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import contextmem.eval

EVAL_DIR = Path(contextmem.eval.__file__).parent


def test_every_evaluation_module_is_listed_and_declares_its_names() -> None:
    modules = sorted(p.stem for p in EVAL_DIR.glob("*.py") if p.stem != "__init__")
    assert contextmem.eval.__all__ == modules  # a new module is listed, a gone one is not
    for name in modules:
        module = getattr(contextmem.eval, name)
        assert module.__doc__, f"contextmem.eval.{name} says nothing about what it measures"
        missing = [n for n in module.__all__ if not hasattr(module, n)]
        assert module.__all__ and not missing, f"contextmem.eval.{name}.__all__ names missing {missing}"


def test_the_package_imports_without_numpy_and_scoring_names_the_extra() -> None:
    code = """
        import sys
        sys.modules["numpy"] = None  # any `import numpy` now raises ImportError

        from contextmem.errors import MissingExtraError
        from contextmem.eval import compaction, memory, recall

        print(memory.labelled_query({"query": "q", "relevant": ["MEMORY.md:3"]}, "1").relevant)
        print(recall.kept_answers("The port is 8080.", ["port is 8080", "9090"], 5))
        try:
            memory.score([])
        except MissingExtraError as exc:
            print("extra:", exc)
        print(sys.modules["numpy"] is None)
    """
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "(Relevant(path='MEMORY.md', start_line=3, end_line=3),)"
    assert lines[1] == "KeptAnswers(kept=1, total=2, tokens=5)"
    assert lines[2].startswith("extra:") and "contextmem[memory]" in lines[2]
    assert lines[3] == "True"


async def test_the_compaction_eval_writes_nothing_where_the_settings_point(tmp_path: Path) -> None:
    """It opens its runtime in a temporary workspace with its own store and index: the user's store,
    workspace and model, named in the settings, are never opened."""
    from contextmem.eval.compaction import evaluate
    from contextmem.messages import assistant, user
    from contextmem.settings import Settings

    store, workspace = tmp_path / "user.sqlite", tmp_path / "workspace"
    settings = Settings(
        context_window=4000, store=f"sqlite:///{store}", workspace=str(workspace), model="openai:gpt-x"
    )
    transcript = [m for i in range(40) for m in (user(f"Pup{i} joined on day {i}."), assistant("Noted."))]
    answers = [f"Pup{i}" for i in range(40)]
    questions = [f"Who joined on day {i}?" for i in range(40)]
    result = await evaluate(settings, transcript, answers, questions=questions, embedder="hash:64")
    assert result.lost == 0 and result.view_or_memory is not None
    assert result.view_or_memory.kept >= result.view.kept > 0
    assert not store.exists() and not workspace.exists()
