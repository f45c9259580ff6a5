"""The SQLite store's compaction lock files, private to their owner whatever the umask.

The ``<db>.locks`` directory is created 0700 and each session's lock file 0600, with the exact modes set
by ``fchmod``/``chmod`` (:mod:`contextmem.safefs`). Compaction locks are ``flock`` locks on those lock
files (:func:`try_flock`); the kernel releases them when the holder dies.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import StoreError
from ..safefs import PRIVATE_FILE, ensure_private_dir

__all__ = ["try_flock"]


def _open_lock_file(path: Path, *, create: bool) -> int | None:
    """An fd on ``path`` (created 0600, in a 0700 directory, when missing and ``create``), or None."""
    flags = os.O_RDWR | os.O_CLOEXEC
    while True:
        try:
            return os.open(path, flags)
        except FileNotFoundError:
            if not create:
                return None
        ensure_private_dir(path.parent)
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, PRIVATE_FILE)
        except FileExistsError:
            continue  # another process created it first: open theirs
        os.fchmod(fd, PRIVATE_FILE)
        return fd


def try_flock(path: Path, *, create: bool = True) -> int | None:
    """An fd holding an exclusive flock on ``path``, or None if someone else holds it (or, unless
    ``create``, it does not exist).

    A lock file may be unlinked (session deleted) between our ``open`` and our ``flock``; we then hold a
    lock on an orphaned inode that nobody else can see, so the inode is checked after locking.
    """
    try:
        import fcntl
    except ImportError:  # Windows
        raise StoreError(
            "SQLite compaction locks need POSIX file locks (fcntl), which this platform lacks. "
            "Fix: run on Linux or macOS, or use the PostgreSQL store."
        ) from None
    fd = _open_lock_file(path, create=create)
    if fd is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held = os.fstat(fd)
        now = os.stat(path)
        if (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino):
            return fd
    except (BlockingIOError, FileNotFoundError):
        pass
    os.close(fd)
    return None
