"""The one gate (contextmem.safefs): names, links, hard links, races, modes. Each attack is a test."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contextmem.errors import PathEscapeError
from contextmem.safefs import MAX_PATH_CHARS, Confined, ensure_private_file, write_atomic_path
from contextmem.workspace import namespace_tree


@pytest.fixture
def tree(tmp_path: Path) -> Confined:
    return namespace_tree(tmp_path / "ws", "default")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    target = tmp_path / "outside" / "authorized_keys"
    target.parent.mkdir()
    target.write_text("ssh-ed25519 AAAA owner\n")
    return target


@pytest.mark.parametrize(
    "name",
    ["", " ", "\x00", "a\x00b", "../x", "a/../../x", "/etc/passwd", "C:\\x", "\\\\host\\share", "..", "."],
)
def test_names_that_leave_the_tree_are_refused_before_any_io(tree: Confined, name: str) -> None:
    with pytest.raises(PathEscapeError):
        tree.parts(name)
    assert not tree.root.exists()  # nothing was created for a refused name


@pytest.mark.parametrize("value", [None, 3, b"MEMORY.md", ["MEMORY.md"], {"p": 1}])
def test_non_strings_are_refused_with_a_typed_error(tree: Confined, value: object) -> None:
    with pytest.raises(PathEscapeError, match="not a string"):
        tree.parts(value)


def test_long_paths_and_names_are_refused(tree: Confined) -> None:
    with pytest.raises(PathEscapeError, match="characters long"):
        tree.parts("a/" * (MAX_PATH_CHARS // 2 + 1))
    with pytest.raises(PathEscapeError, match="255 bytes"):
        tree.parts("memory/" + "x" * 256)
    with pytest.raises(PathEscapeError, match="255 bytes"):
        tree.parts("memory/" + "密" * 90)  # 270 UTF-8 bytes


def test_default_namespace_cannot_name_other_tenants(tree: Confined) -> None:
    with pytest.raises(PathEscapeError, match="another namespace"):
        tree.parts("namespaces/bob/MEMORY.md")


@given(st.lists(st.sampled_from(["a", "b", ".", "..", "", "c.md"]), min_size=1, max_size=6))
def test_every_accepted_name_stays_inside(parts: list[str]) -> None:
    tree = Confined("/nonexistent-root-for-property", reserved=("namespaces",))
    try:
        path = tree.path("/".join(parts))
    except PathEscapeError:
        return
    assert path.is_relative_to(tree.dir) and path != tree.dir


def test_a_final_symlink_is_never_written_or_read(tree: Confined, outside: Path) -> None:
    tree.makedirs()
    (tree.dir / "MEMORY.md").symlink_to(outside)
    before = outside.read_text()
    with pytest.raises(PathEscapeError, match="symlink"):
        tree.append("MEMORY.md", b"attacker key\n")
    with pytest.raises(PathEscapeError, match="symlink"):
        tree.read_bytes("MEMORY.md")
    assert not tree.exists("MEMORY.md")
    assert outside.read_text() == before


def test_a_symlinked_directory_is_never_entered(tree: Confined, outside: Path) -> None:
    tree.makedirs()
    (tree.dir / "memory").symlink_to(outside.parent, target_is_directory=True)
    with pytest.raises(PathEscapeError, match="'memory' is a symlink"):
        tree.append("memory/2026-01-01.md", b"x")
    with pytest.raises(PathEscapeError):
        tree.write_atomic("memory/2026-01-01.md", b"x")
    assert sorted(p.name for p in outside.parent.iterdir()) == ["authorized_keys"]


def test_a_symlinked_namespace_directory_is_refused(tmp_path: Path, outside: Path) -> None:
    (tmp_path / "ws" / "namespaces").mkdir(parents=True)
    (tmp_path / "ws" / "namespaces" / "bob").symlink_to(outside.parent, target_is_directory=True)
    bob = namespace_tree(tmp_path / "ws", "bob")
    with pytest.raises(PathEscapeError, match="'bob' is a symlink"):
        bob.append("MEMORY.md", b"x")
    assert not (outside.parent / "MEMORY.md").exists()


def test_hard_links_are_neither_read_nor_written(tree: Confined, outside: Path) -> None:
    tree.makedirs("memory")
    os.link(outside, tree.dir / "memory" / "notes.md")
    before = outside.read_text()
    with pytest.raises(PathEscapeError, match="hard links"):
        tree.append("memory/notes.md", b"x")
    with pytest.raises(PathEscapeError, match="hard links"):
        tree.read_bytes("memory/notes.md")
    assert outside.read_text() == before
    walked = tree.walk("memory", suffix=".md")
    assert walked.files == [] and walked.skipped == [("memory/notes.md", "hard link")]


def test_walk_reports_links_and_never_follows_them(tree: Confined, outside: Path) -> None:
    tree.append("memory/2026-01-01.md", b"real\n")
    (tree.dir / "memory" / "evil.md").symlink_to(outside)
    (tree.dir / "memory" / "sub").symlink_to(outside.parent, target_is_directory=True)
    walked = tree.walk("memory", suffix=".md")
    assert [rel for rel, _ in walked.files] == ["memory/2026-01-01.md"]
    assert sorted(walked.skipped) == [("memory/evil.md", "symlink"), ("memory/sub", "symlink")]


def test_opening_a_fifo_does_not_block(tree: Confined) -> None:
    tree.makedirs("memory")
    os.mkfifo(tree.dir / "memory" / "pipe.md")
    with pytest.raises(PathEscapeError, match="not a regular file"):
        tree.read_bytes("memory/pipe.md")


def test_created_files_and_directories_are_private_whatever_the_umask(tree: Confined) -> None:
    old = os.umask(0)
    try:
        tree.append("memory/2026-01-01.md", b"x")
        tree.write_atomic("tool_results/a.txt", b"y")
    finally:
        os.umask(old)
    for path in (tree.dir, tree.dir / "memory", tree.dir / "tool_results"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o700
    for path in (tree.dir / "memory" / "2026-01-01.md", tree.dir / "tool_results" / "a.txt"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_write_atomic_replaces_a_link_instead_of_following_it(tree: Confined, outside: Path) -> None:
    tree.makedirs("tool_results")
    (tree.dir / "tool_results" / "r.txt").symlink_to(outside)
    before = outside.read_text()
    tree.write_atomic("tool_results/r.txt", b"mine")
    assert outside.read_text() == before
    assert not (tree.dir / "tool_results" / "r.txt").is_symlink()
    assert tree.read_bytes("tool_results/r.txt") == b"mine"


def test_unlink_removes_a_link_never_its_target(tree: Confined, outside: Path) -> None:
    tree.makedirs("tool_results")
    (tree.dir / "tool_results" / "r.txt").symlink_to(outside)
    assert tree.unlink("tool_results/r.txt")
    assert outside.exists()
    assert not tree.unlink("tool_results/r.txt")


def test_a_failed_append_leaves_no_torn_tail(tree: Confined) -> None:
    """A real short write: the kernel's file-size limit stops the write part-way (as a full disk does)."""
    tree.append("memory/a.md", b"first\n")
    script = f"""
import resource, signal, sys
sys.path.insert(0, {str(Path(__file__).resolve().parents[2] / "src")!r})
from contextmem.safefs import Confined
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
try:
    Confined({str(tree.root)!r}).append("memory/a.md", "密".encode() * 5000)
except OSError as exc:
    print("failed", exc.errno)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("failed")
    assert tree.read_bytes("memory/a.md") == b"first\n"


def test_separator_is_written_only_when_the_file_has_content(tree: Confined) -> None:
    assert tree.append("memory/a.md", b"one\n", separator=b"\n") == 0
    tree.append("memory/a.md", b"two\n", separator=b"\n")
    assert tree.read_bytes("memory/a.md") == b"one\n\ntwo\n"


def test_racing_symlink_swaps_never_let_a_write_out(tree: Confined, outside: Path) -> None:
    """A thread flips ``memory`` between a real directory and a link to outside while another appends."""
    tree.makedirs("memory")
    real = tree.dir / "memory"
    parked = tree.dir / "memory-real"
    stop = threading.Event()
    before = outside.read_text()

    def flip() -> None:
        while not stop.is_set():
            try:
                os.rename(real, parked)
                os.symlink(outside.parent, real, target_is_directory=True)
                os.unlink(real)
                os.rename(parked, real)
            except OSError:
                continue

    flipper = threading.Thread(target=flip)
    flipper.start()
    written = refused = 0
    try:
        for i in range(2_000):
            try:
                tree.append("memory/authorized_keys", f"entry {i}\n".encode())
                written += 1
            except (PathEscapeError, FileNotFoundError):
                refused += 1
    finally:
        stop.set()
        flipper.join()
    assert outside.read_text() == before
    assert sorted(p.name for p in outside.parent.iterdir()) == ["authorized_keys"]
    assert written + refused == 2_000 and written > 0


def test_operator_paths_are_written_atomically_and_privately(tmp_path: Path) -> None:
    target = tmp_path / "cfg" / "config.json"
    write_atomic_path(target, b"{}")
    assert target.read_bytes() == b"{}"
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    db = tmp_path / "db" / "sessions.sqlite"
    ensure_private_file(db)
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    db.write_bytes(b"keep")
    ensure_private_file(db)
    assert db.read_bytes() == b"keep"
