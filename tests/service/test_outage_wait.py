"""OutageWait (knowledge.service.outage) on a clock of the test's own: back-off with jitter while a
backend cannot be reached, one "waiting" line per outage, the limit counted from the first failure."""

from __future__ import annotations

import pytest

from knowledge.errors import BackendUnavailable, InvalidArgument
from knowledge.service.outage import MAX_DELAY, OutageTooLong, OutageWait


class Clock:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def failing(times: int, clock: Clock, cost: float = 0.0):
    """A call that fails ``times`` times (each taking ``cost`` seconds), then answers 42."""
    left = [times]

    def call() -> int:
        clock.now += cost
        if left[0] > 0:
            left[0] -= 1
            raise BackendUnavailable("Cannot reach the PostgreSQL catalog at db:5432/k: Connection refused.")
        return 42

    return call


def test_it_waits_with_growing_delays_and_says_so_once_then_that_the_database_is_back():
    clock, lines = Clock(), []
    wait = OutageWait(60, lines.append, sleep=clock.sleep, clock=clock, jitter=lambda: 0.0)
    assert wait.call(failing(6, clock)) == 42
    assert clock.sleeps == [0.5, 1.0, 2.0, 4.0, MAX_DELAY, MAX_DELAY]
    assert lines[0] == (
        "waiting for the database (Cannot reach the PostgreSQL catalog at db:5432/k: Connection"
        " refused); trying again for up to 60 s (catalog.outage_wait_seconds)"
    )
    assert lines[-1] == "the database is back after 18 s; going on"
    assert any(line.startswith("still waiting for the database (") for line in lines[1:-1])
    assert wait.outages == 1


def test_jitter_adds_up_to_a_quarter():
    clock = Clock()
    wait = OutageWait(60, lambda _: None, sleep=clock.sleep, clock=clock, jitter=lambda: 1.0)
    wait.call(failing(2, clock))
    assert clock.sleeps == [0.625, 1.25]


def test_past_the_limit_it_gives_up_with_the_reason_and_the_time():
    clock, lines = Clock(), []
    wait = OutageWait(10, lines.append, sleep=clock.sleep, clock=clock, jitter=lambda: 0.0)
    with pytest.raises(OutageTooLong) as caught:
        wait.call(failing(100, clock, cost=5.0))  # each try waits 5 s for the pool
    assert str(caught.value).startswith("The database did not come back in 1")
    assert "(catalog.outage_wait_seconds = 10): Cannot reach the PostgreSQL catalog at db:5432/k" in str(caught.value)
    assert isinstance(caught.value, BackendUnavailable) and caught.value.waited >= 10


def test_zero_gives_up_at_once_and_other_errors_are_not_waited_for():
    clock = Clock()
    with pytest.raises(OutageTooLong):
        OutageWait(0, lambda _: None, sleep=clock.sleep, clock=clock).call(failing(1, clock))
    assert clock.sleeps == []

    def bad() -> None:
        raise InvalidArgument("no")

    with pytest.raises(InvalidArgument):
        OutageWait(60, lambda _: None, sleep=clock.sleep, clock=clock).call(bad)
    assert clock.sleeps == []
