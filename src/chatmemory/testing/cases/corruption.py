"""Corrupted or newer-format data raises naming the id, is never read as empty or overwritten."""

from __future__ import annotations

import pytest

from chatmemory.core.errors import (
    CorruptedMemoryError,
    UnsupportedFormatVersionError,
)
from chatmemory.core.memory import MessageWindowChatMemory
from chatmemory.core.messages import UserMessage
from chatmemory.core.store import ChatMemoryStore, SupportsVersioning
from chatmemory.serialization.native import dumps_message
from chatmemory.testing.cases.hooks import RawWriter, texts

GARBAGE_RECORDS: tuple[bytes, ...] = (
    b"\xff\xfe not json",
    b'{"v": 1, "type": "alien", "text": "?"}',
    b'{"v": 1, "type": "user"}',
    b"[1, 2, 3]",
    b"",
)


class CorruptionCases:
    """Corrupted or newer-format data raises naming the id, is never read as empty or overwritten."""

    @staticmethod
    def _raw(write_raw: RawWriter | None) -> RawWriter:
        if write_raw is None:
            pytest.skip("no write_raw hook: corruption cases need one")
        return write_raw

    @pytest.mark.parametrize(
        "garbage", GARBAGE_RECORDS, ids=["bytes", "unknown-type", "missing-field", "not-object", "empty"]
    )
    def test_corrupted_data_raises_naming_the_id(
        self, store: ChatMemoryStore, memory_id: str, write_raw: RawWriter | None, garbage: bytes
    ) -> None:
        plant = self._raw(write_raw)
        plant(memory_id, [dumps_message(UserMessage("fine")), garbage])
        with pytest.raises(CorruptedMemoryError) as raised:
            store.get_messages(memory_id)
        assert raised.value.memory_id == memory_id
        assert memory_id in str(raised.value)
        if isinstance(store, SupportsVersioning):
            with pytest.raises(CorruptedMemoryError):
                store.load(memory_id)

    def test_corrupted_memory_is_not_overwritten_by_add(
        self, store: ChatMemoryStore, memory_id: str, write_raw: RawWriter | None
    ) -> None:
        plant = self._raw(write_raw)
        plant(memory_id, [b"\x00garbage"])
        memory = MessageWindowChatMemory(memory_id, store=store, max_messages=5)
        with pytest.raises(CorruptedMemoryError):
            memory.add(UserMessage("would overwrite"))
        with pytest.raises(CorruptedMemoryError):
            store.get_messages(memory_id)

    def test_newer_format_version_raises(
        self, store: ChatMemoryStore, memory_id: str, write_raw: RawWriter | None
    ) -> None:
        plant = self._raw(write_raw)
        plant(memory_id, [b'{"v": 999, "type": "user", "contents": [], "hologram": true}'])
        with pytest.raises(UnsupportedFormatVersionError) as raised:
            store.get_messages(memory_id)
        assert raised.value.memory_id == memory_id
        assert memory_id in str(raised.value)

    def test_operator_recovers_a_corrupted_memory(
        self, store: ChatMemoryStore, memory_id: str, write_raw: RawWriter | None
    ) -> None:
        plant = self._raw(write_raw)
        plant(memory_id, [b"\xff"])
        store.update_messages(memory_id, texts(2))
        assert store.get_messages(memory_id) == texts(2)
        plant(memory_id, [b"\xff"])
        store.delete_messages(memory_id)
        assert store.get_messages(memory_id) == []
        memory = MessageWindowChatMemory(memory_id, store=store, max_messages=5)
        memory.add(UserMessage("fresh"))
        assert memory.messages() == [UserMessage("fresh")]
