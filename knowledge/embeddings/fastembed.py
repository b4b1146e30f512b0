"""Embedders for the dense text models of fastembed's catalog (ONNX Runtime on the CPU).

fastembed is imported when an embedder is constructed, not with this module: it takes most of a
second to import.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from knowledge._onnx import quiet_onnxruntime
from knowledge.embeddings._inputs import check_query, check_text, check_texts, normalise_rows
from knowledge.embeddings._pooled import length_order
from knowledge.embeddings.base import Embedder, Token, TokenizerTwin
from knowledge.errors import ConfigError, EmbeddingUnavailable

if TYPE_CHECKING:
    from fastembed import TextEmbedding
    from tokenizers import Tokenizer


def _reason(exc: Exception) -> str:
    """``exc``'s message for the middle of a sentence."""
    return str(exc).strip().rstrip(".") or type(exc).__name__


def supported_models() -> list[str]:
    """The names :class:`FastEmbedEmbedder` accepts: fastembed's dense text-embedding catalog, sorted."""
    quiet_onnxruntime()
    from fastembed import TextEmbedding  # noqa: PLC0415 - heavy (ONNX models), when a model is built

    return sorted(entry["model"] for entry in TextEmbedding.list_supported_models())


def _catalog_entry(model_name: str) -> dict[str, Any]:
    quiet_onnxruntime()
    from fastembed import TextEmbedding  # noqa: PLC0415 - heavy (ONNX models), when a model is built

    entries = TextEmbedding.list_supported_models()
    for entry in entries:
        if entry["model"].lower() == model_name.lower():
            return entry
    close = difflib.get_close_matches(model_name, [entry["model"] for entry in entries], n=3)
    hint = f" Did you mean {' or '.join(close)}?" if close else ""
    raise ConfigError(
        f"The embedding model {model_name!r} is not in fastembed's catalog.{hint} The supported names"
        " are listed by knowledge.embeddings.supported_models()."
    )


class FastEmbedEmbedder(Embedder):
    """A fastembed text-embedding model, loaded offline-first from a model cache.

    Loading never touches the network while the model files are in ``cache_dir``. When they are
    not, it fails within milliseconds with :class:`EmbeddingUnavailable`, unless
    ``allow_download`` is set: then fastembed downloads the model into ``cache_dir``. It tries
    three times, pausing 3 s and 9 s, each try retrying its requests, so without a network that
    fails only after about 40 s (measured with every connection refused at once).

    The model loads on first use, or when :meth:`load` is called. ``name`` and ``dimension`` come
    from fastembed's catalog and need no loading; ``max_tokens`` and ``special_tokens`` load it.
    Safe to use from several threads. Queries never wait behind documents: :meth:`embed_documents`
    runs on a thread of its own, at a lower scheduling priority (nice +:data:`BATCH_NICE`, which the
    ONNX Runtime threads of its own session inherit), while :meth:`embed_query` runs at once in the
    caller's thread on a second ONNX Runtime session (``InferenceSession.run`` is thread-safe). So a
    search typed while a 500-chunk file is embedded takes about as long as on an idle machine,
    and the batch takes what CPU the queries leave (``bench/bench_search.py``).

    Args:
        model_name: a name from :func:`supported_models` (case-insensitive).
        cache_dir: the model cache folder (the app passes ``Settings.models_dir``).
        specific_model_path: a folder with the model's files (``model.onnx``, ``tokenizer.json``,
            ``tokenizer_config.json``, ...) to load instead of the cache; never downloaded into.
        batch_size: texts per ONNX Runtime call in :meth:`embed_documents`.
        threads: ONNX Runtime threads; ``None`` uses every core.
        allow_download: let fastembed download a model missing from ``cache_dir``.
        max_tokens: a window smaller than the tokenizer's (``model_max_length`` of its
            ``tokenizer_config.json``); the model then truncates there. ``None`` keeps the tokenizer's.

    Raises:
        ConfigError: ``model_name`` is not in the catalog, or ``batch_size``/``max_tokens`` < 1.
    """

    def __init__(
        self,
        model_name: str,
        cache_dir: Path,
        *,
        specific_model_path: Path | None = None,
        batch_size: int = 32,
        threads: int | None = None,
        allow_download: bool = False,
        max_tokens: int | None = None,
    ) -> None:
        entry = _catalog_entry(model_name)
        if batch_size < 1:
            raise ConfigError(f"batch_size must be at least 1, got {batch_size}.")
        if max_tokens is not None and max_tokens < 1:
            raise ConfigError(f"max_tokens must be at least 1, got {max_tokens}.")
        self.name = entry["model"]
        self.dimension = int(entry["dim"])
        self.cache_dir = Path(cache_dir)
        self.specific_model_path = None if specific_model_path is None else Path(specific_model_path)
        self.batch_size = batch_size
        self.threads = threads
        self.allow_download = allow_download
        self._size_gb: float | None = entry.get("size_in_GB")
        self._window_override = max_tokens
        self._model: TextEmbedding | None = None
        self._tokenizer: Tokenizer | None = None
        self._max_tokens = 0
        self._special_tokens = 0
        self._load_lock = threading.Lock()
        self._batch_pool: ThreadPoolExecutor | None = None
        self._batch_model: Any = None  # the documents' model (_open_documents), made in the pool's thread

    # -- loading ---------------------------------------------------------------------------------
    @property
    def loaded(self) -> bool:
        """Whether the model is loaded (nothing is loaded by asking)."""
        return self._model is not None

    def load(self) -> None:
        """Load the model now; later calls return at once. Safe to call from several threads.

        Raises:
            EmbeddingUnavailable: the model files are missing (and not downloadable) or corrupt, or
                the model's output does not have the catalog's dimension.
            ConfigError: ``max_tokens`` is larger than the tokenizer's window.
        """
        with self._load_lock:
            if self._model is None:
                self._load()

    def _model_dir(self) -> Path | None:
        """The folder to load instead of the cache, or ``None``; the bundled model prepares it here."""
        return self.specific_model_path

    def _load(self) -> None:
        model = self._open(self._model_dir())
        tokenizer = getattr(model.model, "tokenizer", None)
        window = (getattr(tokenizer, "truncation", None) or {}).get("max_length")
        if tokenizer is None or not window:
            raise EmbeddingUnavailable(
                f"The embedding model {self.name} has no tokenizer with a truncation length that"
                " this application can read; choose another model."
            )
        if self._window_override is not None:
            if self._window_override > window:
                raise ConfigError(
                    f"max_tokens = {self._window_override} is larger than the {window}-token window of"
                    f" {self.name} (model_max_length in its tokenizer_config.json)."
                )
            window = self._window_override
            _truncate_at(tokenizer, window)
        # tokenize() and count_tokens() use a copy that never truncates or pads; the model's own
        # tokenizer keeps truncating at the window.
        from tokenizers import Tokenizer  # noqa: PLC0415 - heavy (Rust), when a model is built

        counting = Tokenizer.from_str(tokenizer.to_str())
        counting.no_truncation()
        counting.no_padding()
        processor = counting.post_processor
        special = 0 if processor is None else processor.num_special_tokens_to_add(False)
        try:
            probe = np.asarray(next(iter(model.passage_embed(["probe"]))))
        except Exception as exc:
            raise EmbeddingUnavailable(f"The embedding model {self.name} loaded but cannot run: {exc}") from exc
        if probe.shape != (self.dimension,):
            raise EmbeddingUnavailable(
                f"The embedding model {self.name} should give vectors of {self.dimension} dimensions"
                f" (fastembed's catalog), but its files give shape {probe.shape}: they are another model's."
            )
        self._tokenizer, self._max_tokens, self._special_tokens = counting, int(window), int(special)
        self._model = model

    def _open(self, model_dir: Path | None) -> TextEmbedding:
        quiet_onnxruntime()
        from fastembed import TextEmbedding  # noqa: PLC0415 - heavy (ONNX models), when a model is built

        kwargs: dict[str, Any] = {"cache_dir": str(self.cache_dir), "threads": self.threads}
        if model_dir is not None:
            kwargs["specific_model_path"] = str(model_dir)
        try:
            return TextEmbedding(self.name, local_files_only=True, **kwargs)
        except Exception as exc:  # fastembed, onnxruntime and tokenizers each raise their own types
            local_error = exc
        if model_dir is not None:
            raise EmbeddingUnavailable(
                f"The embedding model {self.name} cannot be loaded from {model_dir}: {local_error}"
            ) from local_error
        if not self.allow_download:
            size = f" (about {self._size_gb:g} GB)" if self._size_gb else ""
            raise EmbeddingUnavailable(
                f"The embedding model {self.name} is not in {self.cache_dir}, or its copy there is"
                f" incomplete ({_reason(local_error)}). Set embeddings.allow_download = true and start"
                f" once with network access to download it{size}, or use the bundled default model by"
                " removing embeddings.model from the settings."
            ) from local_error
        try:
            return TextEmbedding(self.name, local_files_only=False, **kwargs)
        except Exception as exc:
            raise EmbeddingUnavailable(
                f"The embedding model {self.name} is not in {self.cache_dir} and could not be downloaded"
                f" there ({_reason(exc)}). Check the network connection (huggingface.co, or HF_ENDPOINT),"
                " or use the bundled default model by removing embeddings.model from the settings."
            ) from exc

    def _batch_executor(self) -> ThreadPoolExecutor:
        with self._load_lock:
            if self._batch_pool is None:
                self._batch_pool = ThreadPoolExecutor(1, thread_name_prefix="embed-documents", initializer=_lower_priority)
            return self._batch_pool

    def _loaded(self) -> TextEmbedding:
        if self._model is None:
            self.load()
        assert self._model is not None
        return self._model

    # -- the Embedder interface ----------------------------------------------------------------------
    @property
    def max_tokens(self) -> int:  # type: ignore[override]
        """The model's input window in tokens, special tokens included (loads the model)."""
        self._loaded()
        return self._max_tokens

    @property
    def special_tokens(self) -> int:  # type: ignore[override]
        """Special tokens the tokenizer's post-processor adds to every input (loads the model)."""
        self._loaded()
        return self._special_tokens

    def tokenize(self, text: str) -> list[Token]:
        """The model tokenizer's tokens of ``text``, without special tokens and without truncation.

        Offsets are Python ``str`` indices into ``text``, so ``text[t.start:t.end]`` is the source of
        token ``t``; ``t.text`` is the tokenizer's form (lowercased, accents stripped, ``##`` for a
        word-piece continuation, ``[UNK]`` for characters outside its vocabulary).

        Raises:
            InvalidArgument: ``text`` is not a ``str``. EmbeddingUnavailable: as :meth:`load`.
        """
        check_text(text)
        self._loaded()
        assert self._tokenizer is not None
        encoding = self._tokenizer.encode(text, add_special_tokens=False)
        return [
            Token(token_id, token, start, end)
            for token_id, token, (start, end) in zip(encoding.ids, encoding.tokens, encoding.offsets)
        ]

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Each of :meth:`tokenize`'s tokens' ``(start, end)`` ``str`` offsets into ``text``, taken
        from the tokenizer's ``offsets`` without building :class:`Token` objects.

        Raises:
            InvalidArgument: ``text`` is not a ``str``. EmbeddingUnavailable: as :meth:`load`.
        """
        if type(self).tokenize is not FastEmbedEmbedder.tokenize:  # a subclass tokenizes its own way
            return super().token_spans(text)
        check_text(text)
        self._loaded()
        assert self._tokenizer is not None
        return self._tokenizer.encode(text, add_special_tokens=False).offsets

    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` without special tokens and without truncation.

        Raises:
            InvalidArgument: ``text`` is not a ``str``. EmbeddingUnavailable: as :meth:`load`.
        """
        check_text(text)
        self._loaded()
        assert self._tokenizer is not None
        return len(self._tokenizer.encode(text, add_special_tokens=False).ids)

    def tokenizer_twin(self) -> Embedder | None:
        """A :class:`~knowledge.embeddings.base.TokenizerTwin` of this model's tokenizer (loads the
        model); ``None`` for a subclass that tokenizes differently."""
        if type(self).tokenize is not FastEmbedEmbedder.tokenize:
            return None
        self._loaded()
        assert self._tokenizer is not None
        return TokenizerTwin(self.name, self.dimension, self._max_tokens, self._special_tokens, self._tokenizer.to_str())

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents (chunks), ``batch_size`` texts per ONNX Runtime call.

        Text past :attr:`max_tokens` (special tokens included) is truncated by the model.

        Returns:
            ``(n, d)`` float32, each row L2-normalised, rows in the order of ``texts``; the inner
            product of two rows is their cosine similarity in [-1, 1], higher is more similar.

        Raises:
            InvalidArgument: ``texts`` is empty, or an item is not a ``str`` or is blank.
            EmbeddingUnavailable: the model cannot be loaded or run.
        """
        items = check_texts(texts)
        self._loaded()

        def run() -> np.ndarray:
            if self._batch_model is None:
                self._batch_model = self._open_documents()
            return self._embed_batch(self._batch_model, items)

        try:
            vectors = self._batch_executor().submit(run).result()
        except EmbeddingUnavailable:
            raise
        except Exception as exc:
            raise EmbeddingUnavailable(f"The embedding model {self.name} failed on {len(items)} texts: {exc}") from exc
        return normalise_rows(vectors, self.name)

    def _open_documents(self) -> Any:
        """The documents' model, opened in the batch thread (so its ONNX Runtime threads are nice'd)."""
        batch_model = self._open(self._model_dir())
        if self._window_override is not None:
            _truncate_at(batch_model.model.tokenizer, self._max_tokens)  # type: ignore[attr-defined]  # ONNX models have it
        return batch_model

    def _embed_batch(self, model: Any, items: list[str]) -> np.ndarray:
        """``(n, d)`` vectors of ``items`` in their order, from ``model`` (:meth:`_open_documents`'s).

        The texts go to fastembed sorted by length in characters (a proxy for their token lengths that
        costs no second tokenisation), so each ``batch_size`` batch is padded to nearly its own length
        rather than to the longest text of an arbitrary mix; the attention mask keeps padding out of
        every vector, so only the time changes.
        """
        order = length_order([len(item) for item in items])
        rows = np.stack(list(model.passage_embed([items[i] for i in order], batch_size=self.batch_size)))
        out = np.empty_like(rows)
        out[order] = rows
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Embed a search query (fastembed's ``query_embed``: models with a query task or prefix use it).

        Returns:
            ``(d,)`` float32, L2-normalised.

        Raises:
            InvalidArgument: ``text`` is not a ``str`` or is blank. EmbeddingUnavailable: as above.
        """
        query = check_query(text)
        model = self._loaded()
        try:
            vector = next(iter(model.query_embed(query)))
        except Exception as exc:
            raise EmbeddingUnavailable(f"The embedding model {self.name} failed on the query: {exc}") from exc
        return normalise_rows(np.asarray(vector)[np.newaxis, :], self.name)[0]


BATCH_NICE = 5
"""How much nicer (Linux ``nice``) the thread embedding documents runs than the rest of the process:
+5 gives a query's thread about three times the CPU weight of each batch thread (Linux CFS weights
1024 vs 335), while the batch still gets its share on a machine busy with other programs (at +10 it
nearly starved on this project's shared machine)."""


def _lower_priority() -> None:
    """Run this thread at nice :data:`BATCH_NICE` at least (Linux: ``setpriority`` on a thread id
    affects that thread only, and threads it starts inherit it): a process already niced that much
    (the app's worker process, :data:`knowledge.service.worker.WORKER_NICE`) is not lowered twice.
    A no-op where the platform has no per-thread priority."""
    with contextlib.suppress(AttributeError, OSError):
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, max(os.getpriority(os.PRIO_PROCESS, tid), BATCH_NICE)))


def _truncate_at(tokenizer: Any, window: int) -> None:
    """Make a fastembed model's tokenizer truncate at ``window`` tokens (its other settings kept)."""
    tokenizer.enable_truncation(
        max_length=window,
        stride=tokenizer.truncation["stride"],
        strategy=tokenizer.truncation["strategy"],
        direction=tokenizer.truncation["direction"],
    )
