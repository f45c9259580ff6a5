"""The engine's files: which tree a session writes to, and its offloaded tool results (C5, M6).

Everything the engine writes (``dialog/`` through :class:`~contextmem.archive.DialogArchive`,
``tool_results/`` here) goes through one :class:`~contextmem.safefs.Confined` tree, the namespace's own:
files 0600, directories 0700, no symlink followed, never another tenant's directory.
"""

from __future__ import annotations

import contextlib
import os

from ..archive import error_cause
from ..errors import ArchiveError, PathEscapeError
from ..safefs import Confined
from ..settings import Settings
from ..workspace import TOOL_RESULTS_DIR, namespace_tree

__all__ = ["cleanup_offloads", "resolve_files", "write_offload"]


def resolve_files(
    settings: Settings, workspace_dir: str | os.PathLike[str] | None, files: Confined | None
) -> Confined:
    """The session's tree. Precedence: ``files`` as given; else ``workspace_dir``, taken to be the
    namespace's own directory (for the default namespace its ``namespaces/`` stays out of reach); else
    the namespace's directory under ``settings.workspace_path``."""
    if files is not None:
        return files
    if workspace_dir is not None:
        return namespace_tree(workspace_dir, settings.namespace, own_dir=True)
    return namespace_tree(settings.workspace_path, settings.namespace)


def write_offload(files: Confined, relative: str, text: str) -> None:
    """Write a tool result's full text to ``relative`` (under ``tool_results/``) atomically and durably.

    Text UTF-8 cannot encode (a lone surrogate) is written with backslash escapes. Raises
    :class:`ArchiveError` naming the path and the cause (disk full, a symlinked ``tool_results/``, ...).
    """
    data = text.encode("utf-8", "backslashreplace")
    try:
        files.write_atomic(relative, data, under=(TOOL_RESULTS_DIR,))
    except OSError as exc:
        fix = (
            "make tool_results/ a real directory of the workspace (no link)"
            if isinstance(exc, PathEscapeError)
            else "free disk space or make the workspace's tool_results/ writable"
        )
        raise ArchiveError(
            f"cannot write the full tool result to {str(files.dir / relative)!r}: {error_cause(exc)}. "
            f"The result stays whole in the session. Fix: {fix}."
        ) from exc


def cleanup_offloads(files: Confined, cutoff: float) -> int:
    """Remove offloaded results last modified before ``cutoff`` (epoch seconds); returns how many.

    Only regular files directly in ``tool_results/`` are considered; links are never followed or removed.
    """
    removed = 0
    for relative, st in files.walk(TOOL_RESULTS_DIR, suffix=".txt", max_depth=0).files:
        if st.st_mtime < cutoff:
            with contextlib.suppress(FileNotFoundError, PathEscapeError):
                removed += files.unlink(relative)
    return removed
