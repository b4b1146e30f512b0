"""The stand-in S3 server (docker/standins/s3.Dockerfile): moto's S3 in server mode on 0.0.0.0:8333,
``GET /healthz`` answered as SeaweedFS's S3 gateway answers it, and the buckets kept across restarts.

It takes the SeaweedFS image's command (``mini -dir=/data ...``) and uses only ``-dir``. moto keeps
everything in memory: the buckets are loaded from ``DIR/moto-s3.pickle`` at the start and written
there (to a temporary file, then renamed) when the container is stopped (SIGTERM, SIGINT), so
``docker compose down`` and ``up`` keep them; a killed server loses what changed since it started.
moto does not check signatures: any key is let in. Buckets are addressed by path (``http://s3:8333/bucket/key``:
``S3_IGNORE_SUBDOMAIN_BUCKETNAME`` in the image), as the product's client does with an endpoint URL."""

from __future__ import annotations

import os
import pickle
import signal
import sys
import threading
from pathlib import Path

from moto.moto_server.werkzeug_app import create_backend_app
from moto.s3.models import s3_backends
from werkzeug.serving import make_server

PORT = 8333


def data_dir(argv: list[str]) -> Path:
    for arg in argv:
        if arg.startswith(("-dir=", "--dir=")):
            return Path(arg.split("=", 1)[1])
    return Path("/data")


def load(path: Path) -> None:
    """Put the buckets saved at ``path`` (if any) into moto's S3 backends."""
    if not path.is_file():
        return
    with path.open("rb") as fh:
        saved: dict[str, dict[str, dict]] = pickle.load(fh)
    for account, partitions in saved.items():
        for partition, buckets in partitions.items():
            s3_backends[account][partition].buckets.update(buckets)
    print(f"s3 stand-in: loaded {sum(len(b) for p in saved.values() for b in p.values())} bucket(s) from {path}", flush=True)


def save(path: Path) -> None:
    """Write moto's S3 buckets to ``path`` (a temporary file renamed over it)."""
    state = {
        account: {partition: dict(backend.buckets) for partition, backend in partitions.items()}
        for account, partitions in s3_backends.items()
    }
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as fh:
        pickle.dump(state, fh, protocol=pickle.HIGHEST_PROTOCOL)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)
    print(f"s3 stand-in: saved to {path}", flush=True)


def with_healthz(app):
    def wsgi(environ, start_response):
        if environ.get("PATH_INFO") == "/healthz" and environ.get("REQUEST_METHOD") in ("GET", "HEAD"):
            start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", "2")])
            return [b"ok"]
        return app(environ, start_response)

    return wsgi


def main(argv: list[str]) -> int:
    state = data_dir(argv) / "moto-s3.pickle"
    load(state)
    app = with_healthz(create_backend_app("s3"))  # every request is S3's, whatever its Host
    server = make_server("0.0.0.0", PORT, app, threaded=True)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"s3 stand-in: moto S3 on 0.0.0.0:{PORT}, state in {state}", flush=True)
    while not stop.wait(1):
        pass
    server.shutdown()
    save(state)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
