import json
import subprocess
import sys

from contextmem.cli.main import main
from contextmem.demo import run
from contextmem.settings import Settings


def test_demo_stays_within_budget_and_cuts_at_turns():
    lines: list[str] = []
    stats = run(Settings(agent_max_context_tokens=8_000), turns=60, echo=lines.append)
    assert stats["cuts"] > 0
    assert stats["sent"] < stats["full"]
    assert any("history budget" in line for line in lines)


def test_count_command_reads_an_openai_transcript(tmp_path, capsys):
    path = tmp_path / "t.jsonl"
    msgs = [
        {"role": "user", "content": "读取 config.yaml"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "config.yaml"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "port: 8080"},
        {"role": "assistant", "content": "端口是 8080。"},
    ]
    path.write_text("\n".join(json.dumps(m, ensure_ascii=False) for m in msgs))
    assert main(["--context-window", "9000", "count", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["messages"] == 4 and report["turns"] == 1 and report["context_window"] == 9000
    assert report["by_role"]["tool"] > 0 and report["tokens"] == sum(report["by_role"].values())


def test_bad_input_is_one_line_with_the_fix(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"role": "function", "content": "x"}))
    proc = subprocess.run(
        [sys.executable, "-m", "contextmem.cli.main", "count", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "tool" in proc.stderr and "Fix" in proc.stderr
