"""The LangChain4j store through a Redis Cluster failover and a live reshard, sync (threads) and asyncio (tasks).

On the 3-master + 3-replica cluster ``.ci/redis_failover_cluster`` starts, one test at a time with the
native store's failover tests (the same lock file in the cluster's directory). Writers add tool-call
turns round 12 memories (4 per master) in window memories over LangChain4j stores with history, so
every message ever added can be counted:

* failover: the master of a third of the memories is SIGKILLed mid-run and its replica promoted; the
  dead node comes back as a replica. Every error is a ``StoreError``, no add is stored twice, no window
  holds a tool result without its call; with ``replicas_to_ack=1`` every acknowledged add is present.
* resharding: another third's slots move to another master while the writers run (``ASK``, ``TRYAGAIN``,
  ``MOVED``); no add fails, every one is present, and each memory's keys (the value, its history, its
  write ids) sit on one node. A write whose keys stay split between the two nodes for a second (``TRYAGAIN``
  past redis-py's own retries) is sent again until it lands.

Each test leaves the cluster as it found it (slots moved back, every master with a synced replica).
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

from chatmemory import MessageWindowChatMemory, UserMessage, aio
from chatmemory.aio.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore as AsyncStore
from chatmemory.core.messages import ChatMessage
from chatmemory.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore
from chatmemory.stores.langchain4j_redis.keys import history_key, write_ids_key
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

WRITERS, ADDS_EACH, PER_MASTER = 4, 30, 4
WINDOW = 8
DEADLINE = 60.0
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
    assert directory is not None
    faulty = FaultyCluster(Path(directory))
    # The lock tests/stores/test_redis_failover.py takes: one test at a time brings on faults.
    with open(faulty.directory / "tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        faulty.wait_healthy()
        yield faulty
        faulty.wait_healthy()


@pytest.fixture
def url() -> str:
    return os.environ["CHATMEMORY_TEST_REDIS_FAILOVER_URL"]


def _options(prefix: str, replicas_to_ack: int) -> dict[str, Any]:
    return {"key_prefix": prefix, "history": True, "replicas_to_ack": replicas_to_ack, "replicas_timeout": 0.5}


def _contents(
    url: str, prefix: str, memories: list[str]
) -> tuple[dict[str, list[ChatMessage]], dict[str, list[ChatMessage]]]:
    """Each memory's history and window, read by a fresh store; the memories deleted afterwards."""
    reader = LangChain4jRedisChatMemoryStore(url, key_prefix=prefix, history=True)
    try:
        histories = {memory_id: reader.history(memory_id, limit=10_000).messages for memory_id in memories}
        windows = {memory_id: reader.get_messages(memory_id) for memory_id in memories}
        for memory_id in memories:
            reader.delete_messages(memory_id)
    finally:
        reader.close()
    return histories, windows


def _run_threads(
    url: str, options: dict[str, Any], memories: list[str], ledger: Ledger, fault: Callable[[], None]
) -> None:
    """``WRITERS`` threads sharing one store; ``fault`` once a third of the adds are in."""
    store = LangChain4jRedisChatMemoryStore(url, **options)
    done = [0]
    lock = threading.Lock()

    def write(writer: int) -> None:
        windows = {m: MessageWindowChatMemory(m, max_messages=WINDOW, store=store) for m in memories}
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

    threads = [threading.Thread(target=write, args=(writer,)) for writer in range(WRITERS)]
    try:
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + DEADLINE
        while done[0] < WRITERS * ADDS_EACH // 3 and time.monotonic() < deadline:
            time.sleep(0.005)
        fault()
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        assert not any(thread.is_alive() for thread in threads), f"writers still running after {DEADLINE:.0f} s"
    finally:
        store.close()


def _run_tasks(
    url: str, options: dict[str, Any], memories: list[str], ledger: Ledger, fault: Callable[[], None]
) -> None:
    """The same load as asyncio tasks of one store on one loop; ``fault`` runs in a thread meanwhile."""

    async def main() -> None:
        store = AsyncStore(url, **options)
        done = [0]

        async def write(writer: int) -> None:
            windows = {m: aio.MessageWindowChatMemory(m, max_messages=WINDOW, store=store) for m in memories}
            for memory_id, tag in plan_of_writer(writer, memories, ADDS_EACH):
                started = time.monotonic()
                try:
                    await windows[memory_id].add(*turn(tag))
                except Exception as exc:
                    ledger.record(memory_id, tag, started, exc)
                else:
                    ledger.record(memory_id, tag, started, None)
                done[0] += 1

        async def bring_fault() -> None:
            while done[0] < WRITERS * ADDS_EACH // 3:
                await asyncio.sleep(0.005)
            await asyncio.to_thread(fault)

        try:
            await asyncio.wait_for(
                asyncio.gather(bring_fault(), *(write(writer) for writer in range(WRITERS))), DEADLINE
            )
        finally:
            await store.aclose()

    asyncio.run(main())


RUNNERS: dict[str, Callable[..., None]] = {"threads": _run_threads, "asyncio": _run_tasks}


def _layout(cluster: FaultyCluster, url: str, prefix: str) -> tuple[list[str], dict[int, list[str]], Any]:
    probe = LangChain4jRedisChatMemoryStore(url, key_prefix=prefix)
    by_master = memories_by_master(cluster, probe.key_of, PER_MASTER)
    return [memory_id for ids in by_master.values() for memory_id in ids], by_master, probe


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


@pytest.mark.parametrize(("runner", "replicas_to_ack"), [("threads", 1), ("asyncio", 0)])
def test_writers_ride_through_the_failover_of_a_master(
    cluster: FaultyCluster, url: str, runner: str, replicas_to_ack: int
) -> None:
    prefix = f"cml4jfail{uuid.uuid4().hex[:8]}:"
    memories, by_master, probe = _layout(cluster, url, prefix)
    probe.close()
    victim = cluster.masters()[0]
    ledger = Ledger()
    moments: dict[str, float] = {}

    def fault() -> None:
        moments["killed"] = time.monotonic()
        killed, _ = cluster.fail_over(victim)
        moments["promoted"] = time.monotonic()
        time.sleep(0.3)
        cluster.restart(killed)  # back as a replica of the promoted one, while the writers still run

    RUNNERS[runner](url, _options(prefix, replicas_to_ack), memories, ledger, fault)
    cluster.wait_healthy()
    findings = check(ledger, *_contents(url, prefix, memories))
    _report(
        f"failover, {runner}, replicas_to_ack={replicas_to_ack}",
        findings,
        doomed=len(by_master[victim.port]),
        promoted_after=f"{moments['promoted'] - moments['killed']:.2f}s",
        last_error_after=f"{max(ledger.failed_at, default=moments['killed']) - moments['killed']:.2f}s",
    )
    _assert_sound(findings)
    if replicas_to_ack:
        assert findings.lost == [], "with replicas_to_ack=1 every acknowledged add survives the failover"


@pytest.mark.parametrize(("runner", "replicas_to_ack"), [("threads", 0), ("asyncio", 1)])
def test_writers_ride_through_a_live_reshard(
    cluster: FaultyCluster, url: str, runner: str, replicas_to_ack: int
) -> None:
    prefix = f"cml4jshard{uuid.uuid4().hex[:8]}:"
    memories, by_master, probe = _layout(cluster, url, prefix)
    masters = cluster.masters()
    source, target = masters[1], masters[2]
    moving = by_master[source.port]
    slots = [slot_of(probe.key_of(memory_id)) for memory_id in moving]
    ledger = Ledger()

    def fault() -> None:
        cluster.move_slots(slots, target, batch=1, pause=0.02)  # a memory's keys split for a while: TRYAGAIN

    before = cluster.refusals()
    try:
        RUNNERS[runner](url, _options(prefix, replicas_to_ack), memories, ledger, fault)
        refused = cluster.refusals() - before
        for memory_id in moving:
            memory_key = probe.key_of(memory_id)
            assert cluster.owner(slot_of(memory_key)).port == target.port
            keys = (memory_key, history_key(memory_key), write_ids_key(memory_key))
            holding = {port for key in keys for port in cluster.nodes_holding(key)}
            assert holding == {target.port}, f"memory {memory_id!r} is on nodes {holding}"
        findings = check(ledger, *_contents(url, prefix, memories))
    finally:
        probe.close()
        cluster.move_slots(slots, source)  # the next test starts from the layout it expects
    _report(f"reshard, {runner}, replicas_to_ack={replicas_to_ack}", findings, refusals=dict(refused))
    assert refused["ASK"] + refused["TRYAGAIN"] > 0, "the writers met the migration (else the test proves nothing)"
    _assert_sound(findings)
    assert findings.lost == [], "a slot moved between masters loses no acknowledged add"
    assert findings.errors == {}, f"following ASK, MOVED and TRYAGAIN, no add fails: {ledger.samples}"


@pytest.mark.parametrize("runner", ["threads", "asyncio"])
def test_a_write_refused_while_its_keys_are_split_between_nodes_is_sent_again(
    cluster: FaultyCluster, url: str, runner: str
) -> None:
    """Its value moved, its write ids not yet: the script meets TRYAGAIN for a second, past redis-py's retries."""
    prefix = f"cml4jsplit{uuid.uuid4().hex[:8]}:"
    store = LangChain4jRedisChatMemoryStore(url, key_prefix=prefix)
    memory_key = store.key_of("m")
    slot = slot_of(memory_key)
    version = store.save("m", [UserMessage("a")], 0)  # the value and its write ids
    source = cluster.owner(slot)
    target = next(node for node in cluster.masters() if node.port != source.port)
    with cluster.client(target.port) as importing, cluster.client(source.port) as migrating:
        importing.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source.node_id)
        migrating.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", target.node_id)
        migrating.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", memory_key)
    finish = threading.Timer(1.0, cluster.move_slots, ([slot], target))
    finish.start()
    try:
        if runner == "threads":
            store.save("m", [UserMessage("a"), UserMessage("b")], version)
        else:

            async def save() -> None:
                other = AsyncStore(url, key_prefix=prefix)
                try:
                    seen = await other.load("m")
                    await other.save("m", [*seen.messages, UserMessage("b")], seen.version)
                finally:
                    await other.aclose()

            asyncio.run(save())
        finish.join()
        assert store.get_messages("m") == [UserMessage("a"), UserMessage("b")]
        assert cluster.nodes_holding(memory_key) == [target.port]
        store.delete_messages("m")
    finally:
        finish.join()
        store.close()
        cluster.move_slots([slot], source)
