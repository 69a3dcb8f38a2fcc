"""Optimistic concurrency: versions, stale saves, concurrent adds (stores with versioning)."""

from __future__ import annotations

import uuid

import pytest

from chatmemory.core.errors import ConcurrentUpdateError
from chatmemory.core.messages import UserMessage
from chatmemory.testing.cases.hooks import texts
from chatmemory.testing.driver import ContractDriver


class VersioningCases:
    """Optimistic concurrency: versions, stale saves, concurrent adds (stores with versioning)."""

    async def test_versions_start_at_zero_and_move_on(self, contract: ContractDriver, memory_id: str) -> None:
        versioned = contract.versioned()
        first = await versioned.load(memory_id)
        assert (first.messages, first.version) == ([], 0)
        v1 = await versioned.save(memory_id, texts(1), 0)
        v2 = await versioned.save(memory_id, texts(2), v1)
        assert 0 < v1 < v2
        snapshot = await versioned.load(memory_id)
        assert (snapshot.messages, snapshot.version) == (texts(2), v2)

    async def test_a_uuid_or_int_id_is_the_memory_of_its_text(self, contract: ContractDriver, memory_id: str) -> None:
        versioned = contract.versioned()
        session = uuid.uuid5(uuid.NAMESPACE_URL, memory_id)
        number = session.int >> 68  # a 60-bit int no other test uses
        ids: list[tuple[object, str]] = [(session, str(session)), (number, str(number))]
        for given, text in ids:
            # Loaded and saved under the object, then under its text: one memory, one line of versions.
            first = await versioned.load(given)  # type: ignore[arg-type]
            v1 = await versioned.save(given, texts(2), first.version)  # type: ignore[arg-type]
            assert await contract.store.get_messages(text) == texts(2)
            assert (await versioned.load(text)).version == v1
            v2 = await versioned.save(text, texts(3), v1)
            again = await versioned.load(given)  # type: ignore[arg-type]
            assert (again.messages, again.version) == (texts(3), v2)
            await versioned.save(given, texts(1), v2)  # type: ignore[arg-type]
            await contract.store.delete_messages(given)  # type: ignore[arg-type]
            assert await contract.store.get_messages(text) == []

    async def test_stale_save_raises_and_changes_nothing(self, contract: ContractDriver, memory_id: str) -> None:
        versioned = contract.versioned()
        v1 = await versioned.save(memory_id, texts(2, "old"), 0)
        v2 = await versioned.save(memory_id, texts(3, "new"), v1)
        with pytest.raises(ConcurrentUpdateError) as raised:
            await versioned.save(memory_id, texts(1, "stale"), v1)
        assert memory_id in str(raised.value)
        with pytest.raises(ConcurrentUpdateError):
            await versioned.save(memory_id, texts(1, "stale"), 0)
        assert (await versioned.load(memory_id)).version == v2
        assert await contract.store.get_messages(memory_id) == texts(3, "new")

    async def test_save_on_a_missing_memory_needs_version_zero(self, contract: ContractDriver, memory_id: str) -> None:
        versioned = contract.versioned()
        with pytest.raises(ConcurrentUpdateError):
            await versioned.save(memory_id, texts(1), 7)
        assert await contract.store.get_messages(memory_id) == []

    async def test_update_and_delete_move_the_version_on(self, contract: ContractDriver, memory_id: str) -> None:
        versioned, store = contract.versioned(), contract.store
        seen = {await versioned.save(memory_id, texts(1), 0)}
        before_update = await versioned.load(memory_id)
        await store.update_messages(memory_id, texts(2))
        with pytest.raises(ConcurrentUpdateError):
            await versioned.save(memory_id, texts(3), before_update.version)
        before_delete = await versioned.load(memory_id)
        seen.add(before_delete.version)
        await store.delete_messages(memory_id)
        with pytest.raises(ConcurrentUpdateError):
            await versioned.save(memory_id, texts(3), before_delete.version)
        # Recreated after a delete, the memory never repeats a version it had.
        for count in range(1, 4):
            snapshot = await versioned.load(memory_id)
            version = await versioned.save(memory_id, texts(count, "again"), snapshot.version)
            assert version not in seen
            seen.add(version)
        assert await store.get_messages(memory_id) == texts(3, "again")

    async def test_diffing_survives_a_stale_snapshot(self, contract: ContractDriver, memory_id: str) -> None:
        # Another writer replaces the memory between this writer's load and save: the save must fail,
        # never apply a diff computed against rows that are gone.
        versioned, store = contract.versioned(), contract.store
        await versioned.save(memory_id, texts(5, "a"), 0)
        stale = await versioned.load(memory_id)
        await store.delete_messages(memory_id)
        await store.update_messages(memory_id, texts(5, "a"))
        with pytest.raises(ConcurrentUpdateError):
            await versioned.save(memory_id, [*stale.messages[1:], UserMessage("next")], stale.version)
        assert await store.get_messages(memory_id) == texts(5, "a")

    async def test_concurrent_adds_lose_nothing(self, contract: ContractDriver, memory_id: str) -> None:
        contract.versioned()
        writers, adds = 8, 100

        async def writer(worker: int) -> None:
            memory = contract.memory(memory_id, max_messages=writers * adds + 10)
            for index in range(adds):
                await memory.add(UserMessage(f"{worker}:{index}"))
                await contract.pause()

        await contract.together(*(writer(worker) for worker in range(writers)))
        kept = [m.text for m in await contract.store.get_messages(memory_id) if isinstance(m, UserMessage)]
        assert len(kept) == writers * adds
        assert sorted(kept) == sorted(f"{w}:{i}" for w in range(writers) for i in range(adds))
        for number in range(writers):
            mine = [t for t in kept if t.startswith(f"{number}:")]
            assert mine == [f"{number}:{i}" for i in range(adds)], "one writer's messages are out of order"
