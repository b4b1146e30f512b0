"""The four knowledge tools over a :class:`~knowledge.workbench.Workbench`.

Embedding happens inside the tools with the embedding model of the store's template. When no
embedding model can be loaded the whole group reports itself unavailable, with the reason
(``KnowledgeTools.availability()``), and a call returns that reason instead of raising.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from knowledge.access import LocalFolders
from knowledge.errors import KnowledgeError
from knowledge.vectorstore.scoring import higher_is_better
from knowledge.vectorstore.store import Hit
from knowledge.vocabulary import KEYWORD_SCORE, RANK_SCORE, SIMILARITY
from knowledge.workbench import Workbench


@dataclass(frozen=True, slots=True)
class ToolResult:
    """A tool's answer: ``text`` for the model, ``data`` (JSON-serialisable) for programs, ``ok``."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    ok: bool = True


@dataclass(frozen=True, slots=True)
class Tool:
    """One tool: its name, description and JSON-schema ``parameters``, and the function to call."""

    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[..., ToolResult]

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-calling description: ``{"type": "function", "function": {...}}``."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


def _params(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


_STORE = {"type": "string", "description": "Name of the vector store."}


def format_hit(rank: int, hit: Hit) -> str:
    """One passage as text for a model: its number in square brackets (``[2]``, the marker to cite
    it by), scores (the similarity, the vector score; with hybrid search also the keyword score, BM25,
    and the rank score, fused, which orders the list), provenance (no page for a file without pages;
    the chunks a merged passage joins), and the text quoted (words: :mod:`knowledge.vocabulary`)."""
    where = [hit.file_name or hit.file_id]
    if hit.page is not None:
        where.append(f"page {hit.page}")
    if hit.heading:
        where.append(f'section "{hit.heading}"')
    if hit.char_start is not None and hit.char_end is not None:
        where.append(f"chars {hit.char_start}-{hit.char_end}")
    if len(hit.chunks) > 1:
        where.append(f"{len(hit.chunks)} chunks merged")
    quoted = "\n".join("> " + line for line in hit.text.strip().splitlines())
    score = f"{SIMILARITY} {hit.score:.3f}"
    if hit.lexical_score is not None or hit.fused_score is not None:
        score += f" · {KEYWORD_SCORE} " + ("–" if hit.lexical_score is None else f"{hit.lexical_score:.2f}")
    if hit.fused_score is not None:
        score += f" · {RANK_SCORE} {hit.fused_score:.4f}"
    return f"[{rank}] {score} | {', '.join(where)}\n{quoted}"


def passage_key(hit: Mapping[str, Any]) -> tuple[Any, ...]:
    """What makes a found passage (a hit of :meth:`KnowledgeTools.search_stores`) the same passage:
    its store, file, best chunk and character span."""
    return hit.get("store"), hit.get("file_id"), hit.get("chunk_index"), hit.get("char_start"), hit.get("char_end")


def hit_data(hit: Hit) -> dict[str, Any]:
    """A passage as JSON: score, file, chunk_index (the best ranked chunk), ``chunks`` (every chunk
    it joins, sorted), page, heading, character span, text and the hybrid scores."""
    return {
        "score": round(hit.score, 6),
        "file_id": hit.file_id,
        "file_name": hit.file_name,
        "chunk_index": hit.chunk_index,
        "chunks": list(hit.chunks or (hit.chunk_index,)),
        "page": hit.page,
        "heading": hit.heading,
        "char_start": hit.char_start,
        "char_end": hit.char_end,
        "text": hit.text,
        "lexical_score": None if hit.lexical_score is None else round(hit.lexical_score, 6),
        "fused_score": None if hit.fused_score is None else round(hit.fused_score, 6),
    }


#: ``KnowledgeTools(wb, folders=ANYWHERE)``: ``vector_ingest_file`` reads any path the model names.
#: Only for a program whose model is as trusted as its user (never a model that reads documents).
ANYWHERE: Final = "anywhere"

#: The tools that only read; the others write (they change a store or read the local disk).
READ_TOOLS = frozenset({"vector_search"})
WRITE_TOOLS = frozenset({"vector_upsert", "vector_delete_file", "vector_ingest_file"})


class KnowledgeTools:
    """The tool group bound to one workbench.

    Args:
        workbench: stores, ingestion, search.
        folders: where ``vector_ingest_file`` may read: a :class:`~knowledge.access.LocalFolders`
            (the chat passes :func:`~knowledge.access.chat_folders`, from ``chat.allowed_dirs``);
            ``None`` (the default) reads nothing -- a model's request for a path is refused with
            the reason; :data:`ANYWHERE` reads any path, an explicit choice for the user's own
            programs. A model that reads documents can be steered by them, so the default is deny.
    """

    def __init__(self, workbench: Workbench, folders: LocalFolders | Literal["anywhere"] | None = None) -> None:
        self.wb = workbench
        if folders is None:
            folders = LocalFolders.of(
                [],
                workbench.settings.data_root,
                reason=(
                    "this tool group was given no folders; pass folders=LocalFolders.of([...]) -- the chat"
                    " reads chat.allowed_dirs -- or folders=ANYWHERE"
                ),
            )
        elif folders != ANYWHERE and not isinstance(folders, LocalFolders):
            raise TypeError(f"folders must be a LocalFolders, ANYWHERE or None, got {folders!r}")
        self.folders = folders

    # -- availability ---------------------------------------------------------------------------
    def availability(self) -> tuple[bool, str]:
        """``(True, "")``, or ``(False, "unavailable, because ...")`` when the embedding config
        (``vector_store.embedding_config``, default ``embeddings``) is missing, broken or not of type
        EMBEDDING, or its model does not load."""
        model, reason = self.wb.llm_configs().embedding_model()
        if model is None:
            return False, f"unavailable, because {reason}"
        try:
            embedder = self.wb.embedder(model)
            load = getattr(embedder, "load", None)
            if callable(load):
                load()
        except KnowledgeError as exc:
            return False, f"unavailable, because the embedding model cannot be loaded: {exc}"
        return True, ""

    def tools(self) -> list[Tool]:
        return [
            Tool(
                "vector_upsert",
                "Store text as the content of one file in a vector store, replacing any earlier content"
                " of that file (delete + insert: re-ingestion never leaves stale chunks).",
                _params(
                    {
                        "store": _STORE,
                        "file_id": {"type": "string", "description": "Id of the file the text belongs to."},
                        "text": {"type": "string", "description": "The file's full text."},
                        "file_name": {"type": "string", "description": "Display name (optional)."},
                    },
                    ["store", "file_id", "text"],
                ),
                self.vector_upsert,
            ),
            Tool(
                "vector_search",
                "Semantic search in a vector store: embeds the query and returns the top passages, each"
                " numbered [n], with score (cosine similarity, higher is better) and provenance (file,"
                " page, section, character span), quoting its text; overlapping chunks of a file come"
                " back as one passage. Cite a passage you use by its [n].",
                _params(
                    {
                        "store": _STORE,
                        "query": {"type": "string", "description": "What to look for, in words."},
                        "k": {
                            "type": "integer",
                            "minimum": 1,
                            "maximum": 50,
                            "default": 5,
                            "description": "How many passages to return.",
                        },
                        "file_id": {"type": "string", "description": "Only search this file (optional)."},
                    },
                    ["store", "query"],
                ),
                self.vector_search,
            ),
            Tool(
                "vector_delete_file",
                "Remove one file and all its chunks from a vector store.",
                _params(
                    {"store": _STORE, "file_id": {"type": "string", "description": "Id of the file."}}, ["store", "file_id"]
                ),
                self.vector_delete_file,
            ),
            Tool(
                "vector_ingest_file",
                "Read a file (PDF, Office, OpenDocument, EPUB, RTF, mail, ZIP, Markdown, HTML, CSV or text)"
                " from a path, chunk it, embed it and make it searchable in a vector store, in one call.",
                _params(
                    {
                        "store": _STORE,
                        "path": {"type": "string", "description": "Path of the file on this machine."},
                        "password": {
                            "type": "string",
                            "description": "Password of an encrypted PDF or Office file (optional).",
                        },
                    },
                    ["store", "path"],
                ),
                self.vector_ingest_file,
            ),
        ]

    def call(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Call a tool by name with the arguments a model produced; errors come back as text."""
        tools = {t.name: t for t in self.tools()}
        if name not in tools:
            return ToolResult(f"Unknown tool {name!r}. Tools: {', '.join(tools)}.", ok=False)
        ok, reason = self.availability()
        if not ok:
            return ToolResult(f"{name} is {reason}", ok=False)
        try:
            return tools[name].run(**arguments)
        except TypeError as exc:
            return ToolResult(f"Bad arguments for {name}: {exc}", ok=False)
        except KnowledgeError as exc:
            return ToolResult(f"{name} failed: {exc}", ok=False)

    # -- the tools ------------------------------------------------------------------------------
    def vector_upsert(self, store: str, file_id: str, text: str, file_name: str | None = None) -> ToolResult:
        r = self.wb.index_text(store, file_id, text, file_name)
        if not r.ok:
            return ToolResult(r.message, ok=False)
        return ToolResult(
            f"Stored {r.chunks} chunks of {r.name} in {store!r}.", {"store": store, "file_id": file_id, "chunks": r.chunks}
        )

    def vector_search(self, store: str, query: str, k: int = 5, file_id: str | None = None) -> ToolResult:
        """The tool: :meth:`search_stores` of the one ``store`` (the passages numbered from 1); a
        store that cannot be searched is a failed call (``ok`` false, the reason in the text)."""
        result = self.search_stores([store], query, int(k), where={"file_id": file_id} if file_id else None)
        failed = result.data["failed"]
        if failed:
            return ToolResult(f"vector_search failed: {next(iter(failed.values()))}", ok=False)
        return result

    def search_stores(
        self,
        stores: Sequence[str],
        query: str,
        k: int = 5,
        *,
        where: Mapping[str, Any] | None = None,
        thresholds: Mapping[str, float | None] | None = None,
        label: Callable[[str], str] | None = None,
        numbered: Iterable[Mapping[str, Any]] = (),
    ) -> ToolResult:
        """``vector_search`` over one or several stores merged (:meth:`Workbench.search_stores`;
        ``where`` and ``thresholds`` as there): the ``k`` best passages as text for a model, each
        numbered ``[n]`` (:func:`format_hit`; with several stores, its store's label below it), then
        a line per store that could not be searched; ``No results in ... for ...`` when none.

        ``label(store)`` names a store to the model (default: its name, quoted in the no-results
        line). ``numbered``: passages numbered earlier in the same answer (this method's hits, each
        with its ``ref``): a passage found again keeps its number, a new one takes the next.

        ``data``: ``hits`` (each :func:`hit_data` plus ``store``, ``source`` (its label),
        ``distance`` (the store's, so the caller need not ask the catalog), ``higher_is_better``
        (the score direction) and ``ref``), ``failed`` (``{store: reason}``) and ``stores`` (the
        labels searched).

        Raises:
            StoreNotFound: a store that does not exist or the acting person may not read;
            InvalidArgument: a blank query or ``k`` below 1.
        """
        found = self.wb.search_stores(stores, query, k, where=where, thresholds=thresholds)
        name = label or str
        refs = {passage_key(h): h["ref"] for h in numbered}
        lines, hits = [], []
        for sh in found.hits:
            hit = {**hit_data(sh.hit), "store": sh.store, "source": name(sh.store)}
            ref = refs.setdefault(passage_key(hit), len(refs) + 1)  # one number per passage in an answer
            lines.append(format_hit(ref, sh.hit) + ("" if len(stores) == 1 else f"\n(store: {name(sh.store)})"))
            hits.append({**hit, "ref": ref, "distance": sh.distance, "higher_is_better": higher_is_better(sh.distance)})
        for store, why in found.failed.items():
            lines.append(f"Store {name(store)!r} could not be searched: {why}")
        searched = ", ".join(name(n) if label else repr(n) for n in stores)
        text = (
            "\n\n".join(lines)
            if found.hits
            else f"No results in {searched} for {query!r}." + ("\n" + "\n".join(lines) if lines else "")
        )
        return ToolResult(text, {"hits": hits, "failed": dict(found.failed), "stores": [name(n) for n in stores]})

    def vector_delete_file(self, store: str, file_id: str) -> ToolResult:
        n = self.wb.delete_file(store, file_id)
        return ToolResult(f"Removed {n} chunks of {file_id} from {store!r}.", {"removed": n})

    def vector_ingest_file(self, store: str, path: str, password: str | None = None) -> ToolResult:
        p = Path(path).expanduser() if self.folders == ANYWHERE else self.folders.check(path)
        if not p.is_file():
            return ToolResult(f"{path}: no such file.", ok=False)
        r = self.wb.ingest_file(store, p, password=password)
        data = {"file_id": r.file_id, "outcome": r.outcome, "chunks": r.chunks, "pages": r.pages, "warnings": r.warnings}
        warn = ("\nWarnings: " + "; ".join(r.warnings)) if r.warnings else ""
        return ToolResult(r.message + warn, data, ok=r.ok)
