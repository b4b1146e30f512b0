"""A visitor of a ``streamlit run`` server without a browser, as an attacker would be one: Streamlit's own
websocket protocol (``/_stcore/stream``, protobuf ``BackMsg`` up, ``ForwardMsg`` down) and raw HTTP
uploads to ``/_stcore/upload_file/<session>/<file>``; and the server process's resident memory.

Imported as ``from tests.helpers.stream import ...``.
"""

from __future__ import annotations

import http.client
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg
from streamlit.web.server.starlette.starlette_app_utils import (
    generate_xsrf_token_string,
)
from websockets.sync.client import ClientConnection, connect

MIB = 1024 * 1024


def rss_bytes(pid: int) -> int:
    """The resident memory of process ``pid`` (``VmRSS`` of /proc/<pid>/status), in bytes."""
    text = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"^VmRSS:\s+(\d+) kB", text, re.MULTILINE)[1]) * 1024


def new_xsrf() -> str:
    """An XSRF token of Streamlit's format: anyone can make one and send it as cookie and header."""
    return generate_xsrf_token_string(None, None)


@dataclass
class Visitor:
    """One websocket session on the server; ``session_id`` is known once the server has said it
    (:meth:`run_app`) or an upload URL has named it."""

    ws: ClientConnection
    url: str
    xsrf: str
    session_id: str | None = None
    seen: list[str] = field(default_factory=list)  # the types of every ForwardMsg received

    def _send(self, msg: BackMsg) -> None:
        self.ws.send(msg.SerializeToString())

    def _until(self, kind: str, timeout: float = 120.0) -> ForwardMsg:
        while True:
            msg = ForwardMsg()
            msg.ParseFromString(self.ws.recv(timeout=timeout))
            got = msg.WhichOneof("type")
            self.seen.append(got)
            if got == "new_session" and msg.new_session.initialize.session_id:
                self.session_id = msg.new_session.initialize.session_id
            if got == kind:
                return msg

    def run_app(self, timeout: float = 120.0) -> None:
        """Ask for a run of app.py (what a browser does on opening the page) and wait for its end."""
        msg = BackMsg()
        msg.rerun_script.query_string = ""
        self._send(msg)
        self._until("script_finished", timeout)

    def upload_urls(self, *names: str):
        """The server's ``FileURLsResponse`` to a ``file_urls_request`` for ``names``."""
        msg = BackMsg()
        msg.file_urls_request.request_id = uuid.uuid4().hex
        msg.file_urls_request.file_names.extend(names)
        self._send(msg)
        response = self._until("file_urls_response").file_urls_response
        for urls in response.file_urls:
            self.session_id = self.session_id or urls.upload_url.split("/")[-2]
        return response

    def put(self, size: int, path: str | None = None) -> tuple[int, str]:
        """PUT ``size`` bytes as one file to ``path`` (default: a fresh file id in this session)."""
        return put_upload(self.url, path or f"/_stcore/upload_file/{self.session_id}/{uuid.uuid4()}", size, self.xsrf)


@contextmanager
def visitor(url: str) -> Iterator[Visitor]:
    """A websocket session on the server at ``url`` (``http://127.0.0.1:<port>``), open until the
    block ends; XSRF token, Origin and cookie as a browser page of the app would send them."""
    xsrf = new_xsrf()
    ws_url = "ws" + url.removeprefix("http") + "/_stcore/stream"
    with connect(
        ws_url,
        subprotocols=["streamlit", xsrf],
        origin=url,
        additional_headers={"Cookie": f"_streamlit_xsrf={xsrf}"},
        max_size=None,
        open_timeout=30,
    ) as ws:
        yield Visitor(ws, url, xsrf)


def put_upload(url: str, path: str, size: int, xsrf: str) -> tuple[int, str]:
    """PUT a multipart body holding one file of ``size`` zero bytes to ``path``, as the file
    uploader does (XSRF header and cookie); returns the status and the body. When the server answers
    before the body is all sent (a refusal), the rest is not sent."""
    boundary = uuid.uuid4().hex
    head = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.bin"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    tail = f"\r\n--{boundary}--\r\n".encode()
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    conn.putrequest("PUT", path)
    conn.putheader("Content-Type", f"multipart/form-data; boundary={boundary}")
    conn.putheader("Content-Length", str(len(head) + size + len(tail)))
    conn.putheader("X-Xsrftoken", xsrf)
    conn.putheader("Cookie", f"_streamlit_xsrf={xsrf}")
    conn.putheader("Origin", url)
    conn.endheaders()
    chunk = b"\0" * MIB
    try:
        conn.send(head)
        sent = 0
        while sent < size:
            n = min(MIB, size - sent)
            conn.send(chunk[:n])
            sent += n
        conn.send(tail)
    except (TimeoutError, BrokenPipeError, ConnectionResetError):
        pass  # the server stopped reading: its answer is already on the way
    try:
        resp = conn.getresponse()
        try:
            return resp.status, resp.read().decode("utf-8", "replace")
        except http.client.IncompleteRead as exc:
            # The server closed a connection with request bytes it did not read: the reset can drop
            # the body it had sent. Say so, with the length it announced, instead of failing here.
            return resp.status, f"<truncated: {len(exc.partial) + (exc.expected or 0)} bytes announced>"
    finally:
        conn.close()


__all__ = ["MIB", "Visitor", "new_xsrf", "put_upload", "rss_bytes", "visitor"]
