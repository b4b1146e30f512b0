"""Team mode end to end (issue 26): one PostgreSQL over TCP, two API processes and two workers, each
with a data folder of its own -- what they share is the database (catalog, pgvector, files).

Files uploaded through process A are listed with their status and searched through process B; a chat
started in A goes on in B and is listed by a third process (the CLI); a worker killed with SIGKILL
mid-file leaves its job to the other, and every file ends done exactly once with the chunk counts the
vector store agrees with; stopping and starting every process loses nothing.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers.api import free_port

REPO = Path(__file__).resolve().parents[2]
API_KEY = "team-key-for-tests"
N_FILES = 6

pytestmark = [
    pytest.mark.slow,
    # the test's own waits allow up to 20 min (the batch: 900 s); at load 17-19 on 2 cores it took
    # 671 s, past the ini's 600 s
    pytest.mark.timeout(1800),
]


def _text(i: int) -> str:
    """A document of ~40 chunks (a worker spends seconds on it: a kill lands mid-file)."""
    topics = [
        "tides and harbours",
        "glaciers and moraines",
        "bees and hives",
        "comets and orbits",
        "violins and varnish",
        "volcanoes and basalt",
    ]
    return "\n\n".join(
        f"## Part {p} of document {i}\n\n"
        + (f"Document {i} is about {topics[i]}, part {p}. The keeper of record {i}-{p} wrote about {topics[i]} at length. ")
        * 12
        for p in range(40)
    )


class Proc:
    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.log = name, log
        self.fh = log.open("ab")
        self.p = subprocess.Popen(
            [sys.executable, "-m", "knowledge", *args], env=env, cwd=str(REPO), stdout=self.fh, stderr=subprocess.STDOUT
        )

    def output(self) -> str:
        self.fh.flush()
        return self.log.read_text("utf-8", "replace")[-4000:]

    def stop(self) -> None:
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGINT)
            try:
                self.p.wait(60)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(10)
        self.fh.close()


class Team:
    """The processes of one deployment on this machine, each with its own data folder."""

    def __init__(self, tmp: Path, url: str) -> None:
        self.tmp, self.url = tmp, url
        models = tmp / "models"  # the bundled model, unpacked once for every process
        from knowledge.embeddings.bundled import ensure_bundled_model

        ensure_bundled_model(models)
        self.base = {
            **os.environ,
            "PYTHONPATH": str(REPO),
            "KNOWLEDGE_CATALOG__URL": url,
            "KNOWLEDGE_VECTOR_STORE__BACKEND": "pgvector",
            "KNOWLEDGE_VECTOR_STORE__URL": url,
            "KNOWLEDGE_FILE_STORE__BACKEND": "postgresql",
            "KNOWLEDGE_EMBEDDINGS__MODELS_DIR": str(models),
            "KNOWLEDGE_EMBEDDINGS__THREADS": "1",
            "KNOWLEDGE_API_KEY": API_KEY,
            "KNOWLEDGE_INGEST__JOB_LEASE_SECONDS": "3",
        }
        self.procs: list[Proc] = []

    def env(self, name: str, **extra: str) -> dict[str, str]:
        return {**self.base, "KNOWLEDGE_DATA_DIR": str(self.tmp / name), **extra}

    def api(self, name: str):
        port = free_port()
        proc = Proc(
            name,
            ["serve", "--port", str(port)],
            self.env(name, KNOWLEDGE_INGEST__WORKER_THREADS="0"),
            self.tmp / f"{name}.log",
        )
        self.procs.append(proc)
        return proc, _client(port, proc)

    def worker(self, name: str) -> Proc:
        proc = Proc(name, ["worker", "--lease", "3", "--poll", "0.2"], self.env(name), self.tmp / f"{name}.log")
        self.procs.append(proc)
        return proc

    def stop_all(self) -> None:
        for p in self.procs:
            p.stop()
        self.procs = []


def _client(port: int, proc: Proc):
    import openai

    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=API_KEY, max_retries=0, timeout=120)
    deadline = time.monotonic() + 180
    while True:
        try:
            client.models.list()
            return client
        except openai.APIConnectionError:
            if proc.p.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"{proc.name} did not start:\n{proc.output()}") from None
            time.sleep(0.2)


def _until(what: str, check, timeout: float = 600.0, every: float = 0.2):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(every)


@contextmanager
def _catalog(url: str) -> Iterator:
    from knowledge.catalog import Catalog

    cat = Catalog.from_url(url)
    try:
        yield cat
    finally:
        cat.shutdown()


def _rows(url: str, sql: str, args: list | None = None) -> list[tuple]:
    with _catalog(url) as cat, cat.cursor() as cur:
        return cur.execute(sql, args or []).fetchall()


def _probe(settings, url: str):
    """A workbench of this test process on the team's catalog (to count chunks; it embeds nothing)."""
    from knowledge.embeddings.fake import HashEmbedder
    from knowledge.workbench import Workbench

    settings = settings.model_copy(
        update={
            "catalog": settings.catalog.model_copy(update={"url": url}),
            # the team's file store: the catalog records it, and a process
            # naming another is refused (issue 39)
            "file_store": settings.file_store.model_copy(update={"backend": "postgresql"}),
        }
    )
    return Workbench(settings, embedder_factory=lambda model: HashEmbedder(dimension=384))


@pytest.mark.processes
def test_two_api_processes_and_two_workers_on_one_postgresql_behave_as_one_product(
    tmp_path: Path, pgvector_settings
) -> None:
    import openai
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(pgvector_settings().vector_store.url)  # this test's database, over TCP
    url = f"postgresql://{info['user']}@{info['host']}:{info['port']}/{info['dbname']}"
    team = Team(tmp_path, url)
    try:
        _, a = team.api("api-a")
        _, b = team.api("api-b")
        w1, w2 = team.worker("worker-1"), team.worker("worker-2")

        # the API key is the same front door in each process
        for port_client in (a, b):
            with pytest.raises(openai.AuthenticationError):
                openai.OpenAI(base_url=str(port_client.base_url), api_key="wrong", max_retries=0).models.list()

        # upload through A ...
        vs = a.vector_stores.create(name="team")
        ids = [a.files.create(file=(f"doc-{i}.md", _text(i).encode()), purpose="assistants").id for i in range(N_FILES)]
        batch = a.vector_stores.file_batches.create(vector_store_id=vs.id, file_ids=ids)

        # ... kill worker 1 with SIGKILL while it embeds a file
        def w1_mid_file():
            rows = _rows(
                url,
                "SELECT id, name, fraction FROM ingest_jobs WHERE status = 'running' AND worker LIKE ?",
                [f"%:{w1.p.pid}:%"],
            )
            return [r for r in rows if (r[2] or 0) > 0]

        killed = _until("worker 1 to be mid-file", w1_mid_file, timeout=300, every=0.05)[0]
        os.kill(w1.p.pid, signal.SIGKILL)
        assert w1.p.wait(30) == -signal.SIGKILL

        # ... and watch the batch through B: its status, counts, files
        def done():
            got = b.vector_stores.file_batches.retrieve(batch.id, vector_store_id=vs.id)
            return got if got.status != "in_progress" else None

        final = _until("the batch to finish (seen through B)", done, timeout=900, every=0.5)
        assert final.status == "completed" and final.file_counts.completed == N_FILES, final
        listed = list(b.vector_stores.files.list(vector_store_id=vs.id, limit=100))
        assert sorted(f.id for f in listed) == sorted(ids) and {f.status for f in listed} == {"completed"}

        # every file done exactly once: one job each, the killed one twice attempted, by worker 2
        jobs = _rows(url, "SELECT name, status, attempts, worker FROM ingest_jobs ORDER BY name")
        assert [j[1] for j in jobs] == ["done"] * N_FILES, jobs
        again = next(j for j in jobs if j[0] == killed[1])
        assert again[2] == 2 and f":{w2.p.pid}:" in again[3], (killed, again)
        records = _rows(url, "SELECT file_name, chunks, status FROM store_files WHERE store = 'team' ORDER BY file_name")
        assert [r[0] for r in records] == [f"doc-{i}.md" for i in range(N_FILES)] and {r[2] for r in records} == {"done"}
        probe = _probe(pgvector_settings(), url)
        try:
            store = probe.vector_store("team")
            counted = {f.file_name: (f.chunks, store.count(f.file_id)) for f in probe.store_files("team")}
        finally:
            probe.close()
        assert len(counted) == N_FILES and all(rec == vs > 20 for rec, vs in counted.values()), counted

        # the files are in PostgreSQL: no process kept them in its own folder
        assert not [
            p for n in ("api-a", "api-b", "worker-1", "worker-2") for p in (tmp_path / n).glob("files/**/*") if p.is_file()
        ]
        with _catalog(url) as cat, cat.cursor() as cur:
            assert cur.execute("SELECT count(*) FROM knowledge_files").fetchone()[0] == N_FILES

        # search through B finds what A uploaded
        hits = b.vector_stores.search(vector_store_id=vs.id, query="volcanoes and basalt")
        assert hits.data and hits.data[0].filename == "doc-5.md", [h.filename for h in hits.data]

        # a chat started in A goes on in B, and a third process lists it
        first = a.chat.completions.create(
            model="offline",
            messages=[{"role": "user", "content": "bees and hives?"}],
            extra_body={"metadata": {"stores": "team"}},
        )
        sid = first.model_extra["session"]
        second = b.chat.completions.create(
            model="offline",
            messages=[{"role": "user", "content": "and comets?"}],
            extra_headers={"X-Knowledge-Session": sid},
        )
        assert second.model_extra["session"] == sid
        listed_chats = subprocess.run(
            [sys.executable, "-m", "knowledge", "chat", "--list"],
            env=team.env("cli"),
            cwd=str(REPO),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert listed_chats.returncode == 0 and sid in listed_chats.stdout, listed_chats

        # stop every process, start new ones: nothing is lost
        team.stop_all()
        _, a2 = team.api("api-a")
        _, b2 = team.api("api-b")
        again_batch = b2.vector_stores.file_batches.retrieve(batch.id, vector_store_id=vs.id)
        assert again_batch.status == "completed" and again_batch.file_counts.completed == N_FILES
        assert {f.status for f in b2.vector_stores.files.list(vector_store_id=vs.id, limit=100)} == {"completed"}
        assert a2.vector_stores.search(vector_store_id=vs.id, query="glaciers and moraines").data[0].filename == "doc-1.md"
        third = a2.chat.completions.create(
            model="offline", messages=[{"role": "user", "content": "and tides?"}], extra_headers={"X-Knowledge-Session": sid}
        )
        assert third.model_extra["session"] == sid
    except AssertionError as exc:
        logs = "\n".join(f"--- {p.name}:\n{p.output()}" for p in team.procs)
        raise AssertionError(f"{exc}\n{logs}") from exc
    finally:
        team.stop_all()
