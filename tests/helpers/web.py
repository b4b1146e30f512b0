"""A real HTTP server on 127.0.0.1 for the web-page tests: ``Site.pages`` maps a path to
``(status, headers, body)``; every request is recorded in ``Site.requests`` (the paths asked for).
Hostile ones too: :class:`TrickleServer` (headers one byte at a time, never done) and the bodies of
:func:`zeros_bomb` / :func:`gzip_layers` (a chained ``Content-Encoding``)."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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
                    status, headers, body = site.pages.get(self.path, (404, {"Content-Type": "text/plain"}, b"no such page"))
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


def page(title: str, text: str, links: tuple[str, ...] = ()) -> str:
    anchors = "".join(f'<p><a href="{href}">link {i}</a></p>' for i, href in enumerate(links))
    return (
        f"<!doctype html><html><head><title>{title}</title></head><body><h1>{title}</h1><p>{text}</p>{anchors}</body></html>"
    )


# -- hostile servers and bodies (importable by the benchmark) -----------------------------------------
def gzip_layers(data: bytes, layers: int = 2) -> bytes:
    """``data`` gzip-compressed ``layers`` times over: the body to serve with
    ``Content-Encoding: gzip, gzip`` (one ``gzip`` per layer)."""
    import gzip

    for _ in range(layers):
        data = gzip.compress(data, compresslevel=9, mtime=0)
    return data


def zeros_bomb(decoded_mb: int = 1024, layers: int = 2) -> bytes:
    """A body of ``decoded_mb`` MB of zero bytes gzip-compressed ``layers`` times, built in 1 MiB
    steps (the zeros are never held at once). 1,024 MB in two layers is about 10 KB on the wire:
    serve it with ``Content-Encoding`` ``gzip`` repeated ``layers`` times."""
    import zlib

    c = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    block = bytes(1 << 20)
    inner = b"".join(c.compress(block) for _ in range(decoded_mb)) + c.flush()
    return gzip_layers(inner, layers - 1)


class TrickleServer:
    """A raw TCP server on 127.0.0.1 that answers the path ``slow_path`` by sending its response
    headers one byte every ``interval`` seconds, never finishing them (a "slowloris" in reverse:
    httpx's per-read timeouts never trip) for ``lasts`` seconds, then closing; any other path gets
    ``404`` at once. ``served`` counts the slow answers begun. Close it after use."""

    def __init__(self, slow_path: str = "/slow", interval: float = 0.05, lasts: float = 15.0) -> None:
        import socket

        self.slow_path, self.interval, self.lasts = slow_path, interval, lasts
        self.served = 0
        self._stop = threading.Event()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(8)
        self._sock.settimeout(0.1)
        self.port = self._sock.getsockname()[1]
        self._threads: list[threading.Thread] = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn) -> None:
        try:
            conn.settimeout(5)
            request = b""
            while b"\r\n\r\n" not in request:
                part = conn.recv(4096)
                if not part:
                    return
                request += part
            path = request.split(b" ", 2)[1].decode("latin-1")
            if path != self.slow_path:
                conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                return
            self.served += 1
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Slow: "
            i = 0
            until = time.monotonic() + self.lasts
            while not self._stop.is_set() and time.monotonic() < until:
                conn.send(head[i : i + 1] if i < len(head) else b"a")
                i += 1
                time.sleep(self.interval)
        except OSError:
            pass
        finally:
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        for t in self._threads:
            t.join(5)
