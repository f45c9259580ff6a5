"""Summary latency and prompt / generation speed of the local model, on a bundled conversation.

Runs the structured summary contextmem asks for (Goal / Constraints / Progress / Key decisions / Next
steps / Critical context) over a ~2k-token English agent session and a Chinese one, through
:class:`contextmem.llm.local.LocalLLM` exactly as the library calls it (streamed, 2 threads), and prints:

* prompt tokens/s: prompt tokens over the time to the first streamed token;
* generation tokens/s: reply tokens over the rest of the time;
* wall time of the whole summary;
* facts kept: how many of the conversation's exact identifiers (paths, numbers, errors) the summary kept
  verbatim, and how many of the six section headings it has — a crude, reproducible quality signal.

    python bench/bench_local_llm.py                     # the packaged default ("local")
    python bench/bench_local_llm.py --model local:qwen2.5-coder-0.5b --model /path/to/model.gguf
    python bench/bench_local_llm.py --all --show        # every packaged model, printing the summaries

Writes ``bench/results/local_llm.md``; which model is the default, and why, is ``evals/results/local_llm.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import report

from contextmem.llm.local import PACKAGED_MODELS, LocalLLM
from contextmem.messages import Message, assistant, system, text_of, tool_call, tool_result, user

SECTIONS_EN = ("Goal", "Constraints", "Progress", "Key decisions", "Next steps", "Critical context")
SECTIONS_ZH = ("目标", "约束", "进展", "关键决策", "下一步", "关键上下文")


def _call(id: str, name: str, **args: object) -> Message:
    return assistant(tool_calls=[tool_call(id, name, args)])


EN_CONVERSATION: list[Message] = [
    user(
        "Our nightly ETL job `orders_etl` started failing three nights ago. It loads the day's orders "
        "from the Postgres replica into the warehouse. I need it fixed before Friday's finance close. "
        "Constraints: "
        "do not touch the production primary (db-prod-1), keep the job under 45 minutes, and stay on "
        "Python 3.11 because the Airflow workers are pinned to it."
    ),
    assistant("I'll start with the logs of the last failed run."),
    _call("call_1", "read_file", path="/var/log/airflow/orders_etl/2024-11-19.log"),
    tool_result(
        "call_1",
        "[2024-11-19 02:14:07] INFO  extract: 1,284,311 rows from orders_replica.public.orders\n"
        "[2024-11-19 02:31:52] INFO  transform: currency normalisation done\n"
        "[2024-11-19 02:32:10] ERROR load: psycopg.errors.NumericValueOutOfRange: numeric field overflow\n"
        "DETAIL:  A field with precision 10, scale 2 must round to an absolute value less than 10^8.\n"
        'CONTEXT:  COPY fact_orders, line 48213, column amount_eur: "123456789.50"\n'
        "[2024-11-19 02:32:10] ERROR task failed after 18m03s, retry 3/3",
        name="read_file",
    ),
    assistant(
        "The load step fails on a numeric overflow: fact_orders.amount_eur is NUMERIC(10,2), and one row "
        "has 123456789.50 EUR, which needs 11 digits. Either that order is bogus or the column is too "
        "small. Let me look at the source row."
    ),
    _call(
        "call_2",
        "sql_query",
        database="orders_replica",
        query="SELECT id, amount, currency, created_at FROM orders WHERE amount > 10000000 "
        "ORDER BY amount DESC",
    ),
    tool_result(
        "call_2",
        "id       | amount          | currency | created_at\n"
        "---------+-----------------+----------+---------------------\n"
        "9918273  | 16990000000.00  | IDR      | 2024-11-16 11:02:44\n"
        "9920011  | 14250000000.00  | IDR      | 2024-11-17 08:40:12\n"
        "(2 rows)",
        name="sql_query",
    ),
    assistant(
        "Both are Indonesian rupiah orders from a new B2B customer: 16,990,000,000 IDR is about 1,003,000 "
        "EUR, so the amount is real but the converted value should be ~1.0M EUR, not 123M. The "
        "conversion must be wrong too. Checking the rate table."
    ),
    _call("call_3", "read_file", path="etl/orders_etl/transform.py", lines="80-120"),
    tool_result(
        "call_3",
        "def to_eur(amount: Decimal, currency: str, rates: dict[str, Decimal]) -> Decimal:\n"
        "    rate = rates.get(currency)\n"
        "    if rate is None:\n"
        "        # fallback added in PR #412: treat unknown currencies as USD\n"
        "        rate = rates['USD']\n"
        "    return (amount / rate).quantize(Decimal('0.01'))\n",
        name="read_file",
    ),
    user("Why would IDR be unknown? We added it to the rates feed last month."),
    _call(
        "call_4",
        "sql_query",
        database="warehouse",
        query="SELECT currency, rate FROM fx_rates WHERE day = '2024-11-16'",
    ),
    tool_result(
        "call_4",
        "currency | rate\n---------+-----------\nUSD      | 1.0587\nGBP      | 0.8342\nJPY      | 163.12\n"
        "(3 rows)",
        name="sql_query",
    ),
    assistant(
        "The warehouse fx_rates table only has USD, GBP and JPY for 2024-11-16. The feed job `fx_sync` "
        "filters currencies by the list in config/fx_currencies.yaml, and IDR is not in it, so PR #412's "
        "fallback silently converts 16,990,000,000 IDR as if it were USD. Two bugs: the missing IDR rate "
        "and the silent USD fallback."
    ),
    user(
        "Agreed. Remove the fallback: unknown currencies must fail loudly. Add IDR and also VND and PHP, "
        "sales says they are coming next quarter. And widen amount_eur to NUMERIC(14,2) while we are at it."
    ),
    assistant(
        "Plan: (1) transform.py raises UnknownCurrencyError instead of falling back; (2) add IDR, VND, "
        "PHP to config/fx_currencies.yaml and backfill rates from 2024-11-01; (3) migration 0042 widens "
        "fact_orders.amount_eur to NUMERIC(14,2); (4) rerun orders_etl for 2024-11-16 to 2024-11-19."
    ),
    _call("call_5", "edit_file", path="etl/orders_etl/transform.py", summary="raise UnknownCurrencyError"),
    tool_result("call_5", "OK: 1 hunk replaced (lines 82-85)", name="edit_file"),
    _call("call_6", "run_tests", target="tests/etl/test_transform.py"),
    tool_result(
        "call_6",
        "collected 23 items\n"
        "tests/etl/test_transform.py::test_unknown_currency_falls_back_to_usd FAILED\n"
        "E   UnknownCurrencyError: no FX rate for 'XXX' on 2024-01-01\n"
        "22 passed, 1 failed in 4.81s",
        name="run_tests",
    ),
    assistant(
        "The one failure is the old test that asserted the fallback. I replaced it with "
        "test_unknown_currency_raises, which expects UnknownCurrencyError."
    ),
    _call("call_7", "run_tests", target="tests/etl/"),
    tool_result("call_7", "collected 61 items\n61 passed in 9.02s", name="run_tests"),
    _call("call_8", "write_file", path="migrations/0042_widen_amount_eur.sql"),
    tool_result("call_8", "OK: wrote 3 lines", name="write_file"),
    user(
        "Careful: fact_orders has 410 million rows. An ALTER COLUMN TYPE rewrites the table. How long will "
        "that lock it?"
    ),
    assistant(
        "On the staging copy the rewrite took 52 minutes with an ACCESS EXCLUSIVE lock, which would block "
        "the dashboards. Decision proposal: add a new column amount_eur_v2 NUMERIC(14,2), backfill it in "
        "batches of 500,000 rows, then swap the names in one short transaction. No long lock."
    ),
    user("Go with the new column and batched backfill. Run it on staging first (db-staging-2)."),
    _call(
        "call_9",
        "run_command",
        command="python scripts/backfill_amount_eur.py --db db-staging-2 --batch 500000",
    ),
    tool_result(
        "call_9",
        "batch 1/821 ... ok (3.1s)\n...\nbatch 821/821 ... ok (2.9s)\n"
        "backfilled 410,022,517 rows in 41m12s, 0 mismatches",
        name="run_command",
    ),
    assistant(
        "Staging backfill finished: 410,022,517 rows in 41m12s with 0 mismatches. The fx_sync change "
        "adding IDR, VND and PHP is in PR #431, waiting for review from Priya."
    ),
    user(
        "Great. Tomorrow: get PR #431 merged, run the backfill on the warehouse during the 01:00-04:00 "
        "window, then rerun orders_etl for the four failed days. Ping me on #data-oncall when done."
    ),
    assistant(
        "Noted. Tomorrow: merge PR #431 after Priya's review, run the warehouse backfill in the 01:00-04:00 "
        "window, rerun orders_etl for 2024-11-16..2024-11-19, and report on #data-oncall."
    ),
]

EN_FACTS = (
    "orders_etl",
    "db-prod-1",
    "45 minutes",
    "3.11",
    "NUMERIC(10,2)",
    "NUMERIC(14,2)",
    "123456789.50",
    "IDR",
    "PR #412",
    "PR #431",
    "UnknownCurrencyError",
    "config/fx_currencies.yaml",
    "amount_eur_v2",
    "500,000",
    "db-staging-2",
    "410,022,517",
    "Priya",
    "01:00-04:00",
    "#data-oncall",
    "transform.py",
)

ZH_CONVERSATION: list[Message] = [
    user(
        "我们的小程序下单接口 /api/v2/order/create 从周一开始偶尔超时，"
        "高峰期 P99 延迟从 300ms 涨到了 4.2 秒。"
        "周五晚上 8 点有秒杀活动，必须在那之前解决。限制：不能重启主库 mysql-main-01，不能改小程序前端"
        "（审核要 3 天），预算内只能加一台 Redis。"
    ),
    assistant("我先看一下应用日志里的慢请求。"),
    _call("call_1", "read_file", path="/data/logs/order-service/app-2024-06-03.log"),
    tool_result(
        "call_1",
        "2024-06-03 20:15:33 WARN  [order-create] 耗时 4213ms, sql=SELECT * FROM t_coupon WHERE user_id=? "
        "AND status=0\n"
        "2024-06-03 20:15:34 ERROR [order-create] HikariPool-1 - Connection is not available, request "
        "timed out after 3000ms\n"
        "2024-06-03 20:15:34 ERROR [order-create] 下单失败 orderNo=DD20240603201534889 code=E5003",
        name="read_file",
    ),
    assistant(
        "慢的是优惠券查询：t_coupon 按 user_id 和 status 查询，耗时 4 秒多，连接池 HikariPool-1 随后被占满，"
        "报 “Connection is not available”。我看一下这张表的索引。"
    ),
    _call("call_2", "sql_query", database="mysql-replica-02", query="SHOW INDEX FROM t_coupon"),
    tool_result(
        "call_2",
        "Table    | Key_name    | Column_name\n"
        "t_coupon | PRIMARY     | id\n"
        "t_coupon | idx_expire  | expire_time\n"
        "(2 rows)   -- 表行数约 3,800 万",
        name="sql_query",
    ),
    assistant(
        "t_coupon 有约 3,800 万行，但 user_id 上没有索引，每次都是全表扫描。上周的迁移脚本 "
        "V20240527__drop_unused_idx.sql 把 idx_user_status 当作“无用索引”删掉了。"
    ),
    user("原来是这样。直接把索引加回来吗？主库上加索引会不会锁表？"),
    assistant(
        "MySQL 8.0 的 ALTER TABLE ... ADD INDEX 支持 ALGORITHM=INPLACE, LOCK=NONE，不会阻塞读写。"
        "在从库 mysql-replica-02 上测试了一下，3,800 万行建索引用了 6 分 40 秒。建议用 gh-ost 在主库上做，"
        "这样不需要重启，也可以随时暂停。"
    ),
    user("好，用 gh-ost。另外连接池也顺便调一下吧，现在 maximumPoolSize 是多少？"),
    _call("call_3", "read_file", path="order-service/src/main/resources/application-prod.yml"),
    tool_result(
        "call_3",
        "spring:\n  datasource:\n    hikari:\n      maximum-pool-size: 20\n      connection-timeout: 3000\n"
        "      max-lifetime: 1800000",
        name="read_file",
    ),
    assistant(
        "现在 maximum-pool-size 是 20，connection-timeout 是 3000 毫秒。主库 max_connections=1000，"
        "一共 12 个 Pod，所以可以提高到 40（12 × 40 = 480，留足余量）。"
    ),
    user("可以，改成 40。另外秒杀那天的优惠券查询能不能加缓存？"),
    assistant(
        "可以用新加的那台 Redis（redis-seckill-01）缓存用户的可用优惠券，key 为 coupon:avail:{user_id}，"
        "TTL 60 秒；领券和用券时主动删除 key，避免脏数据。"
    ),
    _call(
        "call_4",
        "run_command",
        command="gh-ost --host=mysql-main-01 --table=t_coupon --alter='ADD INDEX "
        "idx_user_status (user_id, status)' --execute",
    ),
    tool_result(
        "call_4",
        "Copy: 38012455/38012455 100.0%; Applied: 10233; Backlog: 0/1000; Time: 7m12s\n"
        "Done migrating t_coupon",
        name="run_command",
    ),
    _call(
        "call_5", "run_command", command="wrk -t4 -c200 -d60s https://staging.example.cn/api/v2/order/create"
    ),
    tool_result(
        "call_5",
        "Latency P50 41ms  P99 280ms\nRequests/sec: 1873.22\nNon-2xx responses: 0",
        name="run_command",
    ),
    assistant(
        "索引已经通过 gh-ost 加到主库上了（7 分 12 秒，没有锁表）。预发环境压测 P99 从 4.2 秒降到 280 毫秒，"
        "QPS 1873，没有错误。连接池改成 40 的配置在 MR !2291 里，等待张伟审核。Redis 缓存还没开始写。"
    ),
    user(
        "很好。明天的安排：合并 MR !2291，写完优惠券缓存并压测到 3000 QPS，周四下午 3 点前发上线单。"
        "另外把 V20240527__drop_unused_idx.sql 的事故复盘写一下，发到 #backend-oncall 群。"
    ),
    assistant(
        "记下了。明天：合并 MR !2291（张伟审核后），完成 redis-seckill-01 上的优惠券缓存并压测到 3000 QPS，"
        "周四下午 3 点前提交上线单，并在 #backend-oncall 发布 V20240527__drop_unused_idx.sql 的复盘。"
    ),
]

ZH_FACTS = (
    "/api/v2/order/create",
    "4.2",
    "mysql-main-01",
    "t_coupon",
    "idx_user_status",
    "V20240527__drop_unused_idx.sql",
    "gh-ost",
    "HikariPool-1",
    "20",
    "40",
    "redis-seckill-01",
    "coupon:avail:",
    "60",
    "280",
    "MR !2291",
    "张伟",
    "3000 QPS",
    "#backend-oncall",
    "E5003",
    "3,800 万",
)

PROMPT_EN = (
    "You compress an AI agent's conversation into a memory summary. Write it in English with exactly these "
    "sections, as markdown headings: ## Goal, ## Constraints, ## Progress, ## Key decisions, ## Next steps, "
    "## Critical context. Be concise, use bullet points. Copy exact file paths, names, numbers, IDs and "
    "error messages verbatim into Critical context. Do not invent anything."
)
PROMPT_ZH = (
    "你负责把 AI 助手的对话压缩成记忆摘要。用中文写，严格使用以下 markdown 标题：## 目标、## 约束、## 进展、"
    "## 关键决策、## 下一步、## 关键上下文。简洁，使用要点列表。文件路径、名称、数字、编号和错误信息必须原样"
    "写入“关键上下文”。不要编造。"
)


def transcript(messages: list[Message]) -> str:
    """The conversation as plain text, one block per message (how a summariser hands it to a model)."""
    lines: list[str] = []
    for m in messages:
        if m.kind == "assistant" and m.tool_calls:
            lines += [
                f"assistant → {c.name}({json.dumps(json.loads(c.arguments), ensure_ascii=False)})"
                for c in m.tool_calls
            ]
        elif m.kind == "tool":
            lines.append(f"tool result ({m.name}):\n{text_of(m.content)}")
        else:
            lines.append(f"{m.kind}: {text_of(m.content)}")
    return "\n\n".join(lines)


def summary_request(lang: str) -> list[Message]:
    conversation, prompt = (EN_CONVERSATION, PROMPT_EN) if lang == "en" else (ZH_CONVERSATION, PROMPT_ZH)
    return [system(prompt), user(f"<conversation>\n{transcript(conversation)}\n</conversation>")]


@dataclass
class Row:
    model: str
    lang: str
    prompt_tokens: int
    prompt_tps: float
    gen_tokens: int
    gen_tps: float
    wall: float
    facts: str
    sections: str
    text: str


async def run_one(llm: LocalLLM, lang: str, max_tokens: int) -> Row:
    start = time.perf_counter()
    first: float | None = None
    response = None
    async for event in llm.stream(summary_request(lang), max_tokens=max_tokens, temperature=0.0):
        if event.kind == "text" and first is None:
            first = time.perf_counter()
        if event.kind == "done":
            response = event.response
    end = time.perf_counter()
    assert response is not None
    first = first or end
    text = text_of(response.message.content)
    facts = EN_FACTS if lang == "en" else ZH_FACTS
    sections = SECTIONS_EN if lang == "en" else SECTIONS_ZH
    usage = response.usage
    return Row(
        model=llm.name.removeprefix("local:"),
        lang=lang,
        prompt_tokens=usage.prompt_tokens,
        prompt_tps=usage.prompt_tokens / max(first - start, 1e-9),
        gen_tokens=usage.completion_tokens,
        gen_tps=max(usage.completion_tokens - 1, 0) / max(end - first, 1e-9),
        wall=end - start,
        facts=f"{sum(f in text for f in facts)}/{len(facts)}",
        sections=f"{sum(s in text for s in sections)}/{len(sections)}",
        text=text,
    )


async def run(models: list[str], langs: list[str], max_tokens: int, show: bool) -> list[Row]:
    rows: list[Row] = []
    for spec in models:
        llm = LocalLLM(spec, n_ctx=4096, n_threads=2)
        load = time.perf_counter()
        await llm.complete([user("Hi")], max_tokens=1)  # load the weights outside the timings
        print(f"# {llm.name}: loaded and warmed up in {time.perf_counter() - load:.1f}s", flush=True)
        for lang in langs:
            row = await run_one(llm, lang, max_tokens)
            rows.append(row)
            if show:
                print(f"\n--- {row.model} / {lang} ---\n{row.text}\n", flush=True)
    return rows


def table(rows: list[Row]) -> str:
    head = (
        "| model | conv | prompt tok | prompt tok/s | gen tok | gen tok/s | wall s | facts kept | sections |"
    )
    out = [head, "|---|---|--:|--:|--:|--:|--:|--:|--:|"]
    out += [
        f"| {r.model} | {r.lang} | {r.prompt_tokens} | {r.prompt_tps:.0f} | {r.gen_tokens} | "
        f"{r.gen_tps:.1f} | {r.wall:.1f} | {r.facts} | {r.sections} |"
        for r in rows
    ]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--model", action="append", help="'local', 'local:<name>' or a .gguf path (repeatable)"
    )
    parser.add_argument("--all", action="store_true", help="every packaged model")
    parser.add_argument("--lang", choices=["en", "zh"], action="append", help="default: both")
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--show", action="store_true", help="print the summaries")
    args = parser.parse_args()
    started = time.perf_counter()
    models = [f"local:{name}" for name in PACKAGED_MODELS] if args.all else (args.model or ["local"])
    rows = asyncio.run(run(models, args.lang or ["en", "zh"], args.max_tokens, args.show))
    text = table(rows)
    print(text)
    report.write(
        "local_llm",
        "Summary latency and prompt / generation speed of the local model",
        "A structured summary of a ~2k-token agent session (English, Chinese), streamed, 2 threads.\n\n"
        + text,
        seconds=time.perf_counter() - started,
    )


if __name__ == "__main__":
    main()
