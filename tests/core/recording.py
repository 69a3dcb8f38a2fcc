"""Store wrappers for the core tests: they count calls, or make every write conflict.

They wrap a real :class:`InMemoryChatMemoryStore`; only the calls are observed or interleaved.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from chatmemory import ChatMessage, InMemoryChatMemoryStore, Snapshot, UserMessage


class RecordingStore:
    """A store without versioning that counts ``get_messages``/``update_messages``/``delete_messages``."""

    def __init__(self, inner: InMemoryChatMemoryStore | None = None) -> None:
        self.inner = inner if inner is not None else InMemoryChatMemoryStore()
        self.calls: Counter[str] = Counter()
        self.writes: list[list[ChatMessage]] = []

    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        self.calls["get"] += 1
        return self.inner.get_messages(memory_id)

    def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        self.calls["update"] += 1
        self.writes.append(list(messages))
        self.inner.update_messages(memory_id, messages)

    def delete_messages(self, memory_id: str) -> None:
        self.calls["delete"] += 1
        self.inner.delete_messages(memory_id)

    def reset(self) -> None:
        self.calls.clear()
        self.writes.clear()


class VersionedRecordingStore(RecordingStore):
    """A versioned store that also counts ``load`` and ``save``."""

    def load(self, memory_id: str) -> Snapshot:
        self.calls["load"] += 1
        return self.inner.load(memory_id)

    def save(self, memory_id: str, messages: Sequence[ChatMessage], expected_version: int) -> int:
        self.calls["save"] += 1
        self.writes.append(list(messages))
        return self.inner.save(memory_id, messages, expected_version)


class AlwaysConflictingStore(VersionedRecordingStore):
    """Another writer changes the memory between every ``load`` and the ``save`` that follows it."""

    def load(self, memory_id: str) -> Snapshot:
        snapshot = super().load(memory_id)
        self.inner.update_messages(memory_id, [*snapshot.messages, UserMessage(f"interloper {self.calls['load']}")])
        return snapshot


class ConflictingOnceStore(VersionedRecordingStore):
    """Another writer slips in between the first ``load`` and ``save`` only."""

    def __init__(self, interloper: ChatMessage) -> None:
        super().__init__()
        self.interloper = interloper

    def load(self, memory_id: str) -> Snapshot:
        snapshot = super().load(memory_id)
        if self.calls["load"] == 1:
            self.inner.update_messages(memory_id, [*snapshot.messages, self.interloper])
        return snapshot
