"""The evaluation datasets, built at run time into ``evals/.cache/`` (git-ignored), never committed.

* :func:`compaction_sets`: the compaction dev sets of :mod:`evals.datasets.compaction` (templates and
  seeds; MADial-Bench's public data for the ``madial`` sets), every draw;
* :func:`memory_sets`: the memory dev sets of :mod:`evals.datasets.memory`, built from the former;
* :mod:`evals.datasets.agent_transcript`: long agent transcripts, a function of ``(turns, seed)``.

Each build is deterministic (the same bytes on every run) and cached under a key of its generators'
source, so a change to a generator builds anew. A build takes ~20 s on 2 cores.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

CACHE = Path(__file__).resolve().parents[1] / ".cache"
_HERE = Path(__file__).parent


def _key() -> str:
    """A digest of the generators' source: the cache folder of what they build now."""
    digest = hashlib.sha256()
    for name in ("compaction.py", "memory.py"):
        digest.update((_HERE / name).read_bytes())
    return digest.hexdigest()[:12]


def _cached(name: str, build: Callable[[Path], None]) -> Path:
    """``CACHE/<key>/<name>``, built by ``build(folder)`` unless a finished build is there."""
    root = CACHE / _key()
    folder = root / name
    if folder.is_dir():
        return folder
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
    try:
        build(scratch)
        scratch.rename(folder)  # a build is either whole or absent
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return folder


def compaction_sets() -> Path:
    """The folder of the compaction dev sets: ``<set>/<name>.jsonl`` and ``<name>.qa.jsonl``."""
    from evals.datasets import compaction

    return _cached("compaction", compaction.build_all)


def memory_sets() -> Path:
    """The folder of the memory dev sets: ``<set>/<name>/memory/*.md`` and ``<set>/<name>.jsonl``, for
    the daily sets (:data:`evals.datasets.memory.SETS`) and the turn sets (``<set>-turns``)."""
    from evals.datasets import memory

    source = compaction_sets()

    def build(out: Path) -> None:
        memory.build_sets(source, out, memory.SETS)
        memory.build_sets(source, out, memory.TURN_SETS, turns=True)

    return _cached("memory", build)
