"""The workspace's directory layout, owned here and nowhere else, and the files of one namespace.

Layout under the ``workspace`` root (default ``~/.contextmem``)::

    ROOT/                       namespace "default" lives at the root, as in CowAgent
        system.md  user.md  MEMORY.md
        memory/YYYY-MM-DD.md    daily memory, created on first write
        dialog/YYYY-MM-DD.jsonl the dialog archive (:mod:`contextmem.archive`)
        tool_results/           offloaded tool results (:mod:`contextmem.engine.files`)
        namespaces/<name>/      every other namespace: the same layout, one directory each
        sessions.sqlite         the default session store (all namespaces; every row carries its namespace)
        memory-index.sqlite     the derived index (all namespaces; every row carries its namespace)

:func:`namespace_tree` is the one function that turns a path into a namespace's tree; everything that
reads or writes a namespace's files (the engine, the archive, the memory writer and index, the adapters)
gets its tree from it, usually through :class:`Workspace`.

Isolation invariant: every file of a namespace that contextmem opens for a caller or a model is opened
through :attr:`Workspace.files` (``namespace_tree(root, namespace)``): component by component with
``O_NOFOLLOW``, so ``..``, absolute paths, the default namespace's ``namespaces/`` and **every symlink**
below the namespace's directory are refused, including one that points back inside it (the simplest rule
to prove), and a hard-linked file is never read or written. The ``Path`` properties below are for display
and for code that hands a directory to another component; they are never opened here.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Sequence
from datetime import date
from pathlib import Path
from typing import Protocol

from .errors import PathEscapeError
from .logs import get_logger
from .namespace import DEFAULT_NAMESPACE, check_namespace
from .safefs import Confined, WalkResult

__all__ = [
    "CORE_FILE",
    "DAILY_DIR",
    "DIALOG_DIR",
    "INDEX_FILE",
    "NAMESPACES_DIR",
    "SESSIONS_FILE",
    "SYSTEM_FILE",
    "TOOL_RESULTS_DIR",
    "USER_FILE",
    "Workspace",
    "daily_date",
    "daily_relative",
    "dialog_relative",
    "memory_kind",
    "namespace_tree",
]

NAMESPACES_DIR = "namespaces"
SESSIONS_FILE = "sessions.sqlite"
INDEX_FILE = "memory-index.sqlite"
SYSTEM_FILE = "system.md"
USER_FILE = "user.md"
CORE_FILE = "MEMORY.md"
DAILY_DIR = "memory"
DIALOG_DIR = "dialog"
TOOL_RESULTS_DIR = "tool_results"

logger = get_logger("contextmem.memory")  # its warnings are about memory files

_DAILY_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})\.md")


def namespace_tree(path: str | os.PathLike[str], namespace: str, *, own_dir: bool = False) -> Confined:
    """The confined file tree of ``namespace`` (see :mod:`contextmem.safefs`).

    ``path`` is the workspace root, under which the layout places the namespace's directory; with
    ``own_dir`` it is the namespace's directory itself (a caller that keeps a namespace's files
    elsewhere). ``namespaces/<name>`` is walked without following links, and the default namespace may
    not reach into ``namespaces/``, where the other tenants live.
    """
    name = check_namespace(namespace)
    if name == DEFAULT_NAMESPACE:
        return Confined(path, reserved=(NAMESPACES_DIR,))
    if own_dir:
        return Confined(path)
    return Confined(path, prefix=(NAMESPACES_DIR, name))


class Placed(Protocol):
    """Where a namespace's files live: what :class:`~contextmem.settings.Settings` says."""

    @property
    def workspace_path(self) -> Path: ...

    @property
    def namespace(self) -> str: ...


class Workspace:
    """The files of one namespace. Cheap to construct; directories are made on first write.

    ``files`` is the one gate every open goes through (see the module docstring).
    """

    def __init__(self, root: str | os.PathLike[str], namespace: str = DEFAULT_NAMESPACE) -> None:
        self.namespace = check_namespace(namespace)
        self.files: Confined = namespace_tree(os.fspath(root), self.namespace)
        self.root = self.files.root
        self.dir = self.files.dir
        self._warned: set[str] = set()  # badly named files already logged

    @classmethod
    def of(cls, settings: Placed) -> Workspace:
        """The workspace ``settings`` name: ``settings.workspace_path`` and ``settings.namespace``."""
        return cls(settings.workspace_path, settings.namespace)

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r}, namespace={self.namespace!r})"

    # --- well-known files (paths for display; open them through ``files``) -------------------

    @property
    def core_file(self) -> Path:
        return self.dir / CORE_FILE

    @property
    def system_file(self) -> Path:
        return self.dir / SYSTEM_FILE

    @property
    def user_file(self) -> Path:
        return self.dir / USER_FILE

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
        return self.dir / daily_relative(day)

    def ensure(self) -> None:
        """Create the namespace directory and its sub-directories, 0700, through the gate.

        Raises :class:`PathEscapeError` when one of them is a symlink (it is never followed).
        """
        for directory in (DAILY_DIR, DIALOG_DIR, TOOL_RESULTS_DIR):
            self.files.makedirs(directory)

    # --- confinement --------------------------------------------------------------------------

    def resolve(self, relative: str, *, under: Sequence[str] = ()) -> Path:
        """The absolute path ``relative`` names inside this namespace, or :class:`PathEscapeError`.

        A thin wrapper over :meth:`Confined.path` for callers that need a path to show: ``..``, absolute
        paths, over-long names, ``namespaces/`` (from the default namespace) and names outside ``under``
        (allowed first components, e.g. ``("dialog", "tool_results")``) are refused, and so is a path
        through or to a symlink that exists now. The file need not exist. This is a check, not an open:
        read or write the file with ``self.files``, which checks again as it opens.
        """
        path = self.files.path(relative, under=under)
        try:
            st = self.files.lstat(relative, under=under)  # parents opened O_NOFOLLOW: a linked one raises
        except FileNotFoundError:
            return path
        if stat.S_ISLNK(st.st_mode):
            raise PathEscapeError(
                f"path {relative[:120]!r} is a symlink; contextmem follows no links inside a workspace. "
                "Fix: replace the link with the real file"
            )
        return path

    def relative(self, path: Path) -> str:
        """``path`` (inside this namespace) as the POSIX relative string used in the index."""
        return path.relative_to(self.dir).as_posix()

    # --- memory files -------------------------------------------------------------------------

    def memory_files(self) -> list[Path]:
        """``MEMORY.md`` and every ``memory/**/*.md`` that is a single-link regular file (no symlinks)."""
        return [self.dir / rel for rel, _ in self.scan_memory_files().files]

    def scan_memory_files(self) -> WalkResult:
        """The memory files (``MEMORY.md``, ``memory/**/*.md``) as relative paths with their ``lstat``,
        sorted, and what was skipped and why: symlinks (never followed), hard links, other non-regular
        entries. The index calls this before every search; it opens no file.
        """
        result = WalkResult()
        try:
            st = self.files.lstat(CORE_FILE)
        except FileNotFoundError:
            pass
        else:
            if stat.S_ISLNK(st.st_mode):
                result.skipped.append((CORE_FILE, "symlink"))
            elif not stat.S_ISREG(st.st_mode):
                result.skipped.append((CORE_FILE, "not a regular file"))
            elif st.st_nlink != 1:
                result.skipped.append((CORE_FILE, "hard link"))
            else:
                result.files.append((CORE_FILE, st))
        daily = self.files.walk(DAILY_DIR, suffix=".md")
        for rel, seen in daily.files:
            if _is_utf8(rel):
                result.files.append((rel, seen))
            else:
                result.skipped.append((self._badly_named(rel), "name is not valid UTF-8"))
        result.skipped.extend((shown_name(rel), why) for rel, why in daily.skipped)
        return result

    def _badly_named(self, rel: str) -> str:
        """A file whose name is not UTF-8 (the bytes of another encoding, e.g. Latin-1 ``caf\\xe9.md``)
        is never indexed: no index, log or JSON answer can carry its name. It is reported by a safe name
        (:func:`shown_name`) and logged once per workspace."""
        shown = shown_name(rel)
        if shown not in self._warned:
            self._warned.add(shown)
            logger.warning(
                "memory file %r is not indexed: its name is not valid UTF-8. Fix: rename it (e.g. "
                "convmv -f latin1 -t utf8)",
                shown,
            )
        return shown


def _is_utf8(name: str) -> bool:
    """Whether a name from the file system is text: undecodable bytes come back as lone surrogates."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_name(name: str) -> str:
    """``name`` as printable text: the bytes of a name that is not UTF-8 as ``\\xNN`` escapes."""
    return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")


def daily_relative(day: date) -> str:
    """The relative path of ``day``'s daily memory file: ``memory/YYYY-MM-DD.md``."""
    return f"{DAILY_DIR}/{day.isoformat()}.md"


def dialog_relative(day: date) -> str:
    """The relative path of ``day``'s dialog archive file: ``dialog/YYYY-MM-DD.jsonl``."""
    return f"{DIALOG_DIR}/{day.isoformat()}.jsonl"


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
