"""Redis Cluster failover and live resharding under writers, sync (threads) and asyncio (tasks).

On the 3-master + 3-replica cluster ``.ci/redis_failover_cluster`` starts (not the shared one: these
tests kill nodes). Writers add tool-call turns round 12 memories (4 per master) in window memories over
stores with history, so every message ever added can be counted:

* failover: the master of a third of the memories is SIGKILLed mid-run and its replica promoted
  (``CLUSTER FAILOVER TAKEOVER``); the dead node is started again and rejoins as a replica. Every error a
  writer sees is a ``StoreError``; no add is stored twice; no window holds a tool result without its call.
  Without ``replicas_to_ack`` the adds lost with the dead master are counted (Redis replicates
  asynchronously); with ``replicas_to_ack=1`` every acknowledged add is present.
* resharding: the slots of another third move to another master while the writers run (``ASK``,
  ``TRYAGAIN``, ``MOVED``); every acknowledged add is present and each memory's keys sit on one node.

Each test leaves the cluster whole (every master with a synced replica). ``benchmarks/redis_cluster_failover.py``
runs the full-size load with processes too.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from chatmemory import MessageWindowChatMemory, aio
from chatmemory.aio.stores.redis import RedisChatMemoryStore as AsyncRedisChatMemoryStore
from chatmemory.core.messages import ChatMessage
from chatmemory.stores.redis import RedisChatMemoryStore
from support.redis_cluster_faults import (
    FAILOVER_EXAMPLE,
    FaultyCluster,
    Findings,
    Ledger,
    check,
    memories_by_master,
    plan_of_writer,
    slot_of,
    turn,
)
from support.servers import unavailable

pytestmark = pytest.mark.redis

WRITERS, ADDS_EACH, PER_MASTER = 4, 40, 4
WINDOW = 8
DEADLINE = 60.0
PACE = 0.015
"""Seconds a writer waits after each add while the fault runs, so that its adds span the fault: unpaced,
asyncio writers finished the rest of their adds in tens of milliseconds, before a reshard's first slot
moved, and met no ``ASK``."""
"""Seconds the writers of one test have (a hang is a failure)."""


@pytest.fixture
def cluster() -> Iterator[FaultyCluster]:
    directory = os.environ.get("CHATMEMORY_TEST_REDIS_FAILOVER_DIR")
    if not directory or not os.environ.get("CHATMEMORY_TEST_REDIS_FAILOVER_URL"):
        unavailable(
            "Redis Cluster with replicas",
            "CHATMEMORY_TEST_REDIS_FAILOVER_URL and CHATMEMORY_TEST_REDIS_FAILOVER_DIR",
            f"{FAILOVER_EXAMPLE} (start one with .ci/redis_failover_cluster start DIR 7100)",
        )
    faulty = FaultyCluster(Path(directory))  # type: ignore[arg-type]
    # One test at a time on the cluster, whatever pytest-xdist's workers run: each brings on faults.
    with open(faulty.directory / "tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        faulty.wait_healthy()
        yield faulty
        faulty.wait_healthy()  # the next test starts from a whole cluster


@pytest.fixture
def url() -> str:
    return os.environ["CHATMEMORY_TEST_REDIS_FAILOVER_URL"]


def _options(prefix: str, replicas_to_ack: int) -> dict[str, Any]:
    return {"key_prefix": prefix, "history": True, "replicas_to_ack": replicas_to_ack, "replicas_timeout": 0.5}


def _layout(cluster: FaultyCluster, url: str, prefix: str) -> tuple[list[str], dict[int, list[str]]]:
    probe = RedisChatMemoryStore(url, key_prefix=prefix)
    try:
        by_master = memories_by_master(cluster, lambda memory_id: probe.keys_of(memory_id)[0], PER_MASTER)
    finally:
        probe.close()
    return [memory_id for ids in by_master.values() for memory_id in ids], by_master


def _contents(
    url: str, prefix: str, memories: list[str]
) -> tuple[dict[str, list[ChatMessage]], dict[str, list[ChatMessage]]]:
    reader = RedisChatMemoryStore(url, key_prefix=prefix, history=True, snapshot_cache_size=0)
    try:
        histories = {memory_id: reader.history(memory_id, limit=10_000).messages for memory_id in memories}
        windows = {memory_id: reader.get_messages(memory_id) for memory_id in memories}
    finally:
        reader.close()
    return histories, windows


def _remove(url: str, prefix: str, memories: list[str]) -> None:
    store = RedisChatMemoryStore(url, key_prefix=prefix, history=True)
    try:
        for memory_id in memories:
            store.delete_messages(memory_id)
    finally:
        store.close()


def _run_threads(
    url: str, options: dict[str, Any], memories: list[str], ledger: Ledger, fault: Callable[[], None]
) -> None:
    """``WRITERS`` threads, each with its own store and window memories; ``fault`` once a third of the adds are in."""
    done = [0]
    lock = threading.Lock()

    def write(writer: int) -> None:
        store = RedisChatMemoryStore(url, **options)
        try:
            windows = {
                memory_id: MessageWindowChatMemory(memory_id, max_messages=WINDOW, store=store)
                for memory_id in memories
            }
            for memory_id, tag in plan_of_writer(writer, memories, ADDS_EACH):
                started = time.monotonic()
                try:
                    windows[memory_id].add(*turn(tag))
                except Exception as exc:
                    ledger.record(memory_id, tag, started, exc)
                else:
                    ledger.record(memory_id, tag, started, None)
                with lock:
                    done[0] += 1
                if faulting.is_set():
                    time.sleep(PACE)
        finally:
            store.close()

    faulting = threading.Event()
    threads = [threading.Thread(target=write, args=(writer,)) for writer in range(WRITERS)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + DEADLINE
    while done[0] < WRITERS * ADDS_EACH // 3 and time.monotonic() < deadline:
        time.sleep(0.005)
    faulting.set()
    try:
        fault()
    finally:
        faulting.clear()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    assert not any(thread.is_alive() for thread in threads), f"writers still running after {DEADLINE:.0f} s"


def _run_tasks(
    url: str, options: dict[str, Any], memories: list[str], ledger: Ledger, fault: Callable[[], None]
) -> None:
    """The same load as asyncio tasks of one store on one loop; ``fault`` runs in a thread meanwhile."""

    async def main() -> None:
        store = AsyncRedisChatMemoryStore(url, **options)
        done = [0]
        faulting = [False]

        async def write(writer: int) -> None:
            windows = {
                memory_id: aio.MessageWindowChatMemory(memory_id, max_messages=WINDOW, store=store)
                for memory_id in memories
            }
            for memory_id, tag in plan_of_writer(writer, memories, ADDS_EACH):
                started = time.monotonic()
                try:
                    await windows[memory_id].add(*turn(tag))
                except Exception as exc:
                    ledger.record(memory_id, tag, started, exc)
                else:
                    ledger.record(memory_id, tag, started, None)
                done[0] += 1
                if faulting[0]:
                    await asyncio.sleep(PACE)

        async def bring_fault() -> None:
            while done[0] < WRITERS * ADDS_EACH // 3:
                await asyncio.sleep(0.005)
            faulting[0] = True
            try:
                await asyncio.to_thread(fault)
            finally:
                faulting[0] = False

        try:
            await asyncio.wait_for(
                asyncio.gather(bring_fault(), *(write(writer) for writer in range(WRITERS))), DEADLINE
            )
        finally:
            await store.aclose()

    asyncio.run(main())


RUNNERS: dict[str, Callable[..., None]] = {"threads": _run_threads, "asyncio": _run_tasks}


def _report(name: str, findings: Findings, **extra: object) -> None:
    print(
        f"\n{name}: acknowledged {findings.acknowledged}, present {findings.present}, lost {len(findings.lost)}, "
        f"doubled {len(findings.doubled)}, broken windows {len(findings.broken_windows)}, errors {findings.errors}, "
        + ", ".join(f"{key} {value}" for key, value in extra.items())
    )


def _assert_sound(findings: Findings) -> None:
    assert findings.not_store_errors == [], "every error a writer sees is a StoreError"
    assert findings.doubled == [], "no add is stored twice"
    assert findings.broken_windows == [], "no window holds a tool result without its call"
    assert findings.acknowledged > WRITERS * ADDS_EACH // 2  # the writers did write


@pytest.mark.parametrize("runner", list(RUNNERS))
@pytest.mark.parametrize("replicas_to_ack", [0, 1])
def test_writers_ride_through_the_failover_of_a_master(
    cluster: FaultyCluster, url: str, runner: str, replicas_to_ack: int
) -> None:
    prefix = f"cmfail{uuid.uuid4().hex[:8]}:"
    memories, by_master = _layout(cluster, url, prefix)
    victim = cluster.masters()[0]
    assert set(by_master[victim.port]) <= set(memories) and len(by_master[victim.port]) == len(memories) // 3
    ledger = Ledger()
    moments: dict[str, float] = {}

    def fault() -> None:
        moments["killed"] = time.monotonic()
        killed, _ = cluster.fail_over(victim)
        moments["promoted"] = time.monotonic()
        time.sleep(0.3)
        cluster.restart(killed)  # back as a replica of the promoted one, while the writers still run

    try:
        RUNNERS[runner](url, _options(prefix, replicas_to_ack), memories, ledger, fault)
        cluster.wait_healthy()
        findings = check(ledger, *_contents(url, prefix, memories))
    finally:
        _remove(url, prefix, memories)
    last_failure = max(ledger.failed_at, default=moments["killed"])
    _report(
        f"failover, {runner}, replicas_to_ack={replicas_to_ack}",
        findings,
        promoted_after=f"{moments['promoted'] - moments['killed']:.2f}s",
        last_error_after=f"{last_failure - moments['killed']:.2f}s",
    )
    _assert_sound(findings)
    if replicas_to_ack:
        assert findings.lost == [], "with replicas_to_ack=1 every acknowledged add survives the failover"


@pytest.mark.parametrize("runner", list(RUNNERS))
@pytest.mark.parametrize("replicas_to_ack", [0, 1])
def test_writers_ride_through_a_live_reshard(
    cluster: FaultyCluster, url: str, runner: str, replicas_to_ack: int
) -> None:
    prefix = f"cmshard{uuid.uuid4().hex[:8]}:"
    memories, by_master = _layout(cluster, url, prefix)
    masters = cluster.masters()
    source, target = masters[1], masters[2]
    probe = RedisChatMemoryStore(url, key_prefix=prefix)
    moving = by_master[source.port]
    slots = [slot_of(probe.keys_of(memory_id)[0]) for memory_id in moving]
    ledger = Ledger()
    moments: dict[str, float] = {}

    def fault() -> None:
        moments["start"] = time.monotonic()
        cluster.move_slots(slots, target, batch=1, pause=0.02)
        moments["end"] = time.monotonic()

    before = cluster.refusals()
    try:
        RUNNERS[runner](url, _options(prefix, replicas_to_ack), memories, ledger, fault)
        refused = cluster.refusals() - before
        for memory_id in moving:
            meta, _ = probe.keys_of(memory_id)
            assert cluster.owner(slot_of(meta)).port == target.port
            keys = (meta, probe.keys_of(memory_id)[1], meta.removesuffix(b"meta") + b"history")
            holding = {port for key in keys for port in cluster.nodes_holding(key)}
            assert holding == {target.port}, f"memory {memory_id!r} is on nodes {holding}"
        findings = check(ledger, *_contents(url, prefix, memories))
    finally:
        probe.close()
        _remove(url, prefix, memories)
        cluster.move_slots(slots, source)  # the next test starts from the layout it expects
    _report(
        f"reshard, {runner}, replicas_to_ack={replicas_to_ack}",
        findings,
        moved_in=f"{moments['end'] - moments['start']:.2f}s",
        refusals=dict(refused),
    )
    assert refused["ASK"] > 0, "the writers met the migration (else the test proves nothing)"
    _assert_sound(findings)
    assert findings.lost == [], "a slot moved between masters loses no acknowledged add"
    assert findings.errors == {}, f"following ASK, MOVED and TRYAGAIN, no add fails: {ledger.samples}"
