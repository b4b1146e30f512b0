"""Text as the product reads and shows it: ``analysis`` (the terms BM25 ranks by), ``highlight``
(which words match a query, text made inert with them marked) and ``render`` (chunks, names and
model answers as safe HTML or plain text: untrusted text is never markup).

Pure functions of text: may import only the ground (``knowledge.errors`` and the like).
"""
