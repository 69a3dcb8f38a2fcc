"""Independent writers of one memory on every backend: threads and processes, CPU hogs, a holder killed mid-turn.

Each writer builds its own store from the URL, as workers of a service do, and its own window memory; they
share only the server. Counts are bounded for CI; ``benchmarks/contention.py`` runs the full-size loads.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from chatmemory import MessageWindowChatMemory, SupportsLockedUpdate, UserMessage
from support.peers import Peer
from support.recipes import SHARED_BETWEEN_PROCESSES, Recipe, recipe

MARKS = {"langchain4j_redis": "redis"}
LEASE = 0.5
"""The lease of the stores that hold a lease lock (Redis, MongoDB, LangChain4j), in these tests."""
DEADLINE = 120.0
"""Seconds a test waits for its writers before it fails (a hang is a failure, not a stuck run)."""

THREADS, PROCESSES, ADDS_EACH = 4, 4, 25
DELETE_RACE_ADDS = 80
"""A peer's adds while another store deletes the memory again and again."""


def _params() -> list[Any]:
    return [
        pytest.param(name, id=name, marks=getattr(pytest.mark, MARKS.get(name, name)))
        for name in SHARED_BETWEEN_PROCESSES
    ]


@pytest.fixture(params=_params())
def shared(request: pytest.FixtureRequest) -> Any:
    made = recipe(request.param)
    made.open().close()  # the tables, once
    yield made
    made.cleanup()


def _lease_options(store_recipe: Recipe) -> dict[str, Any]:
    return (
        {"lock_lease": LEASE} if store_recipe.name in ("redis", "redis_cluster", "mongodb", "langchain4j_redis") else {}
    )


def _add(store_recipe: Recipe, memory_id: str, tag: str, adds: int) -> None:
    store = store_recipe.open()
    try:
        memory = MessageWindowChatMemory(memory_id, max_messages=10_000, store=store)
        for index in range(adds):
            memory.add(UserMessage(f"{tag}-{index}"))
    finally:
        store.close()


def _burn(until: float) -> None:
    while time.monotonic() < until:
        pass


def _join(workers: list[Any]) -> None:
    deadline = time.monotonic() + DEADLINE
    for worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
    alive = [worker for worker in workers if worker.is_alive()]
    for worker in alive:
        if isinstance(worker, multiprocessing.process.BaseProcess):
            worker.kill()
    assert not alive, f"{len(alive)} writers still running after {DEADLINE:.0f} s"


def test_threads_and_processes_each_with_its_own_store_keep_every_add(shared: Recipe) -> None:
    memory_id = f"writers-{uuid.uuid4().hex}"
    spawn = multiprocessing.get_context("spawn")
    errors: list[BaseException] = []

    def thread_writer(tag: str) -> None:
        try:
            _add(shared, memory_id, tag, ADDS_EACH)
        except BaseException as exc:
            errors.append(exc)

    hogs = [spawn.Process(target=_burn, args=(time.monotonic() + 20,)) for _ in range(2)]
    processes = [spawn.Process(target=_add, args=(shared, memory_id, f"p{n}", ADDS_EACH)) for n in range(PROCESSES)]
    threads = [threading.Thread(target=thread_writer, args=(f"t{n}",)) for n in range(THREADS)]
    for worker in [*hogs, *processes, *threads]:
        worker.start()
    try:
        _join([*processes, *threads])
    finally:
        for hog in hogs:
            hog.kill()
    assert not errors, f"{len(errors)} writers failed, the first with {errors[0]!r}"
    assert [process.exitcode for process in processes] == [0] * PROCESSES
    store = shared.open()
    try:
        stored = [message.text for message in store.get_messages(memory_id)]
    finally:
        store.close()
    doubled = [text for text, count in Counter(stored).items() if count > 1]
    assert not doubled, f"written twice: {doubled[:5]}"
    expected = {
        f"{kind}{n}-{i}"
        for kind, count in (("p", PROCESSES), ("t", THREADS))
        for n in range(count)
        for i in range(ADDS_EACH)
    }
    assert set(stored) == expected, f"{len(expected - set(stored))} adds lost"


def _hold_and_hang(store_recipe: Recipe, memory_id: str, ready: str, options: dict[str, Any]) -> None:
    store = store_recipe.open(**options)
    assert isinstance(store, SupportsLockedUpdate)

    def change(messages: list[Any]) -> list[Any]:
        Path(ready).write_text("holding")
        time.sleep(600)  # killed here, holding the memory's lock
        return messages

    store.modify(memory_id, change)


def test_a_writer_killed_holding_the_lock_delays_the_others_by_at_most_the_lease(
    shared: Recipe, tmp_path: Path
) -> None:
    options = _lease_options(shared)
    memory_id = f"killed-{uuid.uuid4().hex}"
    store = shared.open(**options)
    try:
        assert isinstance(store, SupportsLockedUpdate), f"{shared.name}: writers have no lock to queue on"
        store.update_messages(memory_id, [UserMessage("before")])
        ready = tmp_path / "ready"
        holder = multiprocessing.get_context("spawn").Process(
            target=_hold_and_hang, args=(shared, memory_id, str(ready), options)
        )
        holder.start()
        deadline = time.monotonic() + DEADLINE
        while not ready.exists():
            assert holder.is_alive() and time.monotonic() < deadline, "the holder never took the lock"
            time.sleep(0.01)
        os.kill(holder.pid, signal.SIGKILL)  # type: ignore[arg-type]
        holder.join(10)
        started = time.monotonic()
        version = store.modify(memory_id, lambda messages: [*messages, UserMessage("after")])
        waited = time.monotonic() - started
        # The lease (or the server noticing the dead connection) frees the memory; 3 s of slack for a busy machine.
        assert waited < (options.get("lock_lease") or 0) + 3.0, f"waited {waited:.2f} s for a dead holder"
        assert version > 0
        assert [message.text for message in store.get_messages(memory_id)] == ["before", "after"]
    finally:
        store.close()


def test_locked_updates_of_stores_that_share_nothing_never_overlap(shared: Recipe) -> None:
    # Each thread has a store object of its own: only the server's lock can keep their changes apart.
    memory_id = f"exclusive-{uuid.uuid4().hex}"
    stores = [shared.open(**_lease_options(shared)) for _ in range(4)]
    inside, most, errors = [0], [0], []
    guard = threading.Lock()

    def change(messages: list[Any]) -> list[Any]:
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.005)
        with guard:
            inside[0] -= 1
        return [*messages, UserMessage(f"m{len(messages)}")]

    def run(store: Any) -> None:
        try:
            for _ in range(10):
                store.modify(memory_id, change)
        except BaseException as exc:
            errors.append(exc)

    try:
        stores[0].update_messages(memory_id, [UserMessage("m0")])
        threads = [threading.Thread(target=run, args=(store,)) for store in stores]
        for thread in threads:
            thread.start()
        _join(threads)
        assert not errors, f"{len(errors)} writers failed, the first with {errors[0]!r}"
        assert most[0] == 1, f"{most[0]} locked updates ran at once"
        assert [message.text for message in stores[0].get_messages(memory_id)] == [f"m{n}" for n in range(41)]
    finally:
        for store in stores:
            store.close()


def test_a_delete_is_never_undone_by_a_peer_that_read_before_it(shared: Recipe) -> None:
    # A peer's window memory adds turn after turn while this process deletes the memory again and again.
    # An add that read the memory before a delete and writes after it must not put the deleted turns back:
    # a window read after a delete holds only turns whose add ended after that delete began.
    deleter, writer = shared.open(), shared.open(**_lease_options(shared))
    memory_id = f"deleted-{uuid.uuid4().hex[:8]}"
    ended: dict[str, float] = {}  # the text of each added turn: when its add returned

    def add() -> None:
        memory = MessageWindowChatMemory(memory_id, max_messages=6, store=writer)
        for turn in range(DELETE_RACE_ADDS):
            memory.add(UserMessage(f"turn {turn}"))
            ended[f"turn {turn}"] = time.monotonic()

    try:
        resurrected: list[str] = []
        with Peer(add) as peer:
            while peer.writing():
                began = time.monotonic()
                deleter.delete_messages(memory_id)
                for message in deleter.get_messages(memory_id):
                    text = str(message.text)  # type: ignore[union-attr]
                    if text in ended and ended[text] < began:  # ended before the delete began: deleted
                        resurrected.append(text)
                time.sleep(0.003)
        assert resurrected == []
    finally:
        deleter.close()
        writer.close()
