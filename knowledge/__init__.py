"""knowledge: a local knowledge workbench (see README.md)."""

import os as _os

# No telemetry: onnxruntime (the embedding model, OCR) otherwise records usage events in a local queue
# for Microsoft's collector. Set before anything imports onnxruntime (see knowledge._onnx).
_os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")
