"""What the tests share that is not a fixture: import as ``from tests.helpers.<module> import ...``
(never from ``conftest`` or from another test module). The fixtures are in the ``conftest.py`` files.

``env`` the repository, the corpus, a test's isolation and prepared data folders; ``pg`` the embedded
PostgreSQL (session server, per-test databases, a server of a test's own); ``s3`` the moto server and its
buckets; ``backends`` the vector backends the contract suite runs on; ``app`` AppTest; ``api`` a uvicorn
server in a thread; ``browser`` the Streamlit server and Chromium; the rest by their names."""
