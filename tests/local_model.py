"""The one rule for the tests of the real local model: when they skip, and when they fail.

* Only a missing optional extra skips: a module the test needs (the default runtime :data:`RUNTIME`;
  ``llama_cpp`` and its server's ``fastapi`` for the tests of llama-cpp-python's server) or a package of
  the model not installed (``pip install 'contextmem[local]'`` installs them).
* ``CONTEXTMEM_REQUIRE_LOCAL_LLM`` set (CI sets it, as it sets ``CONTEXTMEM_REQUIRE_PG``): that too fails,
  so CI can never go green with the default model's tests silently skipped.
* Anything else fails, with or without the flag: a model file that misses its pinned sha256, a model
  package at another version, a module that is installed but does not import, an error while loading.
* ``CONTEXTMEM_SKIP_LOCAL_LLM=1`` skips them (a developer's quick run); set together with the require
  flag it fails, naming both: the two contradict, and the require flag must never lose quietly.

Test modules call :func:`local_model` first (in a test or a fixture); it returns the verified model file.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
from collections.abc import Mapping
from pathlib import Path

import pytest

from contextmem.llm.local_files import (
    DEFAULT_LOCAL_MODEL,
    PACKAGED_MODELS,
    PackagedModel,
    default_cache_dir,
    packaged_model_path,
)

# The model's threads in tests: one. ``make test`` runs two workers on two cores, and llama.cpp's threads
# wait for each other: beside a busy core, the chat terminal test took 116 s at 2 threads and 60 s at 1
# (38.7 s alone at 2). The conftest passes it to every process the tests start (``local_threads``).
THREADS = 1

# The runtime ``contextmem[local]`` installs, which LocalLLM picks first (contextmem.llm.local.RUNTIMES).
RUNTIME = "xllamacpp"

REQUIRE = "CONTEXTMEM_REQUIRE_LOCAL_LLM"
SKIP = "CONTEXTMEM_SKIP_LOCAL_LLM"
INSTALL = "pip install 'contextmem[local]'"


def _on(env: Mapping[str, str], name: str) -> bool:
    return env.get(name, "").strip().lower() not in ("", "0", "false", "no")


def _installed_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a parent package (``llama_cpp`` of ``llama_cpp.server``) is missing
        return False


def _installed_dist(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def local_model(
    *modules: str,
    model: PackagedModel | None = None,
    env: Mapping[str, str] | None = None,
    cache_dir: Path | None = None,
) -> Path:
    """The verified file of ``model`` (the packaged default), once ``modules`` (:data:`RUNTIME`) import.

    Skips (``pytest.skip``) or fails (``pytest.fail``) by the module's rule; any other error (a sha256
    mismatch: :class:`~contextmem.errors.LLMError`; an import error) propagates, so the test fails.
    """
    env = os.environ if env is None else env
    modules = modules or (RUNTIME,)
    model = model or PACKAGED_MODELS[DEFAULT_LOCAL_MODEL]
    required = _on(env, REQUIRE)
    if _on(env, SKIP):
        if required:
            pytest.fail(f"{SKIP} and {REQUIRE} are both set: they contradict. Fix: unset {SKIP}.")
        pytest.skip(f"{SKIP}=1")
    absent = [f"module {name!r}" for name in modules if not _installed_module(name)]
    absent += [f"package {part.dist!r}" for part in model.parts if not _installed_dist(part.dist)]
    if absent:
        missing = f"the local model's extra is not installed ({', '.join(absent)}). Fix: {INSTALL}"
        if required:
            pytest.fail(f"{REQUIRE} is set, but {missing}")
        pytest.skip(missing)
    for name in modules:
        importlib.import_module(name)  # installed but broken (a library that does not load): an error
    return packaged_model_path(model, cache_dir=cache_dir or default_cache_dir())
