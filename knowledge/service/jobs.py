"""Ingestion jobs: a batch of files ingested into one store in a background thread.

The app starts an :class:`IngestJob` for an upload or a folder and goes on rendering; the job ingests
the files one after another through :meth:`Workbench.ingest_file`, recording each file's stage,
fraction and outcome, which the page reads on its next rerun. Reruns, clicks and slider moves
therefore never interrupt or repeat an ingestion. :meth:`IngestJob.cancel` stops the batch: the file
being ingested is cancelled (its store stays as it was -- the workbench guarantees that per file) and
the files not started yet are reported as cancelled.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from knowledge.errors import InvalidArgument, KnowledgeError
from knowledge.outcomes import IngestResult, Outcome
from knowledge.service.indexing import OCR_SHARE, expand_paths, file_names, skipped_text

if TYPE_CHECKING:
    from knowledge.access import LocalFolders
    from knowledge.filestore.base import StoredFile

log = logging.getLogger(__name__)

#: A file for a job: ``(name, bytes)`` for an upload, ``(name, path)`` for a file on disk.
Item = tuple[str, "bytes | Path"]


class Ingester(Protocol):
    """What a job needs of the workbench: its job registry and one file's ingestion
    (:meth:`knowledge.workbench.Workbench.ingest_file`)."""

    @property
    def jobs(self) -> JobRegistry: ...

    def ingest_file(self, store: str, source: Any, name: str | None = None, **kwargs: Any) -> IngestResult: ...


def _stop_all_at_exit(ref: weakref.ref[JobRegistry]) -> None:
    registry = ref()  # the registry is not kept alive by atexit
    if registry is not None:
        registry.stop_all()


class JobRegistry:
    """The ingest jobs of one workbench (one per server process, shared by every browser session):
    the newest job per store -- so a second tab sees a running upload and can stop it -- and the
    running ones, which are cancelled and awaited when the process exits (a daemon thread still
    inside ONNX Runtime when the interpreter shuts down aborts the whole process, "terminate
    called ..."). Thread-safe."""

    def __init__(self) -> None:
        self._latest: dict[str, IngestJob] = {}
        self._running: weakref.WeakSet[IngestJob] = weakref.WeakSet()
        self._lock = threading.Lock()
        atexit.register(_stop_all_at_exit, weakref.ref(self))

    def started(self, job: IngestJob) -> None:
        with self._lock:
            self._running.add(job)
            self._latest[job.store] = job

    def latest(self, store: str) -> IngestJob | None:
        """The newest job started for ``store``, running or finished, or ``None``."""
        with self._lock:
            return self._latest.get(store)

    def running(self) -> list[IngestJob]:
        with self._lock:
            return [j for j in self._running if not j.done]

    def stop_all(self, timeout: float = 30.0) -> None:
        """Cancel the running jobs and wait up to ``timeout`` seconds for each."""
        with self._lock:
            jobs = list(self._running)
        for job in jobs:
            job.cancel()
        for job in jobs:
            job.wait(timeout)


@dataclass
class FileProgress:
    """One file of a job: ``stage`` is waiting, reading, chunking, embedding, writing or done;
    ``fraction`` in [0, 1] of this file; ``result`` once the file is finished; ``stage_since``
    (``time.monotonic()`` seconds) when the current stage began."""

    name: str
    stage: str = "waiting"
    fraction: float = 0.0
    result: IngestResult | None = None
    stage_since: float = 0.0
    stage_start_fraction: float = 0.0

    def update(self, stage: str, fraction: float, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        fraction = max(0.0, min(1.0, fraction))
        if _kind(stage) != _kind(self.stage):  # "OCR, page 2 of 9" -> "OCR, page 3 of 9": one stage
            self.stage_since, self.stage_start_fraction = now, fraction
        self.stage = stage
        self.fraction = fraction

    def eta_seconds(self, now: float | None = None) -> float | None:
        """Seconds left for this file, extrapolated from the pace so far of the stage that takes the
        time: OCR (per page; the time left is the OCR's, the rest of the file is quick) or embedding;
        ``None`` before there is enough to go on (5 % of the stage or 2 s)."""
        kind = _kind(self.stage)
        if self.result is not None or kind not in ("embedding", "OCR"):
            return None
        end = OCR_SHARE if kind == "OCR" else 1.0
        now = time.monotonic() if now is None else now
        done = self.fraction - self.stage_start_fraction
        spent = now - self.stage_since
        if (done < 0.05 * (end - self.stage_start_fraction) and spent < 2.0) or done <= 0:
            return None
        return spent / done * max(0.0, end - self.fraction)


def _kind(stage: str) -> str:
    """The stage without its detail: ``"OCR, page 3 of 9"`` -> ``"OCR"``."""
    return stage.split(",", 1)[0]


class IngestJob:
    """Ingest ``items`` into ``store`` in a daemon thread (call :meth:`start`).

    Args:
        wb: the (thread-safe) workbench.
        store: the store's name (created on the fly from ``template``, as ``ingest_file`` does).
        items: ``(name, bytes)`` or ``(name, path)`` pairs, ingested in order.
        template, password, attributes: passed to ``ingest_file`` for every file.

    An item's source may also be a ``StoredFile`` already in the file store (the API's uploads).
    """

    def __init__(self, wb: Ingester, store: str, items: Sequence[Item], *, template: str | None = None,
                 password: str | None = None, attributes: dict | None = None) -> None:
        self.wb, self.store, self.template, self.password = wb, store, template, password
        self.attributes = attributes
        self._items = list(items)
        self.files = [FileProgress(name) for name, _ in self._items]
        self.sizes = [_size(source) for _, source in self._items]  # bytes per file (0: unknown)
        self.started_at: float | None = None  # time.monotonic() when the thread started
        self._cancel = threading.Event()
        self.finished_at: float | None = None  # time.monotonic() when the last file got its result
        #: Sentences about the batch as a whole (a folder walk's skipped files), for the page to show.
        self.notes: list[str] = []
        self.skipped: list[str] = []  # files of a folder left out by the allowed folders (from_folder)
        self._thread = threading.Thread(target=self._run, name=f"ingest:{store}", daemon=True)

    @classmethod
    def from_folder(cls, wb: Ingester, store: str, folder: str | os.PathLike, glob: str | None = None,
                    *, folders: LocalFolders | None = None, **kwargs) -> IngestJob:
        """A job for the files of ``folder`` matching ``glob`` (default ``**/*``; hidden files skipped).

        ``folders`` confines the walk (the app passes its :func:`~knowledge.access.app_folders`): the
        folder itself, with symlinks resolved, must be allowed, and a file inside it that is a symlink
        leading out of the allowed folders (or into a hidden folder, or into the data folder) is left
        out and counted in :attr:`skipped`. ``None`` reads any path (the CLI's own use).

        Raises:
            PathNotAllowed: ``folders`` does not allow the folder.
            InvalidArgument: the folder does not exist, is not a folder, or no file matches.
        """
        raw = str(folder).strip()
        path = Path(raw).expanduser()
        if raw and folders is not None:
            path = folders.check(path)
        if not raw:
            raise InvalidArgument("Type the path of a folder on this machine.")
        if not path.is_dir():
            raise InvalidArgument(f"{raw} is not a folder on this machine"
                                  " (give the path of a folder the app can read).")
        walk: dict[str, int] = {}  # files the walk left out, by reason (glob, hidden)
        found = [p for p in expand_paths([path], glob or None, walk) if isinstance(p, Path)]
        skipped = [p for p in found if folders is not None and not folders.allows(p)]
        found = [p for p in found if p not in skipped]
        note = skipped_text(walk)
        if not found:
            extra = f" ({len(skipped)} left out: outside the allowed folders)" if skipped else ""
            raise InvalidArgument(f"No file in {path} matches {glob or '**/*'!r}{extra}." + (f" {note}" if note else ""))
        names = file_names(found)
        job = cls(wb, store, [(names[p], p) for p in found], **kwargs)
        job.skipped = [str(p) for p in skipped]
        job.notes = [note] if note else []
        return job

    # -- control ----------------------------------------------------------------------------------
    def start(self) -> IngestJob:
        self.started_at = time.monotonic()
        self.wb.jobs.started(self)
        self._thread.start()
        return self

    @staticmethod
    def latest(wb: Ingester, store: str) -> IngestJob | None:
        """The newest job started in this process for ``store`` of ``wb``'s data folder, from any
        browser tab or session (so a second tab sees a running upload and can stop it)."""
        return wb.jobs.latest(store)

    @classmethod
    def visible_for(cls, wb: Ingester, store: str, mine: IngestJob | None = None, *,
                    recent_seconds: float = 60.0) -> IngestJob | None:
        """The batch a page shows for ``store``: the newest job of this process when another tab or
        session started it and it runs, or ended ``recent_seconds`` ago at most (so a Stop clicked
        there, or here, shows what it stopped); otherwise ``mine``, the page's own job (``None``:
        none)."""
        latest = cls.latest(wb, store)
        if latest is not None and latest is not mine and (
                not latest.done or (latest.finished_at or 0) > time.monotonic() - recent_seconds):
            return latest
        return mine

    @classmethod
    def running_for(cls, wb: Ingester, store: str) -> bool:
        """Whether a job of this process is ingesting into ``store`` of ``wb``'s data folder now."""
        latest = cls.latest(wb, store)
        return latest is not None and not latest.done

    def replace_result(self, file_id: str, result: IngestResult) -> int:
        """After the file ``file_id`` of this batch was ingested again (a retry, with a password say),
        its line shows ``result`` instead of the first outcome. Returns how many files were updated
        (0: the file is not in this batch)."""
        n = 0
        for fp in self.files:
            if fp.result is not None and fp.result.file_id == file_id:
                fp.result = result
                n += 1
        return n

    def cancel(self) -> None:
        """Stop after the current step: the current file is cancelled, the rest are not started."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def done(self) -> bool:
        """True once every file has a result (also after a cancel)."""
        return all(f.result is not None for f in self.files)

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the job to finish; returns :attr:`done`."""
        if self._thread.is_alive():
            self._thread.join(timeout)
        return self.done

    @property
    def results(self) -> list[IngestResult]:
        return [f.result for f in self.files if f.result is not None]

    @property
    def fraction(self) -> float:
        """How far the whole job is, in [0, 1] (each file counts the same)."""
        if not self.files:
            return 1.0
        return sum(1.0 if f.result else f.fraction for f in self.files) / len(self.files)

    @property
    def finished(self) -> int:
        """How many files have their result."""
        return sum(1 for f in self.files if f.result is not None)

    @property
    def chunks(self) -> int:
        """Chunks indexed so far by the finished files of the batch."""
        return sum(f.result.chunks for f in self.files if f.result is not None and f.result.outcome == "indexed")

    def counts(self) -> dict[str, int]:
        """Finished files by outcome: ``{"indexed": 3, "failed": 1, ...}``."""
        out: dict[str, int] = {}
        for f in self.files:
            if f.result is not None:
                out[f.result.outcome] = out.get(f.result.outcome, 0) + 1
        return out

    def eta_seconds(self, now: float | None = None) -> float | None:
        """Seconds left for the whole batch, from its pace so far: the bytes done (finished files, plus
        the current file's share by its progress, which the embedding stage dominates) per second
        since the start, applied to the bytes still to do. ``None`` before there is enough to go on
        (2 s and 2 % of the batch), once the batch is done, or when the sizes are unknown."""
        if self.done or self.started_at is None:
            return None
        total = sum(self.sizes)
        if total <= 0:
            return None
        now = time.monotonic() if now is None else now
        done = sum(size if f.result is not None else size * f.fraction for f, size in zip(self.files, self.sizes))
        spent = now - self.started_at
        if spent < 2.0 or done < 0.02 * total or done <= 0:
            return None
        return spent / done * (total - done)

    # -- work -------------------------------------------------------------------------------------
    def _run(self) -> None:
        for (name, source), fp in zip(self._items, self.files):
            if self._cancel.is_set():
                fp.result = IngestResult(name, Outcome.CANCELLED, f"{name}: not started, the batch was stopped.")
                continue

            def progress(stage: str, fraction: float, fp: FileProgress = fp) -> None:
                fp.update(stage, fraction)

            try:
                fp.result = self.wb.ingest_file(self.store, source, name, template=self.template,
                                                password=self.password, progress=progress, cancel=self._cancel,
                                                attributes=self.attributes)
            except KnowledgeError as exc:  # the store or template itself is the problem
                fp.result = IngestResult(name, Outcome.FAILED, str(exc), error=type(exc).__name__)
            except Exception as exc:  # a bug: say so for this file, keep the batch going
                log.exception("ingesting %s into %s", name, self.store)
                fp.result = IngestResult(name, Outcome.FAILED, f"{name}: unexpected error ({type(exc).__name__}:"
                                         f" {exc}); see the server log.", error=type(exc).__name__)
            fp.stage = "done"
        self._items = []  # uploaded bytes are not needed any more (the newest job per store is kept)
        self.finished_at = time.monotonic()


def _size(source: bytes | Path | StoredFile) -> int:
    """Bytes of an item's source: its length, a path's size on disk, or a stored file's ``size``
    (0 when unknown)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return len(source)
    if isinstance(source, (str, os.PathLike)):
        try:
            return Path(source).stat().st_size
        except OSError:
            return 0
    return int(getattr(source, "size", 0) or 0)


__all__ = ["FileProgress", "IngestJob", "Item"]
