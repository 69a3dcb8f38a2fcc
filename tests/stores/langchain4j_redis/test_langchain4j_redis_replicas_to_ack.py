"""``replicas_to_ack`` on the LangChain4j store: each write of a memory waits for replicas on its own connection.

On a private master + replica pair (``redis-server`` on free ports) and on the failover cluster: a stopped
replica (SIGSTOP) acknowledges nothing, so a compare-and-set, a plain ``update_messages``, a delete and a
history trim each raise ``ReplicationError`` naming the memory and the count, and are kept; a running
replica acknowledges at once. The replica acknowledges every earlier write first, so a ``WAIT`` sent on
another connection than the write (or before it) counts it and the tests fail. A write found applied when
it is sent again after a lost reply raises ``ReplicationError`` with ``acked=None`` (``WAIT`` cannot vouch
for a run it did not see). Sync and asyncio; bad options refused at construction.
"""

from __future__ import annotations

import asyncio
import datetime
import fcntl
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from chatmemory import StoreError, UserMessage
from chatmemory.aio.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore as AsyncStore
from chatmemory.core.driving import drive
from chatmemory.core.errors import Operation
from chatmemory.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore
from chatmemory.stores.langchain4j_redis.commands import Script
from chatmemory.stores.redis import Redis, ReplicationError
from chatmemory.stores.redis.executor import send
from support.servers import unavailable

pytestmark = pytest.mark.redis


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except OSError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"{what} within 20 s")


@pytest.fixture(scope="module")
def pair() -> Iterator[tuple[str, int]]:
    """A master's URL and its replica's pid (a private pair, so stopping the replica disturbs no one)."""
    binary = shutil.which("redis-server")
    if binary is None:
        unavailable("redis-server binary", "PATH", "/usr/bin")
    assert binary is not None
    master_port, replica_port = _free_port(), _free_port()
    common = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    with tempfile.TemporaryDirectory(prefix="cmtest-l4j-pair-") as directory:
        master = subprocess.Popen([binary, "--port", str(master_port), "--dir", directory, *common])
        following = ["--replicaof", "127.0.0.1", str(master_port)]
        replica = subprocess.Popen([binary, "--port", str(replica_port), "--dir", directory, *following, *common])
        client = Redis(port=master_port)
        try:
            _wait(lambda: client.info("replication").get("connected_slaves") == 1, "the replica attached")
            _wait(lambda: Redis(port=replica_port).info("replication").get("master_link_status") == "up", "in sync")
            yield f"redis://127.0.0.1:{master_port}/0", replica.pid
        finally:
            client.close()
            for process in (replica, master):
                process.send_signal(signal.SIGCONT)
                process.terminate()
                process.wait(10)


@contextmanager
def _stopped(pid: int) -> Iterator[None]:
    """SIGSTOP a replica for the block: it reads and acknowledges nothing meanwhile."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def _synced(url: str) -> None:
    """Have the replica acknowledge everything written so far, so only a write sent after it is pending."""
    client = Redis.from_url(url)
    try:
        client.set(f"cmack-sync:{uuid.uuid4().hex}", b"1", px=10_000)
        assert client.execute_command("WAIT", 1, 5000) == 1
    finally:
        client.close()


def _prefix() -> str:
    return f"cml4jack{uuid.uuid4().hex[:8]}:"


def _shortfall(raised: pytest.ExceptionInfo[ReplicationError], memory_id: str = "m") -> None:
    error = raised.value
    assert isinstance(error, StoreError) and error.memory_id == memory_id
    assert (error.acked, error.wanted) == (0, 1)
    assert "0 of the 1 replicas" in str(error) and "do not write it again" in str(error)


@pytest.mark.parametrize("history", [False, True])
def test_writes_acknowledged_by_a_running_replica_return(pair: tuple[str, int], history: bool) -> None:
    url, _ = pair
    store = LangChain4jRedisChatMemoryStore(
        url, key_prefix=_prefix(), history=history, replicas_to_ack=1, replicas_timeout=2
    )
    try:
        assert store.replicas_to_ack == 1 and "replicas_to_ack=1" in repr(store)
        version = store.save("m", [UserMessage("a")], 0)
        assert store.save("m", [UserMessage("a"), UserMessage("b")], version) > version
        store.update_messages("m", [UserMessage("c")])
        assert store.get_messages("m") == [UserMessage("c")]
        store.delete_messages("m")
        assert store.get_messages("m") == []
    finally:
        store.close()


@pytest.mark.parametrize("history", [False, True])
def test_writes_a_stopped_replica_cannot_acknowledge_raise_and_are_kept(pair: tuple[str, int], history: bool) -> None:
    url, replica = pair
    prefix = _prefix()
    store = LangChain4jRedisChatMemoryStore(
        url, key_prefix=prefix, history=history, replicas_to_ack=1, replicas_timeout=0.2
    )
    plain = LangChain4jRedisChatMemoryStore(url, key_prefix=prefix, history=history)
    try:
        version = store.save("m", [UserMessage("a")], 0)
        _synced(url)  # a WAIT sent before the write (or for another connection) would now count the replica
        with _stopped(replica), pytest.raises(ReplicationError) as raised:
            store.save("m", [UserMessage("a"), UserMessage("b")], version)
        _shortfall(raised)
        assert plain.get_messages("m") == [UserMessage("a"), UserMessage("b")]  # the write is done
        # The store's versions followed the write: the next turn is at the new version, no conflict.
        snapshot = store.load("m")
        assert snapshot.messages == [UserMessage("a"), UserMessage("b")]
        store.save("m", [*snapshot.messages, UserMessage("c")], snapshot.version)
        _synced(url)
        with _stopped(replica), pytest.raises(ReplicationError) as raised:
            store.update_messages("m", [UserMessage("d")])
        _shortfall(raised)
        assert plain.get_messages("m") == [UserMessage("d")]
        if history:
            _synced(url)
            with _stopped(replica), pytest.raises(ReplicationError) as raised:
                store.trim_history(
                    older_than=datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=1),
                    memory_id="m",
                )
            _shortfall(raised)
            assert plain.history("m").messages == []
        _synced(url)
        with _stopped(replica), pytest.raises(ReplicationError) as raised:
            store.delete_messages("m")
        _shortfall(raised)
        assert plain.get_messages("m") == []
    finally:
        store.close()
        plain.close()


@pytest.mark.parametrize("history", [False, True])
def test_a_write_found_applied_when_sent_again_has_no_known_replication(pair: tuple[str, int], history: bool) -> None:
    url, _ = pair
    store = LangChain4jRedisChatMemoryStore(url, key_prefix=_prefix(), history=history, replicas_to_ack=1)
    client = Redis.from_url(url)
    try:
        version = store.save("m", [UserMessage("a")], 0)
        step = store._operations.save("m", [UserMessage("a"), UserMessage("b")], version)
        command = next(step)
        while not isinstance(command, Script):  # a history store may read the value first
            command = step.send(send(client, command))
        assert send(client, command) == 1  # the first run lands; its reply is lost

        def sent_again() -> Generator[Any, object, int]:
            reply = yield command  # what the executor sends again: the same script, the same write id
            try:
                step.send(reply)
            except StopIteration as done:
                return int(done.value)
            raise AssertionError("the save sent more")

        with pytest.raises(ReplicationError) as raised:
            drive(store._acknowledged(Operation.WRITE, sent_again()), store._perform)
        assert raised.value.acked is None and raised.value.memory_id == "m"
        assert "its replication is not known" in str(raised.value)
        assert store.get_messages("m") == [UserMessage("a"), UserMessage("b")]
        store.delete_messages("m")
    finally:
        client.close()
        store.close()


def test_the_asyncio_store_waits_on_the_write_s_connection_too(pair: tuple[str, int]) -> None:
    url, replica = pair

    async def main() -> None:
        store = AsyncStore(url, key_prefix=_prefix(), history=True, replicas_to_ack=1, replicas_timeout=0.2)
        try:
            version = await store.save("m", [UserMessage("a")], 0)
            await store.update_messages("m", [UserMessage("a")])
            _synced(url)
            with _stopped(replica), pytest.raises(ReplicationError) as raised:
                snapshot = await store.load("m")
                await store.save("m", [*snapshot.messages, UserMessage("b")], snapshot.version)
            _shortfall(raised)
            assert version >= 1
            assert await store.get_messages("m") == [UserMessage("a"), UserMessage("b")]
            _synced(url)
            with _stopped(replica), pytest.raises(ReplicationError) as raised:
                await store.delete_messages("m")
            _shortfall(raised)
            assert await store.get_messages("m") == []
        finally:
            await store.aclose()

    asyncio.run(main())


def test_on_a_cluster_the_write_and_its_wait_go_to_the_memory_s_master() -> None:
    url, directory = (
        os.environ.get("CHATMEMORY_TEST_REDIS_FAILOVER_URL"),
        os.environ.get("CHATMEMORY_TEST_REDIS_FAILOVER_DIR"),
    )
    if not url or not directory:
        unavailable(
            "Redis Cluster with replicas", "CHATMEMORY_TEST_REDIS_FAILOVER_URL", "redis+cluster://127.0.0.1:7100"
        )
    assert url is not None and directory is not None
    from support.redis_cluster_faults import FaultyCluster, slot_of

    cluster = FaultyCluster(Path(directory))
    # The failover tests' lock: none of them kills a node while a replica here is stopped.
    with open(cluster.directory / "tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cluster.wait_healthy()
        for store in (
            LangChain4jRedisChatMemoryStore(url, key_prefix=_prefix(), replicas_to_ack=1, replicas_timeout=0.2),
            LangChain4jRedisChatMemoryStore(url, key_prefix=_prefix(), history=True, replicas_to_ack=1),
        ):
            try:
                owners = set()
                for memory_id in ("a", "b", "c", "d", "e", "f"):  # on several masters
                    version = store.save(memory_id, [UserMessage("x")], 0)
                    master = cluster.owner(slot_of(store.key_of(memory_id)))
                    owners.add(master.port)
                    pid = int((cluster.directory / str(cluster.replica_of(master).port) / "redis.pid").read_text())
                    with _stopped(pid), pytest.raises(ReplicationError) as raised:
                        store.save(memory_id, [UserMessage("x"), UserMessage("y")], version)
                    _shortfall(raised, memory_id)
                    store.delete_messages(memory_id)
                assert len(owners) > 1
            finally:
                store.close()
        cluster.wait_healthy()


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"replicas_to_ack": -1}, ValueError, "replicas_to_ack must be 0 or more"),
        ({"replicas_to_ack": 1.5}, TypeError, "replicas_to_ack must be an int"),
        ({"replicas_to_ack": True}, TypeError, "replicas_to_ack must be an int"),
        ({"replicas_to_ack": 1, "replicas_timeout": 0}, ValueError, "replicas_timeout must be"),
        ({"replicas_to_ack": 1, "replicas_timeout": float("inf")}, ValueError, "replicas_timeout must be"),
    ],
)
def test_bad_replication_options_are_refused_at_construction(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    for store_class in (LangChain4jRedisChatMemoryStore, AsyncStore):
        with pytest.raises(error, match=message):
            store_class("redis://127.0.0.1:1/0", **options)
