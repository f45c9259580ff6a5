"""Error of the heuristic counter against the real o200k_base tokenizer, and counting throughput.

Samples: English and Chinese dialogue (MADial-Bench, ../shared/data), Python code (this repo's src/),
JSON (MADial-Bench memory records), plus the bundled agent transcript. Writes ``bench/results/tokens.md``.
Run: python bench/bench_tokens.py
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import report
from conversation import conversation

from contextmem.messages import text_of
from contextmem.tokens import HeuristicCounter, TiktokenCounter

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data" / "madial-bench" / "data"


def samples() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for lang, sub in (
        ("English", "en/MADial-Bench-en-dialogue.json"),
        ("Chinese", "ch/MADial-Bench-zh-dialogue.json"),
    ):
        path = DATA / sub
        if path.exists():
            out[lang] = [
                "\n".join(json.loads(line)["dialogue"])
                for line in path.read_text("utf-8").splitlines()
                if line
            ]
    out["code"] = [p.read_text("utf-8") for p in sorted((ROOT / "src").rglob("*.py"))]
    mem = [DATA / "en/MADial-Bench-en-memory.json", DATA / "ch/MADial-Bench-zh-memory.json"]
    out["JSON"] = [line for p in mem if p.exists() for line in p.read_text("utf-8").splitlines() if line]
    out["agent transcript"] = [text_of(m.content) for m in conversation(2000) if text_of(m.content)]
    return out


def main() -> None:
    real, heur = TiktokenCounter(), HeuristicCounter()
    real.count_text("warm up: load the encoding once")
    started = time.perf_counter()
    table = [
        "| sample | texts | o200k tokens | heuristic | error | MB/s o200k |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for name, texts in samples().items():
        if not texts:
            continue
        t = time.perf_counter()
        r = sum(real.count_text(x) for x in texts)
        secs = time.perf_counter() - t
        h = sum(heur.count_text(x) for x in texts)
        mb = sum(len(x.encode()) for x in texts) / 1e6
        error = 100 * (h - r) / r
        table.append(f"| {name} | {len(texts)} | {r:,} | {h:,} | {error:+.1f}% | {mb / secs:.1f} |")
        print(table[-1], flush=True)
    report.write(
        "tokens",
        "The heuristic counter against o200k_base: error and counting throughput",
        "\n".join(table),
        seconds=time.perf_counter() - started,
    )


if __name__ == "__main__":
    main()
