"""Deterministic long agent transcripts for the prompt-cache bench and the current-turn eval.

A transcript is what a coding agent's session looks like from the model's side: a system prompt, user
turns in English and Chinese, assistant messages that call tools (``read_file``, ``grep``, ``run_tests``,
``web_fetch``, ``query_db``), tool outputs from a few bytes to 200 KB (logs, JSON, code, Chinese prose,
test output) and assistant replies. It is written in the OpenAI JSONL format ``contextmem replay`` reads,
with two sidecars:

* ``OUT.facts.json``: about 20 distinctive facts planted in user messages and tool outputs of the first
  30 turns — ``{"id", "needle", "text", "turn", "where"}``; ``needle`` occurs verbatim in the transcript
  exactly where it was planted and nowhere else, so "is the fact still reachable" is a substring search;
* ``OUT.tools.json``: the OpenAI tool definitions the agent had (``contextmem replay --tools``).

Everything is a function of ``(turns, seed)``: the same arguments give byte-identical files. Use two or
more seeds as dev / held-out variety.

    python -m evals.datasets.agent_transcript OUT.jsonl --turns 300 --seed 1
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

__all__ = ["TOOLS", "Fact", "Transcript", "generate", "write"]

SYSTEM_PROMPT = (
    "You are a careful coding agent working in the repository of a payments platform. Use the tools to "
    "read files, search, run tests and fetch pages; quote file paths exactly; answer in the user's "
    "language (English or 中文)."
)


def tool_definition(name: str, description: str, **params: str) -> dict[str, Any]:
    props = {k: {"type": "string", "description": v} for k, v in params.items()}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": props, "required": list(params)},
        },
    }


TOOLS: list[dict[str, Any]] = [
    tool_definition(
        "read_file", "Read a file of the repository.", path="path relative to the repository root"
    ),
    tool_definition(
        "grep", "Search the repository with a regular expression.", pattern="regex", path="folder"
    ),
    tool_definition(
        "run_tests", "Run the test suite, or one test file, and return its output.", target="tests"
    ),
    tool_definition("web_fetch", "Fetch a web page and return its text.", url="an https URL"),
    tool_definition("query_db", "Run a read-only SQL query on the staging database.", sql="one SELECT"),
]


@dataclass(frozen=True, slots=True)
class Fact:
    """One planted fact: ``needle`` is the verbatim substring that proves it is still there."""

    id: str
    needle: str
    text: str
    turn: int
    where: str  # "user" or "tool"


@dataclass(frozen=True, slots=True)
class Transcript:
    messages: list[dict[str, Any]]  # OpenAI chat dicts, the system message first
    facts: list[Fact]
    tools: list[dict[str, Any]]


# --- vocabulary ----------------------------------------------------------------------------------

MODULES = ["billing", "ledger", "auth", "orders", "refunds", "webhooks", "payouts", "risk", "search"]
EN_ASKS = [
    "Can you look at why {mod} is slow under load and propose a fix?",
    "Please add retries with jitter to the {mod} client and keep the tests green.",
    "The nightly job for {mod} failed again; find the root cause in the logs.",
    "Refactor {mod}/service.py so the database session is injected, not global.",
    "Write a migration that adds an index on {mod}.created_at and check the query plan.",
    "Summarise what changed in {mod} since last release and what could break.",
    "Run the {mod} tests and tell me which ones are flaky.",
    "Check the upstream docs for the {mod} SDK and see if our usage is deprecated.",
]
ZH_ASKS = [
    "帮我看看 {mod} 服务为什么在高峰期超时，给出修复方案。",
    "把 {mod} 模块的日志级别调整一下，错误要带上请求 ID。",
    "昨晚 {mod} 的定时任务又失败了，查一下日志找出原因。",
    "请给 {mod} 写单元测试，覆盖退款和部分退款的情况。",
    "把 {mod} 的配置项整理成表格，标出哪些可以热更新。",
    "检查一下 {mod} 的数据库查询，有没有缺索引的地方。",
]
EN_REPLIES = [
    "I traced the issue in {mod}: the connection pool is exhausted when retries pile up. I capped "
    "retries at 3 with exponential backoff and added a circuit breaker; the tests pass.",
    "Done. {mod}/service.py now takes the session as a parameter; I updated 14 call sites and the "
    "fixtures. Nothing else changed.",
    "The failure comes from a timezone bug in the {mod} scheduler: it compares naive and aware "
    "datetimes. I normalised everything to UTC and added a regression test.",
    "Here is the summary for {mod}: two API changes, one renamed setting, and a stricter validator on "
    "amounts. The validator is the one most likely to break clients.",
]
ZH_REPLIES = [
    "已经查清楚了：{mod} 的连接池在重试堆积时被耗尽。我把重试次数限制为 3 次并加上指数退避，测试全部通过。",
    "{mod} 的定时任务失败是因为时区处理错误，我统一改成 UTC，并补了回归测试。",
    "我整理了 {mod} 的配置项，其中超时时间和日志级别支持热更新，数据库地址需要重启。",
]
ZH_PROSE = (
    "本节说明支付平台的对账流程。每天凌晨系统会拉取渠道账单，与内部流水逐笔核对，差异记录进入人工复核队列。"
    "复核人员需要在两个工作日内处理完毕，超时的差异会自动升级给值班负责人。"
)
LOG_LEVELS = ["INFO", "INFO", "INFO", "WARN", "ERROR", "DEBUG"]


# --- planted facts -------------------------------------------------------------------------------

# (id, needle, sentence): ``[a..b]`` in a needle is a random integer in a..b, ``[x|y]`` one of the choices;
# ``§`` in the sentence is where the needle goes.
FACT_TEMPLATES: list[tuple[str, str, str]] = [
    ("staging_cluster", "kestrel-[2..9]", "the staging cluster is called §"),
    ("deploy_window", "部署窗口是周[一|二|三|四|五] [9..17]:00", "注意：§，其他时间不要发布。"),
    ("ticket", "OPS-[1000..9999]", "this is tracked in ticket §"),
    ("db_port", "port [15400..15499]", "the ledger replica listens on §"),
    ("oncall", "oncall is [Priyanka|Tomasz|Amara]-[10..99]", "this week §"),
    ("feature_flag", "ff_split_refunds_v[2..9]", "the new refund path is behind the flag §"),
    ("bucket", "s3://pay-audit-[100..999]", "audit exports go to §"),
    ("zh_owner", "负责人是[王雪|李明|陈静][1..9]号", "对账模块的§，有问题找她。"),
    ("api_version", "api version 20[20..24]-0[1..9]-1[0..9]", "the payment provider pins §"),
    ("limit", "rate limit [120..980] rps", "the gateway enforces a §"),
    ("commit", "commit 4f[1000..9999]e", "the regression was introduced in §"),
    ("zh_budget", "预算上限 [2..9]万元", "本季度云资源§，超过需要审批。"),
    ("vpn", "vpn-gw-[fra|sin|iad][1..9]", "connect through § before touching prod"),
    ("cron", "cron 17 [1..5] * * *", "the reconciliation job runs at §"),
    ("secret_name", "vault path kv/payments/[stripe|adyen]-[1..9]", "credentials live at §"),
    ("customer", "customer ACME-[100..999]", "the incident affected §"),
    ("zh_sla", "SLA 是 [99.9|99.95|99.99]%", "对外承诺的§，按月计算。"),
    ("timeout", "timeout_ms=[1200..4800]", "the upstream client uses §"),
    ("region", "region eu-[north|south|west]-[1..3]x", "the new shard runs in §"),
    ("zh_codename", "代号「[青鸟|白鹭|飞燕]-[10..99]」", "新版结算系统的§，文档里都用这个名字。"),
]
_SLOT = re.compile(r"\[([^\]]+)\]")


def _fill(template: str, r: random.Random) -> str:
    def pick(m: re.Match[str]) -> str:
        body = m.group(1)
        if ".." in body:
            lo, hi = body.split("..")
            return str(r.randint(int(lo), int(hi)))
        return r.choice(body.split("|"))

    return _SLOT.sub(pick, template)


# --- tool outputs --------------------------------------------------------------------------------


def log_output(r: random.Random, size: int, mod: str) -> str:
    lines = []
    n = 0
    while n < size:
        line = (
            f"2024-06-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:"
            f"{r.randint(0, 59):02d}Z {r.choice(LOG_LEVELS)} {mod}.worker[{r.randint(1, 64)}] "
            f"request_id={r.getrandbits(40):010x} latency_ms={r.randint(1, 9000)} "
            + r.choice(["ok", "retrying", "timeout upstream", "pool exhausted", "连接超时", "ok cached"])
        )
        lines.append(line)
        n += len(line) + 1
    return "\n".join(lines)


def json_output(r: random.Random, size: int, mod: str) -> str:
    rows = []
    n = 0
    while n < size:
        row = {
            "id": r.getrandbits(32),
            "module": mod,
            "amount": round(r.uniform(1, 5000), 2),
            "currency": r.choice(["EUR", "USD", "CNY"]),
            "status": r.choice(["settled", "pending", "failed", "refunded"]),
            "note": r.choice(["", "manual review", "人工复核", "chargeback"]),
        }
        rows.append(row)
        n += 110
    return json.dumps({"rows": rows, "count": len(rows)}, ensure_ascii=False, indent=1)


def code_output(r: random.Random, size: int, mod: str) -> str:
    out = [f'"""{mod} service."""', "", "from __future__ import annotations", ""]
    n = 60
    k = 0
    while n < size:
        k += 1
        block = (
            f"def handle_{mod}_{k}(session, payload: dict) -> dict:\n"
            f"    # retries: {r.randint(1, 5)}, budget {r.randint(10, 900)} ms\n"
            f"    row = session.get({mod.title()}, payload['id'])\n"
            f"    if row is None:\n        raise LookupError(payload['id'])\n"
            f"    row.amount += payload.get('delta', {r.randint(0, 99)})\n"
            f"    return {{'id': row.id, 'ok': True}}\n"
        )
        out.append(block)
        n += len(block)
    return "\n".join(out)


def chinese_prose(r: random.Random, size: int, mod: str) -> str:
    out = [f"# {mod} 模块说明"]
    n = 0
    while n < size:
        para = (
            f"第{len(out)}节（{mod}）：" + ZH_PROSE[r.randint(0, 20) :] + f" 参考编号 {r.randint(1, 999)}。"
        )
        out.append(para)
        n += len(para.encode())
    return "\n\n".join(out)


def test_output(r: random.Random, size: int, mod: str) -> str:
    lines = [f"============ test session starts: tests/test_{mod}.py ============"]
    n = 0
    while n < size:
        name = f"tests/test_{mod}.py::test_case_{r.randint(1, 400)}"
        status = r.choice(["PASSED", "PASSED", "PASSED", "FAILED", "SKIPPED"])
        line = f"{name} {status}"
        if status == "FAILED":
            line += f"\nE   AssertionError: expected {r.randint(0, 99)} got {r.randint(0, 99)}"
        lines.append(line)
        n += len(line) + 1
    return "\n".join(lines)


BODIES: dict[str, list[Callable[[random.Random, int, str], str]]] = {
    "read_file": [code_output, chinese_prose, json_output],
    "grep": [code_output, log_output],
    "run_tests": [test_output],
    "web_fetch": [chinese_prose, json_output, log_output],
    "query_db": [json_output],
}
# (weight, min bytes, max bytes): mostly small, a few huge
SIZES = [(15, 20, 200), (30, 200, 3_000), (35, 3_000, 20_000), (13, 20_000, 80_000), (7, 80_000, 200_000)]


def _size(r: random.Random) -> int:
    _, lo, hi = r.choices(SIZES, weights=[w for w, _, _ in SIZES])[0]
    return r.randint(lo, hi)


def _args(r: random.Random, tool: str, mod: str) -> dict[str, str]:
    return {
        "read_file": {"path": f"src/{mod}/{r.choice(['service', 'models', 'client', 'README'])}.py"},
        "grep": {"pattern": r.choice(["TODO", "timeout", "retry", "session"]), "path": f"src/{mod}"},
        "run_tests": {"target": f"tests/test_{mod}.py"},
        "web_fetch": {"url": f"https://docs.example.com/{mod}/{r.randint(1, 99)}"},
        "query_db": {"sql": f"SELECT * FROM {mod} ORDER BY created_at DESC LIMIT {r.randint(5, 500)}"},
    }[tool]


# --- the transcript ------------------------------------------------------------------------------


def generate(turns: int = 300, seed: int = 1, *, plant_until: int = 30) -> Transcript:
    """A transcript of ``turns`` user turns, a pure function of its arguments (see the module docs).
    Facts are planted in turns 1..``plant_until`` (fewer facts when there are fewer turns)."""
    r = random.Random(seed)
    facts_rng = random.Random(seed * 7919 + 1)
    planted = {t: [] for t in range(1, turns + 1)}  # turn -> [(fact id, needle, sentence, where)]
    fact_turns = sorted(
        r.sample(range(1, min(plant_until, turns) + 1), k=min(len(FACT_TEMPLATES), plant_until, turns))
    )
    facts: list[Fact] = []
    for (fid, template, frame), turn in zip(FACT_TEMPLATES, fact_turns, strict=False):
        needle = _fill(template, facts_rng)
        sentence = frame.replace("§", needle)
        where = "user" if len(facts) % 2 == 0 else "tool"
        planted[turn].append((fid, needle, sentence, where))
        facts.append(Fact(fid, needle, sentence, turn, where))

    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM_PROMPT}]
    call_no = 0
    for turn in range(1, turns + 1):
        mod = r.choice(MODULES)
        zh = r.random() < 0.4
        ask = r.choice(ZH_ASKS if zh else EN_ASKS).format(mod=mod)
        user_facts = [s for _, _, s, w in planted[turn] if w == "user"]
        tool_facts = [s for _, _, s, w in planted[turn] if w == "tool"]
        if user_facts:
            ask += (" 顺便记一下：" if zh else " For the record: ") + "; ".join(user_facts) + "."
        messages.append({"role": "user", "content": f"{ask} (#{turn})"})
        rounds = r.choices([0, 1, 2, 3], weights=[60, 30, 7, 3])[0]
        if tool_facts and rounds == 0:
            rounds = 1
        for k in range(rounds):
            n_calls = 2 if r.random() < 0.15 else 1
            calls = []
            for _ in range(n_calls):
                call_no += 1
                tool = r.choice(list(BODIES))
                calls.append((f"call_{seed}_{call_no}", tool, _args(r, tool, mod)))
            thought = r.choice(["Let me check.", "先看一下相关代码。", None, "Looking at the logs first."])
            messages.append(
                {
                    "role": "assistant",
                    "content": thought,
                    "tool_calls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {"name": tool, "arguments": json.dumps(args, ensure_ascii=False)},
                        }
                        for cid, tool, args in calls
                    ],
                }
            )
            for j, (cid, tool, _) in enumerate(calls):
                body = r.choice(BODIES[tool])(r, _size(r), mod)
                if k == 0 and j == 0 and tool_facts:
                    lines = body.split("\n")
                    at = r.randint(0, len(lines))
                    lines[at:at] = [f"# NOTE: {s}" for s in tool_facts]
                    body = "\n".join(lines)
                messages.append({"role": "tool", "tool_call_id": cid, "content": body})
        reply = r.choice(ZH_REPLIES if zh else EN_REPLIES).format(mod=mod)
        messages.append({"role": "assistant", "content": f"{reply} (#{turn})"})
    return Transcript(messages, facts, TOOLS)


def sidecars(path: Path) -> tuple[Path, Path]:
    """Where :func:`write` puts the facts and the tool definitions for the transcript at ``path``."""
    stem = path.with_suffix("")
    return stem.with_name(stem.name + ".facts.json"), stem.with_name(stem.name + ".tools.json")


def write(path: str | Path, transcript: Transcript) -> None:
    """Write the transcript (JSONL) and its two sidecars (see the module docs)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = (json.dumps(m, ensure_ascii=False) for m in transcript.messages)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    facts_path, tools_path = sidecars(path)
    facts_path.write_text(
        json.dumps([asdict(f) for f in transcript.facts], ensure_ascii=False, indent=1), encoding="utf-8"
    )
    tools_path.write_text(json.dumps(transcript.tools, ensure_ascii=False, indent=1), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", help="the transcript to write (JSONL); sidecars go next to it")
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    t = generate(args.turns, args.seed)
    write(args.out, t)
    size = Path(args.out).stat().st_size
    print(f"{args.out}: {len(t.messages)} messages, {size / 1e6:.1f} MB, {len(t.facts)} facts")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
