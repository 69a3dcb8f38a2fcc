"""Corrupted or newer-format data raises naming the id, is never read as empty or overwritten."""

from __future__ import annotations

import pytest

from chatmemory.core.errors import CorruptedMemoryError, UnsupportedFormatVersionError
from chatmemory.core.messages import UserMessage
from chatmemory.serialization.native import dumps_message
from chatmemory.testing.cases.hooks import texts
from chatmemory.testing.driver import ContractDriver

GARBAGE_RECORDS: tuple[bytes, ...] = (
    b"\xff\xfe not json",
    b'{"v": 1, "type": "alien", "text": "?"}',
    b'{"v": 1, "type": "user"}',
    b"[1, 2, 3]",
    b"",
)


class CorruptionCases:
    """Corrupted or newer-format data raises naming the id, is never read as empty or overwritten."""

    @pytest.mark.parametrize(
        "garbage", GARBAGE_RECORDS, ids=["bytes", "unknown-type", "missing-field", "not-object", "empty"]
    )
    async def test_corrupted_data_raises_naming_the_id(
        self, contract: ContractDriver, memory_id: str, garbage: bytes
    ) -> None:
        await contract.write_raw(memory_id, [dumps_message(UserMessage("fine")), garbage])
        with pytest.raises(CorruptedMemoryError) as raised:
            await contract.store.get_messages(memory_id)
        assert raised.value.memory_id == memory_id
        assert memory_id in str(raised.value)
        versioned = contract.versioned_store()
        if versioned is not None:
            with pytest.raises(CorruptedMemoryError):
                await versioned.load(memory_id)

    async def test_corrupted_memory_is_not_overwritten_by_add(self, contract: ContractDriver, memory_id: str) -> None:
        await contract.write_raw(memory_id, [b"\x00garbage"])
        memory = contract.memory(memory_id, max_messages=5)
        with pytest.raises(CorruptedMemoryError):
            await memory.add(UserMessage("would overwrite"))
        with pytest.raises(CorruptedMemoryError):
            await contract.store.get_messages(memory_id)

    async def test_newer_format_version_raises(self, contract: ContractDriver, memory_id: str) -> None:
        await contract.write_raw(memory_id, [b'{"v": 999, "type": "user", "contents": [], "hologram": true}'])
        with pytest.raises(UnsupportedFormatVersionError) as raised:
            await contract.store.get_messages(memory_id)
        assert raised.value.memory_id == memory_id
        assert memory_id in str(raised.value)

    async def test_operator_recovers_a_corrupted_memory(self, contract: ContractDriver, memory_id: str) -> None:
        store = contract.store
        await contract.write_raw(memory_id, [b"\xff"])
        await store.update_messages(memory_id, texts(2))
        assert await store.get_messages(memory_id) == texts(2)
        await contract.write_raw(memory_id, [b"\xff"])
        await store.delete_messages(memory_id)
        assert await store.get_messages(memory_id) == []
        memory = contract.memory(memory_id, max_messages=5)
        await memory.add(UserMessage("fresh"))
        assert await memory.messages() == [UserMessage("fresh")]
