"""Builders shared by the chat tests: a real PNG, a real PDF, a chat service on a fast fake embedder,
and a local HTTP server speaking OpenAI's chat-completions protocol."""

from __future__ import annotations

import json
import struct
import threading
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from fpdf import FPDF

#: Two pages of text the chat tests ingest (test_chat_openai.py, test_local_model.py).
PAGES = [
    "The harbour master records every ship that enters the port.",
    "The tide tables are printed each Sunday for the sailors of the bay.",
]


def png_bytes(width: int = 4, height: int = 3, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    """A valid PNG of one colour (8-bit RGB), written by hand (zlib + CRC chunks)."""

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def pdf_bytes(pages: list[str]) -> bytes:
    """A text PDF (fpdf2), one string per page."""
    pdf = FPDF()
    pdf.set_font("helvetica", size=12)
    for text in pages:
        pdf.add_page()
        pdf.multi_cell(0, 8, text)
    return bytes(pdf.output())


class ChatCompletionsServer:
    """A local server speaking ``POST /v1/chat/completions`` (OpenAI's protocol; a request with
    ``stream: true`` is answered with server-sent events, one chunk per word) and, given ``models``,
    ``GET /v1/models``.

    ``script`` is a list of functions ``request_json -> assistant message dict`` (``{"content":
    ...}`` or ``{"tool_calls": [...]}``), used in order; every request body is kept in
    :attr:`requests` exactly as the client sent it.
    """

    def __init__(self, script: list[Callable[[dict[str, Any]], dict[str, Any]]], models: list[str] | None = None) -> None:
        self.script = list(script)
        self.models = models  # GET /v1/models lists these (None: 404, as a server without the route)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(body)
                outer.headers.append({k.lower(): v for k, v in self.headers.items()})
                if self.path.rstrip("/") != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": f"no route {self.path}"}})
                if not outer.script:
                    return self._send(500, {"error": {"message": "script exhausted"}})
                message = {"role": "assistant", "content": None, **outer.script.pop(0)(body)}
                if body.get("stream"):
                    return self._stream(body, str(message.get("content") or ""))
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                self._send(
                    200,
                    {
                        "id": f"chatcmpl-{len(outer.requests)}",
                        "object": "chat.completion",
                        "created": 1_700_000_000,
                        "model": body["model"],
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
                    },
                )

            def do_GET(self) -> None:
                if self.path.rstrip("/") == "/v1/models" and outer.models is not None:
                    return self._send(200, {"object": "list", "data": [{"id": m, "object": "model"} for m in outer.models]})
                self._send(404, {"error": {"message": f"no route {self.path}"}})

            def _stream(self, body: dict[str, Any], content: str) -> None:
                """The answer as server-sent events, one chunk per word, then ``[DONE]``."""
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                words = content.split(" ")
                for i, word in enumerate(words):
                    piece = word if i == 0 else " " + word
                    chunk = {
                        "id": "chatcmpl-s",
                        "object": "chat.completion.chunk",
                        "created": 1_700_000_000,
                        "model": body["model"],
                        "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}],
                    }
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
                self.wfile.flush()

            def _send(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if status >= 500:  # a scripted failure is final: the client's retries would only wait
                    self.send_header("x-should-retry", "false")
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )  # shutdown() waits up to one poll

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> ChatCompletionsServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def tool_call(name: str, arguments: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    """An assistant message asking for one tool call."""
    return {
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}]
    }
