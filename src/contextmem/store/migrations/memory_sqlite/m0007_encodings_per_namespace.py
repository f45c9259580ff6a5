"""Vectors and sparse terms per namespace: keyed by ``(namespace, model, hash)``. Never edit; add m0008+.

They were shared by every namespace of the index file, by ``(model, hash)``. So a namespace whose sync
encoded nothing for a chunk learned that another namespace held that exact text, from
``SyncReport.chunks_embedded`` or by timing the sync. Each namespace now keeps its own, as PostgreSQL always
did (a vector lives in its chunk's row).

Each stored encoding is copied to every namespace whose chunks use its text, so nothing is encoded again.
One no chunk uses is dropped, except in a file that has no chunks at all (a file from before m0002,
migrating in this run: m0002 emptied ``chunks``). There every namespace gets every encoding, because which
namespace used which is no longer known.
"""


def _per_namespace(table: str, payload: str) -> tuple[str, ...]:
    return (
        f"""
        CREATE TABLE {table}_new(
            id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, model TEXT NOT NULL, hash TEXT NOT NULL,
            {payload} BLOB NOT NULL)
        """,
        f"""
        INSERT INTO {table}_new(namespace, model, hash, {payload})
        SELECT u.namespace, e.model, e.hash, e.{payload}
            FROM (SELECT DISTINCT namespace, hash FROM chunks) u JOIN {table} e ON e.hash = u.hash
        UNION ALL
        SELECT n.namespace, e.model, e.hash, e.{payload}
            FROM namespaces n JOIN {table} e WHERE NOT EXISTS (SELECT 1 FROM chunks)
        """,
        f"DROP TABLE {table}",
        f"ALTER TABLE {table}_new RENAME TO {table}",
        # (namespace, hash, model): serves a lookup by (namespace, model, hash) and the clean-up of a text
        # the namespace no longer uses, by (namespace, hash) alone.
        f"CREATE UNIQUE INDEX {table}_key ON {table}(namespace, hash, model)",
    )


STATEMENTS = _per_namespace("embeddings", "vector") + _per_namespace("sparse_terms", "terms")
