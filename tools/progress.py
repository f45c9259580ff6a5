"""Run a command, printing a line at least every ``--every`` seconds until it ends: ``make``'s installs.

``pip install -q`` prints nothing while it downloads a gigabyte or compiles llama.cpp for minutes; a user
watching a silent terminal cannot tell that from a hang. This wrapper keeps the command's output in a log
(shown on failure), and says what is running and for how long::

    python tools/progress.py "installing contextmem" --log .venv/install.log -- .venv/bin/pip install ...

Standard library only: it runs before the virtualenv has anything in it. Exit status is the command's.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

TAIL_LINES = 40


def elapsed(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def run(label: str, command: list[str], log: Path, every: float) -> int:
    log.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    print(f"{label} …", flush=True)
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            while True:
                try:
                    code = proc.wait(timeout=every)
                    break
                except subprocess.TimeoutExpired:
                    print(f"  … {label}: {elapsed(time.monotonic() - started)}", flush=True)
        except KeyboardInterrupt:
            proc.terminate()
            proc.wait()
            raise
    took = elapsed(time.monotonic() - started)
    if code == 0:
        print(f"{label}: done in {took}", flush=True)
        return 0
    tail = log.read_text(encoding="utf-8", errors="replace").splitlines()[-TAIL_LINES:]
    print("\n".join(tail), file=sys.stderr)
    print(f"{label}: FAILED (exit {code}) after {took}; full output in {log}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        print("usage: progress.py LABEL --log FILE [--every SECONDS] -- COMMAND...", file=sys.stderr)
        return 2
    cut = argv.index("--")
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("label", help="what is running, as the user should read it")
    parser.add_argument("--log", type=Path, required=True, help="where the command's output goes")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between progress lines")
    args = parser.parse_args(argv[:cut])
    if not argv[cut + 1 :]:
        parser.error("no command given after --")
    return run(args.label, argv[cut + 1 :], args.log, args.every)


if __name__ == "__main__":
    sys.exit(main())
