"""Quality evaluations of contextmem on this project's datasets (``python -m evals.<name>``).

``bench/`` times us against peers; ``evals/`` measures what is kept and found: compaction on the dev
sets (with and without the local model), memory recall on MADial-Bench and on the daily dev sets, the
current turn's tool results, secret redaction on held-out samples. The datasets are generated or read
at run time (:mod:`evals.datasets`); only the copied public secret samples are committed
(``evals/data/secrets``). What users run on their own data is the public ``contextmem.eval`` API.
"""
