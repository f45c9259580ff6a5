"""The local model's two runtimes side by side: xllamacpp (prebuilt wheels) and llama-cpp-python (compiled).

One run measures, for each runtime, on the packaged default model (Qwen2.5-Coder-1.5B Q4_K_M):

* **install**: ``pip install --no-cache-dir`` of the runtime alone (the pin of the ``local`` or the
  ``local-llamacpp`` extra) into a new virtualenv, niced; llama-cpp-python with the Makefile's lean
  CMake flags. The model's packages are the same for both and are not part of it.
* **load**: the first call of a new process (weights loaded, one token generated), and the import.
* **prompt / generation tokens/s**: one streamed summary request (~800 prompt tokens, 128 reply tokens at
  temperature 0) after the load: prompt tokens over the time to the first token, reply tokens over the rest.
* **the demo's answers**: ``contextmem demo`` (the questions answered by the model from memory hits):
  how many answers hold the expected fact, and the answers themselves.
* **save requests**: ``evals/save_requests.py``'s twelve requests (does the model call ``memory_write``?),
  once a round.

Each fresh virtualenv sees this interpreter's site-packages after its own (a ``.pth`` file), so contextmem's
other dependencies and the model's packages come from there, and the runtime from the new one; the worker
processes check which runtime they ran. The machine is shared: rounds alternate the runtimes (A B A B),
installs run under ``nice -n 10``, and the load average is recorded before and after each step.

    python bench/bench_local_runtime.py [--rounds 2] [--no-save-requests] [--workdir /tmp/cm-runtimes]

Writes ``bench/results/local_runtime.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).parent))
import report  # noqa: E402

RUNTIMES = {"llama_cpp": "local-llamacpp", "xllamacpp": "local"}  # runtime -> the extra that pins it
PROMPT_CHARS = 3200  # ~800 tokens of the bench conversation
REPLY_TOKENS = 128


def pin(extra: str) -> str:
    """The runtime's requirement in ``extra`` (the one that is not ``contextmem[...]``)."""
    reqs = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"]
    return next(r for r in reqs[extra] if not r.startswith("contextmem["))


def makefile_cmake_args() -> str:
    """The Makefile's ``CMAKE_ARGS`` for llama-cpp-python, ``$(CURDIR)`` filled in."""
    text = (ROOT / "Makefile").read_text("utf-8")
    match = re.search(r"^CMAKE_ARGS \?= (.+)$", text, re.MULTILINE)
    assert match, "Makefile has no CMAKE_ARGS line"
    return match[1].replace("$(CURDIR)", str(ROOT))


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def install(runtime: str, venv: Path) -> dict[str, Any]:
    """A new virtualenv with the runtime alone, timed; empty pip cache (``--no-cache-dir``)."""
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "PIP_NO_CACHE_DIR": "1"}
    if runtime == "llama_cpp":
        env["CMAKE_ARGS"] = makefile_cmake_args()
        env["CMAKE_BUILD_PARALLEL_LEVEL"] = str(os.cpu_count() or 2)
    requirement = pin(RUNTIMES[runtime])
    before = load()
    began = time.perf_counter()
    done = subprocess.run(
        ["nice", "-n", "10", str(venv / "bin" / "pip"), "install", "--no-cache-dir", "-q", requirement],
        env=env,
        capture_output=True,
        check=False,
        text=True,
    )
    took = time.perf_counter() - began
    if done.returncode:
        raise SystemExit(f"installing {requirement} failed: {done.stderr[-2000:]}")
    site = next((venv / "lib").glob("python3*/site-packages"))
    name = re.split(r"[\[=]", requirement)[0].replace("-", "_")
    assert list(site.glob(f"{name}-*.dist-info")), f"{requirement} is not in {site}"
    # Only now (pip would have found it there and installed nothing): this interpreter's packages, after
    # the venv's own, for contextmem's other dependencies and the model's packages.
    purelib = Path(sysconfig.get_paths()["purelib"])
    (site / "zz_contextmem_bench.pth").write_text(f"{purelib}\n")
    # This interpreter may have the other runtime too (make setup installs both): in this venv it is
    # shadowed by a module that does not import, so contextmem, which takes the first runtime that does,
    # runs this one in the worker and in the demo alike.
    for other in (r for r in RUNTIMES if r != runtime):
        (site / other).mkdir()
        (site / other / "__init__.py").write_text(f'raise ImportError("{other} is hidden in this venv")\n')
    return {"requirement": requirement, "seconds": took, "load_before": before, "load_after": load()}


def worker_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}


def run_worker(venv: Path, what: str, timeout: float) -> dict[str, Any]:
    """Run this file's ``--worker WHAT`` in ``venv``; its last stdout line is its JSON result."""
    before = load()
    began = time.perf_counter()
    done = subprocess.run(
        [str(venv / "bin" / "python"), str(Path(__file__).resolve()), "--worker", what],
        env=worker_env(),
        capture_output=True,
        check=False,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )
    if done.returncode:
        raise SystemExit(f"worker {what} in {venv} failed: {done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result.update(wall=time.perf_counter() - began, load_before=before, load_after=load())
    return result


def run_demo(venv: Path) -> dict[str, Any]:
    """``contextmem demo`` in ``venv``: wall time, the load line, and each answer with its mark."""
    before = load()
    began = time.perf_counter()
    code = "import sys; from contextmem.cli.main import main; sys.exit(main(['demo']))"
    done = subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        env=worker_env(),
        capture_output=True,
        check=False,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    took = time.perf_counter() - began
    answers = re.findall(r"^A: (.*?)  \[(.) expected '([^']*)'", done.stdout, re.MULTILINE)
    loaded = re.search(r"loaded (\S+) in (\d+)s", done.stdout)
    return {
        "exit": done.returncode,
        "wall": took,
        "loaded_s": int(loaded[2]) if loaded else None,
        "answers": [{"answer": a, "mark": m, "expect": e} for a, m, e in answers],
        "right": sum(1 for _, m, _ in answers if m == "✓"),
        "load_before": before,
        "load_after": load(),
        "stderr": done.stderr[-500:] if done.returncode else "",
    }


# --- the workers: run inside a fresh virtualenv ----------------------------------------------------


def _prompt() -> list[Any]:
    from bench_local_llm import EN_CONVERSATION

    from contextmem.messages import SystemMessage, UserMessage, text_of

    text = "\n".join(text_of(m.content) for m in EN_CONVERSATION if text_of(m.content))[:PROMPT_CHARS]
    return [
        SystemMessage("You summarise an agent's work session for the engineer who takes over."),
        UserMessage(f"The session:\n\n{text}\n\nSummarise it in bullet points: goal, findings, next steps."),
    ]


async def _speed() -> dict[str, Any]:
    began = time.perf_counter()
    from contextmem.llm.local import LocalLLM
    from contextmem.messages import UserMessage

    llm = LocalLLM("local")
    imported = time.perf_counter() - began
    began = time.perf_counter()
    await llm.complete([UserMessage("Say ok.")], max_tokens=1)
    loaded = time.perf_counter() - began
    began = time.perf_counter()
    first = end = None
    response = None
    async for event in llm.stream(_prompt(), max_tokens=REPLY_TOKENS, temperature=0.0):
        now = time.perf_counter()
        if event.kind == "text" and first is None:
            first = now
        if event.kind == "done":
            end, response = now, event.response
    assert first is not None and end is not None and response is not None
    usage = response.usage
    fresh_prompt = usage.prompt_tokens - usage.cached_tokens
    return {
        "runtime": llm.runtime,
        "import_s": imported,
        "load_s": loaded,
        "prompt_tokens": usage.prompt_tokens,
        "cached_tokens": usage.cached_tokens,
        "reply_tokens": usage.completion_tokens,
        "prompt_tps": fresh_prompt / (first - began),
        "gen_tps": max(usage.completion_tokens - 1, 1) / max(end - first, 1e-9),
        "reply": " ".join((response.message.content or "").split())[:300],
    }


async def _save_requests() -> dict[str, Any]:
    from contextmem.llm.local import LocalLLM
    from evals.save_requests import run

    runtime = LocalLLM("local").runtime
    outcomes = await run(2)
    return {
        "runtime": runtime,
        "outcomes": [
            {"lang": o.lang, "request": o.request, "outcome": o.outcome, "notes": o.notes, "s": o.seconds}
            for o in outcomes
        ],
    }


def worker(what: str) -> None:
    import asyncio

    result = asyncio.run(_speed() if what == "speed" else _save_requests())
    print(json.dumps(result, ensure_ascii=False), flush=True)


# --- the report ---------------------------------------------------------------------------------------


def median(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[len(xs) // 2] if len(xs) % 2 else (xs[len(xs) // 2 - 1] + xs[len(xs) // 2]) / 2


def body(
    installs: dict[str, Any], rounds: list[dict[str, Any]], saves: dict[str, list[dict[str, Any]]]
) -> str:
    names = list(RUNTIMES)
    lines = [
        "Packaged default model (Qwen2.5-Coder-1.5B-Instruct Q4_K_M), 2 threads, on a machine shared with "
        "other jobs: rounds alternate the runtimes, the load average is given per step. Install: the "
        "runtime alone, `pip install --no-cache-dir` into a new virtualenv, `nice -n 10` "
        "(llama-cpp-python with the Makefile's lean CMake flags). Load: a new process's first call "
        "(one token). Speed: one streamed ~800-token prompt, 128 reply tokens, temperature 0. The demo "
        "answers at temperature 0; the save requests sample as contextmem's agent does (temperature 0.2, "
        "no fixed seed), so two runs on one runtime differ too: they run once a round.",
        "",
        "| | " + " | ".join(f"`{n}`" for n in names) + " |",
        "|---|" + "--:|" * len(names),
        "| install (s) | " + " | ".join(f"{installs[n]['seconds']:.1f}" for n in names) + " |",
        "| install requirement | " + " | ".join(f"`{installs[n]['requirement']}`" for n in names) + " |",
    ]

    def row(label: str, key: str, fmt: str, source: str = "speed") -> None:
        cells = []
        for n in names:
            xs = [r[n][source][key] for r in rounds if r[n][source].get(key) is not None]
            cells.append(
                ("median " + fmt.format(median(xs)) + " (" + ", ".join(fmt.format(x) for x in xs) + ")")
                if xs
                else "—"
            )
        lines.append(f"| {label} | " + " | ".join(cells) + " |")

    row("import (s)", "import_s", "{:.2f}")
    row("load: first call (s)", "load_s", "{:.1f}")
    row("prompt tokens/s", "prompt_tps", "{:.1f}")
    row("generation tokens/s", "gen_tps", "{:.1f}")
    row("demo wall (s)", "wall", "{:.0f}", "demo")
    lines.append(
        "| demo answers right | "
        + " | ".join(
            ", ".join(f"{r[n]['demo']['right']}/{len(r[n]['demo']['answers'])}" for r in rounds)
            for n in names
        )
        + " |"
    )
    runs = len(saves[names[0]]) if saves else 0
    if runs:
        for outcome in ("saved", "wrote something else", "claimed, not saved", "answered, not saved"):
            cells = []
            for n in names:
                per_run = []
                for run in saves[n]:
                    got = [o for o in run["outcomes"] if o["outcome"] == outcome]
                    en = sum(1 for o in got if o["lang"] == "en")
                    per_run.append(f"{len(got)}/12 ({en} en, {len(got) - en} zh)")
                cells.append(", ".join(per_run))
            lines.append(f"| save requests: {outcome} | " + " | ".join(cells) + " |")
        means = [", ".join(f"{sum(o['s'] for o in r['outcomes']) / 12:.0f}" for r in saves[n]) for n in names]
        lines.append("| save requests: mean s a request | " + " | ".join(means) + " |")
    lines += ["", "## Steps in the order they ran, with the load average (1, 5, 15 min) before → after", ""]
    for n in names:
        i = installs[n]
        lines.append(f"- install `{n}`: {i['seconds']:.1f} s, load {i['load_before']} → {i['load_after']}")
    for k, r in enumerate(rounds, 1):
        for n in r["order"]:
            s, d = r[n]["speed"], r[n]["demo"]
            lines.append(
                f"- round {k} `{n}`: speed worker {s['wall']:.0f} s ({s['prompt_tokens']} prompt tokens, "
                f"{s['cached_tokens']} cached, {s['reply_tokens']} reply), load {s['load_before']} → "
                f"{s['load_after']}; demo {d['wall']:.0f} s (exit {d['exit']}, model loaded in "
                f"{d['loaded_s']} s), load {d['load_before']} → {d['load_after']}"
            )
    for k in range(runs):
        for n in names if k % 2 == 0 else list(reversed(names)):
            s = saves[n][k]
            lines.append(
                f"- save requests round {k + 1} `{n}`: {s['wall']:.0f} s, load {s['load_before']} → "
                f"{s['load_after']}"
            )
    lines += ["", "## The demo's answers (last round)", ""]
    last = rounds[-1]
    for q, _ in enumerate(last[names[0]]["demo"]["answers"]):
        for n in names:
            a = last[n]["demo"]["answers"][q]
            lines.append(f"- Q{q + 1} `{n}` [{a['mark']} {a['expect']!r}]: {a['answer'][:200]}")
    lines += ["", "## The speed prompt's reply (last round)", ""]
    lines += [f"- `{n}`: {last[n]['speed']['reply']}" for n in names]
    if runs:
        lines += [
            "",
            "## Save requests, one by one (each round; the `memory_write` note when it was not saved)",
            "",
            "| # | request | " + " | ".join(names) + " |",
            "|--:|---|" + "---|" * len(names),
        ]

        def shown(o: dict[str, Any]) -> str:
            note = f" ({' · '.join(o['notes'])})" if o["notes"] and o["outcome"] != "saved" else ""
            return str(o["outcome"]) + note

        for q, o in enumerate(saves[names[0]][0]["outcomes"]):
            cells = [" / ".join(shown(r["outcomes"][q]) for r in saves[n]) for n in names]
            lines.append(f"| {q + 1} | {o['request']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker", choices=("speed", "save"), help=argparse.SUPPRESS)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/cm-runtimes"))
    ap.add_argument("--no-save-requests", action="store_true")
    args = ap.parse_args()
    if args.worker:
        worker(args.worker)
        return
    began = time.perf_counter()
    venvs = {n: args.workdir / f"venv-{n}" for n in RUNTIMES}
    installs = {n: install(n, venvs[n]) for n in RUNTIMES}
    print(json.dumps(installs), flush=True)
    rounds = []
    for k in range(args.rounds):
        order = list(RUNTIMES) if k % 2 == 0 else list(reversed(RUNTIMES))
        this: dict[str, Any] = {"order": order}
        for n in order:
            speed = run_worker(venvs[n], "speed", 900)
            assert speed["runtime"] == n, f"the {n} venv ran {speed['runtime']}"
            this[n] = {"speed": speed, "demo": run_demo(venvs[n])}
            print(n, json.dumps(this[n], ensure_ascii=False)[:600], flush=True)
        rounds.append(this)
    saves: dict[str, list[dict[str, Any]]] = {n: [] for n in RUNTIMES}
    for k in range(0 if args.no_save_requests else args.rounds):
        for n in list(RUNTIMES) if k % 2 == 0 else list(reversed(RUNTIMES)):
            saved = run_worker(venvs[n], "save", 3600)
            assert saved["runtime"] == n
            saves[n].append(saved)
            print(n, json.dumps(saved, ensure_ascii=False), flush=True)
    report.write(
        "local_runtime",
        "The local model's runtimes: xllamacpp against llama-cpp-python",
        body(installs, rounds, saves),
        seconds=time.perf_counter() - began,
    )


if __name__ == "__main__":
    main()
