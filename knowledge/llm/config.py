"""LLM configs: named descriptions of a model and how to reach it, stored in the catalog.

A config has a ``name``, a ``type`` (``CHAT`` or ``EMBEDDING``), a ``provider`` and a ``model``; a CHAT
config may declare ``capabilities`` (``VISION``: reads images, ``DOCUMENTS``: reads PDFs), and
``None`` means the provider's default (see :meth:`LlmConfig.effective_capabilities`).

API keys are never stored: ``api_key_env`` is the *name* of an environment variable that holds the
key, read when a request is made.

Two configs exist out of the box (catalog migration 2): ``embeddings`` (EMBEDDING, the bundled
offline model -- the knowledge tools need it) and ``offline`` (CHAT, the built-in retrieval-only
assistant, the default chat config). Deleting them is allowed; the knowledge tools then report
themselves unavailable, and the chat falls back to the offline assistant.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Final, Literal
from urllib.parse import urlparse

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from knowledge._names import check_name
from knowledge.catalog import Catalog
from knowledge.config import Settings
from knowledge.errors import InvalidArgument, KnowledgeError

CHAT: Final = "CHAT"
EMBEDDING: Final = "EMBEDDING"
VISION, DOCUMENTS = "VISION", "DOCUMENTS"

#: provider name -> the config type it serves
PROVIDERS: dict[str, str] = {
    "openai": CHAT,  # any OpenAI-compatible chat-completions server (base_url + model)
    "offline": CHAT,  # the built-in retrieval-only assistant, no model
    "bundled": EMBEDDING,  # the fastembed model of the settings (embeddings.model), offline
}
OFFLINE_CONFIG = "offline"

#: Hosts whose OpenAI-compatible API takes OpenAI's own ``file`` content block (PDF inline). Other
#: servers (LM Studio, Ollama, Groq, Mistral, vLLM, llama.cpp) get a DOCUMENTS part as a text note.
FILE_BLOCK_HOSTS = ("api.openai.com", "openrouter.ai", ".openai.azure.com", ".azure.com")

_NAME = re.compile(r"^[\w][\w .\-]{0,63}$")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


class LlmConfigNotFound(KnowledgeError, LookupError):
    """No LLM config has the given name."""


class LlmUnavailable(KnowledgeError):
    """A model cannot be reached or used (no key in the named variable, server down, bad answer)."""


class LlmConfig(BaseModel):
    """One LLM config (see the module docstring).

    ``context_tokens`` is the working-memory budget of a chat request in tokens (history is cut to
    it, oldest turns first); ``timeout`` is seconds per HTTP request. ``write_tools`` (CHAT, default
    off) offers the model the writing knowledge tools too, acting only on the chat's own attachment
    store; by default a model gets read tools only, because documents can carry instructions.
    ``search_first`` (CHAT, default off): the chat searches with the question first and the model
    writes from the top passages, numbered, offered no tools (:mod:`knowledge.llm.local` sets it).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=64)
    type: Literal["CHAT", "EMBEDDING"]
    provider: str
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    capabilities: list[Literal["VISION", "DOCUMENTS"]] | None = None
    context_tokens: int = Field(16_000, ge=1_000, le=2_000_000)
    temperature: float | None = Field(None, ge=0, le=2)
    timeout: float = Field(120.0, gt=0, le=3600)
    write_tools: bool = Field(
        False,
        description="CHAT: also offer the writing tools (vector_upsert,"
        " vector_delete_file, vector_ingest_file), on the chat's own attachments only",
    )
    search_first: bool = Field(
        False,
        description="CHAT: search first and give the model the top passages,"
        " numbered, with no tools (for small local models, which cannot drive tool calls)",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        check_name(v, "LLM config name")
        if not _NAME.fullmatch(v):
            raise ValueError("use letters, digits, spaces, '.', '-' or '_' (1-64 characters)")
        return v

    @field_validator("api_key_env")
    @classmethod
    def _env(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        v = v.strip()
        if v.startswith(("sk-", "gsk_", "sk_")) or not _ENV.match(v):
            raise ValueError(
                "give the NAME of an environment variable that holds the key (e.g. OPENAI_API_KEY), never the key itself"
            )
        return v

    @field_validator("base_url", "model")
    @classmethod
    def _blank(cls, v: str | None) -> str | None:
        return v.strip() if v and v.strip() else None

    @model_validator(mode="after")
    def _consistent(self) -> LlmConfig:
        kind = PROVIDERS.get(self.provider)
        if kind is None:
            raise ValueError(f"unknown provider {self.provider!r}; known: {', '.join(PROVIDERS)}")
        if kind != self.type:
            raise ValueError(f"provider {self.provider!r} serves {kind} configs, not {self.type}")
        if self.type == EMBEDDING and self.capabilities is not None:
            raise ValueError("capabilities are for CHAT configs")
        if self.type == EMBEDDING and self.write_tools:
            raise ValueError("write_tools is for CHAT configs")
        if self.search_first and self.provider != "openai":
            raise ValueError("search_first is for OpenAI-compatible chat configs")
        if self.provider == "openai" and not self.model:
            raise ValueError("an OpenAI-compatible config needs a model name")
        if self.base_url:
            parsed = urlparse(self.base_url)
            if parsed.scheme not in ("http", "https") or not parsed.netloc:
                raise ValueError(f"base_url must be an http(s) URL, got {self.base_url!r}")
        return self

    # -- what the model reads -------------------------------------------------------------------
    def effective_capabilities(self) -> frozenset[str]:
        """The declared capabilities, else the provider's default: OpenAI's own API (no
        ``base_url``) reads images; an unknown OpenAI-compatible server and the offline assistant
        read neither images nor PDFs (a placeholder stands in)."""
        if self.capabilities is not None:
            return frozenset(self.capabilities)
        if self.provider == "openai" and not self.base_url:
            return frozenset({VISION})
        return frozenset()

    def document_mode(self) -> Literal["file", "text"]:
        """How a PDF travels to a DOCUMENTS model: ``file`` (OpenAI's ``file`` content block, for
        OpenAI, OpenRouter and Azure) or ``text`` (a text note with the extracted text, for LM
        Studio, Ollama, Groq, Mistral and other OpenAI-compatible servers)."""
        if self.provider != "openai":
            return "text"
        if not self.base_url:
            return "file"
        host = (urlparse(self.base_url).hostname or "").lower()
        return "file" if any(host == h.lstrip(".") or host.endswith(h) for h in FILE_BLOCK_HOSTS) else "text"

    def public(self) -> dict:
        """The config as a dict for display: never contains a key, only the variable's name."""
        return self.model_dump()


def parse_config(data: dict) -> LlmConfig:
    """``LlmConfig`` from a dict. Raises ``InvalidArgument`` naming the bad field."""
    try:
        return LlmConfig(**data)
    except ValidationError as exc:
        msgs = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'config'}: {e['msg']}" for e in exc.errors())
        raise InvalidArgument(f"Invalid LLM config: {msgs}") from None
    except TypeError as exc:
        raise InvalidArgument(f"Invalid LLM config: {exc}") from None


class LlmConfigs:
    """The LLM configs in the catalog. Thread-safe (the catalog serialises access)."""

    def __init__(self, catalog: Catalog, settings: Settings) -> None:
        self.catalog = catalog
        self.settings = settings

    def list(self, type: str | None = None) -> list[LlmConfig]:
        """Every config (of ``type`` if given), by name. A stored config that no longer validates is
        skipped here and reported by :meth:`get`."""
        with self.catalog.cursor() as cur:
            rows = cur.execute("SELECT spec FROM llm_configs ORDER BY lower(name), name").fetchall()
        out = []
        for (spec,) in rows:
            try:
                cfg = parse_config(json.loads(spec))
            except InvalidArgument:
                continue
            if type is None or cfg.type == type:
                out.append(cfg)
        return out

    def find(self, name: str) -> LlmConfig | None:
        with self.catalog.cursor() as cur:
            row = cur.execute("SELECT spec FROM llm_configs WHERE name = ?", [name]).fetchone()
        return parse_config(json.loads(row[0])) if row else None

    def get(self, name: str) -> LlmConfig:
        """The config ``name``. Raises ``LlmConfigNotFound``; ``InvalidArgument`` if it is broken."""
        cfg = self.find(name)
        if cfg is None:
            raise LlmConfigNotFound(f"No LLM config named {name!r}. Create it on the Settings page.")
        return cfg

    def save(self, config: LlmConfig | dict) -> LlmConfig:
        """Insert or replace a config (validated). Returns it."""
        cfg = config if isinstance(config, LlmConfig) else parse_config(config)
        now = datetime.now(UTC)
        with self.catalog.cursor() as cur:
            cur.execute(
                "INSERT INTO llm_configs VALUES (?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET"
                " spec = excluded.spec, updated = excluded.updated",
                [cfg.name, json.dumps(cfg.model_dump()), now, now],
            )
        return cfg

    def delete(self, name: str) -> bool:
        with self.catalog.cursor() as cur:
            return bool(cur.execute("DELETE FROM llm_configs WHERE name = ? RETURNING name", [name]).fetchall())

    def default_chat(self) -> LlmConfig:
        """The default chat config: ``offline`` (built in; recreated in memory if it was deleted)."""
        return self.chat(None)

    def chat(self, name: str | None) -> LlmConfig:
        """The CHAT config ``name`` (``None``: the offline assistant). Raises ``LlmConfigNotFound``,
        ``InvalidArgument`` when ``name`` is not a CHAT config."""
        if name is None or name == OFFLINE_CONFIG:
            return self.find(OFFLINE_CONFIG) or LlmConfig(name=OFFLINE_CONFIG, type=CHAT, provider="offline")
        cfg = self.get(name)
        if cfg.type != CHAT:
            raise InvalidArgument(f"LLM config {name!r} is an {cfg.type} config; a chat needs a CHAT config.")
        return cfg

    def embedding_model(self) -> tuple[str | None, str]:
        """The model of the embedding config the knowledge tools use (``vector_store.embedding_config``):
        ``(model, "")``, or ``(None, reason)`` when the config is missing, broken or not EMBEDDING."""
        name = self.settings.vector_store.embedding_config
        try:
            cfg = self.find(name)
        except InvalidArgument as exc:
            return None, f"the embedding config {name!r} is broken: {exc}"
        if cfg is None:
            return None, (
                f"there is no LLM config named {name!r} of type EMBEDDING (create one on the"
                " Settings page, provider bundled)"
            )
        if cfg.type != EMBEDDING:
            return None, f"the LLM config {name!r} is a {cfg.type} config, not EMBEDDING"
        return cfg.model or self.settings.embeddings.model, ""
