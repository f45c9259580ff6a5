"""Evaluations users run on their own data: what memory search finds, what compaction keeps, what a
replayed session sends and how much of it a prompt cache serves.

The product never imports this package; the command line is its adapter (``contextmem memory eval``,
``contextmem eval compaction``, ``contextmem replay``). Each evaluation is a module, and its names are
used through it (two of them have an ``evaluate``)::

    from contextmem.eval import compaction, memory, replay

    queries = [memory.labelled_query(entry, str(n)) for n, entry in enumerate(entries, start=1)]
    report = memory.evaluate(index, queries)              # recall@1/5/10, MRR, latency p50/p95
    system, transcript = replay.load_transcript("session.jsonl")
    kept = await compaction.evaluate(settings, transcript, answers, system)   # answers in the view

* :mod:`.memory` — recall@k, MRR and latency of memory search on labelled queries;
* :mod:`.compaction` — the answers a compacted view keeps, against the most recent and every n-th
  message at the same token cost, optionally with memory search;
* :mod:`.recall` — the pure scoring behind it: answers found in a text, and the two baselines;
* :mod:`.replay` — a recorded transcript through the engine, turn by turn, and the proof that no
  message was lost;
* :mod:`.prompt_cache` — per request as sent, the prefix a prompt cache could serve and why it broke.

``import contextmem.eval`` needs the core dependencies only; scoring memory search needs the ``memory``
extra, as the index does.
"""

from __future__ import annotations

from . import compaction, memory, prompt_cache, recall, replay

__all__ = ["compaction", "memory", "prompt_cache", "recall", "replay"]
