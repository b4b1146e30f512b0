"""The answer check, run: each question of a set that has expected answers asked in a chat of its
own over one store, with the offline assistant or a configured chat model, and scored by
:mod:`knowledge.evaluation.answers` (:func:`check_answers`); the run it is kept with
(:func:`run_as_the_chat_searches`). How: docs/evaluation.md ("The answer check").
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from knowledge.chat.service import ChatService
from knowledge.errors import InvalidArgument, KnowledgeError
from knowledge.evaluation.answers import AnswerCheck, check_one
from knowledge.evaluation.questions import QuestionSet
from knowledge.evaluation.runs import EvalRun
from knowledge.service.fusion import RRF_K  # a run from before the setting fused with it
from knowledge.vocabulary import search_mode

if TYPE_CHECKING:  # pragma: no cover
    from knowledge.workbench import Workbench


def check_answers(
    chat: ChatService,
    store: str,
    qset: QuestionSet,
    config: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> AnswerCheck:
    """Ask each question of ``qset`` that has expected answers in a chat of its own (of ``chat``, the
    person's chat service, acting as them) over ``store``
    with chat model config ``config`` (default: the offline assistant), as the Chat page would ask
    it, check the answers (:func:`~knowledge.evaluation.answers.check_one`), and delete those chats.
    ``progress(done, total)`` after each question.

    Nothing leaves the machine but what the chat sends: with the offline assistant nothing, with
    a configured model its requests to the config's ``base_url`` (the store's embedding model, if
    it is a remote one, is asked as any search asks it).

    Raises:
        InvalidArgument: no question of the set has an expected answer. StoreNotFound.
        LlmConfigNotFound (an unknown config). KnowledgeError: the knowledge tools are unavailable.
        LlmUnavailable: the model cannot be reached (the check stops there; its chats are deleted).
    """
    asked = [q for q in qset.questions if q.expected]
    if not asked:
        raise InvalidArgument(
            f"No question of {qset.name} has an expected answer: add an 'expected' column"
            " (alternatives between ' | ') to check answers."
        )
    chat.wb.get_store(store)
    used = chat.configs.chat(config).name  # LlmConfigNotFound, InvalidArgument before any chat
    ok, reason = chat.tools.availability()
    if not ok:
        raise KnowledgeError(f"Cannot check answers: the chat searches with the knowledge tools, which are {reason}.")
    results = []
    for i, q in enumerate(asked, 1):
        sid = chat.create_session(title=f"answer check: {q.text}"[:80], config=config, stores=[store]).id
        try:
            t0 = time.perf_counter()
            reply = chat.send(sid, q.text)
            results.append(check_one(q, reply.text, reply.citations, time.perf_counter() - t0, offline=reply.retrieval_only))
        finally:
            chat.delete_session(sid)
        if progress:
            progress(i, len(asked))
    return AnswerCheck(store, used, tuple(results))


def run_as_the_chat_searches(wb: Workbench, runs: Sequence[EvalRun]) -> EvalRun | None:
    """Of ``runs``, the first of the answer check's store that searched as the chat searches: the
    ranking of the setting ``search.mode``, its fusion weight, rank constant and candidates, and the store's
    reranking -- the run an answer check is kept with
    (:func:`~knowledge.evaluation.runs.with_answers`); ``None`` when no run did."""
    search = wb.settings.search
    mode = search_mode(search.mode)
    for run in runs:
        try:
            reranked, n = wb.reranks(run.store)
        except KnowledgeError:
            continue
        if (
            run.mode == mode
            and run.search.get("fusion_weight") == search.fusion_weight
            and run.search.get("candidates") == search.candidates
            and run.search.get("rank_constant", RRF_K) == search.rank_constant
            and run.search.get("rerank") == (n if reranked else 0)
        ):
            return run
    return None


__all__ = ["check_answers", "run_as_the_chat_searches"]
