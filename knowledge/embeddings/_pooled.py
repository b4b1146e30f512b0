"""A mean-pooled BERT-style ONNX encoder run on onnxruntime directly, batches sorted by token length.

What the bundled model's documents run on (``docs/benchmarks.md``, "Embedding at the hardware floor").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from knowledge._onnx import quiet_onnxruntime

if TYPE_CHECKING:
    from tokenizers import Encoding, Tokenizer


def length_order(lengths: Sequence[int]) -> np.ndarray:
    """Indices that sort ``lengths`` ascending, ties in input order (a stable sort): ``(n,)`` int64.

    Batching texts in this order pads each batch to nearly its own length instead of the longest text
    of an arbitrary mix; ``out[order] = batched_results`` puts results back in input order.
    """
    return np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable")


#: Called before each ONNX Runtime batch of :meth:`MeanPooledEncoder.embed` when set: the app's worker
#: process sets it to :meth:`knowledge.service.yielding.SearchMark.wait` (ingestion yields to searches).
between_batches: Callable[[], object] | None = None


def set_between_batches(hook: Callable[[], object] | None) -> None:
    """Call ``hook`` before each ONNX Runtime batch of the bundled model's documents, in this
    process (``None``: nothing). The app's worker process waits there while a search runs
    (:meth:`knowledge.service.yielding.SearchMark.wait`)."""
    global between_batches
    between_batches = hook


def session_options(intra_op_threads: int | None, inter_op_threads: int = 1) -> Any:
    """ONNX Runtime session options for a CPU encoder: every graph optimisation (``ORT_ENABLE_ALL``),
    sequential execution, ``intra_op_threads`` threads inside an operator (``None`` or 0: one per
    core, ONNX Runtime's default) and ``inter_op_threads`` between operators.

    Raises:
        ValueError: a thread count below 0 (``inter_op_threads`` below 1).
    """
    quiet_onnxruntime()
    import onnxruntime as ort  # noqa: PLC0415 - heavy (ONNX Runtime), when a model is built

    if intra_op_threads is not None and intra_op_threads < 0:
        raise ValueError(f"intra_op_threads must be 0 (one per core) or more, got {intra_op_threads}.")
    if inter_op_threads < 1:
        raise ValueError(f"inter_op_threads must be at least 1, got {inter_op_threads}.")
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.intra_op_num_threads = intra_op_threads or 0
    options.inter_op_num_threads = inter_op_threads
    return options


class MeanPooledEncoder:
    """A BERT-style ONNX model (``input_ids``, ``attention_mask``, optional ``token_type_ids`` ->
    ``last_hidden_state`` ``(b, L, d)``) with its tokenizer: the mean of the token states over the
    attention mask, L2-normalised -- sentence-transformers' pooling for all-MiniLM-L6-v2
    (``1_Pooling/config.json``: ``pooling_mode_mean_tokens``, then its ``Normalize`` module), as
    fastembed's ``PooledNormalizedEmbedding`` computes it.

    The texts of one :meth:`embed` call are tokenised once (``encode_batch``), sorted by token
    length, and cut into batches of ``batch_size``, each padded to its longest text only. A text's
    vector does not depend on its batch (the attention mask hides the padding; measured equal to the
    unsorted batching's and fastembed's, ``tests/ingest/test_embed_floor.py``). :meth:`embed` is
    safe from several threads: ``InferenceSession.run`` is, and nothing is changed after construction.

    Args:
        model_path: the ``.onnx`` file.
        tokenizer: a ``tokenizers.Tokenizer`` (copied; the copy truncates at ``window``, no padding).
        window: tokens per text, special tokens included; longer texts are truncated.
        intra_op_threads, inter_op_threads: as :func:`session_options`.

    Raises:
        onnxruntime's and tokenizers' errors for a missing or corrupt file (the caller words them).
    """

    def __init__(
        self,
        model_path: Path,
        tokenizer: Tokenizer,
        window: int,
        *,
        intra_op_threads: int | None = None,
        inter_op_threads: int = 1,
    ) -> None:
        import onnxruntime as ort  # noqa: PLC0415 - heavy (ONNX Runtime), when a model is built
        from tokenizers import Tokenizer  # noqa: PLC0415 - heavy (Rust), when a model is built

        self.session_options = session_options(intra_op_threads, inter_op_threads)
        self.session = ort.InferenceSession(
            str(model_path), sess_options=self.session_options, providers=["CPUExecutionProvider"]
        )
        inputs = {node.name for node in self.session.get_inputs()}
        missing = {"input_ids", "attention_mask"} - inputs
        if missing:
            raise ValueError(f"{model_path} has no input {', '.join(sorted(missing))}: not a BERT-style encoder.")
        self._token_types = "token_type_ids" in inputs
        self._output = self.session.get_outputs()[0].name  # last_hidden_state
        self.window = int(window)
        self.tokenizer = Tokenizer.from_str(tokenizer.to_str())
        self.tokenizer.no_padding()
        self.tokenizer.enable_truncation(max_length=self.window)
        padding = tokenizer.padding or {}
        self._pad_id = int(padding.get("pad_id", 0))

    def encode(self, texts: Sequence[str]) -> list[Encoding]:
        """The tokenizer's encodings of ``texts`` (special tokens added, truncated at :attr:`window`)."""
        return self.tokenizer.encode_batch(list(texts))

    def embed(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        """Embed ``texts`` (non-empty, each a ``str``), ``batch_size`` texts per ONNX Runtime call.

        Returns:
            ``(n, d)`` float32, rows L2-normalised (a row whose mean is all zeros stays zeros and is
            the caller's to reject), in the order of ``texts``.
        """
        encodings = self.encode(texts)
        ids = [encoding.ids for encoding in encodings]
        order = length_order([len(row) for row in ids])
        out: np.ndarray | None = None
        for start in range(0, len(order), batch_size):
            if between_batches is not None:
                between_batches()
            rows = order[start : start + batch_size]
            vectors = self._run([ids[i] for i in rows])
            if out is None:
                out = np.empty((len(ids), vectors.shape[1]), dtype=np.float32)
            out[rows] = vectors
        assert out is not None
        return out

    def _run(self, batch: list[list[int]]) -> np.ndarray:
        longest = max(len(row) for row in batch)
        input_ids = np.full((len(batch), longest), self._pad_id, dtype=np.int64)
        mask = np.zeros((len(batch), longest), dtype=np.int64)
        for i, row in enumerate(batch):
            input_ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        feed = {"input_ids": input_ids, "attention_mask": mask}
        if self._token_types:
            feed["token_type_ids"] = np.zeros_like(input_ids)
        states = self.session.run([self._output], feed)[0]  # (b, L, d) float32
        weights = mask.astype(states.dtype)
        sums = np.einsum("bld,bl->bd", states, weights)
        means = sums / np.maximum(weights.sum(axis=1, keepdims=True), 1.0)
        norms = np.linalg.norm(means, axis=1, keepdims=True)
        return (means / np.where(norms == 0.0, 1.0, norms)).astype(np.float32, copy=False)
