"""The one atomic replace (``safefs.Confined.atomic_writer``) and the call sites routed through it."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from contextmem.safefs import atomic_writer_path, write_atomic_path


def test_a_streamed_write_replaces_the_file_only_when_the_block_ends_cleanly(tmp_path: Path) -> None:
    target = tmp_path / "model.gguf"
    target.write_bytes(b"old")
    with pytest.raises(ValueError, match="bad hash"), atomic_writer_path(target, mode=0o644) as out:
        out.write(b"half of the new")
        raise ValueError("bad hash")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.gguf"]  # no temporary file left

    with atomic_writer_path(target, mode=0o644) as out:
        for chunk in (b"new ", b"model"):
            out.write(chunk)
    assert target.read_bytes() == b"new model"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.gguf"]


def test_an_atomic_write_is_private_unless_told_and_takes_any_name(tmp_path: Path) -> None:
    name = "记" * 85  # 255 bytes: the temporary name must still fit the file system's limit
    write_atomic_path(tmp_path / name, b"x")
    assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [name]


def test_the_chat_history_is_replaced_privately_not_written_through_a_link(tmp_path: Path) -> None:
    readline = pytest.importorskip("readline")
    from contextmem.cli.chat import HISTORY_FILE, enable_history

    outside = tmp_path / "outside"
    outside.write_text("not yours\n")
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / HISTORY_FILE).symlink_to(outside)
    save = enable_history(workspace)
    readline.clear_history()
    readline.add_history("DB_PASS=hunter2 psql")
    save()
    history = workspace / HISTORY_FILE
    assert outside.read_text() == "not yours\n"
    assert not history.is_symlink() and "hunter2" in history.read_text()
    assert stat.S_IMODE(history.stat().st_mode) == 0o600
