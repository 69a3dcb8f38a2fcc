"""The MongoDB store's ``modify``: writers queue on a lease lock, a dead holder delays others by its lease only.

Real server, real processes: a holder SIGKILLed in the middle of its turn, a holder whose lease ran out
while another wrote (fenced by the version check), and 8 threads + 4 processes, each with its own window
memory object, adding to one memory. Every wait is bounded: a thread or process that does not finish in
time fails the test.
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient, monitoring

from chatmemory import (
    ChatMessage,
    ConcurrentUpdateError,
    CorruptedMemoryError,
    MessageWindowChatMemory,
    SupportsContentionHint,
    SupportsLockedUpdate,
    UserMessage,
)
from chatmemory.stores.mongodb import MongoChatMemoryStore
from support.backends.mongodb import DATABASE, mongodb_url
from support.mongo7_guard import Mongo7Guard

pytestmark = pytest.mark.mongodb

JOIN = 120.0
"""Seconds any thread or process of a test may take before the test fails."""


class Commands(monitoring.CommandListener):
    """The (command, collection) of every write and read a client sends."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name in {"find", "findAndModify", "update", "delete", "insert"}:
            with self._lock:
                self.sent.append((event.command_name, str(event.command[event.command_name])))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass

    def take(self) -> list[tuple[str, str]]:
        with self._lock:
            taken, self.sent = self.sent, []
        return taken


@pytest.fixture(scope="module")
def url() -> str:
    return mongodb_url()


@pytest.fixture(scope="module")
def guard() -> Mongo7Guard:
    return Mongo7Guard()


@pytest.fixture(scope="module")
def commands() -> Commands:
    return Commands()


@pytest.fixture(scope="module")
def client(url: str, guard: Mongo7Guard, commands: Commands) -> Iterator[MongoClient[Any]]:
    made: MongoClient[Any] = MongoClient(url, event_listeners=[guard, commands], serverSelectionTimeoutMS=10_000)
    yield made
    made.close()


@pytest.fixture
def collection_name(client: MongoClient[Any], guard: Mongo7Guard) -> Iterator[str]:
    name = f"locked_{uuid.uuid4().hex}"
    yield name
    client[DATABASE].drop_collection(name)
    client[DATABASE].drop_collection(f"{name}_locks")
    guard.check()


@pytest.fixture
def make_store(client: MongoClient[Any], collection_name: str) -> Any:
    def make(**options: Any) -> MongoChatMemoryStore:
        return MongoChatMemoryStore(client, database=DATABASE, collection=collection_name, **options)

    return make


def _texts(messages: list[ChatMessage]) -> list[str]:
    return [message.text for message in messages]  # type: ignore[attr-defined]


def _appending(*texts: str) -> Any:
    def change(stored: list[ChatMessage]) -> list[ChatMessage]:
        return [*stored, *(UserMessage(text) for text in texts)]

    return change


def _plant_lock(client: MongoClient[Any], collection: str, memory_id: str, seconds: float) -> None:
    """A lock held by a writer elsewhere, its lease ending ``seconds`` from now by the server's clock."""
    client[DATABASE][f"{collection}_locks"].update_one(
        {"_id": memory_id},
        [{"$set": {"token": "someone else", "expires_at": {"$add": ["$$NOW", round(seconds * 1000)]}}}],
        upsert=True,
    )


def _join(*workers: threading.Thread | multiprocessing.process.BaseProcess) -> None:
    deadline = time.monotonic() + JOIN
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
    alive = [worker.name for worker in workers if worker.is_alive()]
    assert not alive, f"still running after {JOIN:g} s: {alive}"


# ------------------------------------------------------------------------------------------- contract


def test_modify_writes_the_change_and_returns_the_version(make_store: Any) -> None:
    store: MongoChatMemoryStore = make_store()
    assert isinstance(store, SupportsLockedUpdate)
    seen: list[list[str]] = []

    def change(stored: list[ChatMessage]) -> list[ChatMessage]:
        seen.append(_texts(stored))
        return [*stored, UserMessage("b")]

    assert store.modify("m", _appending("a")) == store.load("m").version
    version = store.modify("m", change)
    snapshot = store.load("m")
    assert (snapshot.version, _texts(snapshot.messages)) == (version, ["a", "b"])
    assert seen == [["a"]]


def test_a_change_returning_none_writes_nothing(
    make_store: Any, client: MongoClient[Any], collection_name: str
) -> None:
    store: MongoChatMemoryStore = make_store()
    seen: list[list[ChatMessage]] = []
    assert store.modify("absent", lambda stored: seen.append(stored)) == 0
    assert seen == [[]]
    assert client[DATABASE][collection_name].find_one({"_id": "absent"}) is None  # not even created
    version = store.save("m", [UserMessage("a")], 0)
    written_at = client[DATABASE][collection_name].find_one({"_id": "m"})
    assert store.modify("m", lambda stored: None) == version
    assert client[DATABASE][collection_name].find_one({"_id": "m"}) == written_at  # not touched


def test_the_lock_is_given_back_and_never_listed(
    make_store: Any, client: MongoClient[Any], collection_name: str
) -> None:
    store: MongoChatMemoryStore = make_store()
    store.modify("m", _appending("a"))
    assert client[DATABASE][f"{collection_name}_locks"].count_documents({}) == 0
    _plant_lock(client, collection_name, "other", 60)  # a lock of a memory that holds nothing
    assert list(store.memory_ids()) == ["m"]
    with pytest.raises(ValueError, match="boom"):
        store.modify("m", lambda stored: (_ for _ in ()).throw(ValueError("boom")))
    assert client[DATABASE][f"{collection_name}_locks"].count_documents({"_id": "m"}) == 0


def test_a_corrupted_memory_raises_without_calling_the_change(
    make_store: Any, client: MongoClient[Any], collection_name: str
) -> None:
    store: MongoChatMemoryStore = make_store()
    store.write_raw("m", [b"\xff"])
    called: list[object] = []
    with pytest.raises(CorruptedMemoryError):
        store.modify("m", called.append)
    assert called == []
    assert client[DATABASE][f"{collection_name}_locks"].count_documents({}) == 0


def test_an_uncontended_add_sends_no_lock_command(make_store: Any, commands: Commands, collection_name: str) -> None:
    store: MongoChatMemoryStore = make_store()
    memory = MessageWindowChatMemory("m", max_messages=10, store=store)
    memory.add(UserMessage("a"))
    commands.take()
    ours = {collection_name, f"{collection_name}_locks"}
    memory.add(UserMessage("b"))
    sent = [collection for _, collection in commands.take() if collection in ours]
    assert sent == [collection_name, collection_name]  # one read, one write
    store.modify("m", _appending("c"))
    assert [collection for _, collection in commands.take() if collection in ours] == [
        f"{collection_name}_locks",
        collection_name,
        collection_name,
        f"{collection_name}_locks",
    ]


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"lock_lease": "5"}, TypeError, "lock_lease"),
        ({"lock_wait": None}, TypeError, "lock_wait"),
        ({"lock_lease": 0}, ValueError, "lock_lease"),
        ({"lock_lease": float("nan")}, ValueError, "lock_lease"),
        ({"lock_wait": -1}, ValueError, "lock_wait"),
        ({"lock_wait": datetime.timedelta(0)}, ValueError, "lock_wait"),
    ],
)
def test_lock_options_are_checked_at_construction(
    make_store: Any, options: dict[str, Any], error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        make_store(**options)


def test_lock_options_take_timedeltas(make_store: Any) -> None:
    store: MongoChatMemoryStore = make_store(
        lock_lease=datetime.timedelta(milliseconds=500), lock_wait=datetime.timedelta(seconds=2)
    )
    assert store.modify("m", _appending("a")) > 0


def test_threads_sharing_a_store_queue_in_the_process_not_on_the_server(
    make_store: Any, commands: Commands, collection_name: str
) -> None:
    store: MongoChatMemoryStore = make_store()
    store.modify("m", _appending("first"))
    commands.take()
    start = threading.Barrier(8)
    hinted: list[bool] = []

    def modify(name: str) -> None:
        start.wait(JOIN)

        def change(stored: list[ChatMessage]) -> list[ChatMessage]:
            hinted.append(store.contended("m"))  # the others queued a moment ago
            return [*stored, UserMessage(name)]

        store.modify("m", change)

    threads = [threading.Thread(target=modify, args=(f"t{n}",)) for n in range(8)]
    for thread in threads:
        thread.start()
    _join(*threads)
    taking = [command for command, collection in commands.take() if collection == f"{collection_name}_locks"]
    # At most one upsert each (none found the lock busy and polled); fewer when one handed the lock on.
    assert 1 <= taking.count("update") <= 8
    assert taking.count("update") == taking.count("delete")
    assert len(store.get_messages("m")) == 9
    # Queued for: window memories of this process queue for it at once for a while.
    assert isinstance(store, SupportsContentionHint)
    assert any(hinted)
    assert not store.contended("other")


# --------------------------------------------------------------------------------------- the lease


def test_a_live_lock_makes_modify_wait_and_give_up_after_lock_wait(
    make_store: Any, client: MongoClient[Any], collection_name: str
) -> None:
    store: MongoChatMemoryStore = make_store(lock_wait=0.3)
    _plant_lock(client, collection_name, "m", 60)
    started = time.monotonic()
    with pytest.raises(ConcurrentUpdateError, match="'m'"):
        store.modify("m", _appending("a"))
    assert 0.25 < time.monotonic() - started < 5
    assert store.load("m").version == 0  # nothing written


def test_a_planted_lock_delays_a_writer_by_its_lease_at_most(
    make_store: Any, client: MongoClient[Any], collection_name: str
) -> None:
    store: MongoChatMemoryStore = make_store(lock_wait=10)
    _plant_lock(client, collection_name, "m", 0.5)
    started = time.monotonic()
    store.modify("m", _appending("a"))
    waited = time.monotonic() - started
    assert 0.3 < waited < 2.5, waited
    assert _texts(store.get_messages("m")) == ["a"]


def _hold_and_hang(url: str, collection: str, holding: Any) -> None:
    """Take the lock of "m" for a turn that never ends (until this process is killed)."""
    store = MongoChatMemoryStore(url, database=DATABASE, collection=collection, lock_lease=0.5)

    def change(stored: list[ChatMessage]) -> list[ChatMessage]:
        holding.set()
        time.sleep(600)
        return [*stored, UserMessage("never")]

    store.modify("m", change)


def test_a_holder_killed_mid_turn_delays_others_by_its_lease_at_most(url: str, make_store: Any) -> None:
    store: MongoChatMemoryStore = make_store(lock_wait=10)
    spawn = multiprocessing.get_context("spawn")
    holding = spawn.Event()
    holder = spawn.Process(target=_hold_and_hang, args=(url, store.collection.name, holding), daemon=True)
    holder.start()
    try:
        assert holding.wait(60), "the holder never took the lock"
        assert holder.pid is not None
        os.kill(holder.pid, signal.SIGKILL)
        started = time.monotonic()
        store.modify("m", _appending("after"))
        waited = time.monotonic() - started
    finally:
        holder.kill()
        _join(holder)
    # The lease is 0.5 s: the holder's lock kept this writer waiting, and for no longer than the lease
    # (without one it waits lock_wait, 10 s, and fails).
    assert 0.1 < waited < 2.5, waited
    assert _texts(store.get_messages("m")) == ["after"]


def test_a_holder_whose_lease_ran_out_cannot_overwrite(make_store: Any) -> None:
    slow: MongoChatMemoryStore = make_store(lock_lease=0.3)
    other: MongoChatMemoryStore = make_store()  # another store object: it queues on the server's lock only
    slow.save("m", [UserMessage("0")], 0)
    loaded, resume = threading.Event(), threading.Event()
    calls: list[list[str]] = []
    result: list[int] = []

    def stale_change(stored: list[ChatMessage]) -> list[ChatMessage]:
        calls.append(_texts(stored))
        loaded.set()
        resume.wait(30)
        return [*stored, UserMessage("slow")]

    worker = threading.Thread(target=lambda: result.append(slow.modify("m", stale_change)))
    worker.start()
    assert loaded.wait(30)
    time.sleep(0.5)  # the slow holder's lease has run out
    other_version = other.modify("m", _appending("other"))  # takes the lock the slow holder lost
    resume.set()
    _join(worker)
    # The slow holder's write at the version it read conflicted; it read again and applied its change there.
    assert calls == [["0"], ["0", "other"]]
    assert _texts(other.get_messages("m")) == ["0", "other", "slow"]
    assert result[0] > other_version == min(result[0], other_version)


# ------------------------------------------------------------------------------------ many writers

THREADS, PROCESSES = 8, 4
ADDS = int(os.environ.get("CHATMEMORY_CONTENTION_ADDS", "10"))
"""Adds per writer. The issue's figure is 50 (CHATMEMORY_CONTENTION_ADDS=50): on SecantusDB, a Python server
sharing two cores with the writers, that run takes about 90 s, so the suite runs 10."""


def _add(memory: MessageWindowChatMemory, text: str) -> str | None:
    """Add ``text``; the error it met, if any."""
    try:
        memory.add(UserMessage(text))
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


def _adds(store: MongoChatMemoryStore, name: str, start: Any) -> list[str]:
    """``ADDS`` adds by a window memory object of its own, after ``start``; the errors they met."""
    memory = MessageWindowChatMemory("m", max_messages=10_000, store=store)
    start.wait()
    return [error for index in range(ADDS) if (error := _add(memory, f"{name}:{index}")) is not None]


def _add_many(url: str, collection: str, name: str, start: Any) -> list[str]:
    """:func:`_adds` through a store of its own."""
    with MongoChatMemoryStore(url, database=DATABASE, collection=collection) as store:
        store.load("m")  # connect before the start line
        return _adds(store, name, start)


def _process_adds(url: str, collection: str, name: str, start: Any, results: Any) -> None:
    results.put((name, _add_many(url, collection, name, start)))


def test_threads_and_processes_each_with_its_own_memory_keep_every_add(url: str, collection_name: str) -> None:
    spawn = multiprocessing.get_context("spawn")
    start, results = spawn.Event(), spawn.Queue()
    processes = [
        spawn.Process(target=_process_adds, args=(url, collection_name, f"p{n}", start, results), daemon=True)
        for n in range(PROCESSES)
    ]
    errors: dict[str, list[str]] = {}
    shared = MongoChatMemoryStore(url, database=DATABASE, collection=collection_name)

    def thread_adds(name: str) -> None:
        errors[name] = _adds(shared, name, start)

    threads = [threading.Thread(target=thread_adds, args=(f"t{n}",), name=f"t{n}") for n in range(THREADS)]
    try:
        for worker in [*processes, *threads]:
            worker.start()
        shared.load("m")
        time.sleep(1.0)  # let the spawned processes import and connect
        began = time.monotonic()
        start.set()
        for _ in processes:
            name, found = results.get(timeout=JOIN)
            errors[name] = found
        _join(*threads)
        elapsed = time.monotonic() - began
        texts = _texts(shared.get_messages("m"))
    finally:
        for process in processes:
            process.kill()
        _join(*processes)
        shared.close()
    total = (THREADS + PROCESSES) * ADDS
    print(
        f"\nMongoDB modify: {THREADS} threads + {PROCESSES} processes x {ADDS} adds, own memory objects: "
        f"kept {len(set(texts))}/{total}, doubled {len(texts) - len(set(texts))}, "
        f"errors {sum(map(len, errors.values()))}, {elapsed:.1f} s"
    )
    assert not any(errors.values()), errors
    assert len(texts) == len(set(texts)) == total
