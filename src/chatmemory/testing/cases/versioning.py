"""Optimistic concurrency: versions, stale saves, concurrent adds (stores with SupportsVersioning)."""

from __future__ import annotations

import threading

import pytest

from chatmemory.core.errors import (
    ConcurrentUpdateError,
)
from chatmemory.core.memory import MessageWindowChatMemory
from chatmemory.core.messages import UserMessage
from chatmemory.core.store import ChatMemoryStore, SupportsVersioning
from chatmemory.testing.cases.hooks import texts


class VersioningCases:
    """Optimistic concurrency: versions, stale saves, concurrent adds (stores with SupportsVersioning)."""

    @staticmethod
    def _versioned(store: ChatMemoryStore) -> SupportsVersioning:
        if not isinstance(store, SupportsVersioning):
            pytest.skip("the store does not support versioning")
        return store

    def test_versions_start_at_zero_and_move_on(self, store: ChatMemoryStore, memory_id: str) -> None:
        versioned = self._versioned(store)
        first = versioned.load(memory_id)
        assert (first.messages, first.version) == ([], 0)
        v1 = versioned.save(memory_id, texts(1), 0)
        v2 = versioned.save(memory_id, texts(2), v1)
        assert 0 < v1 < v2
        snapshot = versioned.load(memory_id)
        assert (snapshot.messages, snapshot.version) == (texts(2), v2)

    def test_stale_save_raises_and_changes_nothing(self, store: ChatMemoryStore, memory_id: str) -> None:
        versioned = self._versioned(store)
        v1 = versioned.save(memory_id, texts(2, "old"), 0)
        v2 = versioned.save(memory_id, texts(3, "new"), v1)
        with pytest.raises(ConcurrentUpdateError) as raised:
            versioned.save(memory_id, texts(1, "stale"), v1)
        assert memory_id in str(raised.value)
        with pytest.raises(ConcurrentUpdateError):
            versioned.save(memory_id, texts(1, "stale"), 0)
        assert versioned.load(memory_id).version == v2
        assert store.get_messages(memory_id) == texts(3, "new")

    def test_save_on_a_missing_memory_needs_version_zero(self, store: ChatMemoryStore, memory_id: str) -> None:
        versioned = self._versioned(store)
        with pytest.raises(ConcurrentUpdateError):
            versioned.save(memory_id, texts(1), 7)
        assert store.get_messages(memory_id) == []

    def test_update_and_delete_move_the_version_on(self, store: ChatMemoryStore, memory_id: str) -> None:
        versioned = self._versioned(store)
        seen = {versioned.save(memory_id, texts(1), 0)}
        before_update = versioned.load(memory_id)
        store.update_messages(memory_id, texts(2))
        with pytest.raises(ConcurrentUpdateError):
            versioned.save(memory_id, texts(3), before_update.version)
        before_delete = versioned.load(memory_id)
        seen.add(before_delete.version)
        store.delete_messages(memory_id)
        with pytest.raises(ConcurrentUpdateError):
            versioned.save(memory_id, texts(3), before_delete.version)
        # Recreated after a delete, the memory never repeats a version it had.
        for count in range(1, 4):
            snapshot = versioned.load(memory_id)
            version = versioned.save(memory_id, texts(count, "again"), snapshot.version)
            assert version not in seen
            seen.add(version)
        assert store.get_messages(memory_id) == texts(3, "again")

    def test_diffing_survives_a_stale_snapshot(self, store: ChatMemoryStore, memory_id: str) -> None:
        # Another writer replaces the memory between this writer's load and save: the save must fail,
        # never apply a diff computed against rows that are gone.
        versioned = self._versioned(store)
        versioned.save(memory_id, texts(5, "a"), 0)
        stale = versioned.load(memory_id)
        store.delete_messages(memory_id)
        store.update_messages(memory_id, texts(5, "a"))
        with pytest.raises(ConcurrentUpdateError):
            versioned.save(memory_id, [*stale.messages[1:], UserMessage("next")], stale.version)
        assert store.get_messages(memory_id) == texts(5, "a")

    def test_concurrent_adds_lose_nothing(self, store: ChatMemoryStore, memory_id: str) -> None:
        self._versioned(store)
        threads, adds = 8, 100
        errors: list[BaseException] = []

        def writer(worker: int) -> None:
            memory = MessageWindowChatMemory(memory_id, store=store, max_messages=threads * adds + 10, max_attempts=200)
            try:
                for index in range(adds):
                    memory.add(UserMessage(f"{worker}:{index}"))
            except BaseException as exc:
                errors.append(exc)

        workers = [threading.Thread(target=writer, args=(w,)) for w in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert not errors, errors[0]
        texts = [m.text for m in store.get_messages(memory_id) if isinstance(m, UserMessage)]
        assert len(texts) == threads * adds
        assert sorted(texts) == sorted(f"{w}:{i}" for w in range(threads) for i in range(adds))
        for number in range(threads):
            mine = [t for t in texts if t.startswith(f"{number}:")]
            assert mine == [f"{number}:{i}" for i in range(adds)], "one writer's messages are out of order"
