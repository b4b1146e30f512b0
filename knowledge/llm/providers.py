"""Chat providers: one request (OpenAI chat-completions messages + tools) in, one completion out.

* :class:`OpenAICompatible` -- any server speaking OpenAI's chat-completions protocol (OpenAI,
  OpenRouter, Azure, LM Studio, Ollama, Groq, Mistral, vLLM, llama.cpp server), through the official
  ``openai`` package, with tool calling.
* :class:`OfflineAssistant` -- needs no model: it calls ``vector_search`` over the session's
  attachments with the user's words and answers with the best passages quoted with file and page,
  labelled as retrieval-only.

The chat engine (:mod:`knowledge.chat.service`) runs the tool loop; a provider only answers one
request at a time.
"""

from __future__ import annotations

import json
import os
import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from knowledge.errors import KnowledgeError
from knowledge.llm.config import LlmConfig, LlmUnavailable
from knowledge.text.answers import MIN_SCORE as MIN_SENTENCE_SCORE
from knowledge.text.answers import Embed, Picked, pick, score_sentences
from knowledge.text.render import plain_text

RETRIEVAL_ONLY_LABEL = "Retrieval only — no language model wrote this."


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool call the model asked for: ``arguments`` is the JSON text the model produced."""

    id: str
    name: str
    arguments: str

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; ``{}`` for empty text. Raises ``ValueError`` for bad JSON."""
        if not self.arguments or not self.arguments.strip():
            return {}
        value = json.loads(self.arguments)
        if not isinstance(value, dict):
            raise ValueError("the arguments are not a JSON object")
        return value


@dataclass(frozen=True, slots=True)
class Completion:
    """One answer: ``text`` (may be ``None`` with tool calls), the ``tool_calls``, and the raw
    ``request`` / ``response`` as JSON-serialisable dicts for the trace."""

    text: str | None
    tool_calls: list[ToolCall]
    request: dict[str, Any]
    response: dict[str, Any]
    retrieval_only: bool = False
    #: The offline assistant's answering sentences (:func:`knowledge.text.answers.pick`), best first.
    sentences: list[Picked] = field(default_factory=list)


@dataclass(slots=True)
class TurnContext:
    """What the engine knows about the running turn, for providers that need more than messages:
    the user's ``question`` (their typed text), the ``hits`` found by ``vector_search`` so far this
    turn (``knowledge.tools.knowledge.hit_data`` dicts), the attached file names, why the
    knowledge tools are unavailable (``""`` when they are available), the user's stores the session
    searches (``knowledge``), whether it searches attached files too, the attached images (which
    are not indexed), ``min_score``: the score under which a passage does not count as an answer
    (setting ``chat.min_score``; applied to higher-is-better scores only), and ``failed``: the stores
    that could not be searched this turn, with the reason; ``read``: for a turn without typed text,
    what text recognition read in each attached image (name -> text); ``embed``: the searched
    store's embedding model (``texts -> (n, d)`` float32 rows, L2-normalised), with which the
    offline assistant picks the sentences that answer (``None``: it quotes passages); ``on_token``:
    where a streamed answer's text goes as it comes."""

    question: str = ""
    hits: list[dict[str, Any]] = field(default_factory=list)
    attached: list[str] = field(default_factory=list)
    tools_unavailable: str = ""
    knowledge: list[str] = field(default_factory=list)
    searches_attachments: bool = False
    images: list[str] = field(default_factory=list)
    min_score: float | None = None
    failed: dict[str, str] = field(default_factory=dict)
    read: dict[str, str] = field(default_factory=dict)
    embed: Embed | None = None
    #: Called with each piece of text as the model streams it (a request without tools streams).
    on_token: Callable[[str], None] | None = None


def shown_under(value: float, bar: float) -> str:
    """``value`` (below ``bar``) with two decimals, or as many more as it takes to read below
    ``bar`` when written ("0.418" under 0.42, never "0.42"; up to six)."""
    for digits in range(2, 7):
        if round(value, digits) < round(bar, digits):
            return f"{value:.{digits}f}"
    return f"{value:.6f}"


class ChatProvider(ABC):
    """A chat model behind one LLM config."""

    def __init__(self, config: LlmConfig) -> None:
        self.config = config

    @abstractmethod
    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: TurnContext) -> Completion:
        """Answer ``messages`` (OpenAI chat-completions shape) with ``tools`` (function schemas)
        on offer. Raises ``LlmUnavailable`` with a message for a person."""


class OpenAICompatible(ChatProvider):
    """An OpenAI-compatible chat-completions server via the ``openai`` package.

    The API key is read from the environment variable ``config.api_key_env`` at construction; a
    server that needs no key (LM Studio, Ollama, llama.cpp) gets the placeholder ``"not-needed"``.

    Raises:
        LlmUnavailable: the named variable is unset, or OpenAI's own API is used without a key.
    """

    def __init__(self, config: LlmConfig) -> None:
        super().__init__(config)
        import openai  # noqa: PLC0415 - heavy, only with an OpenAI-compatible config

        key = None
        if config.api_key_env:
            key = os.environ.get(config.api_key_env)
            if not key:
                raise LlmUnavailable(
                    f"The LLM config {config.name!r} reads its API key from the environment variable"
                    f" {config.api_key_env}, which is not set. Set it where knowledge runs, then retry."
                )
        elif not config.base_url:
            raise LlmUnavailable(
                f"The LLM config {config.name!r} talks to OpenAI's API but names no"
                " environment variable with the key (api_key_env)."
            )
        self._openai = openai
        self.client = openai.OpenAI(
            api_key=key or "not-needed", base_url=config.base_url, timeout=config.timeout, max_retries=2
        )

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: TurnContext) -> Completion:
        request: dict[str, Any] = {"model": self.config.model, "messages": messages}
        if tools:
            request["tools"] = tools
        if self.config.temperature is not None:
            request["temperature"] = self.config.temperature
        where = self.config.base_url or "api.openai.com"
        oa = self._openai
        try:
            if context.on_token is not None and not tools:
                return self._stream(request, context.on_token)
            resp = self.client.chat.completions.create(**request)
        except oa.APIConnectionError as exc:
            raise LlmUnavailable(
                f"Cannot reach the model server at {where} (config"
                f" {self.config.name!r}): {str(exc).rstrip('.')}. Is it running?"
            ) from exc
        except oa.APIStatusError as exc:
            raise LlmUnavailable(
                f"The model server at {where} answered HTTP {exc.status_code}: {_short(exc.message)}"
            ) from exc
        except oa.OpenAIError as exc:
            raise LlmUnavailable(f"The model server at {where} failed: {_short(str(exc))}") from exc
        if not resp.choices:
            raise LlmUnavailable(f"The model server at {where} returned no answer (no choices).")
        msg = resp.choices[0].message
        calls = [
            ToolCall(tc.id, tc.function.name, tc.function.arguments or "")
            for tc in (msg.tool_calls or [])
            if getattr(tc, "function", None) is not None
        ]
        return Completion(msg.content, calls, request, resp.model_dump(mode="json", exclude_none=True))

    def _stream(self, request: dict[str, Any], on_token: Callable[[str], None]) -> Completion:
        """The answer streamed (server-sent events), each piece handed to ``on_token`` as it comes;
        the trace gets the whole text. Raises the ``openai`` errors :meth:`complete` turns into
        ``LlmUnavailable``."""
        pieces: list[str] = []
        last: dict[str, Any] = {}
        for chunk in self.client.chat.completions.create(**request, stream=True):
            last = chunk.model_dump(mode="json", exclude_none=True)
            for choice in chunk.choices or []:
                piece = getattr(choice.delta, "content", None)
                if piece:
                    pieces.append(piece)
                    on_token(piece)
        text = "".join(pieces)
        response = {
            "id": last.get("id"),
            "model": last.get("model"),
            "object": "chat.completion",
            "streamed": True,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}}],
        }
        return Completion(text, [], {**request, "stream": True}, response)


class OfflineAssistant(ChatProvider):
    """The built-in assistant without a model (retrieval only).

    Round 1 of a turn: when ``vector_search`` is on offer it asks for it with the user's words
    (``k`` = :attr:`K`). Round 2: it answers with the hits, best first, each quoted with file and
    page after its ``[n]`` marker (the number the search gave it), under
    :data:`RETRIEVAL_ONLY_LABEL`. A message of images without words gets what text recognition read
    in them. Without attachments it says how to use it.
    """

    K = 4

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], context: TurnContext) -> Completion:
        names = {t["function"]["name"] for t in tools}
        searched = any(m.get("role") == "tool" for m in _running_turn(messages))
        request = {"model": "offline", "messages": messages, "tools": tools}
        if "vector_search" in names and not searched and context.question.strip():
            call = ToolCall("offline-search-1", "vector_search", json.dumps({"query": context.question, "k": self.K}))
            return Completion(
                None,
                [call],
                request,
                {"tool_calls": [{"id": call.id, "name": call.name, "arguments": call.arguments}]},
                retrieval_only=True,
            )
        text, picked = self._answer(context, "vector_search" in names)
        response = {
            "content": text,
            "sentences": [{"ref": p.ref, "start": p.start, "end": p.end, "score": p.score} for p in picked],
        }
        return Completion(text, [], request, response, retrieval_only=True, sentences=picked)

    def _answer(self, context: TurnContext, can_search: bool) -> tuple[str, list[Picked]]:
        text, picked = self._sentences(context)
        if text is None:
            text = self._passages(context, can_search)
        for store, why in context.failed.items():
            text += f"\n\n⚠️ {store} could not be searched: {why}"
        return text, picked

    def _strong(self, context: TurnContext) -> list[dict[str, Any]]:
        """The hits worth answering from: the relevant ones (:func:`_relevant`) scoring at least
        ``min_score`` when higher is better."""
        floor = context.min_score
        return [
            h
            for h in _relevant(context.hits[: self.K])
            if floor is None or not h.get("higher_is_better", True) or float(h.get("score") or 0.0) >= floor
        ]

    def _sentences(self, context: TurnContext) -> tuple[str | None, list[Picked]]:
        """The answer made of the sentences that answer (:mod:`knowledge.text.answers`), each with
        its passage's ``[n]``; ``(None, [])`` when it cannot be made (no model to score with, no
        passage, no question): :meth:`_passages` answers then."""
        question = context.question.strip()
        strong = self._strong(context)
        if context.embed is None or not question or not strong:
            return None, []
        try:
            scored = score_sentences(question, strong, context.embed)
        except KnowledgeError:
            return None, []
        if not scored:
            return None, []
        where = _knowledge_label(context)
        picked = pick(scored)
        if not picked:
            best = max(scored, key=lambda p: p.score)
            return (
                f"*{RETRIEVAL_ONLY_LABEL}* Nothing in {where} answers “{question}”: no sentence of the"
                f" closest passages scores {MIN_SENTENCE_SCORE:.2f} or more (the best,"
                f" {shown_under(best.score, MIN_SENTENCE_SCORE)}). The"
                " passages are under *Also searched*. Try other words, or choose other stores."
            ), []
        by_ref = {int(h.get("ref") or i): h for i, h in enumerate(strong, 1)}
        lines = [f"*{RETRIEVAL_ONLY_LABEL}* The sentences of {where} that best answer “{question}”:"]
        for p in picked:
            h = by_ref[p.ref]
            said = p.quote or " ".join(plain_text(p.text, file_name=h.get("file_name")).split())
            lines.append(f"> {_inert(said)} [{p.ref}]")
        return lines[0] + "\n\n" + "\n>\n".join(lines[1:]), picked

    def _passages(self, context: TurnContext, can_search: bool) -> str:
        question = context.question.strip()
        if not question and context.read:
            parts = [
                f"*{RETRIEVAL_ONLY_LABEL}* The text read in the attached image"
                f"{'s' if len(context.read) > 1 else ''} (text recognition):"
            ]
            for name, text in context.read.items():
                quoted = "\n".join("> " + _inert(ln) for ln in text.strip().splitlines())
                parts.append(f"**{_inert(name)}**\n{quoted}")
            parts.append("Ask a question about it to search it with the rest of this chat's knowledge.")
            return "\n\n".join(parts)
        where = _knowledge_label(context)
        hits = _relevant(context.hits[: self.K])
        floor = context.min_score
        strong = self._strong(context)
        if strong:
            lines = [f"*{RETRIEVAL_ONLY_LABEL}* The passages of {where} that best match “{question}”:"]
            lines += [f"[{h.get('ref') or i}] {_quote(h)}" for i, h in enumerate(strong, 1)]
            return "\n\n".join(lines)
        if hits:
            best = hits[0]
            return (
                f"*{RETRIEVAL_ONLY_LABEL}* Nothing in {where} matches “{question}” well (the best score,"
                f" {float(best.get('score') or 0):.2f}, is under {floor:.2f}). The closest passage is"
                f" [{best.get('ref') or 1}] {_quote(best)}\n\nTry other words, or choose other stores."
            )
        if can_search:
            return (
                f"*{RETRIEVAL_ONLY_LABEL}* Nothing in {where} matches “{question}”. Try other words, or choose other stores."
            )
        if context.tools_unavailable:
            return (
                f"*{RETRIEVAL_ONLY_LABEL}* I can only quote passages from your stores and attached files,"
                f" and the knowledge tools are {context.tools_unavailable}."
            )
        images = (
            f" I cannot read images ({', '.join(context.images)}): the offline assistant only quotes"
            " text; a chat model config with VISION can look at them."
            if context.images
            else ""
        )
        return (
            f"*{RETRIEVAL_ONLY_LABEL}* I am the offline assistant, and this chat has no documents to"
            f" search yet.{images} Choose stores under **Knowledge** in the sidebar (on the command line:"
            " `--store NAME`), or attach a file to your message, then ask: I quote the passages that"
            " answer it, with file and page. For a language model, add a chat model config on the Settings page."
        )


def _knowledge_label(context: TurnContext) -> str:
    """What the session searches, in words: "Team docs", "Team docs and rust", "Team docs and the
    attached files", "the attached files"."""
    names = list(context.knowledge) + (["the attached files"] if context.searches_attachments else [])
    if not names:
        return "the attached files"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _quote(h: dict[str, Any]) -> str:
    """``**file, page 3** (similarity 0.61)`` and the chunk quoted, shown as written."""
    where = str(h.get("file_name") or h.get("file_id") or "")
    if h.get("page") is not None:
        where += f", page {h['page']}"
    if h.get("heading"):
        where += f", “{_inert(h['heading'])}”"
    if h.get("source") and h.get("source") != "attachments":
        where += f" — {h['source']}"
    readable = plain_text(h.get("text") or "", file_name=h.get("file_name"))  # no source markup
    quoted = "\n".join("> " + _inert(ln) for ln in readable.strip().splitlines())
    return f"**{where}** (similarity {float(h.get('score') or 0):.2f})\n{quoted}"


def _inert(line: str) -> str:
    """A quoted line that Markdown shows as written: emphasis and code marks escaped; a leading list,
    heading, quote, rule or table marker too (``* item`` would otherwise become a bullet, a mail's
    ``> ----`` a heading); leading spaces kept as no-break spaces (four would make a code block)."""
    line = re.sub(r"([\\`*_])", r"\\\1", line)
    line = re.sub(r"^(\s*)([#+\-=>|~])", r"\1\\\2", line)
    line = re.sub(r"^(\s*\d+)([.)])", r"\1\\\2", line)
    indent = len(line) - len(line.lstrip(" \t"))
    return "\u00a0" * indent + line[indent:] if indent else line


def _relevant(hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The hits worth quoting: when scores fall best-first (cosine or dot: higher is better), those
    scoring at least half the best one; otherwise (a distance, lower is better) all of them."""
    scores = [float(h.get("score") or 0.0) for h in hits]
    if not hits or scores != sorted(scores, reverse=True) or scores[0] <= 0:
        return hits
    return [h for h, sc in zip(hits, scores) if sc >= scores[0] / 2]


def _running_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages after the last message the user typed (tool calls and results of this turn)."""
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m.get("role") == "user" and m.get("name") != "view_attachment":
            return messages[i + 1 :]
    return messages


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def open_provider(config: LlmConfig) -> ChatProvider:
    """The provider for a CHAT config. Raises ``LlmUnavailable`` (see :class:`OpenAICompatible`)."""
    if config.provider == "offline":
        return OfflineAssistant(config)
    if config.provider == "openai":
        return OpenAICompatible(config)
    raise LlmUnavailable(f"LLM config {config.name!r} has provider {config.provider!r}, which is not a chat provider.")
