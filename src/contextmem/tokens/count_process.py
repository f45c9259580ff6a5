"""The token-count worker process (``python -m contextmem.tokens.count_process``): what
:class:`.count_worker.CountWorker` starts. It lowers its own priority by :data:`.count_worker.NICE`, then
answers each request on stdin (``ENCODING BYTES\\n`` and the text as UTF-8, lone surrogates passed
through) with ``COUNT\\n`` from :func:`.tiktoken_backend.count_linear`, or ``E message\\n``."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import IO

from .count_worker import NICE
from .tiktoken_backend import count_linear

__all__ = ["serve"]


def serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """A request, its count, until the pipe closes."""
    while header := stdin.readline():
        encoding, size = header.decode("ascii").split()
        text = stdin.read(int(size)).decode("utf-8", "surrogatepass")
        try:
            answer = str(count_linear(encoding, text))
        except Exception as exc:  # its message, one line: the caller counts here instead
            answer = "E " + " ".join(str(exc).split())[:200]
        stdout.write(answer.encode("utf-8") + b"\n")
        stdout.flush()


if __name__ == "__main__":
    with contextlib.suppress(OSError):  # no right to: the count runs at the same priority, still apart
        os.nice(NICE)
    serve(sys.stdin.buffer, sys.stdout.buffer)
