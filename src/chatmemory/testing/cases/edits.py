"""Positional edits (insert at, remove at) on stores with versioning: exact positions, nothing lost to other writers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import pytest

from chatmemory.aio import edits as async_edits
from chatmemory.core import edits as sync_edits
from chatmemory.core.errors import CorruptedMemoryError
from chatmemory.core.messages import ChatMessage, UserMessage
from chatmemory.core.store import Snapshot
from chatmemory.testing.cases.hooks import texts
from chatmemory.testing.driver import AsyncDriver, ContractDriver

SEEDS = 80
"""Messages a memory holds before the concurrent edits: more than twice the removals, so every removal at
position 0 takes a seed, and every insertion (at the middle) lands behind the seeds still to be removed."""
EDITS_EACH = 10
"""Insertions and removals each editor makes, and appends each appender makes."""


def _text(message: ChatMessage | None) -> str:
    return message.text if isinstance(message, UserMessage) else repr(message)


class _Edits:
    """The positional edits of the suite's I/O style, awaited by the cases."""

    def __init__(self, contract: ContractDriver) -> None:
        contract.versioned()  # skips the case on a store without versioning
        self._asyncio = isinstance(contract, AsyncDriver)
        self._store = contract.store if self._asyncio else getattr(contract.store, "wrapped", contract.store)

    async def insert(self, memory_id: str, index: int | None, messages: Sequence[ChatMessage]) -> None:
        if self._asyncio:
            await async_edits.insert_messages(self._store, memory_id, index, messages)
        else:
            sync_edits.insert_messages(self._store, memory_id, index, messages)

    async def remove(self, memory_id: str, index: int) -> ChatMessage | None:
        if self._asyncio:
            return await async_edits.remove_message(self._store, memory_id, index)
        return sync_edits.remove_message(self._store, memory_id, index)


class EditCases:
    """Insert at and remove at a position, written at the version they were decided on (stores with versioning)."""

    async def test_insertions_land_where_list_insert_puts_them(self, contract: ContractDriver, memory_id: str) -> None:
        edits = _Edits(contract)
        await edits.insert(memory_id, 0, texts(1, "first"))  # an unknown memory: created
        await edits.insert(memory_id, None, texts(2, "end"))
        await edits.insert(memory_id, 1, [UserMessage("one"), UserMessage("two")])
        await edits.insert(memory_id, -1, texts(1, "before-last"))
        await edits.insert(memory_id, 100, texts(1, "past-end"))
        await edits.insert(memory_id, -100, texts(1, "before-start"))
        stored = [_text(m) for m in await contract.store.get_messages(memory_id)]
        assert stored == ["before-start0", "first0", "one", "two", "end0", "before-last0", "end1", "past-end0"]

    async def test_removals_take_exactly_the_message_at_the_position(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        edits = _Edits(contract)
        await contract.store.update_messages(memory_id, texts(5))
        assert _text(await edits.remove(memory_id, 1)) == "m1"
        assert _text(await edits.remove(memory_id, -1)) == "m4"
        assert _text(await edits.remove(memory_id, 0)) == "m0"
        assert [_text(m) for m in await contract.store.get_messages(memory_id)] == ["m2", "m3"]

    async def test_a_removal_with_nothing_at_the_position_writes_nothing(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        edits = _Edits(contract)
        versioned = contract.versioned()
        assert await edits.remove(memory_id, 0) is None  # an unknown memory stays unknown
        assert (await versioned.load(memory_id)).version == 0
        await contract.store.update_messages(memory_id, texts(2))
        before = (await versioned.load(memory_id)).version
        for index in (2, -3, 50):
            assert await edits.remove(memory_id, index) is None
        assert await versioned.load(memory_id) == Snapshot(texts(2), before)
        await contract.store.update_messages(memory_id, [])
        assert await edits.remove(memory_id, -1) is None  # an existing empty memory

    async def test_an_insertion_of_nothing_writes_nothing(self, contract: ContractDriver, memory_id: str) -> None:
        edits = _Edits(contract)
        await edits.insert(memory_id, 0, [])
        assert (await contract.versioned().load(memory_id)).version == 0

    async def test_edits_move_the_version_on(self, contract: ContractDriver, memory_id: str) -> None:
        edits = _Edits(contract)
        versioned = contract.versioned()
        await edits.insert(memory_id, None, texts(2))
        first = (await versioned.load(memory_id)).version
        await edits.remove(memory_id, 0)
        second = (await versioned.load(memory_id)).version
        assert 0 < first < second

    async def test_edits_of_a_corrupted_memory_raise_and_change_nothing(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        edits = _Edits(contract)
        await contract.write_raw(memory_id, [b"\x00garbage"])
        with pytest.raises(CorruptedMemoryError):
            await edits.insert(memory_id, 0, texts(1))
        with pytest.raises(CorruptedMemoryError):
            await edits.remove(memory_id, 0)
        with pytest.raises(CorruptedMemoryError):
            await contract.store.get_messages(memory_id)

    async def test_concurrent_positional_edits_lose_nothing(self, contract: ContractDriver, memory_id: str) -> None:
        # Two editors insert at the middle and remove at the front while two appenders add at the end.
        edits = _Edits(contract)
        seeds = [f"seed-{index}" for index in range(SEEDS)]
        await contract.store.update_messages(memory_id, [UserMessage(text) for text in seeds])
        removed: list[str] = []

        async def edit(editor: int) -> None:
            for turn in range(EDITS_EACH):
                stored = await contract.store.get_messages(memory_id)
                await edits.insert(memory_id, len(stored) // 2, [UserMessage(f"e{editor}-{turn}")])
                removed.append(_text(await edits.remove(memory_id, 0)))
                await contract.pause()

        async def append(appender: int) -> None:
            for turn in range(EDITS_EACH):
                await edits.insert(memory_id, None, [UserMessage(f"a{appender}-{turn}")])
                await contract.pause()

        await contract.together(edit(0), append(0), edit(1), append(1))
        stored = [_text(message) for message in await contract.store.get_messages(memory_id)]
        inserted = [f"e{editor}-{turn}" for editor in range(2) for turn in range(EDITS_EACH)]
        appended = [f"a{appender}-{turn}" for appender in range(2) for turn in range(EDITS_EACH)]
        # Every removal took exactly one message, each a different one, from the front, in order.
        assert sorted(removed) == sorted(seeds[: 2 * EDITS_EACH]), removed
        doubled = sorted(text for text, count in Counter(stored).items() if count > 1)
        assert not doubled, f"written twice: {doubled[:5]}"
        assert Counter(stored) == Counter(seeds[len(removed) :] + inserted + appended), "an edit was lost"
        assert stored[: SEEDS // 4] == seeds[len(removed) : len(removed) + SEEDS // 4], "an insertion misplaced"
        for appender in range(2):  # appends at the end, in each appender's order
            assert [t for t in stored if t.startswith(f"a{appender}-")] == [
                f"a{appender}-{turn}" for turn in range(EDITS_EACH)
            ]
