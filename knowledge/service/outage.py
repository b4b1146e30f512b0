"""Waiting out a short outage of the catalog, the file store or the vector backend (a PostgreSQL or
S3 server that stopped or restarts), for the front-ends that can wait: the CLI's batch, an app page.

:class:`OutageWait` calls a function again while it raises
:class:`~knowledge.errors.BackendUnavailable`, with exponential back-off and jitter, for at most
``catalog.outage_wait_seconds`` from the first failure; it says "waiting for the database (...)"
once per outage (and now and then while it lasts) and "the database is back" after it. Past the
limit: :class:`OutageTooLong`, whose message says how long it waited and why. The REST API and MCP
do not wait (they answer 503 with ``Retry-After``); the workers have their own retries.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

from knowledge.errors import BackendUnavailable

T = TypeVar("T")

#: Seconds before the first retry; each next one waits twice as long, up to :data:`MAX_DELAY`
#: (plus up to a quarter more, at random, so that many waiting clients do not retry in step).
FIRST_DELAY = 0.5
MAX_DELAY = 5.0
#: Seconds between two "still waiting" lines during one outage.
SAY_EVERY = 10.0


class OutageTooLong(BackendUnavailable):
    """A backend stayed unreachable longer than ``catalog.outage_wait_seconds``.

    Attributes:
        waited: seconds waited, from the first failure.
        reason: the last failure's message (what cannot be reached, in words).
    """

    def __init__(self, waited: float, limit: float, reason: str) -> None:
        self.waited, self.limit, self.reason = waited, limit, reason
        super().__init__(
            f"The database did not come back in {max(waited, limit):.0f} s of waiting"
            f" (catalog.outage_wait_seconds = {limit:g}): {reason}"
        )


def outage_reason(exc: BaseException) -> str:
    """The first line of ``exc``'s message (what cannot be reached), without a final full stop."""
    text = str(exc).strip()
    return (text.splitlines()[0] if text else "the server cannot be reached").rstrip(".")


class OutageWait:
    """Calls that wait out an outage (see the module docstring).

    Args:
        limit: seconds to wait from the first failure of an outage (``catalog.outage_wait_seconds``;
            0: give up at once).
        say: called with each line to show ("waiting for the database (...)", "the database is back").
        sleep, clock, jitter: ``time.sleep``, ``time.monotonic`` and ``random.random`` (for tests).
    """

    def __init__(
        self,
        limit: float,
        say: Callable[[str], Any],
        *,
        sleep: Callable[[float], Any] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.limit, self.say = float(limit), say
        self._sleep, self._clock, self._jitter = sleep, clock, jitter
        #: Outages waited out so far, and the seconds they took in all.
        self.outages = 0
        self.waited = 0.0

    def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)``, called again while it raises ``BackendUnavailable``, with back-off.

        ``fn`` must be safe to call again after a failure (a read, or a write that checks whether
        its first attempt went through).

        Raises:
            OutageTooLong: still unreachable after ``limit`` seconds (the message says what).
            whatever else ``fn`` raises, at once.
        """
        started: float | None = None
        said = 0.0
        delay = FIRST_DELAY
        while True:
            try:
                result = fn(*args, **kwargs)
            except BackendUnavailable as exc:
                now = self._clock()
                if started is None:
                    started = said = now
                    self.say(
                        f"waiting for the database ({outage_reason(exc)}); trying again for up to"
                        f" {self.limit:.0f} s (catalog.outage_wait_seconds)"
                    )
                elif now - said >= SAY_EVERY:
                    said = now
                    self.say(
                        f"still waiting for the database ({now - started:.0f} s of {self.limit:.0f} s): {outage_reason(exc)}"
                    )
                left = self.limit - (now - started)
                if left <= 0:
                    raise OutageTooLong(now - started, self.limit, outage_reason(exc)) from exc
                self._sleep(min(left, delay * (1 + self._jitter() / 4)))
                delay = min(MAX_DELAY, delay * 2)
                continue
            if started is not None:
                waited = self._clock() - started
                self.outages += 1
                self.waited += waited
                self.say(f"the database is back after {waited:.0f} s; going on")
            return result


__all__ = ["FIRST_DELAY", "MAX_DELAY", "SAY_EVERY", "OutageTooLong", "OutageWait", "outage_reason"]
