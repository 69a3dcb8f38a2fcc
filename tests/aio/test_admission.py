"""Admission: operations let through first come, first served, never more at once than the limit."""

from __future__ import annotations

import asyncio

import pytest

from chatmemory import telemetry
from chatmemory.core.errors import StoreError
from chatmemory.stores.base.aio import Admission

pytestmark = pytest.mark.asyncio


async def _rounds(admission: Admission, tasks: int, turns: int) -> list[tuple[int, int]]:
    """Each task takes ``turns`` turns, one ``sleep(0)`` inside each; the order turns were taken in."""
    order: list[tuple[int, int]] = []
    running = 0

    async def task(number: int) -> None:
        nonlocal running
        for turn in range(turns):
            async with admission:
                running += 1
                assert running <= admission.limit
                order.append((number, turn))
                await asyncio.sleep(0)
                running -= 1

    await asyncio.gather(*(task(number) for number in range(tasks)))
    return order


async def test_one_place_goes_round_the_tasks_in_turn() -> None:
    # A task that asks again right after its turn queues behind those waiting: round after round.
    order = await _rounds(Admission(1, None, "test"), tasks=4, turns=3)
    assert order == [(number, turn) for turn in range(3) for number in range(4)]


async def test_no_task_takes_a_second_turn_before_every_waiting_task_had_its_first() -> None:
    admission = Admission(3, None, "test")
    order = await _rounds(admission, tasks=10, turns=4)
    firsts = [index for index, (_, turn) in enumerate(order) if turn == 0]
    seconds = [index for index, (_, turn) in enumerate(order) if turn == 1]
    assert max(firsts) < min(seconds)
    assert admission.running == 0 and admission.waiting == 0


async def test_a_waiter_gives_up_after_the_timeout_with_an_error_naming_the_limit() -> None:
    admission = Admission(1, 0.05, "pool_size=1, pool_timeout=0.05 s")
    async with admission:
        with telemetry.operation(backend="test", name="update", memory_id="user-7") as op:
            op.owner = object()  # as a store's operation: its memory id is named
            with pytest.raises(StoreError) as raised:
                async with admission:
                    pytest.fail("admitted past the limit")
    message = str(raised.value)
    assert "'user-7'" in message
    assert "within 0.05 s" in message
    assert "1 connections (pool_size=1, pool_timeout=0.05 s)" in message
    assert admission.waiting == 0
    async with admission:  # the place is free again
        assert admission.running == 1


async def test_a_cancelled_waiter_leaves_the_line_and_loses_no_place() -> None:
    admission = Admission(1, None, "test")
    entered = asyncio.Event()

    async def waiter() -> None:
        async with admission:
            entered.set()

    async with admission:
        waiting = asyncio.create_task(waiter())
        await asyncio.sleep(0)
        assert admission.waiting == 1
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert admission.waiting == 0
    assert admission.running == 0
    await asyncio.wait_for(waiter(), 1)
    assert entered.is_set()


async def test_a_waiter_cancelled_once_admitted_passes_its_place_on() -> None:
    admission = Admission(1, None, "test")
    third_in = asyncio.Event()

    async def second() -> None:
        async with admission:
            pytest.fail("ran although cancelled")

    async def third() -> None:
        async with admission:
            third_in.set()

    async with admission:
        cancelled = asyncio.create_task(second())
        following = asyncio.create_task(third())
        await asyncio.sleep(0)
    # The place went to ``second`` as the first one left; it is cancelled before it could run.
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    await asyncio.wait_for(following, 1)
    assert third_in.is_set()
    assert admission.running == 0


@pytest.mark.parametrize(("limit", "timeout"), [(0, None), (-1, None), (True, None), (1.5, None), (1, -1.0)])
async def test_bad_limits_are_refused_when_built(limit: object, timeout: float | None) -> None:
    with pytest.raises(ValueError, match="admission"):
        Admission(limit, timeout, "test")  # type: ignore[arg-type]
