"""``replicas_to_ack``: each write of a memory waits for replicas (``WAIT`` on the write's own connection).

On a private master + replica pair (``redis-server`` on free ports) and on the failover cluster: a stopped
replica (SIGSTOP) acknowledges nothing, so the write raises ``ReplicationError`` naming the memory and the
count, and is kept; a running one acknowledges at once. A ``WAIT`` sent on another connection than the
write would count the stopped replica as having it (that connection wrote nothing), so these tests fail
for a store that does not pin the pair to one connection. Sync and asyncio; options checked at construction.
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
from collections.abc import Iterator
from pathlib import Path

import pytest

from chatmemory import StoreError, UserMessage
from chatmemory.aio.stores.redis import RedisChatMemoryStore as AsyncRedisChatMemoryStore
from chatmemory.core.history import HistoryEntry
from chatmemory.stores.redis import Redis, RedisChatMemoryStore, ReplicationError
from support.servers import unavailable

pytestmark = pytest.mark.redis


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait(check: object, what: str) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if check():  # type: ignore[operator]
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
    master_port, replica_port = _free_port(), _free_port()
    common = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    with tempfile.TemporaryDirectory(prefix="cmtest-pair-") as directory:
        master = subprocess.Popen([binary, "--port", str(master_port), "--dir", directory, *common])  # type: ignore[list-item]
        replica = subprocess.Popen(
            [
                binary,
                "--port",
                str(replica_port),
                "--dir",
                directory,
                "--replicaof",
                "127.0.0.1",
                str(master_port),
                *common,
            ]  # type: ignore[list-item]
        )
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


def _stopped(pid: int) -> _Stopped:
    return _Stopped(pid)


class _Stopped:
    """SIGSTOP a replica for the block: it reads and acknowledges nothing meanwhile."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __enter__(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def __exit__(self, *exc: object) -> None:
        os.kill(self.pid, signal.SIGCONT)


def _synced(url: str) -> None:
    """Have the replica acknowledge everything written so far, so only a write sent after it is pending."""
    client = Redis.from_url(url)
    try:
        client.set(f"cmack-sync:{uuid.uuid4().hex}", b"1", px=10_000)
        assert client.execute_command("WAIT", 1, 5000) == 1
    finally:
        client.close()


def _prefix() -> str:
    return f"cmack{uuid.uuid4().hex[:8]}:"


def test_a_write_acknowledged_by_a_running_replica_returns(pair: tuple[str, int]) -> None:
    url, _ = pair
    store = RedisChatMemoryStore(url, key_prefix=_prefix(), replicas_to_ack=1, replicas_timeout=2)
    try:
        version = store.save("m", [UserMessage("a")], 0)
        assert store.save("m", [UserMessage("a"), UserMessage("b")], version) > version
        store.delete_messages("m")
    finally:
        store.close()


def test_a_write_a_stopped_replica_cannot_acknowledge_raises_and_is_kept(pair: tuple[str, int]) -> None:
    url, replica = pair
    prefix = _prefix()
    store = RedisChatMemoryStore(url, key_prefix=prefix, replicas_to_ack=1, replicas_timeout=0.2)
    plain = RedisChatMemoryStore(url, key_prefix=prefix)
    try:
        version = store.save("m", [UserMessage("a")], 0)
        _synced(url)  # a WAIT sent before the write (or for another connection) would now count the replica
        with _stopped(replica), pytest.raises(ReplicationError) as raised:
            store.save("m", [UserMessage("a"), UserMessage("b")], version)
        error = raised.value
        assert isinstance(error, StoreError) and error.memory_id == "m"
        assert (error.acked, error.wanted) == (0, 1)
        assert "0 of the 1 replicas" in str(error) and "do not write it again" in str(error)
        assert plain.get_messages("m") == [UserMessage("a"), UserMessage("b")]  # the write is done
        # The store's cache followed the write: the next turn is at the new version, no conflict.
        snapshot = store.load("m")
        store.save("m", [*snapshot.messages, UserMessage("c")], snapshot.version)
        with _stopped(replica), pytest.raises(ReplicationError):
            store.delete_messages("m")
        assert plain.get_messages("m") == []
    finally:
        store.close()
        plain.close()


def test_a_history_restore_waits_for_the_replicas_as_a_write_does(pair: tuple[str, int]) -> None:
    url, replica = pair
    prefix = _prefix()
    store = RedisChatMemoryStore(url, key_prefix=prefix, history=True, replicas_to_ack=1, replicas_timeout=0.2)
    try:
        when = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
        assert store.restore_history("m", [HistoryEntry(1, UserMessage("a"), when)], window=[UserMessage("a")]) == 1
        _synced(url)
        with _stopped(replica), pytest.raises(ReplicationError):
            store.restore_history("m", [HistoryEntry(2, UserMessage("b"), when)])
        assert [entry.sequence for entry in store.history("m").entries] == [1, 2]  # the restore is done
        store.delete_messages("m")
    finally:
        store.close()


def test_the_asyncio_store_waits_on_the_write_s_connection_too(pair: tuple[str, int]) -> None:
    url, replica = pair

    async def main() -> None:
        store = AsyncRedisChatMemoryStore(url, key_prefix=_prefix(), replicas_to_ack=1, replicas_timeout=0.2)
        try:
            version = await store.save("m", [UserMessage("a")], 0)
            _synced(url)
            os.kill(replica, signal.SIGSTOP)
            try:
                with pytest.raises(ReplicationError) as raised:
                    await store.save("m", [UserMessage("a"), UserMessage("b")], version)
            finally:
                os.kill(replica, signal.SIGCONT)
            assert raised.value.acked == 0
            assert await store.get_messages("m") == [UserMessage("a"), UserMessage("b")]
            await store.delete_messages("m")
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
    from support.redis_cluster_faults import FaultyCluster, slot_of

    cluster = FaultyCluster(Path(directory))  # type: ignore[arg-type]
    # The failover tests kill and restart this cluster's nodes: one test at a time on it (their lock).
    with open(cluster.directory / "tests.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cluster.wait_healthy()
        store = RedisChatMemoryStore(url, key_prefix=_prefix(), replicas_to_ack=1, replicas_timeout=0.2)  # type: ignore[arg-type]
        try:
            for memory_id in ("a", "b", "c", "d"):  # on several masters
                version = store.save(memory_id, [UserMessage("x")], 0)
                replica = cluster.replica_of(cluster.owner(slot_of(store.keys_of(memory_id)[0])))
                pid = int((cluster.directory / str(replica.port) / "redis.pid").read_text())
                with _stopped(pid), pytest.raises(ReplicationError) as raised:
                    store.save(memory_id, [UserMessage("x"), UserMessage("y")], version)
                assert raised.value.acked == 0 and raised.value.memory_id == memory_id
                store.delete_messages(memory_id)
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
    options: dict[str, object], error: type[Exception], message: str
) -> None:
    for store_class in (RedisChatMemoryStore, AsyncRedisChatMemoryStore):
        with pytest.raises(error, match=message):
            store_class("redis://127.0.0.1:1/0", **options)  # type: ignore[arg-type]
