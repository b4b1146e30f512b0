"""The answer check, run: each question of a set that has expected answers asked in a chat of its
own over one store, with the offline assistant or a configured chat model, and scored by
:mod:`knowledge.evaluation.answers`. How: docs/evaluation.md ("The answer check").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from knowledge.chat.service import ChatService
from knowledge.errors import InvalidArgument
from knowledge.evaluation.answers import AnswerCheck, check_one
from knowledge.evaluation.questions import QuestionSet

if TYPE_CHECKING:  # pragma: no cover
    from knowledge.workbench import Workbench


def check_answers(wb: Workbench, store: str, qset: QuestionSet, config: str | None = None,
                  progress: Callable[[int, int], None] | None = None) -> AnswerCheck:
    """Ask each question of ``qset`` that has expected answers in a chat of its own over ``store``
    with chat model config ``config`` (default: the offline assistant), check the answers, and
    delete those chats.

    Raises:
        InvalidArgument: no question of the set has an expected answer; StoreNotFound; a chat
            model config that is unknown (``KnowledgeError``); what the chat raises.
    """
    asked = [q for q in qset.questions if q.expected]
    if not asked:
        raise InvalidArgument(f"No question of {qset.name} has an expected answer: add an 'expected' column"
                              " (answers between |) to check answers.")
    wb.get_store(store)
    chat = ChatService(wb)
    results = []
    used = config or "offline"
    for i, q in enumerate(asked, 1):
        sid = chat.create_session(title=f"answer check: {q.text}"[:80], config=config, stores=[store]).id
        try:
            t0 = time.perf_counter()
            reply = chat.send(sid, q.text)
            results.append(check_one(q, reply.text, reply.citations, time.perf_counter() - t0))
            used = reply.config
        finally:
            chat.delete_session(sid)
        if progress:
            progress(i, len(asked))
    return AnswerCheck(store, used, tuple(results))


__all__ = ["check_answers"]
