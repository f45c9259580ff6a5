"""The memory workspace of one namespace (SPEC M1, M6) and the one function that confines paths to it.

Layout under the ``workspace`` root (default ``~/.contextmem``)::

    ROOT/                       namespace "default" lives at the root, as in CowAgent
        system.md  user.md  MEMORY.md
        memory/YYYY-MM-DD.md    daily memory, created on first write
        dialog/  tool_results/
        namespaces/<name>/      every other namespace: the same layout, one directory each
        memory-index.sqlite     the derived index (all namespaces; every row carries its namespace)

Isolation invariant: every path a caller (or a model, through the tools) names is resolved by
:meth:`Workspace.resolve`, which refuses ``..``, absolute paths, symlinks leading out of the namespace's
directory and, for the root namespace, anything under ``namespaces/``. No other function turns a
user-supplied string into a path.
"""

from __future__ import annotations

import os
import re
from datetime import date
from pathlib import Path, PurePosixPath

from ..errors import ConfigError, PathEscapeError

DEFAULT_NAMESPACE = "default"
NAMESPACES_DIR = "namespaces"
INDEX_FILE = "memory-index.sqlite"
CORE_FILE = "MEMORY.md"
DAILY_DIR = "memory"
DIALOG_DIR = "dialog"
TOOL_RESULTS_DIR = "tool_results"

_NAMESPACE_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,127}")
_DAILY_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\.md")


def check_namespace(namespace: str) -> str:
    """Return ``namespace`` if it is a safe directory name, else raise :class:`ConfigError`."""
    if not _NAMESPACE_RE.fullmatch(namespace) or namespace in (".", ".."):
        raise ConfigError(
            f"namespace {namespace!r} is not allowed. Fix: use 1-128 characters of letters, digits, "
            "'.', '_', '-' or '@', starting with a letter or digit"
        )
    return namespace


class Workspace:
    """The files of one namespace. Cheap to construct; directories are made on first write."""

    def __init__(self, root: str | os.PathLike[str], namespace: str = DEFAULT_NAMESPACE) -> None:
        self.root = Path(root).expanduser().resolve()
        self.namespace = check_namespace(namespace)
        self.dir = self.root if namespace == DEFAULT_NAMESPACE else self.root / NAMESPACES_DIR / namespace

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r}, namespace={self.namespace!r})"

    # --- well-known files -------------------------------------------------------------------

    @property
    def core_file(self) -> Path:
        return self.dir / CORE_FILE

    @property
    def system_file(self) -> Path:
        return self.dir / "system.md"

    @property
    def user_file(self) -> Path:
        return self.dir / "user.md"

    @property
    def daily_dir(self) -> Path:
        return self.dir / DAILY_DIR

    @property
    def dialog_dir(self) -> Path:
        return self.dir / DIALOG_DIR

    @property
    def tool_results_dir(self) -> Path:
        return self.dir / TOOL_RESULTS_DIR

    @property
    def index_path(self) -> Path:
        return self.root / INDEX_FILE

    def daily_file(self, day: date) -> Path:
        return self.daily_dir / f"{day.isoformat()}.md"

    def ensure(self) -> None:
        """Create the namespace directory and its sub-directories (files are created on first write)."""
        for directory in (self.dir, self.daily_dir, self.dialog_dir, self.tool_results_dir):
            directory.mkdir(parents=True, exist_ok=True)

    # --- confinement --------------------------------------------------------------------------

    def resolve(self, relative: str, *, under: tuple[str, ...] = ()) -> Path:
        """The real path of ``relative`` inside this namespace, or :class:`PathEscapeError`.

        ``under`` optionally restricts the first path component (e.g. ``("dialog", "tool_results")``).
        The file need not exist; symlinks along the existing part are resolved and must stay inside.
        """
        text = relative.replace("\\", "/").strip()
        if not text or "\x00" in text:
            raise PathEscapeError(f"path {relative!r} is empty or invalid. Fix: give a relative path")
        pure = PurePosixPath(text)
        if pure.is_absolute() or re.match(r"^[A-Za-z]:", text):
            raise PathEscapeError(
                f"path {relative!r} is absolute. Fix: give a path relative to the workspace, e.g. 'MEMORY.md'"
            )
        parts = [p for p in pure.parts if p != "."]
        if ".." in parts:
            raise PathEscapeError(f"path {relative!r} contains '..'. Fix: name a file inside the workspace")
        if not parts:
            raise PathEscapeError(f"path {relative!r} names the workspace itself. Fix: name a file in it")
        if under and parts[0] not in under:
            raise PathEscapeError(f"path {relative!r} is not under {', '.join(d + '/' for d in under)}")
        if self.namespace == DEFAULT_NAMESPACE and parts[0] == NAMESPACES_DIR:
            raise PathEscapeError(f"path {relative!r} belongs to another namespace")
        base = self.dir.resolve()
        target = base.joinpath(*parts).resolve()
        if not target.is_relative_to(base):
            raise PathEscapeError(f"path {relative!r} leads outside the workspace (through a symlink)")
        inner = target.relative_to(base).parts
        if self.namespace == DEFAULT_NAMESPACE and inner and inner[0] == NAMESPACES_DIR:
            raise PathEscapeError(f"path {relative!r} leads into another namespace (through a symlink)")
        if under and (not inner or inner[0] not in under):
            raise PathEscapeError(f"path {relative!r} leads outside {', '.join(d + '/' for d in under)}")
        return target

    def relative(self, path: Path) -> str:
        """``path`` (inside this namespace) as the POSIX relative string used in the index."""
        return path.relative_to(self.dir).as_posix()

    # --- memory files -------------------------------------------------------------------------

    def memory_files(self) -> list[Path]:
        """``MEMORY.md`` and every ``memory/**/*.md``, skipping symlinks that leave the namespace."""
        return [Path(path) for _, path in self.scan_memory_files()]

    def scan_memory_files(self) -> list[tuple[str, str]]:
        """``(relative, absolute)`` path strings of the memory files, sorted; no ``Path`` objects.

        The index calls this before every search, so it uses ``os.scandir`` and plain strings.
        """
        base = str(self.dir)
        real_base = os.path.realpath(base)
        found: list[tuple[str, str]] = []
        core = os.path.join(base, CORE_FILE)
        if os.path.isfile(core):
            found.append((CORE_FILE, core))

        def walk(directory: str, prefix: str) -> None:
            try:
                entries = sorted(os.scandir(directory), key=lambda e: e.name)
            except (FileNotFoundError, NotADirectoryError):
                return
            for entry in entries:
                rel = f"{prefix}/{entry.name}"
                if entry.is_symlink():
                    real = os.path.realpath(entry.path)
                    if os.path.commonpath([real, real_base]) != real_base:
                        continue
                if entry.is_dir(follow_symlinks=False):
                    walk(entry.path, rel)
                elif entry.name.endswith(".md") and entry.is_file():
                    found.append((rel, entry.path))

        walk(os.path.join(base, DAILY_DIR), DAILY_DIR)
        return found


def daily_date(relative: str) -> date | None:
    """The day of a daily file ``memory/YYYY-MM-DD.md`` (``None`` for any other path)."""
    head, _, name = relative.rpartition("/")
    match = _DAILY_RE.fullmatch(name)
    if head != DAILY_DIR or match is None:
        return None
    try:
        return date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError:
        return None


def memory_kind(relative: str) -> str:
    """``core`` (no decay), ``daily`` (decays) or ``note`` (other files under memory/, no decay)."""
    if relative == CORE_FILE:
        return "core"
    return "daily" if daily_date(relative) is not None else "note"
