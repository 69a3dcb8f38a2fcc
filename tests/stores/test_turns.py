"""Writers taking turns in a process (chatmemory.stores.base.turns), with the server lock's calls recorded."""

from __future__ import annotations

import asyncio
import threading

import pytest

from chatmemory.stores.base.turns import AsyncLocalTurns, LocalTurns, LockOptions, modify_in_turn, modify_in_turn_async


class Server:
    """Records the lock calls; a token is held from its lock until its unlock."""

    def __init__(self) -> None:
        self.locks: list[bytes] = []
        self.unlocks: list[bytes] = []

    @property
    def held(self) -> set[bytes]:
        return set(self.locks) - set(self.unlocks)


async def test_writers_queued_in_a_process_share_one_server_lock_and_give_it_back_once() -> None:
    turns, server, order = AsyncLocalTurns(), Server(), []

    async def lock(token: bytes) -> None:
        server.locks.append(token)

    async def unlock(token: bytes) -> None:
        server.unlocks.append(token)

    async def writer(n: int) -> int:
        async def change() -> int:
            order.append(n)
            await asyncio.sleep(0)
            return n

        return await modify_in_turn_async(turns, "m", 5.0, lock=lock, unlock=unlock, change=change)

    assert await asyncio.gather(*(writer(n) for n in range(5))) == list(range(5))
    assert order == list(range(5))
    assert len(server.locks) == 1 and server.unlocks == server.locks and not server.held
    assert turns.contended("m") and not turns.contended("other")


async def test_a_lock_handed_to_waiters_who_were_all_cancelled_is_given_back() -> None:
    turns, server = AsyncLocalTurns(), Server()
    inside, release = asyncio.Event(), asyncio.Event()

    async def lock(token: bytes) -> None:
        server.locks.append(token)

    async def unlock(token: bytes) -> None:
        server.unlocks.append(token)

    async def first_change() -> int:
        inside.set()
        await release.wait()
        return 1

    async def second_change() -> int:  # never runs: cancelled while waiting
        raise AssertionError("the cancelled writer ran")

    first = asyncio.create_task(modify_in_turn_async(turns, "m", 5.0, lock=lock, unlock=unlock, change=first_change))
    await inside.wait()
    second = asyncio.create_task(modify_in_turn_async(turns, "m", 5.0, lock=lock, unlock=unlock, change=second_change))
    await asyncio.sleep(0.01)  # the second waits for the turn
    release.set()
    await asyncio.sleep(0)  # the first finishes, sees a waiter, hands the server lock on
    second.cancel()
    assert await first == 1
    with pytest.raises(asyncio.CancelledError):
        await second
    assert server.locks and not server.held, "the handed-on server lock was never given back"


async def test_a_failed_change_gives_the_lock_back() -> None:
    turns, server = AsyncLocalTurns(), Server()

    async def lock(token: bytes) -> None:
        server.locks.append(token)

    async def unlock(token: bytes) -> None:
        server.unlocks.append(token)

    async def change() -> int:
        raise ValueError("damaged")

    with pytest.raises(ValueError, match="damaged"):
        await modify_in_turn_async(turns, "m", 5.0, lock=lock, unlock=unlock, change=change)
    assert len(server.locks) == 1 and not server.held


def test_threads_take_turns_and_a_lock_past_half_its_lease_is_taken_afresh() -> None:
    turns, server, guard = LocalTurns(), Server(), threading.Lock()
    inside, most = [0], [0]

    def lock(token: bytes) -> None:
        server.locks.append(token)

    def unlock(token: bytes) -> None:
        server.unlocks.append(token)

    def change() -> int:
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        threading.Event().wait(0.002)
        with guard:
            inside[0] -= 1
        return 0

    def writer() -> None:
        for _ in range(5):
            modify_in_turn(turns, "m", 0.004, lock=lock, unlock=unlock, change=change)  # lease: 4 ms

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert most[0] == 1
    assert len(server.locks) > 1, "a lock past half its lease was handed on instead of taken afresh"
    assert not server.held


def test_lock_options_are_checked_when_built() -> None:
    assert LockOptions.validate(0.5, 2).lease_ms == 500
    with pytest.raises(ValueError, match="lock_lease"):
        LockOptions.validate(0, 2)
    with pytest.raises(TypeError, match="lock_wait"):
        LockOptions.validate(1, "2")  # type: ignore[arg-type]
