"""A cancelled ``add`` leaves the memory at its old or its new window, never a mix, and the store usable.

Cancellation is injected three ways, on whatever asyncio store the ``async_store`` fixture gives: after
each trip around the event loop until ``add`` completes (every ``await`` the loop can reach), before and
after each store call of ``add`` (a reply lost to a cancellation after the server applied the write), and
with ``asyncio.timeout`` deadlines.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Sequence
from typing import Any

import pytest

from chatmemory import ChatMessage, Snapshot, SystemMessage, UserMessage, aio
from chatmemory.aio import MessageWindowChatMemory

WINDOW = 5
SETTLE = 0.02


def expected_after(old: list[ChatMessage], added: ChatMessage) -> list[ChatMessage]:
    system = [m for m in old if isinstance(m, SystemMessage)]
    rest = [m for m in old if not isinstance(m, SystemMessage)] + [added]
    return system + rest[-(WINDOW - len(system)) :]


async def _seed(store: aio.ChatMemoryStore, memory_id: str) -> MessageWindowChatMemory:
    memory = MessageWindowChatMemory(memory_id, max_messages=WINDOW, store=store)
    await memory.add(SystemMessage("s"), *(UserMessage(f"seed {i}") for i in range(WINDOW)))
    return memory


async def test_cancelled_after_each_loop_iteration(async_store: aio.ChatMemoryStore, memory_id: str) -> None:
    memory = await _seed(async_store, memory_id)
    for iterations in range(5000):
        old = await memory.messages()
        added = UserMessage(f"add {iterations}")
        task = asyncio.create_task(memory.add(added))
        for _ in range(iterations):
            await asyncio.sleep(0)
        finished_first = task.done()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            # On Python 3.11, asyncio.wait_for inside a driver may swallow a cancellation that arrives as
            # the awaited future completes (CPython gh-86296): then add simply completes.
            await task
        # A write the server received before the cancellation is applied all the same, perhaps after a
        # read sent later on another connection; let it land before judging the state.
        await asyncio.sleep(SETTLE)
        now = await memory.messages()
        if task.cancelled():
            assert now in (old, expected_after(old, added)), f"cancelled after {iterations} loop iterations"
        else:
            assert now == expected_after(old, added), f"completed after {iterations} loop iterations"
        if finished_first:
            break  # add finished before the cancellation: every await point was reached
    else:
        pytest.fail("add never completed within 5000 loop iterations")
    assert await memory.messages() != []


class _Cancelling:
    """Forwards to a store and raises ``CancelledError`` around its ``at``-th call (before or after it)."""

    def __init__(self, inner: Any, at: int, after: bool) -> None:
        self.inner, self.at, self.after, self.calls = inner, at, after, 0

    async def _call(self, name: str, *args: Any) -> Any:
        self.calls += 1
        if self.calls == self.at and not self.after:
            raise asyncio.CancelledError
        result = await getattr(self.inner, name)(*args)
        if self.calls == self.at and self.after:
            raise asyncio.CancelledError
        return result

    async def get_messages(self, memory_id: str) -> list[ChatMessage]:
        result: list[ChatMessage] = await self._call("get_messages", memory_id)
        return result

    async def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        await self._call("update_messages", memory_id, messages)

    async def delete_messages(self, memory_id: str) -> None:
        await self._call("delete_messages", memory_id)


class _VersionedCancelling(_Cancelling):
    async def load(self, memory_id: str) -> Snapshot:
        result: Snapshot = await self._call("load", memory_id)
        return result

    async def save(self, memory_id: str, messages: Sequence[ChatMessage], expected_version: int) -> int:
        result: int = await self._call("save", memory_id, messages, expected_version)
        return result


@pytest.mark.parametrize("after", [False, True], ids=["before-the-call", "after-the-call"])
async def test_cancelled_at_each_store_call(async_store: aio.ChatMemoryStore, memory_id: str, after: bool) -> None:
    await _seed(async_store, memory_id)
    wrapper = _VersionedCancelling if isinstance(async_store, aio.SupportsVersioning) else _Cancelling
    at = 1
    while True:
        spy = wrapper(async_store, at, after)
        memory = MessageWindowChatMemory(memory_id, max_messages=WINDOW, store=spy)
        old = await async_store.get_messages(memory_id)
        added = UserMessage(f"call {at} {after}")
        try:
            await memory.add(added)
        except asyncio.CancelledError:
            await asyncio.sleep(SETTLE)
            now = await async_store.get_messages(memory_id)
            # Cancelled after the write reached the store: the new window; before it: the old one.
            assert now in (old, expected_after(old, added)), f"cancelled at store call {at}"
            at += 1
            continue
        assert spy.calls < at, "add completed although a call raised CancelledError"
        break
    assert at >= 3  # read and write were both reached (before and after each)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="asyncio.timeout is new in Python 3.11")
@pytest.mark.parametrize("deadline", [0.0, 1e-5, 1e-4, 3e-4, 1e-3, 3e-3])
async def test_asyncio_timeout(async_store: aio.ChatMemoryStore, memory_id: str, deadline: float) -> None:
    memory = await _seed(async_store, memory_id)
    for attempt in range(20):
        old = await memory.messages()
        added = UserMessage(f"timeout {deadline} {attempt}")
        try:
            async with asyncio.timeout(deadline):
                await memory.add(added)
        except TimeoutError:
            await asyncio.sleep(SETTLE)
        assert await memory.messages() in (old, expected_after(old, added))
    # The store is still usable after every cancellation (its connections went back to the pool).
    await memory.add(UserMessage("after"))
    assert (await memory.messages())[-1] == UserMessage("after")
