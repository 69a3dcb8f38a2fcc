"""Many tasks on one loop: nothing lost, nothing doubled, every window as the in-memory reference has it."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable

import chatmemory
from chatmemory import AiMessage, ChatMessage, ConcurrentUpdateError, Snapshot, SystemMessage, UserMessage, aio
from chatmemory.aio import MessageWindowChatMemory


class _Yielding(aio.InMemoryChatMemoryStore):
    """The in-memory store with a trip around the loop in every call, as a network store has: tasks collide."""

    async def load(self, memory_id: str) -> Snapshot:
        await asyncio.sleep(0)
        return await super().load(memory_id)

    conflicts = 0

    async def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        await asyncio.sleep(0)
        try:
            return await super().save(memory_id, messages, expected_version)
        except ConcurrentUpdateError:
            self.conflicts += 1
            raise


async def test_100_tasks_adding_20_messages_each_to_one_memory(
    async_store: aio.ChatMemoryStore, memory_id: str, scale: float
) -> None:
    await _one_memory(async_store, memory_id, scale)


async def test_tasks_sharing_a_memory_object_take_turns(memory_id: str) -> None:
    store = _Yielding()
    await _one_memory(store, memory_id, 1.0)
    assert store.conflicts == 0


async def test_tasks_with_their_own_memory_objects_retry_their_conflicts(memory_id: str) -> None:
    store = _Yielding()
    tasks, adds = 10, 30

    async def writer(task: int) -> None:
        memory = MessageWindowChatMemory(memory_id, max_messages=tasks * adds, store=store)
        for index in range(adds):
            await memory.add(UserMessage(f"{task}:{index}"))

    await asyncio.gather(*(writer(task) for task in range(tasks)))
    kept = [m.text for m in await store.get_messages(memory_id) if isinstance(m, UserMessage)]
    assert Counter(kept) == Counter(f"{t}:{i}" for t in range(tasks) for i in range(adds))
    assert store.conflicts > 0


async def _one_memory(async_store: aio.ChatMemoryStore, memory_id: str, scale: float) -> None:
    tasks, adds = 100, max(1, int(20 * scale))
    memory = MessageWindowChatMemory(memory_id, max_messages=tasks * adds + 1, store=async_store)

    async def writer(task: int) -> None:
        for index in range(adds):
            await memory.add(UserMessage(f"{task}:{index}"))
            await asyncio.sleep(0)

    # Any ConcurrentUpdateError fails the test here.
    await asyncio.gather(*(writer(task) for task in range(tasks)))
    kept = [m.text for m in await memory.messages() if isinstance(m, UserMessage)]
    assert len(kept) == tasks * adds
    assert Counter(kept) == Counter(f"{t}:{i}" for t in range(tasks) for i in range(adds))
    for task in range(tasks):
        assert [t for t in kept if t.startswith(f"{task}:")] == [f"{task}:{i}" for i in range(adds)]


def _turn(memory_number: int, turn: int) -> list[chatmemory.ChatMessage]:
    if turn == 0:
        return [SystemMessage(f"assistant of {memory_number}"), UserMessage("hello")]
    return [UserMessage(f"{memory_number} asks {turn}"), AiMessage(f"{memory_number} answer {turn}")]


async def test_2000_memories_of_10_turns_on_200_tasks(
    async_store: aio.ChatMemoryStore, memory_id: str, scale: float
) -> None:
    memories, turns, workers, window = int(2000 * scale), 10, 200, 7
    queue: asyncio.Queue[int] = asyncio.Queue()
    for number in range(memories):
        queue.put_nowait(number)

    async def worker() -> None:
        # Each worker takes a memory and plays its whole conversation, one awaited turn after another.
        while not queue.empty():
            number = queue.get_nowait()
            memory = MessageWindowChatMemory(f"{memory_id}-{number}", max_messages=window, store=async_store)
            for turn in range(turns):
                await memory.add(*_turn(number, turn))
                await asyncio.sleep(0)  # interleave the workers even on a store that never suspends

    await asyncio.gather(*(worker() for _ in range(workers)))
    for number in range(memories):
        reference = chatmemory.MessageWindowChatMemory(max_messages=window)
        for turn in range(turns):
            reference.add(*_turn(number, turn))
        stored = await MessageWindowChatMemory(
            f"{memory_id}-{number}", max_messages=window, store=async_store
        ).messages()
        assert stored == reference.messages(), number
