"""Batch reads (``SupportsBatchReads.read_batch``) on every backend that has them.

A batch gives each memory as the one-memory reads give it (``read_raw``, ``load``, ``memory_times``):
absent and expired ones as ``None``, records that do not decode as they are, and a memory damaged beyond
a read (a Redis list without its metadata, SQL rows without their head row, a MongoDB document whose
``messages`` is no array) with its damage, never raised and never left out.
"""

from __future__ import annotations

import dataclasses
import datetime
from typing import Any

import pytest

from chatmemory import AiMessage, ChatMemoryStore, SystemMessage, UserMessage
from chatmemory.core.errors import CorruptedMemoryError
from chatmemory.inspection import summarize, summarize_many
from chatmemory.serialization.native import dumps_message
from chatmemory.stored_memories import SupportsBatchReads
from support.backends import Backend
from support.peers import Peer
from support.recipes import Recipe

UTC = datetime.timezone.utc
HOUR = datetime.timedelta(hours=1)


@pytest.fixture
def batch_store(store: ChatMemoryStore) -> Any:
    if not isinstance(store, SupportsBatchReads):
        pytest.skip(f"{type(store).__name__} has no batch reads")
    return store


def window(n: int) -> list[Any]:
    return [SystemMessage("be brief"), *(UserMessage(f"q{i}") if i % 2 else AiMessage(f"a{i}") for i in range(n))]


def test_each_memory_as_the_one_memory_reads_give_it(batch_store: Any) -> None:
    store = batch_store
    now = datetime.datetime.now(UTC)
    ids = [f"m-{n:02d}" for n in range(12)]
    for n, memory_id in enumerate(ids):
        store.update_messages(memory_id, window(n))
        if n % 3 == 0:
            store.expire_at(memory_id, now + HOUR)
    store.update_messages(ids[5], window(2))  # a window that shrank: only its live rows are read
    store.update_messages("gone", window(1))
    store.expire_at("gone", now - HOUR)
    asked = ["absent", *ids, "gone", ids[0]]
    found = store.read_batch(asked)
    assert len(found) == len(asked)
    assert found[0] is None and found[-2] is None
    for memory_id, stored in zip([*asked[1:-2], ids[0]], [*found[1:-2], found[-1]], strict=True):
        assert stored is not None and stored.memory_id == memory_id and stored.damage is None
        assert stored.records == store.read_raw(memory_id)
        assert stored.version == store.load(memory_id).version
        assert stored.times == store.memory_times(memory_id)
    assert found[1 + 3].times.expires_at is not None and found[1 + 1].times.expires_at is None
    assert store.read_batch([]) == []


def test_records_that_do_not_decode_are_read_as_stored(batch_store: Any, backend: Backend) -> None:
    store = batch_store
    records = [dumps_message(UserMessage("fine")), b"{not json"]
    backend.write_raw(store, "broken", records)
    (stored,) = store.read_batch(["broken"])
    assert stored is not None and stored.records == records == store.read_raw("broken")
    (memory_id, summary), *_ = summarize_many(store, ["broken"])
    assert memory_id == "broken" and summary is not None
    assert "not valid JSON" in (summary.error or "") and summary.messages == 2
    assert summary.size == sum(map(len, records))


def _damage(store: Any, memory_id: str) -> None:
    """Break ``memory_id`` beyond what a read accepts, the way each backend can be broken."""
    name = type(store).__name__
    if name == "RedisChatMemoryStore":
        store._client.delete(store._key_space.keys_of(memory_id).meta)
    elif name == "SQLChatMemoryStore":
        memories = store._tables.memories
        with store._transaction() as connection:
            connection.execute(memories.delete().where(memories.c.memory_id == memory_id))
    elif name == "MongoChatMemoryStore":
        store._collection.update_one({"_id": memory_id}, {"$set": {"messages": 3}})
    else:  # pragma: no cover - a new backend with batch reads says how it breaks
        pytest.fail(f"no way to damage a {name}")


def test_a_damaged_memory_is_reported_with_its_damage_never_left_out(batch_store: Any) -> None:
    store = batch_store
    store.update_messages("fine", window(2))
    store.update_messages("broken", window(3))
    _damage(store, "broken")
    with pytest.raises(CorruptedMemoryError):
        store.load("broken")
    fine, broken = store.read_batch(["fine", "broken"])
    assert fine is not None and fine.damage is None and len(fine.records) == 3
    assert broken is not None and broken.damage
    summaries = dict(summarize_many(store, ["fine", "broken"]))
    assert summaries["fine"] == summarize(store, "fine")
    broken_summary = summaries["broken"]
    assert broken_summary is not None and broken_summary.error is not None
    assert broken.damage in broken_summary.error


def test_summaries_from_batches_are_the_one_memory_summaries(batch_store: Any) -> None:
    store = batch_store
    ids = [f"s-{n}" for n in range(7)]
    for n, memory_id in enumerate(ids):
        store.update_messages(memory_id, window(n))
    store.expire_at(ids[2], datetime.datetime.now(UTC) + HOUR)
    batched = list(summarize_many(store, [*ids, "absent"], batch=3))
    assert batched == [(memory_id, summarize(store, memory_id)) for memory_id in [*ids, "absent"]]


def test_summaries_without_roles_differ_only_in_roles(batch_store: Any) -> None:
    store = batch_store
    ids = [f"r-{n}" for n in range(5)]
    for n, memory_id in enumerate(ids):
        store.update_messages(memory_id, window(n + 1))
    counted = dict(summarize_many(store, ids, batch=2))
    for memory_id, summary in summarize_many(store, ids, batch=2, roles=False):
        full = counted[memory_id]
        assert summary is not None and full is not None and full.roles
        assert not summary.roles
        assert dataclasses.replace(summary, roles=full.roles) == full


def test_a_window_with_a_pinned_run_is_read_whole(backend: Backend) -> None:
    """A store with history keeps evicted rows; a first run kept before them (pinned) is read with the rest."""
    try:
        store: Any = backend.make_store(history=True)
    except TypeError:
        pytest.skip(f"{backend} keeps no history")
    try:
        if not isinstance(store, SupportsBatchReads):
            pytest.skip(f"{type(store).__name__} has no batch reads")
        system, *turns = window(6)
        store.update_messages("pinned", [system, *turns[:3]])
        store.update_messages("pinned", [system, *turns[2:]])  # evicts right after the kept system message
        store.update_messages("plain", window(2))
        pinned, plain = store.read_batch(["pinned", "plain"])
        assert pinned is not None and pinned.records == store.read_raw("pinned")
        assert store.load("pinned").messages == [system, *turns[2:]]
        assert plain is not None and plain.records == store.read_raw("plain")
    finally:
        backend.close_store(store)


# --------------------------------------------------------------- a peer writing while a batch reads

WRITES = 150
"""The peer's writes in the test below (bounded for CI; each a load and a save)."""


def test_each_entry_is_one_state_of_its_memory_while_a_peer_writes(peer_recipe: Recipe) -> None:
    # A peer (its own store, as another process has) slides the windows of three memories while a batch
    # reads them again and again: every entry read must be one state the peer left, its version with
    # that version's records, never a version with records of the write after it.
    reader, writer = peer_recipe.open(), peer_recipe.open()
    ids = ["peer-a", "peer-b", "peer-c"]
    states: dict[tuple[str, int], list[bytes]] = {}

    def write() -> None:
        for turn in range(WRITES):
            memory_id = ids[turn % len(ids)]
            said = [UserMessage(f"{memory_id} turn {n}: " + "words " * 30) for n in range(turn + 1)]
            version = writer.save(memory_id, said[-4:], writer.load(memory_id).version)
            states[(memory_id, version)] = writer.read_raw(memory_id)  # the only writer: still this state

    try:
        if not isinstance(reader, SupportsBatchReads):
            pytest.skip(f"{type(reader).__name__} has no batch reads")
        for memory_id in ids:
            version = writer.save(memory_id, [UserMessage(f"{memory_id} first")], 0)
            states[(memory_id, version)] = writer.read_raw(memory_id)
        read: list[Any] = []
        with Peer(write) as peer:
            while peer.writing():
                read.extend(entry for entry in reader.read_batch(ids) if entry is not None)
        assert len(read) >= len(ids)
        mixed = [(e.memory_id, e.version) for e in read if states.get((e.memory_id, e.version)) != e.records]
        assert mixed == []
    finally:
        reader.close()
        writer.close()


@pytest.mark.sqlite
def test_a_write_between_two_statements_of_a_sql_batch_read_cannot_mix_states(tmp_path: Any) -> None:
    # The interleaving the test above finds by chance, made to happen: a peer writes just before each
    # statement of the batch read after its first. One statement reads heads and rows together.
    from sqlalchemy import create_engine, event

    from chatmemory.stores.sql import SQLChatMemoryStore

    url = f"sqlite:///{tmp_path / 'peer.db'}"
    engine = create_engine(url)
    reader, writer = SQLChatMemoryStore(engine), SQLChatMemoryStore(url)
    reader.create_schema()
    try:
        first = writer.save("m", [UserMessage("one")], 0)
        assert reader.read_batch(["m"])[0] is not None  # the reader's schema check is behind it
        sent: list[str] = []

        @event.listens_for(engine, "before_cursor_execute")
        def peer_writes(*args: Any) -> None:
            sent.append(args[2])
            if len(sent) == 2:
                writer.save("m", [UserMessage("one"), AiMessage("two")], first)

        (entry,) = reader.read_batch(["m"])
        assert entry is not None and sent
        assert (entry.version, entry.records) in ((first, [dumps_message(UserMessage("one"))]), _now(writer, "m"))
    finally:
        reader.close()
        writer.close()
        engine.dispose()


def _now(store: Any, memory_id: str) -> tuple[int, list[bytes]]:
    return store.load(memory_id).version, store.read_raw(memory_id)
