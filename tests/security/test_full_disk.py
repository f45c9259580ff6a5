"""A full disk is never swallowed, and no turn silently leaves the request (issue 31, attack 6).

The attack: ``dialog/`` on a 256 KB tmpfs that fills up. Before the fix, 15 turns emitted dozens of
``archive_failed`` events, no error reached the caller, ``compact()`` returned normally having compacted
nothing, and the last request carried 9 of 15 live user turns, the others left out without a summary.

The disk is really full: a child process enters its own user and mount namespaces (``unshare -rm``),
mounts a 256 KB tmpfs on the workspace's ``dialog/`` and fills it, so the kernel answers ENOSPC. Where
user namespaces are not allowed, the child sets ``RLIMIT_FSIZE`` just above a pre-filled archive file
instead, and the kernel answers EFBIG: the same failure at the same boundary (a write refused by the
kernel), never a patched call. Then space returns (the filler is deleted, the limit raised) and the same
session compacts for real with nothing lost.

On PostgreSQL (a store every host shares) the store's rows are the archive: a full ``dialog/`` (there
the file size limit, see :func:`run_child`) costs nothing, and the same checks hold.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import contextmem

SRC = Path(contextmem.__file__).resolve().parents[1]

CHILD = textwrap.dedent(
    """
    import asyncio, json, os, resource, signal, subprocess, sys, time
    from pathlib import Path
    from contextmem.budget import Window
    from contextmem.engine import ContextEngine
    from contextmem.errors import ArchiveError
    from contextmem.messages import AssistantMessage, UserMessage
    from contextmem.settings import Settings
    from contextmem.store.open import open_store

    root, url, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
    dialog = root / "dialog"
    dialog.mkdir(parents=True)
    DAY = 1_790_000_000.0  # the archive file is named after the clock's day
    filler = dialog / "filler"
    if mode == "tmpfs":
        mount = ["mount", "-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs", str(dialog)]
        subprocess.run(mount, check=True)
        free = os.statvfs(dialog)
        filler.write_bytes(b"x" * (free.f_bavail * free.f_frsize - 4096))  # 4 KB left
    else:  # RLIMIT_FSIZE: today's archive file is 4 KB from the limit (blank lines, which readers skip)
        day = time.strftime("%Y-%m-%d", time.localtime(DAY))
        filler = dialog / f"{day}.jsonl"
        filler.write_bytes(b"\\n" * (8 << 20))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, ((8 << 20) + 4096, resource.RLIM_INFINITY))

    def space_returns():
        if mode == "tmpfs":
            filler.unlink()
        else:
            resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))

    async def main():
        store = open_store(url)
        settings = Settings(workspace=str(root), agent_max_context_turns=8, summary_max_tokens=300)
        engine = await ContextEngine.open(
            "s1", store=store, settings=settings, workspace_dir=root, window=Window(4000, 200),
            clock=lambda: DAY,
        )
        failed = []
        engine.subscribe(lambda e: failed.append(e.kind) if e.kind == "archive_failed" else None)
        out = {"builds": []}
        for i in range(15):
            user = UserMessage(f"turn {i}: " + "检查日志 数据 " * 60)
            await engine.add(user, AssistantMessage(f"reply {i} " + "好的 " * 40))
            live = list(engine.history.messages)
            try:
                request = await engine.build("system")
            except ArchiveError as exc:
                shown = getattr(engine.stats(), "archive_error", None)  # /context
                out["builds"].append({"error": str(exc), "archive_error": shown})
                continue
            sent = [m for m in request.messages if m.kind != "system"]
            out["builds"].append({
                "all_live_sent": sent == engine.history.messages,
                "left_with_summary": len(engine.history) >= len(live) or engine.summary is not None,
                "users": sum(m.kind == "user" for m in sent),
            })
        try:
            out["compact"] = (await engine.compact()).compacted
        except ArchiveError as exc:
            out["compact_error"] = str(exc)
        out["archive_failed"] = len(failed)
        space_returns()
        request = await engine.build("system")
        report = await engine.verify()
        out["after"] = {
            "fits": request.estimate.prompt + request.max_tokens <= 4000,
            "archive_error": getattr(engine.stats(), "archive_error", None),
            "lost": report.lost, "archived": report.archived, "appended": report.appended,
        }
        await store.close()
        print(json.dumps(out))

    asyncio.run(main())
    """
)


def userns_mounts() -> bool:
    """Whether this machine lets a process mount a tmpfs in its own user and mount namespaces."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt 2>/dev/null || exit 1"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return probe.returncode == 0


def run_child(root: Path, url: str) -> tuple[str, dict]:
    # A user namespace cannot reach the test PostgreSQL's socket (its owner maps to nobody there), so on
    # PostgreSQL the child stays in the host's namespaces and the file size limit fills the disk.
    mode = "tmpfs" if url.startswith("sqlite") and userns_mounts() else "fsize"
    argv = [sys.executable, "-c", CHILD, str(root), url, mode]
    if mode == "tmpfs":
        argv = ["unshare", "-rm", *argv]
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return mode, json.loads(done.stdout.strip().splitlines()[-1])


def test_full_disk_surfaces_and_never_drops_turns(tmp_path, store_url):
    mode, out = run_child(tmp_path / "ws", store_url)
    builds = out["builds"]
    sent = [b for b in builds if "error" not in b]
    # Every request that was built carried every live message: no turn left it without a summary.
    assert sent and all(b["all_live_sent"] and b["left_with_summary"] for b in sent), builds
    if store_url.startswith("sqlite"):
        cause = "ENOSPC" if mode == "tmpfs" else "EFBIG"
        errors = [b for b in builds if "error" in b]
        # The caller is told, in one line naming the cause, with the Fix last ...
        assert errors and out["archive_failed"] > 0, builds
        for b in errors:
            assert cause in b["error"] and "\n" not in b["error"], b
            assert b["error"].rindex("Fix: free disk space") > b["error"].index("context window")
            assert b["archive_error"] and cause in b["archive_error"]  # ... and /context shows it
        # /compact says it could not, instead of returning as if it had compacted.
        assert "compact" not in out and cause in out["compact_error"] and "Fix:" in out["compact_error"]
    else:  # the store is the archive: nothing of dialog/ is needed
        assert len(sent) == len(builds) and out["archive_failed"] == 0, out
    after = out["after"]
    assert after["fits"] and after["archive_error"] is None
    assert after["lost"] == 0 and after["archived"] > 0 and after["appended"] == 30
