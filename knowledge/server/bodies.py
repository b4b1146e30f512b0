"""The REST API's request bodies as pydantic models: checked by FastAPI before a handler runs, and
documented in ``/openapi.json``.

Every model refuses a field it does not know (``extra="forbid"``: as OpenAI answers
``Unrecognized request argument supplied``, a misspelt ``filter`` is not ignored) and takes JSON's
types as they are (``strict``: ``"yes"`` is not ``true``, ``5.0`` is not an integer). A refused body
is a 400 in OpenAI's error shape naming the field (:func:`knowledge.server.http.validation_error`);
``/openapi.json`` lists each model's fields. The depth of a body's nesting is checked before it is
parsed (:class:`knowledge.server.http.JsonRoute`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    WithJsonSchema,
    field_validator,
    model_validator,
)

#: OpenAI's bounds of a static chunking strategy.
MIN_CHUNK, MAX_CHUNK = 100, 4096


class Body(BaseModel):
    """A request body: unknown fields refused, JSON types taken strictly."""

    model_config = ConfigDict(extra="forbid", strict=True)


# -- chunking ---------------------------------------------------------------------------------------------
class StaticChunking(Body):
    """OpenAI's ``static`` chunking: chunk size and overlap in tokens."""

    max_chunk_size_tokens: int = Field(ge=MIN_CHUNK, le=MAX_CHUNK, description="Tokens per chunk, 100 to 4096.")
    chunk_overlap_tokens: int = Field(ge=0, description="Tokens shared by neighbouring chunks, at most half a chunk.")

    @model_validator(mode="after")
    def _overlap_at_most_half(self) -> StaticChunking:
        half = self.max_chunk_size_tokens // 2
        if self.chunk_overlap_tokens > half:
            raise ValueError(
                f"chunk_overlap_tokens must be an integer from 0 to half of max_chunk_size_tokens"
                f" ({half}), got {self.chunk_overlap_tokens}."
            )
        return self


class ChunkingStrategy(Body):
    """OpenAI's ``chunking_strategy``: ``{"type": "auto"}`` (the store's template) or
    ``{"type": "static", "static": {max_chunk_size_tokens, chunk_overlap_tokens}}``."""

    type: Literal["auto", "static"] = "auto"
    static: StaticChunking | None = None

    @model_validator(mode="after")
    def _static_given(self) -> ChunkingStrategy:
        if self.type == "static" and self.static is None:
            raise ValueError("A static chunking_strategy needs 'static': {max_chunk_size_tokens, chunk_overlap_tokens}.")
        return self


# -- vector stores -----------------------------------------------------------------------------------------
class ExpiresAfter(Body):
    """OpenAI's ``expires_after``: ``{"anchor": "last_active_at", "days": 1..365}`` (kept and reported)."""

    anchor: Literal["last_active_at"]
    days: int = Field(ge=1, le=365)


def _check_metadata(value: dict[str, str] | None) -> dict[str, str] | None:
    if value is not None and (len(value) > 16 or not all(0 < len(k) <= 64 and len(v) <= 512 for k, v in value.items())):
        raise ValueError(
            "metadata must be an object of at most 16 string pairs (keys up to 64 characters, values up to 512)."
        )
    return value


class CreateStore(Body):
    """``POST /v1/vector_stores``. ``template`` is beyond OpenAI: the store's template (default ``default``)."""

    name: str | None = None
    file_ids: list[str] | None = None
    metadata: dict[str, str] | None = Field(None, description="At most 16 string pairs.")
    expires_after: ExpiresAfter | None = None
    chunking_strategy: ChunkingStrategy | None = Field(None, description="The default of the files added later.")
    description: str | None = None
    template: str | None = None

    _metadata = field_validator("metadata")(_check_metadata)


class ModifyStore(Body):
    """``POST /v1/vector_stores/{vs_id}``: ``metadata`` and ``expires_after`` (``name`` only as it is)."""

    name: str | None = None
    metadata: dict[str, str] | None = None
    expires_after: ExpiresAfter | None = None

    _metadata = field_validator("metadata")(_check_metadata)


# -- a store's files ----------------------------------------------------------------------------------------
class FileEntry(Body):
    """``POST /v1/vector_stores/{vs_id}/files``, and one of a batch's ``files``: a file uploaded
    through ``/v1/files``, its ``attributes`` (checked by :func:`knowledge.attributes.check_attributes`)
    and its ``chunking_strategy`` (default: the store's)."""

    file_id: str
    attributes: dict[str, Any] | None = None
    chunking_strategy: ChunkingStrategy | None = None


class FileAttributes(Body):
    """``POST /v1/vector_stores/{vs_id}/files/{file_id}``: the file's new ``attributes``."""

    attributes: dict[str, Any] | None = None


class FileBatch(Body):
    """``POST /v1/vector_stores/{vs_id}/file_batches``: ``file_ids`` and/or ``files`` (at least one
    file), with the batch's ``attributes`` and ``chunking_strategy`` for those that name none."""

    file_ids: list[str] | None = None
    files: list[FileEntry] | None = None
    attributes: dict[str, Any] | None = None
    chunking_strategy: ChunkingStrategy | None = None


class WebPages(Body):
    """``POST /v1/vector_stores/{vs_id}/web_pages`` (beyond OpenAI): the page's ``url``, ``depth``
    (links away on the same site) and ``max_pages`` (bounds: :class:`knowledge.service.web.Crawl`)."""

    url: str = Field(description="The http(s) URL of a web page.")
    depth: int | None = None
    max_pages: int | None = None
    attributes: dict[str, Any] | None = None
    chunking_strategy: ChunkingStrategy | None = None


# -- chat --------------------------------------------------------------------------------------------------
def _store_list(value: Any) -> Any:
    """``metadata.stores`` as a list: a comma-separated string split (blanks left out)."""
    if isinstance(value, str):
        return [s.strip() for s in value.split(",") if s.strip()]
    return value


class ChatMetadata(BaseModel):
    """A chat request's ``metadata``: ``session`` (a session id; the header ``X-Knowledge-Session``
    wins), ``stores`` (the stores the session searches: a list, or a comma-separated string) and
    ``vector_store_ids`` (stores by their API id, ``vs_...``, the same two ways). Other keys are the
    caller's (OpenAI's metadata is free-form) and are not used."""

    model_config = ConfigDict(extra="allow", strict=True)

    session: str | None = None
    stores: Annotated[
        list[str] | None,
        BeforeValidator(_store_list),
        WithJsonSchema({"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}, {"type": "null"}]}),
    ] = None
    vector_store_ids: Annotated[
        list[str] | None,
        BeforeValidator(_store_list),
        WithJsonSchema({"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}, {"type": "null"}]}),
    ] = None


class ChatCompletion(Body):
    """``POST /v1/chat/completions``: ``model``, ``messages``, ``stream`` and ``metadata`` are read
    (:mod:`knowledge.server.routes.chat`); OpenAI's other fields are accepted and have no effect
    here (the CHAT config decides them); any other field is refused."""

    model: str = Field(min_length=1, description="The name of a chat model config (see GET /v1/models).")
    messages: list[dict[str, Any]] = Field(
        min_length=1, description="OpenAI's messages; the last user message is sent (the session keeps the conversation)."
    )
    stream: bool = False
    metadata: ChatMetadata | None = None
    # accepted, not used (typed and bounded as OpenAI's API reference gives them, so a wrong value is
    # refused naming its field rather than passed over):
    stream_options: dict[str, Any] | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    top_p: float | None = Field(None, ge=0, le=1)
    n: int | None = Field(None, ge=1, le=128)
    max_tokens: int | None = Field(None, ge=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    stop: str | list[str] | None = None
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    logit_bias: dict[str, float] | None = None
    logprobs: bool | None = None
    top_logprobs: int | None = Field(None, ge=0, le=20)
    user: str | None = None
    seed: int | None = None
    response_format: dict[str, Any] | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool | None = None
    store: bool | None = None
    reasoning_effort: str | None = None
    service_tier: str | None = None
    modalities: list[str] | None = None
    audio: dict[str, Any] | None = None
    prediction: dict[str, Any] | None = None
    web_search_options: dict[str, Any] | None = None
    safety_identifier: str | None = None
    prompt_cache_key: str | None = None
    verbosity: str | None = None
    function_call: str | dict[str, Any] | None = None
    functions: list[dict[str, Any]] | None = None


# -- search ------------------------------------------------------------------------------------------------
def _joined(value: Any) -> Any:
    """A list of strings as one query (OpenAI takes either); anything else as it is."""
    if isinstance(value, list) and all(isinstance(q, str) for q in value):
        return " ".join(value)
    return value


Query = Annotated[
    str,
    BeforeValidator(_joined),
    WithJsonSchema(
        {
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
            "description": "What to look for: a string, or a list of strings (joined).",
        }
    ),
]


class RankingOptions(Body):
    """OpenAI's ``ranking_options``: ``score_threshold`` applies to ``score``, the similarity (cosine,
    higher is better); ``ranker`` is accepted and not used."""

    ranker: str | None = None
    score_threshold: float | None = None


class SearchBody(Body):
    """``POST /v1/vector_stores/{vs_id}/search`` (:mod:`knowledge.server.routes.search`)."""

    query: Query
    max_num_results: int = Field(10, ge=1, le=50, description="How many results, 1 to 50.")
    filters: dict[str, Any] | None = Field(None, description="OpenAI's comparison and compound filters.")
    ranking_options: RankingOptions | None = None
    rewrite_query: bool = Field(False, description="Accepted and noted, never done.")
    mode: str | None = Field(
        None, description="Beyond OpenAI, the ranking: hybrid (default), vector (semantic) or lexical (keyword)."
    )

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("query must be a non-blank string (or a list of strings).")
        return value


__all__ = [
    "MAX_CHUNK",
    "MIN_CHUNK",
    "Body",
    "ChatCompletion",
    "ChatMetadata",
    "ChunkingStrategy",
    "CreateStore",
    "ExpiresAfter",
    "FileAttributes",
    "FileBatch",
    "FileEntry",
    "ModifyStore",
    "RankingOptions",
    "SearchBody",
    "StaticChunking",
    "WebPages",
]
