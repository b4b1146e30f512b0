"""A real HTTP server on 127.0.0.1 for the web-page tests: ``Site.pages`` maps a path to
``(status, headers, body)``; every request is recorded in ``Site.requests`` (the paths asked for)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class Site:
    def __init__(self) -> None:
        self.pages: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.requests: list[str] = []
        self.lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with site.lock:
                    site.requests.append(self.path)
                    status, headers, body = site.pages.get(self.path, (404, {"Content-Type": "text/plain"},
                                                                       b"no such page"))
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                if "Content-Length" not in headers:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def html(self, path: str, body: str, status: int = 200) -> None:
        self.pages[path] = (status, {"Content-Type": "text/html; charset=utf-8"}, body.encode("utf-8"))

    def redirect(self, path: str, to: str, status: int = 302) -> None:
        self.pages[path] = (status, {"Location": to}, b"")

    def asked(self, path: str) -> int:
        with self.lock:
            return sum(1 for p in self.requests if p == path)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site() -> Iterator[Site]:
    s = Site()
    yield s
    s.close()


def page(title: str, text: str, links: tuple[str, ...] = ()) -> str:
    anchors = "".join(f'<p><a href="{href}">link {i}</a></p>' for i, href in enumerate(links))
    return (f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1>"
            f"<p>{text}</p>{anchors}</body></html>")
