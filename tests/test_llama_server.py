"""Against llama-cpp-python's own OpenAI-compatible server, serving the bundled GGUF (not a fake of ours).

The failures a user met there, re-tried: an unknown window is a clear error at open rather than a plan for
50,000 tokens; an over-long prompt is a classified :class:`ContextOverflowError` with the server's limit
(its streamed answer is an empty 200), never a blank stored reply; a one-shot ``ask`` with the window set
gets a real reply through the strict-server shim (tools offered, ``tool_choice`` stated).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from contextmem.cli.main import main
from contextmem.errors import ConfigError, ContextOverflowError
from contextmem.llm.openai_compat import OpenAICompatLLM
from contextmem.messages import user
from contextmem.runtime import ContextMem
from contextmem.settings import Settings

from .local_model import local_model
from .servers import free_port

pytestmark = pytest.mark.local_llm
N_CTX = 2048  # llama-cpp-python's server default, said explicitly
STARTUP = 300  # seconds; the 2-core machine may be busy


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    model = local_model("llama_cpp.server", "fastapi", "uvicorn")  # skip or fail: tests/local_model.py
    log = tmp_path_factory.mktemp("llama-server") / "stderr.log"
    port = free_port()
    launcher = str(Path(__file__).with_name("llama_server_main.py"))  # llama_cpp.server, AMX-safe
    argv = [sys.executable, launcher, "--model", str(model), "--model_alias", "qwen"]
    argv += ["--n_ctx", str(N_CTX), "--host", "127.0.0.1", "--port", str(port), "--verbose", "False"]
    with log.open("wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, cwd=Path(__file__).parent)
    base_url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + STARTUP
    try:
        while True:
            try:
                with urllib.request.urlopen(base_url + "/models", timeout=5) as answer:
                    json.load(answer)
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    tail = log.read_text(errors="replace")[-2000:]
                    pytest.fail(f"llama_cpp.server did not start: {tail}")
                time.sleep(0.5)
        yield base_url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


async def test_unknown_window_is_a_clear_error_at_open(llama_server: str, tmp_path: Path) -> None:
    settings = Settings(workspace=str(tmp_path), model="openai:qwen", base_url=llama_server)
    with pytest.raises(ConfigError, match=r"cannot tell the context window.*--context-window"):
        await ContextMem.open(settings, memory=False)


async def test_an_over_long_streamed_prompt_is_an_overflow_with_the_servers_limit(llama_server: str) -> None:
    llm = OpenAICompatLLM("qwen", base_url=llama_server)
    long_prompt = "The quick brown fox jumps over the lazy dog. 敏捷的棕色狐狸跳过了懒狗。 " * 200
    with pytest.raises(ContextOverflowError) as caught:
        async for _ in llm.stream([user(long_prompt)], max_tokens=8):
            pass
    assert caught.value.limit == N_CTX


def test_ask_with_the_window_set_gets_a_real_reply(
    llama_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["--workspace", str(tmp_path), "--embedder", "hash", "--model", "openai:qwen"]
    argv += ["--base-url", llama_server, "--context-window", str(N_CTX), "--max-tokens", "24"]
    assert main([*argv, "--strict-server", "ask", "Reply with one word: hello"]) == 0
    assert capsys.readouterr().out.strip()
