"""ONNX Runtime without its telemetry.

onnxruntime (1.2x+ wheels for Linux too) records usage events -- model loads, devices, run times,
the OS -- in a local queue (``~/.cache/Microsoft/DeveloperTools/.onnxruntime/onnxruntime.db``) meant
for Microsoft's collector. This product sends nothing anywhere, so ``knowledge/__init__.py`` sets
``ORT_DISABLE_TELEMETRY=1`` before anything imports onnxruntime (measured here with onnxruntime 1.32:
then no queue, no device id, no folder is written; ``onnxruntime.disable_telemetry_events()`` alone,
called after the import, still let the queue be written), and every path that loads an ONNX model
(the embedding model, OCR) also calls that switch, for a process that imported onnxruntime first.
"""

from __future__ import annotations

import os
import threading

_DONE = False
_LOCK = threading.Lock()


def quiet_onnxruntime() -> None:
    """Turn off onnxruntime's telemetry events for this process (idempotent, thread-safe); a
    missing onnxruntime or a version without the switch is not an error."""
    global _DONE
    if _DONE:
        return
    with _LOCK:
        if _DONE:
            return
        os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")  # read when onnxruntime is first imported
        try:
            import onnxruntime  # noqa: PLC0415 - heavy (ONNX Runtime), first use only

            onnxruntime.disable_telemetry_events()
        except (ImportError, AttributeError):
            pass
        _DONE = True
