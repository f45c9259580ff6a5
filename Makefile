# One vocabulary: run, test, lint, bench. Each target sets itself up (virtualenv + installs).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
EXTRAS ?= dev,bench,openai,anthropic,postgres,memory,memory-jieba,local,mcp,openai-agents,langchain

.PHONY: run test lint bench setup clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	touch $(STAMP)

setup: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/contextmem demo

test: $(STAMP)
	$(PY) -m pytest

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench examples
	$(VENV)/bin/ruff format --check src tests bench examples
	$(VENV)/bin/mypy src

bench: $(STAMP)
	$(PY) bench/bench_tokens.py
	$(PY) bench/bench_budget.py
	$(PY) bench/bench_compaction.py
	$(PY) bench/bench_store.py
	$(PY) bench/bench_redaction.py
	$(PY) bench/bench_cache.py

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache .mypy_cache .hypothesis
