"""Local model servers on this machine: find one on its default port and make a chat config for it.

Only loopback is probed (``127.0.0.1``), only when asked (the Settings page, once per visit, and
its *Look again* button; nothing probes in the background: offline means offline), with a short
timeout per port. Each port is asked ``GET /v1/models`` -- the OpenAI-compatible list every one of
these servers serves -- and, for Ollama, ``GET /api/tags`` when the first has no models.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass

from knowledge.llm.config import CHAT, LlmConfig

#: The servers and their default ports: Ollama 11434, LM Studio 1234, llama.cpp's server 8080.
DEFAULT_PORTS: dict[str, int] = {"Ollama": 11434, "LM Studio": 1234, "llama.cpp server": 8080}
#: Seconds to wait for each port (a closed port answers at once; a busy one is not waited for).
PROBE_TIMEOUT = 0.5


@dataclass(frozen=True, slots=True)
class LocalServer:
    """A server found: ``name`` (as in :data:`DEFAULT_PORTS`), ``base_url`` (``http://127.0.0.1:PORT/v1``)
    and the ``models`` it lists, in its order."""

    name: str
    base_url: str
    models: tuple[str, ...]

    def config(self, model: str | None = None, name: str | None = None) -> LlmConfig:
        """A CHAT config for ``model`` (default: the first listed) on this server, in the
        search-first mode (small local models cannot drive tool calls reliably).

        Raises:
            ValueError: the server lists no model and none is given.
        """
        model = model or (self.models[0] if self.models else None)
        if not model:
            raise ValueError(f"{self.name} at {self.base_url} lists no model; load one in it first.")
        label = name or f"{self.name} {model}"
        cleaned = "".join(ch if ch.isalnum() or ch in " .-_" else "-" for ch in label)[:64].strip()
        return LlmConfig(name=cleaned, type=CHAT, provider="openai", model=model, base_url=self.base_url, search_first=True)


def _get_json(url: str, timeout: float) -> object | None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return json.loads(resp.read())
    except (OSError, ValueError, urllib.error.URLError):
        return None


def probe(name: str, port: int, host: str = "127.0.0.1", timeout: float = PROBE_TIMEOUT) -> LocalServer | None:
    """The server on ``host:port`` if it answers the model list, else ``None`` (never raises)."""
    base = f"http://{host}:{int(port)}"
    listed = _get_json(f"{base}/v1/models", timeout)
    models: list[str] = []
    if isinstance(listed, dict) and isinstance(listed.get("data"), list):
        models = [str(m.get("id")) for m in listed["data"] if isinstance(m, dict) and m.get("id")]
    if not models:
        tags = _get_json(f"{base}/api/tags", timeout)  # Ollama's own list
        if isinstance(tags, dict) and isinstance(tags.get("models"), list):
            models = [str(m.get("name")) for m in tags["models"] if isinstance(m, dict) and m.get("name")]
        elif listed is None:
            return None
    return LocalServer(name, f"{base}/v1", tuple(models))


def detect(ports: dict[str, int] | None = None, timeout: float = PROBE_TIMEOUT) -> list[LocalServer]:
    """The local servers answering on ``ports`` (name -> port; default :data:`DEFAULT_PORTS`) of
    ``127.0.0.1``, in that order."""
    found = []
    for name, port in (ports or DEFAULT_PORTS).items():
        server = probe(name, port, timeout=timeout)
        if server is not None:
            found.append(server)
    return found


__all__ = ["DEFAULT_PORTS", "PROBE_TIMEOUT", "LocalServer", "detect", "probe"]
