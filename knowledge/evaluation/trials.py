"""Trials: what another setting would give, before it is kept. A sweep of the hybrid fusion weight
(:func:`sweep_fusion_weight`, one run per weight) and chunk settings tried on temporary copies of a
store rebuilt from its stored chunks (:func:`try_chunkings`, no file read again); the chunking
chosen is kept as a template (:func:`keep_as_template`). How trials work: docs/evaluation.md.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from knowledge.errors import InvalidArgument
from knowledge.evaluation.questions import QuestionSet
from knowledge.evaluation.runs import EvalRun, evaluate
from knowledge.ingest.chunker import plan_chunking
from knowledge.ingest.document import Document, Section
from knowledge.service.indexing import Indexer
from knowledge.service.search import Searcher
from knowledge.service.stores import Stores
from knowledge.service.templates import VectorStoreTemplate, make_template


def parse_weights(text: str) -> list[float]:
    """Fusion weights typed by a person (``"0, 0.25, 0.5"``; ``;`` also separates), each once,
    ascending.

    Raises:
        InvalidArgument: a part is not a number, or not between 0 and 1, or there is none.
    """
    try:
        weights = sorted({float(x) for x in (text or "").replace(";", ",").split(",") if x.strip()})
    except ValueError:
        weights = []
    if not weights or not all(0.0 <= w <= 1.0 for w in weights):
        raise InvalidArgument("Weights are numbers between 0 and 1, separated by commas.")
    return weights


def sweep_fusion_weight(
    stores: Stores,
    searcher: Searcher,
    store: str,
    qset: QuestionSet,
    weights: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0),
    k: int = 10,
    candidates: int | None = None,
    where: Mapping[str, Any] | None = None,
) -> list[EvalRun]:
    """Hybrid runs of ``store`` on ``qset``, one per fusion weight (not saved); ``where`` as in
    :func:`~knowledge.evaluation.runs.evaluate`."""
    return [
        evaluate(stores, searcher, store, qset, "hybrid", k, fusion_weight=w, candidates=candidates, where=where)
        for w in weights
    ]


@dataclass(frozen=True, slots=True)
class ChunkTrial:
    """A chunk setting tried on a temporary copy of a store: its chunk count, the seconds taken to
    re-chunk and embed, and a run per mode."""

    size: int
    overlap: int
    chunks: int
    build_seconds: float
    runs: tuple[EvalRun, ...] = field(default_factory=tuple)


def documents_from_chunks(points: list[Any]) -> Document:
    """A file's text rebuilt from its stored chunks (their spans in the extracted text), with one
    section per run of chunks of the same page and heading -- what the chunker needs, without
    reading the file again. Gaps between chunks (whitespace the chunker skipped) become newlines."""
    points = sorted(points, key=lambda p: (p.payload.get("char_start") or 0, p.payload.get("chunk_index", 0)))
    buf: list[str] = []
    length = 0
    sections: list[Section] = []
    for p in points:
        text = p.payload["text"]
        start = p.payload.get("char_start")
        start = length if start is None else int(start)
        if start > length:
            buf.append("\n" * (start - length))
            length = start
        overlap = length - start
        if overlap < len(text):
            buf.append(text[overlap:])
            length = start + len(text)
        key = (p.payload.get("page"), p.payload.get("heading"))
        if sections and (sections[-1].page, sections[-1].heading) == key:
            sections[-1] = replace(sections[-1], char_end=max(sections[-1].char_end, start + len(text)))
        else:
            begin = max(start, sections[-1].char_end if sections else 0)
            sections.append(Section(begin, start + len(text), key[0], key[1]))
    return Document("".join(buf), sections, "text")


def try_chunkings(
    stores: Stores,
    indexer: Indexer,
    searcher: Searcher,
    store: str,
    qset: QuestionSet,
    chunkings: Sequence[tuple[int, int]],
    modes: Sequence[str] = ("hybrid",),
    k: int = 10,
    progress: Callable[[str, float], None] | None = None,
    where: Mapping[str, Any] | None = None,
) -> list[ChunkTrial]:
    """Try chunk settings ``[(size, overlap), ...]`` (tokens; 1 to 4 of them) on temporary copies of
    ``store``: each file's text is rebuilt from the chunks stored in ``store`` (no file is read
    again), cut again with the store's model, embedded into a temporary store ``<store>~try-<size>-<overlap>``,
    evaluated on ``qset`` in each of ``modes``, and deleted. ``progress(message, fraction)``.
    ``where``: only the chunks matching it are copied (the files the person trying may read).

    Raises:
        InvalidArgument: no setting or more than 4, a bad size/overlap. StoreNotFound.
    """
    if not 1 <= len(chunkings) <= 4:
        raise InvalidArgument("Try 1 to 4 chunk settings at a time.")
    record = stores.get(store)
    embedder = stores.embedder(record.embedding_model)
    for size, overlap in chunkings:
        plan_chunking(embedder, size, overlap)  # InvalidArgument before any work
    source = stores.collection_of(record)  # a per-machine store of a shared catalog is refused here
    by_file: dict[str, list[Any]] = {}
    if source.collection_exists():
        for p in source.scroll(where=where):
            by_file.setdefault(p.payload["file_id"], []).append(p)
    docs = {fid: (pts[0].payload.get("file_name"), documents_from_chunks(pts)) for fid, pts in by_file.items()}
    trials = []
    for t, (size, overlap) in enumerate(chunkings):
        name = f"{store}~try-{size}-{overlap}"
        if stores.exists(name):
            stores.drop(name)
        stores.backend(record.backend).collection(name).drop_collection()  # left by a trial that crashed
        stores.put(
            name, record.template, record.backend, record.embedding_model, record.dimension, record.distance, collection=name
        )
        try:
            t0 = time.perf_counter()
            total = 0
            for i, (fid, (file_name, doc)) in enumerate(sorted(docs.items())):
                total += indexer.index_document(name, fid, doc, file_name, chunk_tokens=size, overlap_tokens=overlap).chunks
                if progress:
                    progress(
                        f"{size}/{overlap}: embedding {i + 1} of {len(docs)} files",
                        (t + (i + 1) / max(1, len(docs)) * 0.8) / len(chunkings),
                    )
            built = time.perf_counter() - t0
            runs = []
            for mode in modes:
                run = evaluate(stores, searcher, name, qset, mode, k)
                runs.append(
                    replace(run, store=store, template=None, chunking={"size": size, "overlap": overlap, "trial": True})
                )
            trials.append(ChunkTrial(size, overlap, total, built, tuple(runs)))
        finally:
            stores.drop(name)
        if progress:
            progress(f"{size}/{overlap}: done", (t + 1) / len(chunkings))
    return trials


def keep_as_template(
    stores: Stores,
    save_template: Callable[[VectorStoreTemplate], VectorStoreTemplate],
    store: str,
    size: int,
    overlap: int,
    name: str | None = None,
) -> VectorStoreTemplate:
    """Save a template like ``store``'s (backend, model, distance) with the chunking ``size/overlap``
    (default name ``<template>-<size>-<overlap>``); returns it. New stores made from it, or files
    ingested again with it, are cut that way (``save_template``: the workbench's, which keeps a
    template in use from changing its model). Raises ``InvalidArgument``."""
    record = stores.get(store)
    base = stores.template_of(record)
    tpl = make_template(
        name=name or f"{base.name}-{size}-{overlap}",
        backend=base.backend,
        embedding_model=base.embedding_model,
        distance=base.distance,
        max_chunk_size_tokens=size,
        chunk_overlap_tokens=overlap,
        description=f"Chunking {size}/{overlap} chosen on the Evaluate page for {store!r}.",
    )
    return save_template(tpl)


__all__ = [
    "ChunkTrial",
    "documents_from_chunks",
    "keep_as_template",
    "parse_weights",
    "sweep_fusion_weight",
    "try_chunkings",
]
