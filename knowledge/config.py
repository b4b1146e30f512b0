"""Settings: defaults < settings file (TOML) < ``KNOWLEDGE_*`` environment variables < arguments.

Every key of ``../shared/docs/PRODUCT.md`` is here. Nested keys are written with a dot in prose and
in the TOML file (``[vector_store] backend = "pgvector"``) and with a double underscore in the
environment (``KNOWLEDGE_VECTOR_STORE__BACKEND=pgvector``).

One data folder roots every relative path: ``data_dir`` (default ``data`` in the working directory,
``KNOWLEDGE_DATA_DIR`` moves it), so a test, a benchmark or a second demo runs against its own folder.

The settings file is, first match wins: ``KNOWLEDGE_SETTINGS_FILE``; ``<data_dir>/settings.toml``;
``knowledge.toml`` in the working directory. A named file that does not exist is an error; the other
two are optional. Unknown keys -- in the file or as ``KNOWLEDGE_*`` variables -- are an error, so a
typo never silently falls back to a default. Invalid values raise :class:`~knowledge.errors.ConfigError`.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from knowledge.errors import ConfigError
from knowledge.vocabulary import search_mode

ENV_PREFIX = "KNOWLEDGE_"
SETTINGS_FILE_ENV = "KNOWLEDGE_SETTINGS_FILE"
#: The account the command line acts as when ``--user`` is not given (not a setting: read by ``knowledge.cli``).
USER_ENV = "KNOWLEDGE_USER"
Distance = Literal["cosine", "euclid", "dot", "manhattan"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class VectorStoreSettings(_Section):
    """``vector_store.*``: the default template's backend and the memory backend's policy."""

    backend: str = Field("memory", min_length=1, description="memory, pgvector, qdrant, or a plugin's name")
    dir: Path = Field(Path("vector-stores"), description="memory backend: store folders (relative to data_dir)")
    url: str | None = Field(None, description="pgvector / qdrant connection URL")
    user: str | None = None
    password: SecretStr | None = None
    embedding_config: str = Field("embeddings", min_length=1, description="name of the EMBEDDING config")
    distance: Distance = Field("cosine", description="distance of new stores: cosine, euclid, dot, manhattan")
    idle_seconds: float = Field(600.0, gt=0, description="memory backend: unload stores idle this long (s)")
    max_chunks_per_store: int = Field(100_000, gt=0, description="memory backend: chunk cap per store")
    ann: Literal["auto", "off"] = Field(
        "auto",
        description="memory backend: 'auto' = approximate search (HNSW graph, exact rescoring) for"
        " stores of at least ann_min_points chunks; 'off' = always exact",
    )
    ann_min_points: int = Field(
        20_000, ge=0, description="memory backend: stores with fewer chunks search exactly (0: never approximate)"
    )
    options: dict[str, Any] = Field(default_factory=dict, description="extra options for a plugin backend")
    max_chunk_size_tokens: int = Field(
        192,
        gt=0,
        description="chunk size in model tokens (capped at the model's window); 192/48 retrieved"
        " best on the project's Rust-book question set in all three rankings (docs/benchmarks.md)",
    )
    chunk_overlap_tokens: int = Field(48, ge=0, description="overlap between consecutive chunks, tokens")
    qdrant_location: str | None = Field(
        None, description="qdrant: server URL, ':memory:' or a folder (relative to data_dir); default: url, else 'qdrant'"
    )
    qdrant_api_key: SecretStr | None = Field(None, description="qdrant: API key (Qdrant Cloud)")
    qdrant_collection: str = Field(
        "knowledge",
        min_length=1,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="qdrant: prefix of the physical collections (<prefix>-<distance>-<dimension>)",
    )
    qdrant_timeout: float = Field(5.0, gt=0, le=300, description="qdrant: timeout of one server call, seconds")
    qdrant_retries: int = Field(3, ge=1, le=10, description="qdrant: attempts per idempotent call (backoff, Retry-After)")

    @model_validator(mode="after")
    def _overlap_below_size(self) -> VectorStoreSettings:
        if self.chunk_overlap_tokens >= self.max_chunk_size_tokens:
            raise ValueError(
                f"chunk_overlap_tokens ({self.chunk_overlap_tokens}) must be smaller than"
                f" max_chunk_size_tokens ({self.max_chunk_size_tokens})"
            )
        return self


class CatalogSettings(_Section):
    """``catalog.*``: where the catalog (templates, stores, files, chats, configs) is kept."""

    url: str | None = Field(
        None,
        description="a postgresql:// URL (often the pgvector server) for a catalog shared by several"
        " processes and hosts; default: the DuckDB file <data_dir>/catalog.duckdb (no set-up)",
    )
    lock_timeout: float = Field(
        10.0,
        gt=0,
        le=600,
        description="DuckDB file: seconds to wait for another process's turn before saying the catalog is in use",
    )
    connect_timeout: float = Field(5.0, gt=0, le=120, description="PostgreSQL: seconds to wait for the server")
    pool_max_size: int = Field(8, ge=1, le=100, description="PostgreSQL: connections the catalog opens at most")
    outage_wait_seconds: float = Field(
        60.0,
        ge=0,
        le=3600,
        description="seconds a front-end (the CLI's batch, an app page) waits for the"
        " catalog, the file store or the vector backend to come back when it cannot be reached, trying again"
        ' with back-off and saying "waiting for the database", before it gives up with the reason; the REST'
        " API answers 503 with Retry-After meanwhile; 0 = give up at once",
    )

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, url: str | None) -> str | None:
        if url is not None and not url.startswith(("postgresql://", "postgres://")):
            raise ValueError("catalog.url must be a postgresql:// URL (or unset for the DuckDB file)")
        return url


class FileStoreSettings(_Section):
    """``file_store.*``: where uploaded files are kept."""

    backend: str = Field("filesystem", min_length=1, description="filesystem, postgresql, s3, or a plugin's name")
    dir: Path = Field(Path("files"), description="filesystem: the folder (relative to data_dir)")
    url: str | None = Field(None, description="postgresql: connection URL (default: catalog.url, when that setting exists)")
    s3_bucket: str | None = Field(None, description="s3: the bucket (must exist)")
    s3_prefix: str = Field(
        "",
        pattern=r"^([A-Za-z0-9!_.*'()-]+/)*([A-Za-z0-9!_.*'()-]+)?$",
        description="s3: key prefix inside the bucket, e.g. 'team-a' (a '/' is added)",
    )
    s3_endpoint_url: str | None = Field(
        None, description="s3: endpoint of an S3-compatible server (MinIO, Ceph, R2); unset: AWS S3"
    )
    s3_region: str | None = Field(None, description="s3: region; unset: the AWS configuration's")
    s3_access_key_id: SecretStr | None = Field(
        None, description="s3: access key id; unset: the standard AWS chain (AWS_* variables, ~/.aws, roles)"
    )
    s3_secret_access_key: SecretStr | None = Field(None, description="s3: secret access key (with the id)")


def _listed(value: Any, sep: str) -> Any:
    """A list setting given as one string (an environment variable): a JSON list
    (``["/a", "/b"]``), else the items split at ``sep`` (``/a:/b`` for folders, as ``PATH`` is
    written; ``a,b`` for names), blanks dropped. Anything else is left to the field's validation."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if text.startswith("["):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            return value
    return [item.strip() for item in text.split(sep) if item.strip()]


class IngestSettings(_Section):
    """``ingest.*``: limits for files coming in, OCR, and the in-process ingestion workers."""

    max_file_mb: float = Field(100.0, gt=0, description="largest file accepted, in MB (10^6 bytes)")
    allowed_dirs: Annotated[list[Path] | None, NoDecode] = Field(
        None,
        description="folders the app may read files from (its folder form); unset = the home"
        " folder while the app serves loopback only, nothing when it is shared. The CLI reads any path."
        " In the environment: a JSON list or folders separated by ':' (KNOWLEDGE_INGEST__ALLOWED_DIRS=/a:/b)",
    )
    ocr: Literal["auto", "off"] = Field(
        "auto",
        description="auto = read PDF pages without a text layer and image files (PNG, JPEG, TIFF,"
        " WebP, BMP) by OCR (rapidocr-onnxruntime, offline); off = report them; a template may override it",
    )
    pdf_tables: Literal["auto", "off"] = Field(
        "auto",
        description="auto = find the tables of PDFs (camelot) and write each as Markdown rows under"
        " its header, so chunks keep rows whole and repeat the header; off = read PDF pages as text"
        " only (faster on table-heavy files; re-ingest a file for a change to apply to it)",
    )
    worker_threads: int = Field(
        1,
        ge=0,
        le=16,
        description="ingestion worker threads of each app, API and CLI process: 1 = its own"
        " worker ingests the batches it queues (and any other's); 0 = it only queues them and dedicated"
        " `python -m knowledge worker` processes ingest (files with a PDF password still run here)",
    )
    worker_process: bool = Field(
        True,
        description="the app runs its ingestion worker (worker_threads > 0) as a child process,"
        " `python -m knowledge worker`, at a lower priority and one ONNX thread fewer than the cores (unless"
        " embeddings.threads is set): its searches never wait behind an upload; false = worker threads"
        " inside the app's own process",
    )
    job_lease_seconds: float = Field(
        30.0,
        ge=0.5,
        le=3600,
        description="seconds an in-process worker's heartbeat stays good: a job whose"
        " worker is silent this long is taken over by another (`worker --lease` for worker processes)",
    )
    worker_host: str | None = Field(
        None,
        min_length=1,
        description="this machine's name in the job rows (default: its host name); must"
        " differ between machines or containers that share a catalog",
    )
    retry_base_seconds: float = Field(
        2.0,
        gt=0,
        le=3600,
        description="an infrastructure error (the catalog, file store or vector backend"
        " unreachable; the worker's disk full, memory or model missing) never fails a file: its job is queued"
        " again after a back-off drawn in [0, min(retry_max_seconds, retry_base_seconds * 2^(n-1))] seconds"
        " after its n-th such error (exponential back-off with full jitter, AWS Architecture Blog 2015)",
    )
    retry_max_seconds: float = Field(
        300.0,
        gt=0,
        le=86_400,
        description="the longest back-off, in seconds, of a job waiting out an"
        " infrastructure error (see retry_base_seconds)",
    )
    retry_max_attempts: int = Field(
        50,
        ge=1,
        le=100_000,
        description="infrastructure errors after which a job fails with its last reason"
        " (counted apart from the file's own attempts; 50 with the default back-off is about 3.5 hours of waiting)",
    )
    worker_sick_after: int = Field(
        3,
        ge=1,
        le=1000,
        description="a worker whose own disk, memory or embedding model failed this many jobs"
        " in a row stands down: it gives its job back to the queue and its process exits with status 3",
    )
    worker_status_file: Path | None = Field(
        None,
        description="a `python -m knowledge worker` process writes its health here as JSON (state running,"
        " waiting, sick, stopped; reason; last job), for a supervisor or a health check; unset = none",
    )
    worker_health_port: int | None = Field(
        None,
        ge=0,
        le=65535,
        description="a `python -m knowledge worker` process answers /healthz, /readyz and /metrics on this"
        " port (a small HTTP listener on worker_health_host; 0 = any free port, logged); unset = no listener",
    )
    worker_health_host: str = Field(
        "127.0.0.1",
        min_length=1,
        description="the address the worker's health listener binds (0.0.0.0: every interface, for a"
        " container's health check from outside; /metrics then needs the API's key)",
    )
    worker_database_wait_seconds: float = Field(
        0.0,
        ge=0,
        le=31_536_000,
        description="seconds a worker waits for a catalog that cannot be reached (it"
        ' retries with back-off, logging "waiting for the database") before its process exits with status 4;'
        " 0 = wait for as long as it takes",
    )

    reader_processes: int = Field(
        2,
        ge=0,
        le=32,
        description="child processes that read and chunk files (kept between files): a file whose"
        " reader passes its memory or time limit is stopped there and fails with the reason, and the worker goes"
        " on; 0 = read inside the calling process, unbounded (for debugging only)",
    )
    reader_memory_mb: int = Field(
        3072,
        ge=256,
        le=1_048_576,
        description="most memory (resident, in MB of 2^20 bytes) a child may use to"
        " read and chunk one file; past it the child is stopped and the file fails naming the limit. At least"
        " 256: a child holds about 60 MB before it reads anything and 120-150 MB once the readers and the"
        " model's tokenizer are loaded. OCR costs most: a scanned A4 page peaks near 1.1 GB, a 12-megapixel"
        " photo near 2.6 GB",
    )
    reader_timeout_seconds: float = Field(
        120.0,
        gt=0,
        le=86_400,
        description="seconds a child may take to read and chunk one file, plus"
        " reader_seconds_per_mb for each MB of the file; OCR gives every page this long again",
    )
    reader_seconds_per_mb: float = Field(
        5.0,
        ge=0,
        le=3600,
        description="seconds added to reader_timeout_seconds for each MB (10^6 bytes) of the file"
        " (a 60 MB text took 127 s to read and chunk at load 6 on 2 cores, and over 246 s in the app beside a"
        " browser)",
    )

    web_allow_private: bool = Field(
        False,
        description="let web pages be fetched from hosts in private, loopback, link-local and reserved"
        " address ranges (an intranet wiki, a server on this machine); off = only public addresses",
    )
    web_timeout_seconds: float = Field(
        20.0, gt=0, le=600, description="seconds a web page may take to connect and arrive, whole"
    )
    web_max_pages: int = Field(
        50, ge=1, le=10_000, description="most pages one web crawl fetches (a request's max_pages is capped by it)"
    )

    _dirs = field_validator("allowed_dirs", mode="before")(lambda v: _listed(v, os.pathsep))

    @property
    def max_file_bytes(self) -> int:
        return int(self.max_file_mb * 1_000_000)


class EmbeddingSettings(_Section):
    """``embeddings.*``: the model behind the default embedding config."""

    model: str = Field(
        "sentence-transformers/all-MiniLM-L6-v2",
        min_length=1,
        description="fastembed model name; the default is bundled and works offline",
    )
    models_dir: Path = Field(Path("models"), description="model cache (relative to data_dir)")
    batch_size: int = Field(
        8,
        gt=0,
        le=4096,
        description="texts per ONNX call; 8 embedded the bundled model's chunks fastest on a"
        " 2-core machine (13.6 chunks/s against 11.9 for 32: docs/benchmarks.md)",
    )
    threads: int | None = Field(None, gt=0, description="ONNX Runtime threads (None = all cores)")
    allow_download: bool = Field(False, description="let fastembed download a catalog model that is not in models_dir yet")


class SearchSettings(_Section):
    """``search.*``: how stores are searched (see :mod:`knowledge.service.fusion`)."""

    mode: Literal["hybrid", "vector", "lexical"] = Field(
        "hybrid",
        description="the ranking: hybrid (semantic and keyword merged by reciprocal rank fusion),"
        " semantic (by meaning: the embeddings' similarity; also written vector) or keyword"
        " (BM25 over the words; also written lexical)",
    )
    _mode = field_validator("mode", mode="before")(lambda v: search_mode(v) if isinstance(v, str) else v)
    candidates: int = Field(
        50, ge=1, le=10_000, description="hybrid: chunks each ranking contributes to the fusion (at least k)"
    )
    score_threshold: float | None = Field(
        0.3,
        ge=-1.0,
        le=1.0,
        description="search playground: the default score threshold for cosine and dot stores (vector score,"
        " higher is better); below it a result is not a good match. None: no default threshold",
    )
    merge_overlapping: bool = Field(
        True,
        description="search playground: hits whose character spans overlap in the same file are shown"
        " as one hit with the union span",
    )
    fusion_weight: float = Field(
        0.6,
        ge=0.0,
        le=1.0,
        description="hybrid: weight of the vector ranking against the words (BM25)"
        " ranking in the fusion; 0.5 = plain reciprocal rank fusion, 1 = vector order, 0 = words order."
        " 0.6 ranked best on the project's Rust-book question set (docs/benchmarks.md)",
    )
    rank_constant: int = Field(
        10,
        ge=1,
        le=1000,
        description="hybrid: the rank constant k of the reciprocal rank fusion, each ranking"
        " giving w / (k + rank); smaller k weighs the first ranks more. 60 in Cormack et al. (SIGIR 2009);"
        " 10 ranked best on the project's question sets with no loss on any (docs/benchmarks.md)",
    )
    rerank: bool = Field(
        False,
        description="rerank the best passages by the sentence of each that best answers the query (the"
        " store's own model, offline; docs/search.md); a template's own setting comes first",
    )
    rerank_candidates: int = Field(30, ge=2, le=200, description="how many of the ranking's best passages are reranked")


class AppSettings(_Section):
    """``app.*``: who may use the Streamlit app (see :mod:`knowledge.access`)."""

    password_hash: SecretStr | None = Field(
        None,
        description="scrypt hash of the app's password (make one with `python -m knowledge password`);"
        " the environment variable KNOWLEDGE_APP_PASSWORD (plain text) works too",
    )
    max_bundle_mb: float = Field(
        1000.0,
        gt=0,
        description="largest .kb bundle the app's Import takes, in MB (10^6 bytes): a bundle"
        " holds many files; the app's upload ceiling (server.maxUploadSize) is the larger of this and"
        " ingest.max_file_mb",
    )
    public_url: str | None = Field(
        None,
        description="the address people open the app at (https://knowledge.example.org, or behind a"
        " reverse proxy the proxy's), http(s) with no query: invitation links are built on it by the"
        " People page, the REST API and the CLI alike; unset = the page uses the address its browser"
        " opened, the REST API and the CLI give the link's ?invite=TOKEN part only",
    )

    @field_validator("public_url")
    @classmethod
    def _public_url_form(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        text = value.strip().rstrip("/")
        if not re.fullmatch(r"https?://[^\s/?#]+(/[^\s?#]*)?", text):
            raise ValueError(f"{value!r} is not an address to open the app at: write http(s)://host[:port][/path], no query")
        return text


class LdapSettings(_Section):
    """``accounts.ldap.*``: sign-in with a directory password (LDAP, Active Directory); off while ``url``
    is unset. The person's DN is ``user_dn`` with the username put in (RFC 4514 escaped), or found by a
    search (``search_base`` + ``search_filter``, RFC 4515 escaped) as ``bind_dn``; then the server is
    asked to bind as that DN with the typed password, and the groups are read (see docs/team.md)."""

    url: str | None = Field(
        None,
        description="the directory's address, ldap://host[:port] or ldaps://host[:port]; unset = no LDAP"
        " sign-in. ldap:// without start_tls is allowed to a loopback host only (passwords would cross"
        " the network in clear)",
    )
    start_tls: bool = Field(False, description="on ldap://, upgrade the connection with StartTLS (RFC 4511 4.14) first")
    ca_file: Path | None = Field(
        None, description="PEM file of the CA(s) the server's certificate must chain to; unset = the system's"
    )
    user_dn: str | None = Field(
        None,
        description="the DN of a person, with {username} where the username goes"
        " (uid={username},ou=people,dc=example,dc=org; AD: {username}@example.org); or leave unset and"
        " set search_base",
    )
    bind_dn: str | None = Field(
        None, description="the service account that searches for a person's DN (unset = search anonymously)"
    )
    bind_password_env: str | None = Field(
        None, description="the NAME of the environment variable holding bind_dn's password (never the password)"
    )
    search_base: str | None = Field(None, description="where a person's entry is searched (with search_filter)")
    search_filter: str = Field(
        "(uid={username})", description="the filter that finds one person; {username} is escaped (RFC 4515)"
    )
    group_base: str | None = Field(None, description="where groups are searched; unset = groups are not read")
    group_filter: str = Field(
        "(&(objectClass=groupOfNames)(member={dn}))",
        description="the filter of a person's groups; {dn} (their DN) and {username} are escaped (RFC 4515)",
    )
    group_attribute: str = Field("cn", description="the attribute of a group entry that is its name here")
    create_members: bool = Field(
        False,
        description="a person the directory signs in who has no account yet gets a member account;"
        " false = an admin creates it first (without a password)",
    )
    timeout: float = Field(5.0, gt=0, le=120, description="seconds to connect to the directory, and to wait for each answer")

    @model_validator(mode="after")
    def _coherent(self) -> LdapSettings:
        if self.url is None or not self.url.strip():
            return self
        url = self.url.strip()
        match = re.fullmatch(r"(ldaps?)://(\[[0-9a-fA-F:.]+\]|[^\s/:?#\[\]]+)(:\d{1,5})?/?", url)
        if not match:
            raise ValueError(f"accounts.ldap.url {url!r} is not ldap://host[:port] or ldaps://host[:port]")
        if match.group(1) == "ldaps" and self.start_tls:
            raise ValueError("accounts.ldap: start_tls is for ldap:// (ldaps:// is TLS from the start)")
        host = match.group(2).strip("[]")
        if match.group(1) == "ldap" and not self.start_tls and not _loopback(host):
            raise ValueError(
                f"accounts.ldap.url {url!r} would send passwords in clear: use ldaps:// or start_tls = true"
                " (plain ldap:// is allowed to a loopback host only)"
            )
        if self.user_dn is not None and self.search_base is not None:
            raise ValueError("accounts.ldap: set either user_dn (a DN template) or search_base (a search), not both")
        if self.user_dn is None and self.search_base is None:
            raise ValueError(
                "accounts.ldap: set user_dn (a DN template) or search_base (a search): how to find a person's entry"
            )
        if self.user_dn is not None and "{username}" not in self.user_dn:
            raise ValueError("accounts.ldap.user_dn needs {username} where the username goes")
        if self.search_base is not None and "{username}" not in self.search_filter:
            raise ValueError("accounts.ldap.search_filter needs {username}")
        if (self.bind_dn is None) != (self.bind_password_env is None):
            raise ValueError("accounts.ldap: bind_dn and bind_password_env go together")
        if self.bind_password_env is not None and self.bind_password_env.upper().startswith(ENV_PREFIX):
            raise ValueError(
                f"accounts.ldap.bind_password_env {self.bind_password_env!r}: name a variable outside"
                f" {ENV_PREFIX}* (those are settings, and an unknown one is an error)"
            )
        return self


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class QuotaSettings(_Section):
    """``quotas``: the limits every person, group and store has unless an admin set its own (kept in
    the catalog, migration 20); ``0`` = unlimited (the default: nothing changes on a laptop).
    Stored bytes, files and chunks count a store's file records; a person's are those of the stores
    they own, a group's those of its members' stores."""

    user_bytes: int = Field(0, ge=0, description="bytes of files a person's stores may hold (0: unlimited)")
    user_files: int = Field(0, ge=0, description="files a person's stores may hold (0: unlimited)")
    user_chunks: int = Field(0, ge=0, description="chunks a person's stores may hold (0: unlimited)")
    group_bytes: int = Field(0, ge=0, description="bytes of files the stores of a group's members may hold")
    group_files: int = Field(0, ge=0, description="files the stores of a group's members may hold")
    group_chunks: int = Field(0, ge=0, description="chunks the stores of a group's members may hold")
    store_bytes: int = Field(0, ge=0, description="bytes of files one store may hold (0: unlimited)")
    store_files: int = Field(0, ge=0, description="files one store may hold (0: unlimited)")
    store_chunks: int = Field(0, ge=0, description="chunks one store may hold (0: unlimited)")
    api_requests_per_minute: int = Field(
        0, ge=0, description="REST API requests one key may send per minute (0: unlimited); a person's own limit comes first"
    )
    admins_exempt: bool = Field(True, description="admins (and the local admin) are never refused by a quota or rate")


class AccountsSettings(_Section):
    """``accounts.*``: people, once the first account exists (see :mod:`knowledge.people`)."""

    session_hours: float = Field(
        12.0, gt=0, description="a sign-in to the app lasts this many hours, then the person signs in again"
    )
    invite_hours: float = Field(72.0, gt=0, description="an invitation link stays valid this many hours (it works once)")
    min_password_length: int = Field(10, ge=1, le=1024, description="shortest password an account may have, in characters")
    admins_see_all: bool = Field(
        True,
        description="admins read, write and manage every store, private ones too (as Open WebUI's"
        " BYPASS_ADMIN_ACCESS_CONTROL); false = an admin sees only what is theirs or shared with them",
    )
    sso_create_members: bool = Field(
        False,
        description="single sign-on (OpenID Connect, st.login): a person the provider signs in who"
        " has no account yet gets a member account; false = an admin creates it first",
    )
    sso_groups_claim: str | None = Field(
        None,
        description="single sign-on: the ID token claim that lists the person's groups (e.g. groups);"
        " read at every sign-in and kept as their memberships from that provider; unset = groups are not read",
    )
    sso_group_map: dict[str, str] = Field(
        default_factory=dict,
        description='provider group -> group here (e.g. {"/staff/hr" = "hr"}); when set, it is also the'
        " list: a provider group it does not name is ignored; empty = the provider's names as they are",
    )
    sso_groups_removed: Literal["remove", "keep"] = Field(
        "remove",
        description="a group the provider no longer lists: remove (the membership goes) or keep (only ever added)",
    )
    sso_roles_claim: str | None = Field(
        None, description="single sign-on: the claim whose values sso_role_map reads (e.g. roles, or groups)"
    )
    sso_role_map: dict[str, Literal["admin", "member"]] = Field(
        default_factory=dict,
        description="provider value -> role: a person with any value mapped to admin is an admin, else a"
        " member, set at every sign-in (the last admin is never made a member); empty = the role is the admin's",
    )
    ldap: LdapSettings = Field(default_factory=LdapSettings)

    @model_validator(mode="after")
    def _sso_roles(self) -> AccountsSettings:
        if self.sso_role_map and not self.sso_roles_claim:
            raise ValueError("accounts.sso_role_map needs accounts.sso_roles_claim (the claim it reads)")
        return self


class ChatSettings(_Section):
    """``chat.*``: what a chat searches and what a chat model may do."""

    allowed_dirs: Annotated[list[Path], NoDecode] = Field(
        default_factory=list,
        description="folders the chat's vector_ingest_file tool may read (only when a"
        " CHAT config enables writing tools); empty = none",
    )
    default_stores: Annotated[list[str], NoDecode] = Field(
        default_factory=list, description="stores a new chat searches when the last chat chose none"
    )
    min_score: float = Field(
        0.35,
        ge=-1,
        le=1,
        description="offline assistant: a passage scoring under this (cosine) does not"
        " count as an answer; it says nothing matched well and shows the closest one. Measured with the"
        " bundled model on the Rust book: the best hit of 14 answerable questions scored 0.46-0.76, of 12"
        " unrelated or nonsense ones 0.13-0.30",
    )

    _dirs = field_validator("allowed_dirs", mode="before")(lambda v: _listed(v, os.pathsep))
    _stores = field_validator("default_stores", mode="before")(lambda v: _listed(v, ","))


class McpSettings(_Section):
    """``mcp.*``: what the MCP server's tools may do (see :mod:`knowledge.server.mcp`)."""

    allowed_dirs: Annotated[list[Path], NoDecode] = Field(
        default_factory=list, description="folders the MCP tool ingest_file may read; empty = none"
    )

    _dirs = field_validator("allowed_dirs", mode="before")(lambda v: _listed(v, os.pathsep))


class ApiSettings(_Section):
    """``api.*``: the OpenAI-compatible REST API (see :mod:`knowledge.server.app`); ``cors_origins``
    and ``allowed_hosts`` hold for the MCP server over HTTP too."""

    cors_origins: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="browser origins (scheme://host[:port]) allowed to call the REST API"
        " and the MCP server over HTTP (CORS); empty = CORS off, every other origin refused",
    )
    allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="Host header values the REST API and the MCP server over HTTP answer"
        " besides the address reached (and 127.0.0.1, localhost, [::1] on loopback): name (any port) or"
        " name:port; behind a reverse proxy, every name and IP address people use to reach the proxy",
    )
    docs: bool = Field(
        False,
        description="serve the interactive OpenAPI page /docs (its Swagger UI scripts come from a public"
        " CDN, so the page is off by default; /openapi.json is always served)",
    )

    _origins = field_validator("cors_origins", mode="before")(lambda v: _listed(v, ","))
    _hosts = field_validator("allowed_hosts", mode="before")(lambda v: _listed(v, ","))

    @field_validator("cors_origins")
    @classmethod
    def _origin_form(cls, origins: list[str]) -> list[str]:
        out = []
        for o in origins:
            o = o.strip().rstrip("/")
            if o == "*" or not re.fullmatch(r"https?://[^/\s?#]+", o):
                raise ValueError(
                    f"{o!r} is not an origin: write scheme://host[:port], e.g. http://localhost:3000 (no path, no wildcard)"
                )
            out.append(o.lower())
        return out

    @field_validator("allowed_hosts")
    @classmethod
    def _host_form(cls, hosts: list[str]) -> list[str]:
        for h in hosts:
            if not re.fullmatch(r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9._-]+)(:\d{1,5})?", h.strip()):
                raise ValueError(f"{h!r} is not a host name: write name or name:port (an IPv6 address in [ ])")
        return [h.strip().lower() for h in hosts]


class ServerSettings(_Section):
    """``server.*``: how the app and the REST/MCP servers read a request that came through a reverse
    proxy (see :mod:`knowledge.forwarded`)."""

    trusted_proxies: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="addresses or networks (10.0.0.5, ::1, 10.0.0.0/24) of the reverse"
        " proxies whose Forwarded / X-Forwarded-For / X-Forwarded-Proto headers are believed (the visitor's"
        " address, https at the proxy: a Secure cookie); empty = none. A request with forwarding headers is"
        " never the local admin, trusted or not",
    )

    _proxies = field_validator("trusted_proxies", mode="before")(lambda v: _listed(v, ","))

    @field_validator("trusted_proxies")
    @classmethod
    def _proxy_form(cls, entries: list[str]) -> list[str]:
        out = []
        for e in entries:
            text = e.strip()
            try:
                ipaddress.ip_network(text if "/" in text else text.strip("[]"), strict=False)
            except ValueError:
                raise ValueError(
                    f"{e!r} is not an IP address or network: write 10.0.0.5, ::1 or 10.0.0.0/24 (a host name is not trusted)"
                ) from None
            out.append(text)
        return out


class OpsSettings(_Section):
    """``ops.*``: health, metrics, traces and logs for the people who run it (see
    :mod:`knowledge.telemetry`)."""

    metrics: bool = Field(
        True,
        description="serve Prometheus metrics at /metrics on the REST API, the MCP server over HTTP and a"
        " worker's health listener (guarded like the API); false = 404",
    )
    metrics_token: SecretStr | None = Field(
        None,
        description="a bearer token for /metrics alone, from the environment (KNOWLEDGE_OPS__METRICS_TOKEN):"
        " a Prometheus scraper sends it (authorization: credentials) to the REST API, the MCP server and a"
        " worker's health listener, with or without user accounts; it opens nothing else. Unset = /metrics"
        " takes the API's key (a user's key once accounts exist)",
    )
    log_format: Literal["text", "json"] = Field(
        "text",
        description="json = the servers' and workers' log lines as JSON objects, one a line (time, level,"
        " logger, message, request_id, and each line's own fields), with one line per request and per file",
    )
    otlp_endpoint: str | None = Field(
        None,
        description="OpenTelemetry traces are exported by OTLP over HTTP to this URL"
        " (http://collector:4318/v1/traces; needs the package opentelemetry-exporter-otlp-proto-http);"
        " unset = spans are made only for an in-process tracer provider and nothing is sent anywhere",
    )
    service_name: str = Field(
        "knowledge", min_length=1, description="the service.name of the traces (the process's role is added)"
    )
    ready_timeout_seconds: float = Field(
        5.0,
        gt=0,
        le=300,
        description="/readyz answers within this many seconds: a part (catalog, file store, vector backend,"
        " model) that has not answered by then is not ready (a probe's own timeout should be longer)",
    )

    @field_validator("otlp_endpoint")
    @classmethod
    def _endpoint_form(cls, url: str | None) -> str | None:
        if url is not None and not re.fullmatch(r"https?://[^/\s?#]+(/\S*)?", url.strip()):
            raise ValueError(f"{url!r} is not an http(s) URL (write http://collector:4318/v1/traces)")
        return url.strip() if url is not None else None


class SourcesSettings(_Section):
    """``sources.*``: the sources (shares, repositories, mailboxes, drives, buckets) stores are kept in
    sync with (see :mod:`knowledge.sources`)."""

    sid_map: dict[str, str] = Field(
        default_factory=dict,
        description="Windows security identifiers (S-1-5-21-...) of an SMB share's ACLs mapped to"
        " readers (user:<username> or group:<name>); a SID not here is looked up in the LDAP directory"
        " (accounts.ldap) by objectSid when one is set, else it grants nobody",
    )
    sid_attribute: str = Field(
        "objectSid",
        description="the directory attribute a SID not in sid_map is looked up by (accounts.ldap): objectSid"
        " (Active Directory, Samba AD: the binary SID of MS-DTYP 2.4.2.2) or a text one such as sambaSID"
        " (Samba's LDAP schema: S-1-5-21-...)",
    )
    check_seconds: float = Field(
        15.0, gt=0, description="how often an app, API or worker process looks for sources due to run"
    )
    max_file_bytes: int = Field(
        100 * 1024 * 1024, ge=1, description="default size limit of one file read from a source, in bytes"
    )
    timeout_seconds: float = Field(
        30.0,
        gt=0,
        description="how long one network operation of a source may take before the run says the server did not answer",
    )

    @field_validator("sid_map")
    @classmethod
    def _sid_map_form(cls, table: dict[str, str]) -> dict[str, str]:
        out = {}
        for sid, principal in table.items():
            key = sid.strip().upper()
            if not re.fullmatch(r"S-1-(\d+|0X[0-9A-F]{12})(-\d+){0,15}", key):
                raise ValueError(f"sources.sid_map: {sid!r} is not a SID (write S-1-5-21-...)")
            kind, sep, name = principal.strip().partition(":")
            if not sep or kind.strip().lower() not in ("user", "group") or not name.strip():
                raise ValueError(f"sources.sid_map: {sid} maps to {principal!r}; write user:<username> or group:<name>")
            out[key] = f"{kind.strip().lower()}:{name.strip()}"
        return out

    @field_validator("sid_attribute")
    @classmethod
    def _attribute_form(cls, name: str) -> str:
        if not re.fullmatch(r"[A-Za-z][A-Za-z0-9-]*", name.strip()):
            raise ValueError(f"sources.sid_attribute {name!r} is not an LDAP attribute name")
        return name.strip()


class Settings(BaseSettings):
    """All settings. Construct with :func:`load_settings` to get errors as :class:`ConfigError`."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        env_ignore_empty=True,  # KNOWLEDGE_DATA_DIR= (empty) is unset: ./data, not the working directory
        extra="forbid",
        validate_default=True,
    )

    data_dir: Path = Field(Path("data"), description="root of every relative path")
    catalog: CatalogSettings = Field(default_factory=CatalogSettings)
    vector_store: VectorStoreSettings = Field(default_factory=VectorStoreSettings)
    file_store: FileStoreSettings = Field(default_factory=FileStoreSettings)
    embeddings: EmbeddingSettings = Field(default_factory=EmbeddingSettings)
    ingest: IngestSettings = Field(default_factory=IngestSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    app: AppSettings = Field(default_factory=AppSettings)
    accounts: AccountsSettings = Field(default_factory=AccountsSettings)
    chat: ChatSettings = Field(default_factory=ChatSettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    api: ApiSettings = Field(default_factory=ApiSettings)
    server: ServerSettings = Field(default_factory=ServerSettings)
    sources: SourcesSettings = Field(default_factory=SourcesSettings)
    ops: OpsSettings = Field(default_factory=OpsSettings)
    quotas: QuotaSettings = Field(default_factory=QuotaSettings)
    secret_key: SecretStr | None = Field(
        None,
        description="the key the catalog's credentials (a source's password or token) are encrypted"
        " with, from the environment (KNOWLEDGE_SECRET_KEY): any passphrase; every app, API and worker"
        " process of a shared catalog needs the same. Unset with the embedded catalog: a key file"
        " data/secret.key is made (mode 0600)",
    )
    api_key: SecretStr | None = Field(
        None,
        description="bearer token of the REST API and the MCP server over HTTP, from the environment"
        " (KNOWLEDGE_API_KEY); required when they listen on anything but loopback",
    )
    app_password: SecretStr | None = Field(
        None,
        description="the app's password in plain text, from the environment (KNOWLEDGE_APP_PASSWORD);"
        " app.password_hash is the form for a settings file",
    )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, _TomlSource(settings_cls)

    # -- resolved paths -------------------------------------------------------------------------
    def resolve(self, path: Path | str) -> Path:
        """``path`` made absolute: relative paths are taken under :attr:`data_dir`."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.data_root / p)

    @property
    def data_root(self) -> Path:
        """The data folder as an absolute path."""
        return Path(self.data_dir).expanduser().absolute()

    @property
    def vector_store_dir(self) -> Path:
        return self.resolve(self.vector_store.dir)

    @property
    def file_store_dir(self) -> Path:
        return self.resolve(self.file_store.dir)

    @property
    def models_dir(self) -> Path:
        return self.resolve(self.embeddings.models_dir)

    @property
    def catalog_path(self) -> Path:
        return self.resolve("catalog.duckdb")


def settings_file_path(environ: dict[str, str] | None = None) -> Path | None:
    """The settings file in force, or ``None``. See the module docstring for the search order."""
    env = os.environ if environ is None else environ
    named = env.get(SETTINGS_FILE_ENV)
    if named:
        path = Path(named).expanduser()
        if not path.is_file():
            raise ConfigError(f"{SETTINGS_FILE_ENV} names {str(path)!r}, which is not a file.")
        return path
    data_dir = Path(env.get(f"{ENV_PREFIX}DATA_DIR") or "data").expanduser()
    for candidate in (data_dir / "settings.toml", Path("knowledge.toml")):
        if candidate.is_file():
            return candidate
    return None


class _TomlSource(PydanticBaseSettingsSource):
    """Reads the settings file (TOML) as the lowest-precedence source after the defaults."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:  # pragma: no cover
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        path = settings_file_path()
        if path is None:
            return {}
        try:
            with path.open("rb") as fh:
                return tomllib.load(fh)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"The settings file {str(path)!r} is not valid TOML: {exc}") from exc
        except OSError as exc:
            raise ConfigError(f"The settings file {str(path)!r} cannot be read: {exc}") from exc


def _known_env_names() -> set[str]:
    """Every ``KNOWLEDGE_*`` name a setting has, sections within sections too
    (``KNOWLEDGE_ACCOUNTS__LDAP__URL``)."""
    names = {SETTINGS_FILE_ENV, USER_ENV}

    def add(prefix: str, model: type[BaseModel]) -> None:
        for name, field in model.model_fields.items():
            key = f"{prefix}{name.upper()}"
            names.add(key)
            annotation = field.annotation
            if isinstance(annotation, type) and issubclass(annotation, BaseModel):
                add(f"{key}__", annotation)

    add(ENV_PREFIX, Settings)
    return names


def _check_env(environ: dict[str, str]) -> None:
    known = _known_env_names()
    unknown = sorted(
        k
        for k in environ
        if k.upper().startswith(ENV_PREFIX)
        and k.upper() not in known
        and not k.upper().startswith(f"{ENV_PREFIX}VECTOR_STORE__OPTIONS__")
        and not k.upper().startswith(f"{ENV_PREFIX}TEST_")  # the test suite's own (KNOWLEDGE_TEST_CORPUS)
    )
    if unknown:
        raise ConfigError(
            f"Unknown setting in the environment: {', '.join(unknown)}. Nested keys use a double"
            f" underscore, e.g. KNOWLEDGE_VECTOR_STORE__BACKEND. Known: {', '.join(sorted(known))}."
        )


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        key = ".".join(str(p) for p in err.get("loc", ())) or "(settings)"
        value = err.get("input")
        shown = "" if isinstance(value, dict) else f" = {value!r}"
        parts.append(f"{key}{shown}: {err.get('msg')}")
    return "Invalid settings: " + "; ".join(parts)


def load_settings(**overrides: Any) -> Settings:
    """Load the settings from defaults, the settings file, the environment and ``overrides``.

    ``overrides`` use the field names (``data_dir=...``, ``vector_store={"backend": "memory"}``) and
    win over everything else.

    Raises:
        ConfigError: an unknown key, an invalid value or an unreadable settings file.
    """
    _check_env(dict(os.environ))
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None
    except SettingsError as exc:  # an environment variable that does not parse (a bad JSON value)
        cause = f": {exc.__cause__}" if exc.__cause__ else ""
        raise ConfigError(f"Invalid settings: {exc}{cause}") from None
