"""Independent writers of one memory: each with its own memory object, none loses, doubles or gives up an add."""

from __future__ import annotations

from collections import Counter

from chatmemory.core.messages import ChatMessage, UserMessage
from chatmemory.testing.driver import AsyncDriver, ContractDriver

WRITERS_ON_THREADS, WRITERS_AS_TASKS = 8, 50
"""Writers of the independent-writers cases: threads for a sync store, tasks for an asyncio one."""
ADDS_EACH = 5
"""Adds each of those writers makes."""


def _text(message: ChatMessage) -> str:
    return message.text if isinstance(message, UserMessage) else repr(message)


class WriterCases:
    """Many writers of one memory id, each through a memory object of its own (a request, a worker, an agent).

    The objects share nothing but the store, so their adds meet only there: a store with versioning must
    queue them (a locked update after a conflict) or retry them until every one lands, never drop one,
    write one twice or give up with a conflict while the others make progress. (Without versioning a
    store cannot tell the writers apart: the cases skip.)
    """

    async def test_independent_memory_objects_keep_every_add(self, contract: ContractDriver, memory_id: str) -> None:
        contract.versioned()  # without versions, writers that share nothing cannot see each other's adds
        writers = WRITERS_AS_TASKS if isinstance(contract, AsyncDriver) else WRITERS_ON_THREADS
        expected = [f"w{writer}-{index}" for writer in range(writers) for index in range(ADDS_EACH)]

        async def write(writer: int) -> None:
            memory = contract.memory(memory_id, max_messages=len(expected) + 1)
            for index in range(ADDS_EACH):
                await memory.add(UserMessage(f"w{writer}-{index}"))

        await contract.together(*(write(writer) for writer in range(writers)))
        stored = [_text(message) for message in await contract.store.get_messages(memory_id)]
        doubled = sorted(text for text, count in Counter(stored).items() if count > 1)
        assert not doubled, f"adds written twice: {doubled[:5]}"
        assert sorted(stored) == sorted(expected), f"{len(set(expected) - set(stored))} adds lost"
        for writer in range(writers):  # each writer's adds in the order it made them
            own = [text for text in stored if text.startswith(f"w{writer}-")]
            assert own == [f"w{writer}-{index}" for index in range(ADDS_EACH)], own

    async def test_independent_windows_stay_whole_under_eviction(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        # A small window: most adds evict, and every eviction is decided on what the store holds.
        contract.versioned()
        writers = WRITERS_AS_TASKS // 5 if isinstance(contract, AsyncDriver) else WRITERS_ON_THREADS // 2

        async def write(writer: int) -> None:
            memory = contract.memory(memory_id, max_messages=6)
            for index in range(ADDS_EACH):
                await memory.add(UserMessage(f"w{writer}-{index}"))

        await contract.together(*(write(writer) for writer in range(writers)))
        stored = [_text(message) for message in await contract.store.get_messages(memory_id)]
        assert len(stored) == 6, stored
        assert len(set(stored)) == 6, f"an add written twice: {stored}"
