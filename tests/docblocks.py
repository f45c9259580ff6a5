"""The code in README.md and docs/: every Python block and every ``contextmem …`` shell line, as written.

:func:`blocks` reads a markdown file's fenced blocks; :func:`commands` picks the shell lines that run
``contextmem`` (alone or fed by a pipe), comments stripped. ``tests/test_docs.py`` runs them; the
tests of this module show the extraction catching what it must (a block, a line, a piped command) and
missing nothing a reader would take for code.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")))

_FENCE = re.compile(
    r"^ {0,3}(?P<fence>`{3,})(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^ {0,3}(?P=fence)[ \t]*$",
    re.MULTILINE | re.DOTALL,
)
SHELL = frozenset({"sh", "bash", "shell", "console"})


@dataclass(frozen=True, slots=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    body: str

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks(path: Path, text: str | None = None) -> list[Block]:
    """Every fenced block of ``path`` (or of ``text``, read as if it were ``path``), in order."""
    text = path.read_text(encoding="utf-8") if text is None else text
    return [
        Block(path, text.count("\n", 0, m.start()) + 1, m["lang"].lower(), m["body"])
        for m in _FENCE.finditer(text)
    ]


def strip_comment(line: str) -> str:
    """``line`` without a trailing ``# comment``; a ``#`` inside quotes or inside a word stays."""
    quote: str | None = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def runs_contextmem(command: str) -> bool:
    """True when a stage of the pipeline ``command`` is the ``contextmem`` program."""
    return any(stage.split()[:1] == ["contextmem"] for stage in command.split("|") if stage.strip())


def commands(block: Block) -> list[str]:
    """The shell lines of ``block`` that run ``contextmem``, without their comments."""
    if block.lang not in SHELL:
        return []
    lines = (strip_comment(line).strip() for line in block.body.splitlines())
    return [line for line in lines if line and runs_contextmem(line)]


def python_blocks() -> list[Block]:
    return [b for path in DOCS for b in blocks(path) if b.lang in ("python", "py")]


def shell_commands() -> dict[Path, list[tuple[Block, str]]]:
    """Per file, its ``contextmem`` lines in reading order (a file's lines share one workspace)."""
    found: dict[Path, list[tuple[Block, str]]] = {}
    for path in DOCS:
        lines = [(b, c) for b in blocks(path) for c in commands(b)]
        if lines:
            found[path] = lines
    return found
