"""The contract's timed cases: tried again slower when a check came too late, failed when every try did."""

from __future__ import annotations

import time

import pytest

from chatmemory.testing.cases.margins import SCALES, TooLate, late, with_slower_clock_when_late


async def test_a_late_try_runs_again_slower_with_fresh_ids() -> None:
    tries: list[tuple[float, int]] = []

    async def case(scale: float, attempt: int) -> None:
        tries.append((scale, attempt))
        if attempt < 2:
            raise TooLate

    await with_slower_clock_when_late(case, "a check came late")
    assert tries == [(SCALES[0], 0), (SCALES[1], 1), (SCALES[2], 2)]
    assert SCALES == (1.0, 2.0, 4.0)


async def test_a_try_in_time_is_the_only_one() -> None:
    tries: list[float] = []

    async def case(scale: float, attempt: int) -> None:
        tries.append(scale)

    await with_slower_clock_when_late(case, "a check came late")
    assert tries == [1.0]


async def test_late_on_every_try_fails_saying_what_came_late() -> None:
    async def case(scale: float, attempt: int) -> None:
        raise TooLate

    with pytest.raises(pytest.fail.Exception, match="on each try, the read came late: the machine is too slow"):
        await with_slower_clock_when_late(case, "the read came late")


async def test_a_failure_that_is_not_lateness_goes_through_at_once() -> None:
    tries: list[float] = []

    async def case(scale: float, attempt: int) -> None:
        tries.append(scale)
        raise AssertionError("lost a message")

    with pytest.raises(AssertionError, match="lost a message"):
        await with_slower_clock_when_late(case, "a check came late")
    assert tries == [1.0]


def test_late_compares_the_time_since_a_reading_with_a_lifetime() -> None:
    now = time.monotonic()
    assert late(now - 2.0, 1.0)
    assert not late(now, 60.0)
