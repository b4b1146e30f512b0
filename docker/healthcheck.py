"""The container's health check (``knowledge-container health [ROLE]``, the image's ``HEALTHCHECK``):
asks the process this container runs, on loopback, whether it is ready, and exits 0 (healthy) or 1.

The role is the argument, else read from the container's command line (``/proc/1/cmdline``:
``tini -- knowledge-container ROLE ...``):

* ``api``, ``mcp``: ``GET /readyz`` on 8900 / 8901 (the catalog, the file store, the vector backend and the
  model all answer; docs/team.md, "Operating it");
* ``worker``: ``GET /readyz`` of its health listener (``ingest.worker_health_port``, 9101 here): ready
  only while it is ``running``, not ``waiting`` for the database, ``sick`` or ``stopped``;
* ``app``: Streamlit's ``GET /_stcore/health`` on 8501 (the server answers);
* anything else (``init``, a one-off command): healthy, there is nothing to ask.

A ``--port N`` (``--server.port N`` for the app) given after the role is followed. What a probe that
failed answered is printed (``docker inspect`` shows it under ``State.Health``)."""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

#: role -> (port, path)
PROBES = {
    "app": (8501, "/_stcore/health"),
    "api": (8900, "/readyz"),
    "mcp": (8901, "/readyz"),
    "worker": (9101, "/readyz"),
}


def command_line() -> list[str]:
    """The container's command line, from the entrypoint's name on (``[]`` when it cannot be read)."""
    try:
        with open("/proc/1/cmdline", "rb") as fh:
            words = [w.decode(errors="replace") for w in fh.read().split(b"\0") if w]
    except OSError:
        return []
    for i, word in enumerate(words):
        if os.path.basename(word) in ("knowledge-container", "entrypoint.sh"):
            return words[i + 1 :] or ["app"]
    return []


def port_of(role: str, args: list[str]) -> int:
    """The port the role's process listens on: a ``--port``/``--server.port`` among ``args``, else its default."""
    flags = ("--server.port",) if role == "app" else ("--port",)
    for i, arg in enumerate(args):
        for flag in flags:
            if arg == flag and i + 1 < len(args) and args[i + 1].isdigit():
                return int(args[i + 1])
            if arg.startswith(flag + "=") and arg.split("=", 1)[1].isdigit():
                return int(arg.split("=", 1)[1])
    if role == "worker":
        return int(os.environ.get("KNOWLEDGE_INGEST__WORKER_HEALTH_PORT") or PROBES["worker"][0])
    return PROBES[role][0]


def main(argv: list[str]) -> int:
    words = argv or command_line()
    role = words[0] if words else ""
    if role not in PROBES:
        print(f"healthy: nothing to ask ({role or 'no role'})")
        return 0
    url = f"http://127.0.0.1:{port_of(role, words[1:])}{PROBES[role][1]}"
    try:
        with urllib.request.urlopen(url, timeout=8) as response:
            body = response.read(2000).decode(errors="replace")
    except urllib.error.HTTPError as exc:
        print(f"unhealthy: {url} answered {exc.code}: {exc.read(2000).decode(errors='replace')}")
        return 1
    except OSError as exc:
        print(f"unhealthy: {url}: {exc}")
        return 1
    print(f"healthy: {url}: {body.strip()[:500]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
