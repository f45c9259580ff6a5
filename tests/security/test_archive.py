"""The dialog archive heals itself and never lies (issue 12, points 3, 5, 6).

Real files, real kernel failures: a torn tail is made by truncating a real archive mid-UTF-8 and by a
real short write under ``RLIMIT_FSIZE`` in a child process; an unusable ``dialog/`` is a regular file in
its place (chmod does not stop root). Stores are real SQLite files.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from contextmem.archive import DialogArchive, encode_line
from contextmem.budget import Window
from contextmem.engine import ContextEngine, EngineEvent
from contextmem.errors import ArchiveError, MessageFormatError
from contextmem.messages import AssistantMessage, ToolCall, ToolMessage, UserMessage
from contextmem.store.sqlite import SqliteSessionStore
from contextmem.workspace import namespace_tree
from tests.engine_helpers import small_settings

ROOT = Path(__file__).resolve().parents[2]


async def open_engine(
    root: Path, store: SqliteSessionStore, *, namespace: str = "default", window: int = 3000, **kw: object
) -> ContextEngine:
    return await ContextEngine.open(
        "s1",
        store=store,
        settings=small_settings(namespace=namespace, workspace=root, **kw),
        window=Window(window, 200),
    )


async def fill(engine: ContextEngine, turns: int, *, start: int = 0, tag: str = "") -> None:
    """Turns of Chinese text (multi-byte UTF-8) that overflow a small window, so builds compact."""
    for i in range(start, start + turns):
        await engine.add(
            UserMessage(f"{tag}turn {i}: 检查日志 " + "数据 " * 60), AssistantMessage("好的 " * 40)
        )
        await engine.build("system")


def dialog_files(root: Path) -> list[Path]:
    return sorted((root / "dialog").glob("*.jsonl"))


async def test_torn_tail_cut_mid_utf8_is_quarantined_and_next_append_is_readable(tmp_path):
    store = SqliteSessionStore(tmp_path / "s.sqlite")
    engine = await open_engine(tmp_path, store)
    await fill(engine, 12)
    assert (await engine.verify()).archived > 0
    [path] = dialog_files(tmp_path)
    # A crash mid-append left half a line: its message was never marked archived.
    half = encode_line("default", "s1", 999, UserMessage("崩溃 " * 50), reason="x", ts=0.0)
    cut = half.index("崩".encode()) + 1  # inside a 3-byte character
    with path.open("ab") as f:
        f.write(half[:cut])
    report = await engine.verify()  # never raises on the torn line; it reports it
    assert report.lost == 0
    assert [p.why for p in report.corrupt] == ["unterminated last line (torn write)"]
    size_before = path.stat().st_size
    await fill(engine, 6, start=12)  # the next append heals the file first
    data = path.read_bytes()
    assert data.endswith(b"\n") and half[:cut] not in data
    quarantine = path.with_name(path.name + ".corrupt")
    assert quarantine.read_bytes() == half[:cut] + b"\n"
    assert quarantine.stat().st_mode & 0o777 == 0o600
    report = await engine.verify()
    assert report.lost == 0 and report.corrupt == () and len(report.quarantined) == 1
    assert path.stat().st_size > size_before - cut
    seqs = [a.seq for a in engine.archive.read("s1")]
    assert 999 not in seqs and max(seqs) > 20  # the new lines are there and readable
    await store.close()


async def test_truncated_archive_is_reported_never_raises(tmp_path):
    """A damaged disk (the last line cut mid-UTF-8 *after* it was marked archived): verify() tells how
    many archived messages no readable line holds, and which line is damaged, without raising."""
    store = SqliteSessionStore(tmp_path / "s.sqlite")
    engine = await open_engine(tmp_path, store)
    await fill(engine, 12)
    [path] = dialog_files(tmp_path)
    data = path.read_bytes()
    last = data.rstrip(b"\n").rfind(b"\n") + 1
    cut = next(i for i in range(last, len(data)) if data[i] >= 0xE0) + 2  # inside a 3-byte character
    os.truncate(path, cut)
    last_seq = json.loads(data[last:])["seq"]
    report = await engine.verify()
    assert report.missing == (last_seq,)
    assert len(report.corrupt) == 1 and "torn" in report.corrupt[0].why
    await store.close()


async def test_damaged_lines_are_skipped_and_reported(tmp_path):
    store = SqliteSessionStore(tmp_path / "s.sqlite")
    engine = await open_engine(tmp_path, store)
    await fill(engine, 12)
    [path] = dialog_files(tmp_path)
    lines = path.read_bytes().splitlines(keepends=True)
    flipped = bytearray(lines[0])
    flipped[-5] ^= 0x01  # one bit: the checksum catches it
    garbage = [b"\xff\xfe not utf-8\n", b"{not json\n", b'{"hello": 1}\n']
    path.write_bytes(bytes(flipped) + b"".join(lines[1:]) + b"".join(garbage))
    report = await engine.verify()
    whys = [p.why for p in report.corrupt]
    assert len(whys) == 4
    assert whys[0].startswith("checksum mismatch") and whys[1].startswith("not UTF-8")
    assert whys[2].startswith("not JSON") and whys[3].startswith("not an archive record")
    assert report.missing == (json.loads(lines[0])["seq"],)  # exactly the damaged line's message
    assert [str(p).split(":")[0] for p in report.corrupt] == [str(path.relative_to(tmp_path))] * 4
    await store.close()


async def test_old_lines_without_checksum_or_namespace_still_read(tmp_path):
    (tmp_path / "dialog").mkdir()
    old = {
        "session": "s1",
        "seq": 1,
        "reason": "turn_trim",
        "ts": 1.0,
        "message": {"role": "user", "content": "hi"},
    }
    (tmp_path / "dialog" / "2024-01-01.jsonl").write_text(json.dumps(old) + "\n")
    other = dict(old, seq=2, namespace="carol")
    with (tmp_path / "dialog" / "2024-01-01.jsonl").open("a") as f:
        f.write(json.dumps(other) + "\n")
    problems: list = []
    [got] = DialogArchive(tmp_path).read("s1", report=problems)  # carol's line is not ours
    assert (got.seq, got.message, got.namespace, problems) == (1, UserMessage("hi"), "default", [])
    # A line without a namespace belongs to the namespace whose tree holds it.
    assert [(a.seq, a.namespace) for a in DialogArchive(tmp_path, namespace="carol").read()] == [
        (1, "carol"),
        (2, "carol"),
    ]


SHORT_WRITE_CHILD = textwrap.dedent(
    """
    import json, os, resource, signal, sys
    from contextmem.archive import DialogArchive, encode_line
    from contextmem.errors import ArchiveError
    from contextmem.messages import UserMessage
    root, mode = sys.argv[1], sys.argv[2]
    path = os.path.join(root, "dialog", "2024-01-01.jsonl")
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    size = os.path.getsize(path)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size + 100, size + 100))
    message = UserMessage("满了 " * 400)
    if mode == "raw":  # a writer without the archive's care: the kernel cuts its line short
        fd = os.open(path, os.O_WRONLY | os.O_APPEND)
        data = encode_line("default", "s1", 500, message, reason="x", ts=0.0)
        written = os.write(fd, data)
        print(json.dumps({"written": written, "of": len(data)}))
    else:
        archive = DialogArchive(root, clock=lambda: 1704100000.0)
        try:
            archive.append("s1", [(501, message)], "turn_trim")
            print(json.dumps({"error": None}))
        except ArchiveError as exc:
            print(json.dumps({"error": str(exc)}))
    """
)


def run_short_write(root: Path, mode: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run(
        [sys.executable, "-c", SHORT_WRITE_CHILD, str(root), mode],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout)


async def test_real_short_write_is_cut_back_or_quarantined(tmp_path):
    archive = DialogArchive(tmp_path, clock=lambda: 1704100000.0)  # 2024-01-01
    archive.append("s1", [(1, UserMessage("第一条")), (2, AssistantMessage("ok"))], "turn_trim")
    [path] = dialog_files(tmp_path)
    assert path.name == "2024-01-01.jsonl"
    intact = path.read_bytes()

    # Our own append under a full disk: a real short write, then EFBIG; the file is cut back.
    result = run_short_write(tmp_path, "archive")
    assert result["error"] and str(path) in result["error"] and "EFBIG" in result["error"]
    assert "Fix:" in result["error"]
    assert path.read_bytes() == intact

    # Another writer's short write leaves a torn tail (cut mid-character by the kernel) ...
    result = run_short_write(tmp_path, "raw")
    assert 0 < result["written"] < result["of"]
    torn = path.read_bytes()[len(intact) :]
    assert len(torn) == 100 and not torn.endswith(b"\n")
    problems: list = []
    assert [a.seq for a in DialogArchive(tmp_path).read("s1", report=problems)] == [1, 2]
    assert len(problems) == 1
    # ... which the next append moves to the quarantine before writing whole lines.
    ref = archive.append("s1", [(3, UserMessage("第三条"))], "turn_trim")
    assert path.read_bytes().startswith(intact) and path.read_bytes().endswith(b"\n")
    assert (
        ref.first_line == 3
        and (tmp_path / "dialog" / "2024-01-01.jsonl.corrupt").read_bytes() == torn + b"\n"
    )
    problems = []
    assert [a.seq for a in DialogArchive(tmp_path).read("s1", report=problems)] == [1, 2, 3]
    assert problems == []


async def test_same_session_id_in_two_namespaces_never_collides(tmp_path):
    """One store, one workspace root, session id ``s1`` in ``default`` and in ``bob``: each namespace's
    archive lives in its own directory and holds only its own lines; both verify with nothing lost."""
    store = SqliteSessionStore(tmp_path / "shared.sqlite")
    alice = await open_engine(tmp_path, store)
    bob = await open_engine(tmp_path, store, namespace="bob")
    await fill(alice, 10, tag="alice ")
    await fill(bob, 10, tag="bob ")
    for engine, name in ((alice, "alice"), (bob, "bob")):
        report = await engine.verify()
        assert report.lost == 0 and report.archived > 0 and report.corrupt == ()
        texts = [
            str(a.message.content) for a in engine.archive.read("s1") if isinstance(a.message, UserMessage)
        ]
        assert texts and all(t.startswith(name) for t in texts)
    assert bob.workspace_dir == tmp_path / "namespaces" / "bob"
    bob_lines = [json.loads(x) for p in dialog_files(bob.workspace_dir) for x in p.read_text().splitlines()]
    assert bob_lines and {x["namespace"] for x in bob_lines} == {"bob"}
    assert all(
        x["namespace"] == "default"
        for p in dialog_files(tmp_path)
        for x in map(json.loads, p.read_text().splitlines())
    )
    # Even sharing one directory (a caller passing the same workspace_dir), lines are keyed by namespace.
    shared = namespace_tree(tmp_path, "default")
    carol = await ContextEngine.open(
        "s1", store=store, settings=small_settings(namespace="carol"), files=shared, window=Window(3000, 200)
    )
    await fill(carol, 10, tag="carol ")
    assert (await carol.verify()).lost == 0 and (await alice.verify()).lost == 0
    assert {
        str(a.message.content)[:5] for a in carol.archive.read("s1") if isinstance(a.message, UserMessage)
    } == {"carol"}
    assert all(
        str(a.message.content).startswith("alice")
        for a in alice.archive.read("s1")
        if isinstance(a.message, UserMessage)
    )
    await store.close()


async def test_lone_surrogate_is_archived_never_raises(tmp_path):
    """A message value holding a lone surrogate (what an old database held before stores refused them)
    is archived with a \\u escape instead of failing every later compaction, and its line stays readable."""
    archive = DialogArchive(tmp_path)
    bad = UserMessage("old row \ud800 from before the check")
    archive.append("s1", [(1, bad), (2, AssistantMessage("好"))], "turn_trim")
    [path] = dialog_files(tmp_path)
    raw = path.read_bytes()
    assert b"\\ud800" in raw and raw.decode("utf-8")  # valid UTF-8 on disk, the escape kept exactly
    problems: list = []
    got = {a.seq: a.message for a in archive.read("s1", report=problems)}
    assert problems == [] and got[2] == AssistantMessage("好")
    assert got[1] == UserMessage("old row \ufffd from before the check")


async def test_old_database_row_with_a_lone_surrogate_does_not_brick_the_session(tmp_path):
    """An older contextmem stored lone surrogates (as JSON escapes). Such a session still opens, compacts
    and verifies: the row reads back with U+FFFD in place of the surrogate, and nothing is lost."""
    db = tmp_path / "s.sqlite"
    store = SqliteSessionStore(db)
    engine = await open_engine(tmp_path, store)
    await fill(engine, 1)
    await store.close()
    with sqlite3.connect(db) as conn:  # what the old version wrote, behind the new store's back
        pk, seq = conn.execute("SELECT id, next_seq FROM cm_sessions WHERE session_id = 's1'").fetchone()
        conn.execute(
            "INSERT INTO cm_messages (session, seq, original, created_at) VALUES (?, ?, ?, 0)",
            (pk, seq, json.dumps({"role": "user", "content": "old row \ud800 here"})),
        )
        conn.execute(
            "INSERT INTO cm_messages (session, seq, original, created_at) VALUES (?, ?, ?, 0)",
            (pk, seq + 1, json.dumps({"role": "assistant", "content": "ok"})),
        )
        conn.execute("UPDATE cm_sessions SET next_seq = ? WHERE id = ?", (seq + 2, pk))
    store = SqliteSessionStore(db)
    engine = await open_engine(tmp_path, store)
    assert UserMessage("old row \ufffd here") in engine.history.messages
    await fill(engine, 12, start=1)  # compactions archive the old row without failing
    report = await engine.verify()
    assert report.lost == 0 and report.archived >= 2 and report.corrupt == ()
    assert await store.integrity_check() == []
    await store.close()


async def test_lone_surrogate_is_refused_at_the_door_and_nothing_is_stored(tmp_path):
    store = SqliteSessionStore(tmp_path / "s.sqlite")
    engine = await open_engine(tmp_path, store)
    await fill(engine, 3)
    appended = (await engine.verify()).appended
    with pytest.raises(MessageFormatError, match=r"messages\[1\]\.content"):
        await engine.add(UserMessage("fine"), AssistantMessage("bad \udfff"))
    assert (await engine.verify()).appended == appended
    await fill(engine, 1, start=3)  # the engine goes on
    assert (await engine.verify()).appended == appended + 2
    await store.close()


async def test_unusable_dialog_dir_raises_archive_error_and_recovers(tmp_path):
    store = SqliteSessionStore(tmp_path / "s.sqlite")
    engine = await open_engine(tmp_path, store, window=4000)
    events: list[EngineEvent] = []
    engine.subscribe(events.append)
    for i in range(4):
        call = ToolCall(f"c{i}", "read_file", "{}")
        await engine.add(UserMessage(f"q{i}"), AssistantMessage(None, tool_calls=(call,)))
        await engine.add(ToolMessage(f"c{i}", "行 " * 400), AssistantMessage(f"a{i}"))
    (tmp_path / "dialog").write_text("not a directory")  # mkdir and open now fail (ENOTDIR / EEXIST)
    await engine.add(UserMessage("huge: " + "数据 " * 8000))  # needs the emergency cut, which must archive
    with pytest.raises(ArchiveError) as caught:
        await engine.build("system")
    text = str(caught.value)
    assert text.startswith("cannot append") and str(tmp_path / "dialog") in text and "Fix:" in text
    assert "context window" in text and text.index("context window") < text.rindex("Fix:")  # cause, cost, Fix
    failed = [e for e in events if e.kind in ("archive_failed", "offload_failed")]
    assert failed and all(
        str(tmp_path / "dialog") in e.data["error"] or "tool_results" in e.data["error"] for e in failed
    )
    report = await engine.verify()
    assert report.archived == 0 and report.lost == 0 and report.live == report.appended
    (tmp_path / "dialog").unlink()  # the operator fixes the workspace: the same session works again
    request = await engine.build("system")
    assert request.estimate.prompt + request.max_tokens <= 4000
    report = await engine.verify()
    assert report.archived > 0 and report.lost == 0
    await store.close()
