"""Workspace layout, namespace names and path confinement (SPEC M1, M5, M6)."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pytest

from contextmem.errors import ConfigError
from contextmem.memory import PathEscapeError
from contextmem.workspace import Workspace, daily_date, memory_kind


def test_default_namespace_lives_at_the_root_and_others_apart(tmp_path: Path) -> None:
    default = Workspace(tmp_path)
    alice = Workspace(tmp_path, "alice")
    assert default.core_file == tmp_path.resolve() / "MEMORY.md"
    assert alice.core_file == tmp_path.resolve() / "namespaces" / "alice" / "MEMORY.md"
    assert alice.daily_file(date(2026, 3, 8)).name == "2026-03-08.md"
    assert not alice.dir.exists()  # nothing is created until written
    alice.ensure()
    assert {p.name for p in alice.dir.iterdir()} == {"memory", "dialog", "tool_results"}


@pytest.mark.parametrize("name", ["", "..", ".", "a/b", "../x", "a b", "-x", "x" * 65, "a\x00b", "Alice", 7])
def test_unsafe_namespace_names_are_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(ConfigError, match="Fix:"):
        Workspace(tmp_path, name)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "path",
    [
        "../secret.txt",
        "memory/../../secret.txt",
        "dialog/../../../etc/passwd",
        "/etc/passwd",
        "C:/windows",
        "..\\secret.txt",
        "",
        ".",
        "a\x00b",
    ],
)
def test_traversal_and_absolute_paths_are_refused(tmp_path: Path, path: str) -> None:
    ws = Workspace(tmp_path, "alice")
    with pytest.raises(PathEscapeError):
        ws.resolve(path)


def test_path_escape_error_is_a_permission_error(tmp_path: Path) -> None:
    with pytest.raises(PermissionError):
        Workspace(tmp_path).resolve("../x")


def test_no_symlink_is_followed_not_even_one_pointing_inside_the_namespace(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    ws = Workspace(tmp_path / "root", "alice")
    ws.ensure()
    (ws.dialog_dir / "link").symlink_to(outside, target_is_directory=True)
    (ws.dialog_dir / "file-link.txt").symlink_to(outside / "secret.txt")
    (ws.dialog_dir / "2026-01-01.jsonl").write_text("{}\n")
    (ws.tool_results_dir / "alias.jsonl").symlink_to(ws.dialog_dir / "2026-01-01.jsonl")
    (ws.dir / "inner-dir").symlink_to(ws.dialog_dir, target_is_directory=True)
    for path in ("dialog/link/secret.txt", "dialog/file-link.txt", "tool_results/alias.jsonl"):
        with pytest.raises(PathEscapeError, match="symlink"):
            ws.resolve(path)
        with pytest.raises(PathEscapeError, match="symlink"):
            ws.files.read_bytes(path)
    with pytest.raises(PathEscapeError, match="symlink"):  # a linked directory, even into the namespace
        ws.resolve("inner-dir/2026-01-01.jsonl")
    assert ws.resolve("dialog/2026-01-01.jsonl") == ws.dialog_dir / "2026-01-01.jsonl"


def test_default_namespace_cannot_reach_other_namespaces(tmp_path: Path) -> None:
    other = Workspace(tmp_path, "bob")
    other.ensure()
    other.core_file.write_text("bob's secret")
    default = Workspace(tmp_path)
    default.ensure()
    with pytest.raises(PathEscapeError):
        default.resolve("namespaces/bob/MEMORY.md")
    os.symlink(other.dir, default.dir / "bob-link")
    with pytest.raises(PathEscapeError):
        default.resolve("bob-link/MEMORY.md")


def test_under_restricts_the_first_component(tmp_path: Path) -> None:
    ws = Workspace(tmp_path)
    assert ws.resolve("dialog/2026-01-01.jsonl", under=("dialog",)).name == "2026-01-01.jsonl"
    with pytest.raises(PathEscapeError):
        ws.resolve("MEMORY.md", under=("dialog", "tool_results"))


def test_memory_files_skip_and_report_every_symlink_and_hard_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("not mine")
    ws = Workspace(tmp_path / "root", "alice")
    ws.ensure()
    ws.core_file.write_text("core")
    (ws.daily_dir / "2026-01-01.md").write_text("daily")
    (ws.daily_dir / "notes").mkdir()
    (ws.daily_dir / "notes" / "a.md").write_text("note")
    (ws.daily_dir / "x.txt").write_text("not markdown")
    (ws.daily_dir / "evil.md").symlink_to(outside)
    (ws.daily_dir / "inner.md").symlink_to(ws.daily_dir / "2026-01-01.md")  # inside: still not followed
    (ws.daily_dir / "linked-dir").symlink_to(ws.daily_dir / "notes", target_is_directory=True)
    os.link(outside, ws.daily_dir / "hard.md")
    assert [ws.relative(p) for p in ws.memory_files()] == [
        "MEMORY.md",
        "memory/2026-01-01.md",
        "memory/notes/a.md",
    ]
    assert sorted(ws.scan_memory_files().skipped) == [
        ("memory/evil.md", "symlink"),
        ("memory/hard.md", "hard link"),
        ("memory/inner.md", "symlink"),
        ("memory/linked-dir", "symlink"),
    ]
    ws.core_file.unlink()
    ws.core_file.symlink_to(outside)
    assert ("MEMORY.md", "symlink") in ws.scan_memory_files().skipped


def test_ensure_creates_private_directories_and_refuses_a_linked_one(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        ws = Workspace(tmp_path / "root", "alice")
        ws.ensure()
    finally:
        os.umask(old)
    for directory in (ws.dir, ws.daily_dir, ws.dialog_dir, ws.tool_results_dir):
        assert directory.stat().st_mode & 0o777 == 0o700, directory
    other = Workspace(tmp_path / "root", "bob")
    other.dir.mkdir(parents=True)
    (other.dir / "memory").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(PathEscapeError, match="Fix:"):
        other.ensure()


def test_kinds_and_daily_dates() -> None:
    assert memory_kind("MEMORY.md") == "core"
    assert memory_kind("memory/2026-03-08.md") == "daily"
    assert daily_date("memory/2026-03-08.md") == date(2026, 3, 8)
    assert memory_kind("memory/notes/2026-03-08.md") == "note"
    assert daily_date("memory/2026-02-30.md") is None
    assert memory_kind("memory/ideas.md") == "note"
