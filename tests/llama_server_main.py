"""Run llama-cpp-python's OpenAI-compatible server as ``python -m llama_cpp.server`` does, with one change.

On Intel AMX CPUs llama-cpp-python 0.3.36 segfaults in its repacked (AMX) weight layout on any batch of
more than one token (see :func:`contextmem.llm.local_llamacpp.model_params`); its server has no option to turn
that layout off, so this launcher turns it off for the model the server loads. Nothing else differs.
"""

from __future__ import annotations

import runpy

from contextmem.llm.local import cpu_has_amx
from contextmem.llm.local_llamacpp import model_params

if __name__ == "__main__":
    with model_params(extra_buffers=not cpu_has_amx()):
        runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
