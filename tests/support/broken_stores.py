"""Deliberately broken stores: each breaks one rule of the contract, which must then fail."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Sequence

from chatmemory import ChatMessage, SerializationError
from chatmemory.serialization import dumps_message, loads_message


class RecordStore:
    """A correct, minimal store of encoded records per id (the base the broken ones bend)."""

    def __init__(self) -> None:
        self._records: dict[str, list[bytes]] = {}
        self._lock = threading.Lock()

    def _key(self, memory_id: str) -> str:
        return memory_id

    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        with self._lock:
            records = list(self._records.get(self._key(memory_id), []))
        return [loads_message(record, memory_id=memory_id) for record in records]

    def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        records = [dumps_message(message) for message in messages]
        with self._lock:
            self._records[self._key(memory_id)] = records

    def delete_messages(self, memory_id: str) -> None:
        with self._lock:
            self._records.pop(self._key(memory_id), None)

    def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        with self._lock:
            self._records[self._key(memory_id)] = list(records)


class EmptyOnCorruptionStore(RecordStore):
    """Reads corrupted data as an empty memory."""

    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        try:
            return super().get_messages(memory_id)
        except SerializationError:
            return []


class ReorderingStore(RecordStore):
    """Returns the messages of longer lists in the wrong order."""

    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        messages = super().get_messages(memory_id)
        if len(messages) > 2:
            messages[0], messages[1] = messages[1], messages[0]
        return messages


class SharedStateStore(RecordStore):
    """Keys memories by a lowercased, glob-stripped form of the id, so distinct ids collide."""

    def _key(self, memory_id: str) -> str:
        return memory_id.strip().lower().replace("*", "").replace("?", "") or "_"


class NonAtomicStore(RecordStore):
    """Clears the list, then writes one message at a time: a failure or a reader sees half a list."""

    def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        with self._lock:
            self._records[memory_id] = []
        for message in messages:
            record = dumps_message(message)
            time.sleep(0)
            with self._lock:
                self._records.setdefault(memory_id, []).append(record)


class AsyncOver:
    """An asyncio store over one of the stores above: each call yields to the loop, then runs the sync one."""

    def __init__(self, inner: RecordStore) -> None:
        self.inner = inner

    async def get_messages(self, memory_id: str) -> list[ChatMessage]:
        await asyncio.sleep(0)
        return self.inner.get_messages(memory_id)

    async def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        await asyncio.sleep(0)
        self.inner.update_messages(memory_id, messages)

    async def delete_messages(self, memory_id: str) -> None:
        await asyncio.sleep(0)
        self.inner.delete_messages(memory_id)

    async def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        self.inner.write_raw(memory_id, records)


class AsyncNonAtomicStore(AsyncOver):
    """Clears the list, then appends one message at a time with an ``await`` between: tasks see half lists."""

    def __init__(self) -> None:
        super().__init__(RecordStore())

    async def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        records = self.inner._records
        records[memory_id] = []
        for message in messages:
            record = dumps_message(message)
            await asyncio.sleep(0)
            records.setdefault(memory_id, []).append(record)
