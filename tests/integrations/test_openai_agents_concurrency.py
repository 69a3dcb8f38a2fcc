"""ChatMemorySession under many writers, on every async backend: tasks sharing one session take turns,
independent sessions on one id lose nothing, and a conflicting write queues on the store's lock.

``max_attempts=1`` turns any conflict into an error: tasks sharing one session object must never conflict
with each other, so they pass with a single attempt each.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Coroutine
from typing import Any, TypeVar, cast

import pytest

from chatmemory import aio
from chatmemory.integrations.openai_agents import ChatMemorySession

T = TypeVar("T")


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


async def _run_all(workers: list[Coroutine[Any, Any, T]]) -> list[T]:
    """Run ``workers`` at once to the end (a failing one does not leave the others running); fail on any error."""
    outcomes = await asyncio.gather(*workers, return_exceptions=True)
    errors = [outcome for outcome in outcomes if isinstance(outcome, BaseException)]
    assert errors == [], f"{len(errors)} of {len(workers)} workers failed, the first with {errors[0]!r}"
    return cast("list[T]", outcomes)


def _check_each_writer_in_order(contents: list[str], writers: int, adds: int) -> None:
    """Every ``writer:index`` item once, and each writer's items in the order it added them."""
    assert len(contents) == len(set(contents)) == writers * adds, "an item was lost or doubled"
    by_writer: dict[str, list[int]] = {}
    for content in contents:
        writer, index = content.split(":")
        by_writer.setdefault(writer, []).append(int(index))
    assert all(indices == list(range(adds)) for indices in by_writer.values()), "a writer's items are out of order"


async def test_forty_tasks_sharing_one_session_take_turns(async_store: aio.ChatMemoryStore) -> None:
    session = ChatMemorySession("shared", store=async_store, max_attempts=1)

    async def writer(number: int) -> None:
        for index in range(10):
            await session.add_items([_user(f"{number}:{index}")])

    await _run_all([writer(number) for number in range(40)])

    _check_each_writer_in_order([item["content"] for item in await session.get_items()], 40, 10)


async def test_pops_and_adds_sharing_one_session_take_turns(async_store: aio.ChatMemoryStore) -> None:
    session = ChatMemorySession("pops", store=async_store, max_attempts=1)

    async def worker(number: int) -> Any:
        await session.add_items([_user(f"{number}:0")])
        await session.add_items([_user(f"{number}:1")])
        return await session.pop_item()

    popped = await _run_all([worker(number) for number in range(20)])

    left = await session.get_items()
    assert len(left) == 20 and None not in popped
    # Each pop took an item no other pop took, and what is left is everything else.
    contents = [item["content"] for item in [*left, *popped]]
    assert sorted(contents) == sorted(f"{number}:{index}" for number in range(20) for index in range(2))


async def test_independent_sessions_on_one_id_lose_nothing(async_store: aio.ChatMemoryStore) -> None:
    # A session object per task (an object per request, an agent per role): they do conflict, and retry.
    async def writer(number: int) -> None:
        session = ChatMemorySession("independent", store=async_store)
        for index in range(10):
            await session.add_items([_user(f"{number}:{index}")])

    await _run_all([writer(number) for number in range(20)])

    items = await ChatMemorySession("independent", store=async_store).get_items()
    _check_each_writer_in_order([item["content"] for item in items], 20, 10)


async def test_a_conflicting_write_queues_on_the_store_lock(async_store: aio.ChatMemoryStore) -> None:
    if not (isinstance(async_store, aio.SupportsLockedUpdate) and inspect.iscoroutinefunction(async_store.modify)):
        pytest.skip(f"{type(async_store).__name__} has no locked update")
    # Two attempts: the optimistic one, then the locked one, which waits its turn and cannot conflict.
    sessions = [ChatMemorySession("queued", store=async_store, max_attempts=2) for _ in range(20)]

    async def writer(number: int) -> None:
        for index in range(5):
            await sessions[number].add_items([_user(f"{number}:{index}")])

    await _run_all([writer(number) for number in range(20)])

    _check_each_writer_in_order([item["content"] for item in await sessions[0].get_items()], 20, 5)


async def test_a_window_session_shared_by_tasks_keeps_the_newest(async_store: aio.ChatMemoryStore) -> None:
    session = ChatMemorySession("window", store=async_store, max_messages=30, max_attempts=1)

    async def writer(number: int) -> None:
        for index in range(5):
            await session.add_items([_user(f"{number}:{index}")])

    await _run_all([writer(number) for number in range(20)])

    contents = [item["content"] for item in await session.get_items()]
    assert len(contents) == len(set(contents)) == 30
    # The window is the newest 30 adds: a writer's later items stay wherever its earlier ones did.
    kept = set(contents)
    for content in contents:
        writer, index = content.split(":")
        assert all(f"{writer}:{later}" in kept for later in range(int(index), 5)), content
