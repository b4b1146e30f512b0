"""PDFium's process-wide lock, shared by the PDF reader (:mod:`._pdf`) and OCR (:mod:`._ocr`).

PDFium is not thread-safe (pypdfium2's documentation): every call into it -- opening, reading,
rendering, closing -- holds :data:`PDFIUM_LOCK`. The PDF reader takes it after its own pypdf lock
when both are held. A module of its own so both readers import it one way (no cycle).
"""

from __future__ import annotations

import threading

PDFIUM_LOCK = threading.RLock()

__all__ = ["PDFIUM_LOCK"]
