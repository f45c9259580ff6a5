"""The one gate for every path contextmem opens for a caller or a model (M5, M6).

A :class:`Confined` is a directory tree the library owns: a namespace's directory. Every file in it is
reached component by component from directory file descriptors, each component opened with
``O_NOFOLLOW``. Invariants:

* **Nothing leaves the tree.** ``..``, absolute paths, NUL, over-long paths and names are refused before
  any I/O (:meth:`Confined.parts`); first-level names in ``reserved`` (the default namespace's
  ``namespaces/``, which holds the other tenants) are refused too.
* **No symlink is followed below the root**, in the middle (``memory/`` → ``/etc``) or at the end
  (``MEMORY.md`` → ``~/.ssh/authorized_keys``): the kernel refuses it (``ELOOP``/``ENOTDIR``) and we raise
  :class:`~contextmem.errors.PathEscapeError`. Walks (:meth:`Confined.walk`) skip symlinks and report them.
* **No race between check and use.** The open *is* the check: a link swapped in after anyone looked is
  refused by the kernel. An opened file must be a regular file with exactly one link (``fstat`` on the
  descriptor we then use), so a hard link to an outside or another tenant's file is never read or
  written through; opens never block on a FIFO.
* **Private by construction.** Directories are created 0700 and files 0600, whatever the umask (only a
  caller replacing a file that is no secret, such as a packaged model, may ask a wider ``mode``).

The root itself is the operator's choice and may be reached through symlinks (``~/.contextmem`` →
``/data/cm``): it is resolved once, when the :class:`Confined` is made. ``prefix`` components between
the root and the tree (``namespaces/<name>``) are walked with ``O_NOFOLLOW`` like the rest.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import secrets
import stat
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from .errors import PathEscapeError

__all__ = [
    "MAX_PATH_CHARS",
    "PRIVATE_DIR",
    "PRIVATE_FILE",
    "Confined",
    "WalkResult",
    "append_or_cut_back",
    "atomic_writer_path",
    "ensure_private_dir",
    "ensure_private_file",
    "write_all",
    "write_atomic_path",
]

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
MAX_PATH_CHARS = 1024
MAX_NAME_BYTES = 255

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_LINK_ERRNOS = (errno.ELOOP, errno.ENOTDIR)
_DRIVE = re.compile(r"^[A-Za-z]:")


@dataclass(slots=True)
class WalkResult:
    """Regular files found by :meth:`Confined.walk` and what was skipped, as relative POSIX paths."""

    files: list[tuple[str, os.stat_result]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why)


class Confined:
    """A directory tree that every open goes through. Cheap to make; holds no descriptors."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        prefix: Sequence[str] = (),
        reserved: Sequence[str] = (),
    ) -> None:
        self.root = Path(os.path.realpath(os.path.expanduser(os.fspath(root))))
        self.prefix = tuple(prefix)
        self.reserved = frozenset(reserved)
        for part in self.prefix:
            if part in ("", ".", "..") or "/" in part or "\x00" in part:
                raise PathEscapeError(f"prefix component {part!r} is not a plain name. Fix: use a name")

    def __repr__(self) -> str:
        return f"Confined({str(self.dir)!r})"

    @property
    def dir(self) -> Path:
        """The tree's directory (root + prefix), for display and for relative paths in messages."""
        return self.root.joinpath(*self.prefix)

    # --- names ----------------------------------------------------------------------------------

    def parts(self, relative: object, *, under: Sequence[str] = ()) -> tuple[str, ...]:
        """The components of ``relative`` if it names something inside the tree, else PathEscapeError.

        ``under`` restricts the first component (e.g. ``("dialog", "tool_results")``).
        """
        if not isinstance(relative, str):
            raise PathEscapeError(
                f"path {relative!r} is a {type(relative).__name__}, not a string. Fix: pass a relative path"
            )
        text = relative.replace("\\", "/").strip()
        shown = text[:120] + ("…" if len(text) > 120 else "")
        if not text or "\x00" in text:
            raise PathEscapeError(f"path {shown!r} is empty or contains NUL. Fix: give a relative path")
        if len(text) > MAX_PATH_CHARS:
            raise PathEscapeError(
                f"path {shown!r} is {len(text)} characters long. Fix: paths are at most {MAX_PATH_CHARS}"
            )
        pure = PurePosixPath(text)
        if pure.is_absolute() or _DRIVE.match(text):
            raise PathEscapeError(
                f"path {shown!r} is absolute. Fix: give a path relative to the workspace, e.g. 'MEMORY.md'"
            )
        parts = tuple(p for p in pure.parts if p != ".")
        if ".." in parts:
            raise PathEscapeError(f"path {shown!r} contains '..'. Fix: name a file inside the workspace")
        if not parts:
            raise PathEscapeError(f"path {shown!r} names the workspace itself. Fix: name a file in it")
        for part in parts:
            if len(part.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
                raise PathEscapeError(
                    f"path {shown!r} has a component over {MAX_NAME_BYTES} bytes. Fix: use shorter names"
                )
        if under and parts[0] not in under:
            raise PathEscapeError(
                f"path {shown!r} is not under {', '.join(d + '/' for d in under)}. Fix: name a file there"
            )
        if parts[0] in self.reserved:
            raise PathEscapeError(f"path {shown!r} belongs to another namespace. Fix: use your own files")
        return parts

    def path(self, relative: str, *, under: Sequence[str] = ()) -> Path:
        """The absolute path ``relative`` names (validated, not opened): for messages and results."""
        return self.dir.joinpath(*self.parts(relative, under=under))

    # --- descriptors ----------------------------------------------------------------------------

    def _escape(self, shown: str, name: str, dir_fd: int) -> PathEscapeError:
        try:
            is_link = stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        except OSError:
            is_link = False
        why = "is a symlink" if is_link else "is not a directory"
        return PathEscapeError(
            f"path {shown!r}: {name!r} {why}; contextmem follows no links inside a workspace. "
            "Fix: replace the link with the real file or directory"
        )

    def _open_dir(self, parts: Sequence[str], *, create: bool, shown: str) -> int:
        """A descriptor of ``root/prefix/parts``; each component ``O_NOFOLLOW``, created 0700 if asked."""
        if create:
            self.root.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        fd = os.open(self.root, _DIR_FLAGS)
        try:
            for name in (*self.prefix, *parts):
                try:
                    nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except FileNotFoundError:
                    if not create:
                        raise
                    with contextlib.suppress(FileExistsError):
                        os.mkdir(name, PRIVATE_DIR, dir_fd=fd)
                    try:
                        nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
                    except OSError as exc:
                        if exc.errno in _LINK_ERRNOS:
                            raise self._escape(shown, name, fd) from None
                        raise
                except OSError as exc:
                    if exc.errno in _LINK_ERRNOS:
                        raise self._escape(shown, name, fd) from None
                    raise
                os.close(fd)
                fd = nxt
            return fd
        except BaseException:
            os.close(fd)
            raise

    @contextlib.contextmanager
    def directory(self, relative: str = "", *, create: bool = False) -> Iterator[int]:
        """A descriptor of a directory in the tree (``""``: the tree itself), closed on exit."""
        parts = self.parts(relative) if relative else ()
        fd = self._open_dir(parts, create=create, shown=relative or ".")
        try:
            yield fd
        finally:
            os.close(fd)

    def open(
        self,
        relative: str,
        flags: int = os.O_RDONLY,
        *,
        under: Sequence[str] = (),
        make_dirs: bool = False,
        mode: int = PRIVATE_FILE,
    ) -> int:
        """A descriptor of the regular file ``relative`` (see the module invariants); the caller closes it.

        The file must have a single link: a hard link could make another tenant's or an outside file
        look like ours. ``make_dirs`` creates missing parent directories (0700).
        """
        parts = self.parts(relative, under=under)
        dfd = self._open_dir(parts[:-1], create=make_dirs, shown=relative)
        try:
            try:
                fd = os.open(parts[-1], flags | _FILE_FLAGS, mode, dir_fd=dfd)
            except OSError as exc:
                if exc.errno == errno.ELOOP:
                    raise self._escape(relative, parts[-1], dfd) from None
                raise
        finally:
            os.close(dfd)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise PathEscapeError(
                    f"path {relative!r} is not a regular file. Fix: name a file, not a directory or device"
                )
            if st.st_nlink != 1:
                raise PathEscapeError(
                    f"path {relative!r} has {st.st_nlink} hard links; contextmem writes only files it "
                    "alone names. Fix: replace the hard link with a copy"
                )
            os.set_blocking(fd, True)
        except BaseException:
            os.close(fd)
            raise
        return fd

    # --- whole-file helpers -----------------------------------------------------------------------

    def read_bytes(self, relative: str, *, under: Sequence[str] = (), max_bytes: int | None = None) -> bytes:
        """The file's bytes (at most ``max_bytes`` when given)."""
        fd = self.open(relative, os.O_RDONLY, under=under)
        with os.fdopen(fd, "rb") as handle:
            return handle.read() if max_bytes is None else handle.read(max_bytes)

    def read_text(self, relative: str, *, under: Sequence[str] = (), max_bytes: int | None = None) -> str:
        """The file as UTF-8 (a BOM dropped, undecodable bytes replaced)."""
        return self.read_bytes(relative, under=under, max_bytes=max_bytes).decode("utf-8-sig", "replace")

    def exists(self, relative: str, *, under: Sequence[str] = ()) -> bool:
        """Whether ``relative`` names a regular file here (False for links, which are never followed)."""
        try:
            return stat.S_ISREG(self.lstat(relative, under=under).st_mode)
        except (FileNotFoundError, NotADirectoryError, PathEscapeError):
            return False

    def lstat(self, relative: str, *, under: Sequence[str] = ()) -> os.stat_result:
        """``stat`` of ``relative`` itself (a link is not followed; a linked parent is refused)."""
        parts = self.parts(relative, under=under)
        dfd = self._open_dir(parts[:-1], create=False, shown=relative)
        try:
            return os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
        finally:
            os.close(dfd)

    @contextlib.contextmanager
    def locked_append(
        self, relative: str, *, under: Sequence[str] = (), readable: bool = False
    ) -> Iterator[tuple[int, bool]]:
        """``(fd, created)`` of ``relative`` opened for appending (created 0600, parents 0700), under an
        exclusive ``flock`` held until exit. A new file's directory is fsynced on exit. ``readable``
        opens it read-write (still appending), for callers that inspect or repair the tail under the lock.
        """
        parts = self.parts(relative, under=under)
        dfd = self._open_dir(parts[:-1], create=True, shown=relative)
        access = (os.O_RDWR if readable else os.O_WRONLY) | os.O_APPEND
        try:
            created = False
            try:
                fd = self.open(relative, access, under=under)
            except FileNotFoundError:
                fd = self.open(relative, access | os.O_CREAT, under=under)
                created = True
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                yield fd, created
            finally:
                os.close(fd)  # releases the lock
            if created:
                os.fsync(dfd)
        finally:
            os.close(dfd)

    def append(self, relative: str, data: bytes, *, separator: bytes = b"", under: Sequence[str] = ()) -> int:
        """Append ``data`` whole (``separator`` first if the file is not empty), fsynced, under the file's
        lock; returns the offset it starts at. A failed write is cut back off, leaving no torn tail."""
        with self.locked_append(relative, under=under) as (fd, _):
            start = os.fstat(fd).st_size
            append_or_cut_back(fd, separator + data if start and separator else data, start)
            return start

    def write_atomic(self, relative: str, data: bytes, *, under: Sequence[str] = ()) -> None:
        """Replace ``relative`` with ``data`` atomically and durably (see :meth:`atomic_writer`)."""
        with self.atomic_writer(relative, under=under) as out:
            out.write(data)

    @contextlib.contextmanager
    def atomic_writer(
        self, relative: str, *, under: Sequence[str] = (), mode: int = PRIVATE_FILE
    ) -> Iterator[BinaryIO]:
        """A binary file to write ``relative``'s new content into, streaming; it replaces ``relative``
        only when the block ends without an error.

        The one atomic replace of the library: a temporary file beside ``relative`` (created exclusively,
        a dot name that :meth:`walk` skips), fsynced and given ``mode`` (0600 unless the caller says the
        content is no secret), renamed over ``relative`` — a link there is replaced, never followed — and
        the directory fsynced. On an error the temporary file is removed and ``relative`` is untouched.
        """
        parts = self.parts(relative, under=under)
        dfd = self._open_dir(parts[:-1], create=True, shown=relative)
        try:
            stem = parts[-1].encode("utf-8", "surrogatepass")[:200].decode("utf-8", "ignore")
            tmp = f".{stem}.{secrets.token_hex(6)}.tmp"  # within MAX_NAME_BYTES whatever the name
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FILE_FLAGS, PRIVATE_FILE, dir_fd=dfd)
            try:
                with os.fdopen(fd, "wb") as out:
                    yield out
                    out.flush()
                    os.fchmod(out.fileno(), mode)
                    os.fsync(out.fileno())
                os.replace(tmp, parts[-1], src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)
                raise
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def unlink(self, relative: str, *, under: Sequence[str] = ()) -> bool:
        """Remove ``relative`` (a link is removed, never its target); False if it did not exist."""
        parts = self.parts(relative, under=under)
        try:
            dfd = self._open_dir(parts[:-1], create=False, shown=relative)
        except FileNotFoundError:
            return False
        try:
            os.unlink(parts[-1], dir_fd=dfd)
            return True
        except FileNotFoundError:
            return False
        finally:
            os.close(dfd)

    def makedirs(self, relative: str = "") -> None:
        """Create ``relative`` (and the tree) as directories, 0700."""
        with self.directory(relative, create=True):
            pass

    def walk(self, relative: str = "", *, suffix: str = "", max_depth: int = 16) -> WalkResult:
        """Regular files under ``relative`` (recursively, names ending in ``suffix``), sorted by path.

        Symlinks and other non-regular entries are skipped and reported, never followed. A missing
        directory is an empty result.
        """
        result = WalkResult()
        try:
            top = self._open_dir(self.parts(relative) if relative else (), create=False, shown=relative)
        except FileNotFoundError:
            return result
        except PathEscapeError:
            result.skipped.append((relative, "symlink"))
            return result

        def visit(fd: int, prefix: str, depth: int) -> None:
            with os.scandir(fd) as it:
                entries = sorted(it, key=lambda e: e.name)
            for entry in entries:
                rel = f"{prefix}/{entry.name}" if prefix else entry.name
                if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                if stat.S_ISLNK(st.st_mode):
                    result.skipped.append((rel, "symlink"))
                elif stat.S_ISDIR(st.st_mode):
                    if depth >= max_depth:
                        result.skipped.append((rel, "too deep"))
                        continue
                    try:
                        sub = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                    except OSError:
                        result.skipped.append((rel, "unreadable"))
                        continue
                    try:
                        visit(sub, rel, depth + 1)
                    finally:
                        os.close(sub)
                elif stat.S_ISREG(st.st_mode):
                    if not entry.name.endswith(suffix):
                        continue
                    if st.st_nlink != 1:
                        result.skipped.append((rel, "hard link"))
                    else:
                        result.files.append((rel, st))
                elif entry.name.endswith(suffix):
                    result.skipped.append((rel, "not a regular file"))

        try:
            visit(top, relative.strip("/"), 0)
        finally:
            os.close(top)
        result.files.sort(key=lambda item: item[0])
        return result


# --- outside a tree: files whose path the operator chose --------------------------------------------


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until everything is written (a write may be short)."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def write_atomic_path(path: str | os.PathLike[str], data: bytes, *, mode: int = PRIVATE_FILE) -> None:
    """Replace the file at an operator-chosen ``path`` with ``data`` atomically, durably and privately
    (0600, unless ``mode`` says otherwise); see :func:`atomic_writer_path`."""
    with atomic_writer_path(path, mode=mode) as out:
        out.write(data)


def atomic_writer_path(
    path: str | os.PathLike[str], *, mode: int = PRIVATE_FILE
) -> AbstractContextManager[BinaryIO]:
    """:meth:`Confined.atomic_writer` for an operator-chosen ``path`` (a model being assembled, a history).

    Its directory is the operator's and may be reached through links; the file is replaced, never followed.
    """
    target = Path(path)
    return Confined(target.parent).atomic_writer(target.name, mode=mode)


def append_or_cut_back(fd: int, payload: bytes, start: int) -> None:
    """Write ``payload`` at the end of ``fd`` (opened ``O_APPEND``, ``start`` bytes long) and fsync it.

    On any failure (a full disk, a short write) the file is cut back to ``start`` before the error is
    re-raised, so a failed append never leaves a torn tail for the next writer.
    """
    try:
        write_all(fd, payload)
        os.fsync(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
            os.fsync(fd)
        raise


def ensure_private_dir(path: str | os.PathLike[str]) -> None:
    """Create the directory ``path`` with mode exactly 0700 unless it exists (parents as ``mkdir -p``)."""
    target = Path(path)
    target.parent.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        target.mkdir(mode=PRIVATE_DIR)
        os.chmod(target, PRIVATE_DIR)  # a strict umask cannot make it unusable, a loose one cannot widen it


def ensure_private_file(path: str | os.PathLike[str]) -> None:
    """Create ``path`` empty with mode exactly 0600 if it does not exist (e.g. before SQLite opens it, so
    its ``-wal``/``-shm`` files inherit the mode). Parents are created 0700. An existing file is left as
    it is: its mode is the operator's choice."""
    target = Path(path)
    ensure_private_dir(target.parent)
    try:
        fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE)
    except FileExistsError:
        return
    try:
        os.fchmod(fd, PRIVATE_FILE)
    finally:
        os.close(fd)
