"""Two real ``python -m knowledge serve`` processes on one PostgreSQL catalog + pgvector (and one
file-store folder), driven by the official ``openai`` client: what is uploaded, batched and chatted
through A is there through B, and after both are stopped and started again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import quote, urlencode

import httpx
import openai
import pytest
from psycopg.conninfo import conninfo_to_dict

from tests.helpers.api import free_port
from tests.helpers.pg import pg_catalog_settings

RESULT = "ch09-02-recoverable-errors-with-result.md"
PANIC = "ch09-01-unrecoverable-errors-with-panic.md"
ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


class Server:
    """``python -m knowledge serve`` on a free port with ``env``, its output in ``log``."""

    def __init__(self, env: dict[str, str], log: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = log
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "knowledge", "serve", "--port", str(self.port)],
                env=env,
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 90
        while True:
            try:
                if httpx.get(self.base + "/v1/models", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"the server did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.1)
        self.client = openai.OpenAI(base_url=self.base + "/v1", api_key="unused", max_retries=0, timeout=90)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.mark.processes
def test_two_serve_processes_on_one_postgresql_are_one_product(tmp_path, settings, pg_database, corpus):
    info = conninfo_to_dict(pg_catalog_settings(settings).catalog.url or "")
    query = urlencode({k: v for k, v in info.items() if k in ("host", "port", "password")})
    url = f"postgresql://{quote(str(info.get('user', 'postgres')))}@/{quote(str(info['dbname']))}?{query}"
    base = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    base.update(
        PYTHONPATH=str(ROOT),
        KNOWLEDGE_CATALOG__URL=url,
        KNOWLEDGE_VECTOR_STORE__BACKEND="pgvector",
        KNOWLEDGE_VECTOR_STORE__URL=url,
        KNOWLEDGE_FILE_STORE__DIR=str(tmp_path / "shared-files"),
        KNOWLEDGE_EMBEDDINGS__MODEL="fake/hash-64",
    )
    envs = [{**base, "KNOWLEDGE_DATA_DIR": str(tmp_path / name)} for name in ("a", "b")]
    book = corpus / "md" / "rust-book"
    servers = [Server(env, tmp_path / f"{i}.log") for i, env in enumerate(envs)]
    try:
        a, b = (s.client for s in servers)
        vs = a.vector_stores.create(name="team", metadata={"owner": "docs"})
        with (book / RESULT).open("rb") as f1, (book / PANIC).open("rb") as f2:
            batch = a.vector_stores.file_batches.upload_and_poll(vector_store_id=vs.id, files=[f1, f2], poll_interval_ms=100)
        assert batch.status == "completed" and batch.file_counts.completed == 2

        seen = b.vector_stores.file_batches.retrieve(batch.id, vector_store_id=vs.id)
        assert seen.status == "completed" and seen.file_counts == batch.file_counts
        files = list(b.vector_stores.file_batches.list_files(batch.id, vector_store_id=vs.id))
        assert len(files) == 2 and {f.status for f in files} == {"completed"}
        assert b.vector_stores.retrieve(vs.id).metadata == {"owner": "docs"}
        hits = list(
            b.vector_stores.search(vs.id, query="propagating errors with the question mark operator", max_num_results=5)
        )
        assert hits and RESULT in {h.filename for h in hits}

        first = a.chat.completions.create(
            model="offline",
            metadata={"stores": "team"},
            messages=[{"role": "user", "content": "How do I propagate errors with the ? operator?"}],
        )
        session = first.model_extra["session"]
        second = b.chat.completions.create(
            model="offline",
            extra_headers={"X-Knowledge-Session": session},
            messages=[{"role": "user", "content": "And what does panic! do?"}],
        )
        assert second.model_extra["session"] == session and second.choices[0].message.content
        before = (seen.model_dump(), sorted(f.model_dump_json() for f in files))
    finally:
        for s in servers:
            s.stop()

    servers = [Server(env, tmp_path / f"{i}.log") for i, env in reversed(list(enumerate(envs)))]
    try:
        b, a = (s.client for s in servers)
        for c in (a, b):
            again = c.vector_stores.file_batches.retrieve(batch.id, vector_store_id=vs.id)
            listed = list(c.vector_stores.file_batches.list_files(batch.id, vector_store_id=vs.id))
            assert (again.model_dump(), sorted(f.model_dump_json() for f in listed)) == before
            assert c.vector_stores.retrieve(vs.id).metadata == {"owner": "docs"}
            assert list(c.vector_stores.search(vs.id, query="the question mark operator", max_num_results=3))
        third = a.chat.completions.create(
            model="offline", metadata={"session": session}, messages=[{"role": "user", "content": "Thanks."}]
        )
        assert third.model_extra["session"] == session
    finally:
        for s in servers:
            s.stop()
