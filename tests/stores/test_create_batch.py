"""Batch creates (``SupportsBatchCreates.create_batch``) on every backend that has them.

A batch create leaves each memory it creates as ``save(id, messages, 0)`` followed by ``expire_at``
would (same messages, a version above 0, the expiry asked for, else the store's ttl); a memory that
exists comes back as ``None`` and is not touched, and so does a second copy of an id in the same batch.
"""

from __future__ import annotations

import contextlib
import datetime
from typing import Any

import pytest

from chatmemory import UserMessage
from chatmemory.core.errors import ConcurrentUpdateError
from chatmemory.stored_memories import NewMemory, SupportsBatchCreates
from support.backends import Backend
from support.batches import close_to, window
from support.peers import Peer
from support.recipes import Recipe

UTC = datetime.timezone.utc
HOUR = datetime.timedelta(hours=1)


def creating(store: Any) -> Any:
    if not isinstance(store, SupportsBatchCreates):
        pytest.skip(f"{type(store).__name__} has no batch creates")
    return store


@pytest.fixture(params=[False, True], ids=["plain", "ttl"])
def pair(backend: Backend, request: pytest.FixtureRequest) -> Any:
    """Two stores of the backend alike (a ttl of an hour or none): one for the batch, one for save."""
    options = {"ttl": 3600} if request.param else {}
    made = [backend.make_store(**options), backend.make_store(**options)]
    yield made
    for store in made:
        backend.close_store(store)


def test_a_batch_creates_what_one_by_one_saves_would(pair: Any) -> None:
    batched, saved = creating(pair[0]), pair[1]
    at = (datetime.datetime.now(UTC) + HOUR).replace(microsecond=0)
    memories = [
        NewMemory(f"m-{n:02d}", window(n), sets_expiry=n % 3 != 0, expires_at=at if n % 3 == 1 else None)
        for n in range(9)
    ]
    versions = batched.create_batch(memories)
    for memory in memories:
        saved.save(memory.memory_id, memory.messages, 0)
        if memory.sets_expiry:
            saved.expire_at(memory.memory_id, memory.expires_at)
    assert len(versions) == len(memories)
    for memory, version in zip(memories, versions, strict=True):
        assert version is not None and version > 0
        snapshot = batched.load(memory.memory_id)
        assert snapshot.version == version
        assert snapshot.messages == saved.get_messages(memory.memory_id) == list(memory.messages)
        assert batched.read_raw(memory.memory_id) == saved.read_raw(memory.memory_id)
        times, expected = batched.memory_times(memory.memory_id), saved.memory_times(memory.memory_id)
        assert times is not None and expected is not None
        assert close_to(times.expires_at, expected.expires_at), memory
        if memory.sets_expiry:
            assert close_to(times.expires_at, memory.expires_at)
    # A created memory goes on like any other: a conditional write at its version.
    assert batched.save("m-04", window(5), versions[4]) > versions[4]
    assert batched.create_batch([]) == []


def test_memories_that_exist_are_not_touched(store: Any) -> None:
    store = creating(store)
    store.update_messages("there", window(2))
    store.expire_at("there", None)
    before = store.load("there")
    at = datetime.datetime.now(UTC) + HOUR
    versions = store.create_batch(
        [NewMemory("new-1", window(1)), NewMemory("there", window(7), True, at), NewMemory("new-2", window(3))]
    )
    assert versions[1] is None and versions[0] is not None and versions[2] is not None
    after = store.load("there")
    assert (after.messages, after.version) == (before.messages, before.version)
    times = store.memory_times("there")
    assert times is not None and times.expires_at is None
    assert store.get_messages("new-2") == window(3)


def test_an_expired_memory_is_created_again(store: Any) -> None:
    store = creating(store)
    store.update_messages("old", window(4))
    store.expire_at("old", datetime.datetime.now(UTC) - HOUR)
    (version,) = store.create_batch([NewMemory("old", window(1))])
    assert version is not None
    assert store.load("old").messages == window(1)


def test_a_second_copy_of_an_id_in_the_batch_is_none(store: Any) -> None:
    store = creating(store)
    versions = store.create_batch(
        [NewMemory("twice", window(1)), NewMemory("once", window(2)), NewMemory("twice", window(5))]
    )
    assert versions[0] is not None and versions[1] is not None and versions[2] is None
    assert store.get_messages("twice") == window(1)
    with pytest.raises(ConcurrentUpdateError):
        store.save("twice", window(3), 0)


def test_a_batch_run_again_creates_only_what_is_missing(store: Any) -> None:
    store = creating(store)
    memories = [NewMemory(f"r-{n}", window(n)) for n in range(6)]
    first = store.create_batch(memories[:3])
    again = store.create_batch(memories)
    assert all(version is not None for version in first)
    assert again[:3] == [None, None, None] and all(version is not None for version in again[3:])
    for memory, version in zip(memories, [*first, *again[3:]], strict=True):
        assert store.load(memory.memory_id).version == version


# ------------------------------------------------------------------ a peer creating the same ids

RACES, BATCH = 6, 40
"""Batches raced (each of ``BATCH`` ids a peer creates too, one by one, at the same time)."""


def test_a_batch_and_a_peer_creating_the_same_ids_each_create_an_id_once(peer_recipe: Recipe) -> None:
    # The batch and a peer (its own store) create the same ids at the same time: for each id one of them
    # creates it and says so, the other says it existed, and what is stored is what the winner wrote.
    batcher, peer = peer_recipe.open(), peer_recipe.open()
    try:
        creating(batcher)
        for race in range(RACES):
            _race(batcher, peer, [f"race-{race}-{n:02d}" for n in range(BATCH)])
    finally:
        batcher.close()
        peer.close()


def _race(batcher: Any, peer: Any, ids: list[str]) -> None:
    theirs: dict[str, int] = {}

    def create(memory_id: str) -> None:
        with contextlib.suppress(ConcurrentUpdateError):  # the batch created it first
            theirs[memory_id] = peer.save(memory_id, [UserMessage(f"peer {memory_id}")], 0)

    def create_one_by_one() -> None:
        for memory_id in reversed(ids):  # meets the batch midway
            create(memory_id)

    with Peer(create_one_by_one) as racing:
        racing.writing()
        versions = batcher.create_batch(
            [NewMemory(memory_id, [UserMessage(f"batch {memory_id}")]) for memory_id in ids]
        )
    for memory_id, version in zip(ids, versions, strict=True):
        stored = peer.load(memory_id)
        if version is not None:
            assert memory_id not in theirs, memory_id
            assert (stored.version, stored.messages) == (version, [UserMessage(f"batch {memory_id}")])
        else:
            assert stored.version == theirs[memory_id], memory_id
            assert stored.messages == [UserMessage(f"peer {memory_id}")]
