"""Does the packaged local model save what it is asked to remember?

Each request below asks the agent to remember one fact, in English or in Chinese. The requests and their
facts were invented for this evaluation (no dataset). Each runs as one turn of the real agent loop
(:class:`contextmem.agent.Agent`, the ``model = "local"`` default, its memory tools offered through the
GGUF's chat template), a new session per request, in one fresh workspace. A turn is counted as:

* **saved**: a ``memory_write`` call of the turn succeeded and its note holds the fact (its key words, in
  the request's own form, case aside), and the workspace's memory files hold it after the turn;
* **wrote something else**: a ``memory_write`` call succeeded, but its note does not hold the fact;
* **claimed, not saved**: no ``memory_write`` call, and the reply says it saved: the agent marked it with
  its "(not saved …)" note (:mod:`contextmem.agent.claims`);
* **answered, not saved**: no call and no claim.

Memory search uses the ``hash`` embedder (no vector model to load): what is measured is the call, not
the search. The model is slow on 2 cores (~20 s a call, two calls for a turn that saves); run it niced.

Run: python -m evals.save_requests [--out evals/results/save_requests.md] [--threads 2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.report import write

# (language, request, the fact's key words: each must be in the note, case aside). Invented.
REQUESTS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("en", "Please remember that our staging database listens on port 6543.", ("6543",)),
    ("en", "Save this to your memory: the quarterly review is on 14 March.", ("14 March",)),
    ("en", "Remember that my daughter's name is Ottilie.", ("Ottilie",)),
    ("en", "Note for later: the deploy freeze starts on Friday at 18:00.", ("18:00",)),
    ("en", "Keep in mind that I am allergic to hazelnuts.", ("hazelnut",)),
    ("en", "Please remember: the Lisbon office's meeting room is called HarbourLight.", ("HarbourLight",)),
    ("zh", "请记住，我的车牌号是沪A73915。", ("73915",)),
    ("zh", "帮我记一下：下周三下午三点和财务部开会。", ("财务",)),
    ("zh", "请保存到记忆里：我们的测试集群叫做青松。", ("青松",)),
    ("zh", "记住，我对花生过敏。", ("花生",)),
    ("zh", "请记下来：新项目的代号是赤鹰。", ("赤鹰",)),
    ("zh", "帮我记住，我妈妈的生日是十月二十日。", ("十月二十",)),
)

OUTCOMES = ("saved", "wrote something else", "claimed, not saved", "answered, not saved")


@dataclass(frozen=True, slots=True)
class Outcome:
    lang: str
    request: str
    outcome: str
    notes: tuple[str, ...]  # what each memory_write call was given
    reply: str
    seconds: float


def note(arguments: str | None) -> str:
    """The ``text`` a ``memory_write`` call was given (its arguments as the model wrote them)."""
    try:
        parsed = json.loads(arguments or "{}")
    except ValueError:
        return arguments or ""
    return str(parsed.get("text", "")) if isinstance(parsed, dict) else str(parsed)


def holds(text: str, keys: tuple[str, ...]) -> bool:
    low = text.casefold()
    return all(key.casefold() in low for key in keys)


def memory_text(core: Path, daily: Path) -> str:
    """What the memory files hold: ``MEMORY.md`` and the daily files."""
    files = [core, *sorted(daily.glob("*.md"))]
    return "\n".join(p.read_text("utf-8", errors="replace") for p in files if p.is_file())


async def run(threads: int) -> list[Outcome]:
    from contextmem.agent.claims import SAVE_TOOL
    from contextmem.agent.loop import Agent
    from contextmem.lang import languages
    from contextmem.messages import text_of
    from contextmem.runtime import ContextMem
    from contextmem.settings import Settings

    outcomes = []
    with tempfile.TemporaryDirectory(prefix="save-requests-") as tmp:
        workspace = Path(tmp)
        settings = Settings(model="local", workspace=workspace, local_threads=threads)
        runtime = await ContextMem.open(settings, embedder="hash")
        ws = runtime.workspace
        try:
            for n, (lang, request, keys) in enumerate(REQUESTS):
                began = time.perf_counter()
                agent = await Agent.open(runtime, f"save-{n}", restore=False)
                result = await agent.ask(request)
                took = time.perf_counter() - began
                writes = [
                    (note(call.arguments), text_of(output.content))
                    for step in result.task.steps
                    for call, output in zip(step.calls, step.results, strict=False)
                    if call.name == SAVE_TOOL
                ]
                ok = [text for text, output in writes if not output.startswith("error:")]
                if any(holds(note, keys) for note in ok) and holds(
                    memory_text(ws.core_file, ws.daily_dir), keys
                ):
                    outcome = OUTCOMES[0]
                elif ok:
                    outcome = OUTCOMES[1]
                elif any(lang.not_saved_note and lang.not_saved_note in result.reply for lang in languages()):
                    outcome = OUTCOMES[2]
                else:
                    outcome = OUTCOMES[3]
                outcomes.append(
                    Outcome(lang, request, outcome, tuple(t for t, _ in writes), result.reply, took)
                )
                print(f"{n + 1}/{len(REQUESTS)} {lang} {outcome} ({took:.0f} s)", flush=True)
        finally:
            await runtime.close()
    return outcomes


def cell(text: str, limit: int = 90) -> str:
    one = " ".join(text.split()).replace("|", "\\|")
    return one if len(one) <= limit else one[: limit - 1] + "…"


def report(outcomes: list[Outcome], threads: int) -> str:
    langs = ("en", "zh")
    count = {
        (lang, o): sum(1 for x in outcomes if x.lang == lang and x.outcome == o)
        for lang in langs
        for o in OUTCOMES
    }
    total = {lang: sum(1 for x in outcomes if x.lang == lang) for lang in langs}
    lines = [
        f"{len(outcomes)} save requests invented for this evaluation ({total['en']} English, {total['zh']} "
        "Chinese), each one turn of the agent loop with the packaged default local model "
        f"(Qwen2.5-Coder-1.5B, `local_threads` {threads}), a new session each; memory search on the "
        "`hash` embedder. **saved**: a `memory_write` call succeeded, its note holds the fact and the "
        "memory files hold it after the turn; **claimed, not saved**: no call, and the reply said it saved "
        '(the agent appended its "(not saved …)" note).',
        "",
        "| outcome | English | Chinese | all |",
        "|---|--:|--:|--:|",
    ]
    for o in OUTCOMES:
        en, zh = count[("en", o)], count[("zh", o)]
        lines.append(f"| {o} | {en} / {total['en']} | {zh} / {total['zh']} | {en + zh} / {len(outcomes)} |")
    mean = sum(x.seconds for x in outcomes) / max(len(outcomes), 1)
    lines += ["", f"Mean {mean:.0f} s a request (the turn, both model calls when it saves).", ""]
    lines += ["| # | request | outcome | `memory_write` note | reply | s |", "|--:|---|---|---|---|--:|"]
    for n, x in enumerate(outcomes, 1):
        notes = cell(" · ".join(x.notes)) if x.notes else "—"
        lines.append(
            f"| {n} | {cell(x.request, 60)} | {x.outcome} | {notes} | {cell(x.reply)} | {x.seconds:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("evals/results/save_requests.md"))
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    began = time.perf_counter()
    outcomes = asyncio.run(run(args.threads))
    write(
        "save_requests",
        "Save requests: does the local model call memory_write?",
        report(outcomes, args.threads),
        seconds=time.perf_counter() - began,
        out=args.out,
    )


if __name__ == "__main__":
    main()
