"""Secret redaction: contextmem.redaction vs its previous regexes vs detect-secrets 1.5.0 (Yelp).

All three run in one process on the same inputs:

* ``contextmem``: the real ``contextmem.redaction.redact_secrets``.
* ``before``: the regexes contextmem used before ``redaction.py`` (``summarize/ledger.py``), kept verbatim
  below as the baseline.
* ``detect-secrets``: the real package, default plugin set (``default_settings()``), used as a library
  in its two modes. ``scan_line`` is its ad-hoc string API (what ``detect-secrets scan --string`` runs):
  one line at a time, unquoted strings searched eagerly; its entropy plugins then report every word, so
  a finding of theirs is kept only when it passes the plugin's own entropy limit, as ``analyze_line``
  does in file mode and as ``--string`` marks ``True``. ``scan_file`` is its file mode (``detect-secrets
  scan``): the text is written to a ``.txt`` file and scanned with all default filters. detect-secrets
  reports values, not spans, so a text is redacted by replacing every reported ``secret_value``.

Measured: throughput (MB/s of UTF-8 over ~1 MB of tool-output-sized chunks built from this repository's
own files: conversations in English and Chinese, their raw JSONL, Python source, Markdown, logs, with a
secret every ~10 KB); recall on the labelled positive samples of ``tests/security/test_secrets.py``
(caught = the secret no longer appears in the output; flagged = the detector reported something, even if
what it reported does not remove the secret); false positives on its negative samples (damaged = the
output differs from the input). Writes ``bench/results/redaction.md``.
Run: python bench/bench_redaction.py [--out FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the labelled samples: tests/security
import report

from contextmem.redaction import REDACTED, RULES, find_secrets, redact_secrets
from tests.security.test_secrets import NEGATIVE, POSITIVE

ROOT = Path(__file__).resolve().parent.parent

# --- before: the previous detector, copied verbatim from summarize/ledger.py ------------------------
_SECRET_KEYS = (
    r"password|passwd|passphrase|pwd|secret|client[_-]?secret|api[_-]?key|apikey|access[_-]?key(?:[_-]?id)?"
    r"|secret[_-]?access[_-]?key|secret[_-]?key|private[_-]?key|auth[_-]?token|access[_-]?token"
    r"|refresh[_-]?token|session[_-]?token|token"
)
_SECRET_WHOLE = re.compile(
    "|".join(
        [
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
            r"\bsk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{16,}",
            r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b",
            r"\bgh[pousr]_[A-Za-z0-9]{20,}\b",
            r"\bgithub_pat_[A-Za-z0-9_]{20,}\b",
            r"\bglpat-[A-Za-z0-9_-]{20,}\b",
            r"\bxox[abposr]-[A-Za-z0-9-]{10,}\b",
            r"\bAIza[0-9A-Za-z_-]{30,}\b",
            r"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        ]
    ),
    re.S,
)
_SECRET_AFTER = [
    re.compile(r"(?i)\b((?:Bearer|Basic|Token)\s+)[A-Za-z0-9._~+/=-]{8,}"),
    re.compile(rf"(?i)\b((?:{_SECRET_KEYS})[\"']?\s*(?:[=:]|\s+is\s+)\s*[\"']?)[^\s\"',;]+"),
    re.compile(r"((?:密码|口令|密钥|令牌|私钥)\s*(?:是|为|[:：=])\s*)[^\s，。；,;]+"),
    re.compile(r"(\b[a-z][a-z0-9+.-]*://[^\s/:@]+:)[^\s/@]+(?=@)"),
]


def before_redact(text: str, known: Iterable[str] = ()) -> str:
    for secret in sorted(set(known), key=len, reverse=True):
        if secret and secret != REDACTED:
            text = text.replace(secret, REDACTED)
    text = _SECRET_WHOLE.sub(REDACTED, text)
    for pattern in _SECRET_AFTER:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text


# --- detect-secrets, the real package ---------------------------------------------------------------


def _replace_values(text: str, values: set[str]) -> str:
    for value in sorted(values, key=len, reverse=True):
        if value:
            text = text.replace(value, REDACTED)
    return text


class DetectSecretsLines:
    """``detect_secrets.core.scan.scan_line`` on every line, inside ``default_settings()``."""

    def __init__(self) -> None:
        self._limits: dict[str, Any] = {}

    @contextmanager
    def session(self) -> Iterator[None]:
        from detect_secrets.settings import default_settings, get_plugins

        with default_settings():
            # Base64HighEntropyString (limit 4.5), HexHighEntropyString (3.0)
            self._limits = {p.secret_type: p for p in get_plugins() if hasattr(p, "entropy_limit")}
            yield

    def find(self, text: str) -> set[str]:
        from detect_secrets.core.scan import scan_line

        found: set[str] = set()
        for line in text.splitlines():
            for secret in scan_line(line):
                value = secret.secret_value or ""
                plugin = self._limits.get(secret.type)
                if plugin is None or plugin.calculate_shannon_entropy(value) > plugin.entropy_limit:
                    found.add(value)
        return found

    def redact(self, text: str) -> str:
        return _replace_values(text, self.find(text))


class DetectSecretsFile:
    """``detect_secrets.core.scan.scan_file`` on the text written to a ``.txt`` file, default settings."""

    def __init__(self) -> None:
        self._path = ""

    @contextmanager
    def session(self) -> Iterator[None]:
        from detect_secrets.settings import default_settings

        with default_settings(), tempfile.TemporaryDirectory(prefix="bench_redaction_") as tmp:
            self._path = os.path.join(tmp, "tool_output.txt")
            yield

    def find(self, text: str) -> set[str]:
        from detect_secrets.core.scan import scan_file

        with open(self._path, "w", encoding="utf-8") as f:
            f.write(text)
        return {s.secret_value or "" for s in scan_file(self._path)}

    def redact(self, text: str) -> str:
        return _replace_values(text, self.find(text))


# --- the throughput corpus ----------------------------------------------------------------------------


def corpus(size: int = 1_000_000) -> list[str]:
    """Tool-output-sized chunks (2-20 KB) of this repository's own text, a secret in each chunk."""
    rng = random.Random(7)
    pieces: list[str] = []
    for path in sorted((ROOT / "tests/data/conversations").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            pieces.append(line)  # the raw JSON line
            msg = json.loads(line)
            if msg.get("content"):
                pieces.append(msg["content"])  # the message text, English or Chinese
    for path in sorted((ROOT / "src/contextmem").rglob("*.py")):
        if path.name != "redaction.py":  # its docstring is a catalogue of secret shapes
            src = path.read_text(encoding="utf-8")
            pieces.extend(src[i : i + 3000] for i in range(0, len(src), 3000))
    pieces.extend(path.read_text(encoding="utf-8") for path in sorted(ROOT.glob("*.md")))
    logs = [
        "2026-11-22T14:05:11Z ERROR pool.go:88 dial tcp 10.0.3.21:5432: connect: ECONNREFUSED",
        "2026-11-22T14:05:12Z WARN retry 3/5 after 2s token budget 4096 max_tokens=4096",
        "INFO request_id=7d9f8e2a-41b3-4c5e-9a1f-0b2c3d4e5f60 status=200 duration_ms=31 commit=9f3c2ab",
        "GET /api/v1/users?page=2 HTTP/1.1 200 key=sort_key=name",
        '{"level": "info", "msg": "cache miss", "key": "user:42", "ttl": 300, "trace": "9f3c2ab1d4e5"}',
        "部署完成，耗时 30秒；接下来需要检查 src/auth/token.py 里的令牌刷新逻辑。",
    ]
    secrets = [
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
        "export MYSQL_ROOT_PASSWORD=hunter2secret",
        "DB_PASS=s3cr3tpass",
        "stripe sk_live_51H8xyzABCDEF0123456789abcdefGHIJ",
        "Authorization: Bearer abcDEF123456789xyz",
        "数据库密码是 Qw3rty!2026 ，别外传",
    ]
    chunks: list[str] = []
    total = 0
    while total < size:
        n = rng.randint(2_000, 20_000)
        parts: list[str] = []
        length = 0
        while length < n:
            part = rng.choice(pieces) if rng.random() < 0.7 else "\n".join(rng.choices(logs, k=20))
            parts.append(part)
            length += len(part)
        parts.insert(rng.randrange(len(parts) + 1), rng.choice(secrets))
        chunk = "\n".join(parts)[:n]
        chunks.append(chunk)
        total += len(chunk.encode())
    return chunks


# --- the run -------------------------------------------------------------------------------------------


@dataclass
class Candidate:
    name: str
    kind: str  # real code or a copy
    redact: Callable[[str], str]
    flag: Callable[[str], bool]  # whether it reports anything on a text
    repeat: int
    session: Callable[[], AbstractContextManager[None]] = nullcontext  # detect-secrets' settings


@dataclass
class Result:
    mbps: float
    caught: list[bool]
    flagged: list[bool]
    damaged: dict[str, str]  # negative sample -> its damaged output


def family(text: str, secret: str) -> str:
    """The id of the contextmem rule that covers the secret: a name for the sample's family and form."""
    at = text.find(secret)
    lower = text.lower()
    for rule in RULES:
        for m in rule.pattern.finditer(lower if rule.fold else text):
            start, end = m.span("value") if rule.target == "value" else m.span()
            if start <= at < end and (rule.check is None or rule.check(text, m)):
                return rule.id
    return "unlabelled"


def shown(text: str, width: int = 70) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= width else text[: width - 1] + "…"


def measure(candidates: list[Candidate], chunks: list[str]) -> dict[str, float]:
    """Best-of-N seconds per full pass, timed round-robin so load changes hit every candidate alike."""
    best = {c.name: float("inf") for c in candidates}
    for r in range(max(c.repeat for c in candidates)):
        for c in candidates:
            if r < c.repeat:
                with c.session():
                    start = time.perf_counter()
                    for chunk in chunks:
                        c.redact(chunk)
                    best[c.name] = min(best[c.name], time.perf_counter() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=1_000_000, help="bytes of throughput corpus")
    ap.add_argument("--repeat", type=int, default=5, help="passes for the regex detectors (best kept)")
    ap.add_argument("--ds-repeat", type=int, default=2, help="passes for detect-secrets (best kept)")
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "redaction.md")
    args = ap.parse_args()
    started = time.perf_counter()

    ds_lines, ds_file = DetectSecretsLines(), DetectSecretsFile()
    ds_version = version("detect-secrets")
    candidates = [
        Candidate(
            "contextmem `redact_secrets`",
            "real code",
            redact_secrets,
            lambda t: bool(find_secrets(t)),
            args.repeat,
        ),
        Candidate(
            "contextmem before (ledger regexes)",
            "verbatim copy in the bench",
            before_redact,
            lambda t: before_redact(t) != t,
            args.repeat,
        ),
        Candidate(
            f"detect-secrets {ds_version} `scan_line` per line",
            "real package",
            ds_lines.redact,
            lambda t: bool(ds_lines.find(t)),
            args.ds_repeat,
            ds_lines.session,
        ),
        Candidate(
            f"detect-secrets {ds_version} `scan_file` (.txt)",
            "real package",
            ds_file.redact,
            lambda t: bool(ds_file.find(t)),
            args.ds_repeat,
            ds_file.session,
        ),
    ]
    chunks = corpus(args.size)
    size = sum(len(c.encode()) for c in chunks)
    load_before = os.getloadavg()
    seconds = measure(candidates, chunks)
    load_after = os.getloadavg()

    results: dict[str, Result] = {}
    for c in candidates:
        with c.session():
            results[c.name] = Result(
                mbps=size / seconds[c.name] / 1e6,
                caught=[secret not in c.redact(text) for text, secret, _ in POSITIVE],
                flagged=[c.flag(text) for text, _, _ in POSITIVE],
                damaged={text: out for text in NEGATIVE if (out := c.redact(text)) != text},
            )
    ours = results[candidates[0].name].mbps
    n_pos, n_neg = len(POSITIVE), len(NEGATIVE)
    lines = [
        f"On {platform.python_implementation()} {platform.python_version()}, "
        f"load average {load_before[0]:.2f} before / {load_after[0]:.2f} after "
        f"timing; throughput = best of {args.repeat} passes ({args.ds_repeat} for detect-secrets, timed "
        f"round-robin) over {size / 1e6:.2f} MB in {len(chunks)} chunks of this repo's own text "
        "(English/Chinese conversations and their JSONL, Python source, Markdown, logs, a secret per chunk).",
        f"Recall: {n_pos} labelled positives of `tests/security/test_secrets.py`, caught = the secret value "
        "is gone from the output (flagged = the detector reported anything); false positives: its "
        f"{n_neg} negatives (git SHA, UUID, paths, `max_tokens=4096`, prose...), damaged = output changed.",
        "",
        "| detector | what runs | MB/s | contextmem is | recall (caught) | flagged | false positives |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for c in candidates:
        r = results[c.name]
        ratio = "—" if c is candidates[0] else f"{ours / r.mbps:,.1f}x faster"
        lines.append(
            f"| {c.name} | {c.kind} | {r.mbps:,.2f} | {ratio} | "
            f"{sum(r.caught)}/{n_pos} ({100 * sum(r.caught) / n_pos:.0f}%) | "
            f"{sum(r.flagged)}/{n_pos} | {len(r.damaged)}/{n_neg} |"
        )
    lines += [
        "",
        "detect-secrets modes: `scan_line` is its ad-hoc string API (eager search of unquoted strings; a "
        "high-entropy finding is kept only above the plugin's own limit, 4.5 base64 / 3.0 hex); "
        "`scan_file` is `detect-secrets scan` on the text saved as a `.txt` file (quoted strings only for "
        "entropy, all default filters). It reports values, not spans: the redaction replaces each "
        "reported `secret_value`, so a finding whose value is only the prefix (`ghp`, `glpat`, "
        "`BEGIN RSA PRIVATE KEY`) is flagged but leaves the secret in place. The labelled samples are "
        "contextmem's own regression tests, written alongside its rule table (the family names below are "
        "its rule ids): its full score there is by construction, not an independent recall estimate.",
    ]
    families = [family(text, secret) for text, secret, _ in POSITIVE]
    for c in candidates:
        r = results[c.name]
        missed = [i for i, ok in enumerate(r.caught) if not ok]
        damaged = r.damaged
        lines += ["", f"## {c.name}: {len(missed)} missed, {len(damaged)} false positives", ""]
        by_family: dict[str, list[int]] = {}
        for i in missed:
            by_family.setdefault(families[i], []).append(i)
        for fam, idx in sorted(by_family.items()):
            samples = "; ".join(
                f"`{shown(POSITIVE[i][0])}`" + (" (flagged)" if r.flagged[i] else "") for i in idx
            )
            lines.append(f"- missed, {fam} ({len(idx)}): {samples}")
        for text, out in damaged.items():
            lines.append(f"- damaged: `{shown(text)}` -> `{shown(out)}`")
        if not missed and not damaged:
            lines.append("- none")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        title = "Secret redaction: contextmem vs its previous regexes vs detect-secrets"
        report.write("redaction", title, text, seconds=time.perf_counter() - started, out=args.out)


if __name__ == "__main__":
    main()
