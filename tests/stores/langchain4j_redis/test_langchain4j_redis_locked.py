"""The LangChain4j Redis store's ``modify``: writers queue on a lease lock beside the value, never storm.

Real servers (standalone and Redis Cluster), real threads and processes: ``modify`` returns the version the
memory is at; a change returning ``None`` writes nothing; the lock key is never listed (by the store, the
copy source or an export) while it is held; a holder that died holding the lock (a planted lock of
another token, a process SIGKILLed in its turn) delays the others by its lease at most; a holder whose
lease ran out still writes only at the version it read and gives back only its own lock; window memories
take ``modify`` only after a conflict; 8 threads + 4 processes, each with its own window memory, keep
every add. Every wait is bounded: a thread or process that does not finish in time fails the test.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chatmemory import (
    ChatMessage,
    ConcurrentUpdateError,
    MessageWindowChatMemory,
    SupportsContentionHint,
    SupportsLockedUpdate,
    UserMessage,
)
from chatmemory.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore
from chatmemory.stores.langchain4j_redis.keys import lock_key
from chatmemory.stores.redis import Redis, RedisCluster
from chatmemory.transfer.sources import LangChain4jRedisSource, StoreSource
from support.backends.langchain4j_redis import drop_prefix
from support.backends.redis import cluster_url, redis_url

pytestmark = pytest.mark.redis

JOIN = 120.0
"""Seconds any thread or process of a test may take before the test fails."""
LEASE = 0.5
"""The lease of the stores here: the longest a dead holder may keep the others waiting."""
SLACK = 0.6
"""What a loaded two-core machine may add to a wait (polling backoff, scheduling) beyond the lease."""
THREADS, PROCESSES, ADDS = 8, 4, 50


@pytest.fixture(params=["server", pytest.param("cluster", marks=pytest.mark.redis_cluster)])
def url(request: pytest.FixtureRequest) -> str:
    return str(redis_url() if request.param == "server" else cluster_url())


@pytest.fixture
def client(url: str) -> Iterator[Redis | RedisCluster]:
    made: Redis | RedisCluster
    if url.startswith("redis+cluster"):
        made = RedisCluster.from_url(url.replace("+cluster", "", 1))
    else:
        made = Redis.from_url(url)
    yield made
    made.close()


@pytest.fixture
def prefix(client: Redis | RedisCluster) -> Iterator[str]:
    made = f"lc4j-locked:{uuid.uuid4().hex[:10]}:"
    yield made
    drop_prefix(client, made)


@pytest.fixture(params=[False, True], ids=["plain", "history"])
def history(request: pytest.FixtureRequest) -> bool:
    return bool(request.param)


def _store(client: Redis | RedisCluster, prefix: str, **options: Any) -> LangChain4jRedisChatMemoryStore:
    return LangChain4jRedisChatMemoryStore(client, key_prefix=prefix, lock_lease=LEASE, **options)


def _texts(messages: list[ChatMessage]) -> list[str]:
    return [str(message.text) if isinstance(message, UserMessage) else repr(message) for message in messages]


def _append(text: str) -> Callable[[list[ChatMessage]], list[ChatMessage]]:
    return lambda messages: [*messages, UserMessage(text)]


def _in_thread(target: Callable[[], object]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:  # reported by the test
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, errors


# ------------------------------------------------------------------------------------------ the basics


def test_the_store_supports_locked_updates_and_checks_the_lock_options(client: Redis | RedisCluster) -> None:
    store = LangChain4jRedisChatMemoryStore(client, key_prefix="lc4j-locked-options:")
    assert isinstance(store, SupportsLockedUpdate)
    with pytest.raises(ValueError, match="lock_lease"):
        LangChain4jRedisChatMemoryStore(client, lock_lease=0)
    with pytest.raises(ValueError, match="lock_wait"):
        LangChain4jRedisChatMemoryStore(client, lock_wait=float("inf"))
    with pytest.raises(TypeError, match="lock_lease"):
        LangChain4jRedisChatMemoryStore(client, lock_lease="5")  # type: ignore[arg-type]


def test_a_memory_modified_lately_is_contended_for_a_while(client: Redis | RedisCluster, prefix: str) -> None:
    store = _store(client, prefix)
    assert isinstance(store, SupportsContentionHint)
    assert not store.contended("m")
    store.modify("m", _append("a"))
    assert store.contended("m") and not store.contended("other")
    assert not _store(client, prefix).contended("m")  # the hint is of this store's writers


def test_modify_returns_the_version_the_memory_is_at(client: Redis | RedisCluster, prefix: str, history: bool) -> None:
    store = _store(client, prefix, history=history)
    first = store.modify("m", _append("a"))
    assert store.load("m").version == first and store.get_messages("m") == [UserMessage("a")]
    second = store.modify("m", _append("b"))
    assert second > first and store.load("m").version == second
    assert store.get_messages("m") == [UserMessage("a"), UserMessage("b")]
    other = _store(client, prefix, history=history)  # another process's view: versions are its own
    assert other.modify("m", _append("c")) == other.load("m").version
    assert store.get_messages("m") == [UserMessage(t) for t in "abc"]
    if history:
        assert store.history("m").messages == [UserMessage(t) for t in "abc"]
    assert client.exists(lock_key(store.key_of("m"))) == 0  # given back


def test_a_change_returning_none_writes_nothing(client: Redis | RedisCluster, prefix: str, history: bool) -> None:
    store = _store(client, prefix, history=history)
    seen: list[list[ChatMessage]] = []

    def look(messages: list[ChatMessage]) -> None:
        seen.append(messages)

    assert store.modify("new", look) == 0
    assert seen == [[]] and client.exists(store.key_of("new")) == 0
    version = store.modify("m", _append("a"))
    client.pexpire(store.key_of("m"), 60_000)
    assert store.modify("m", lambda messages: None) == version
    assert store.load("m").version == version and store.get_messages("m") == [UserMessage("a")]
    assert client.pttl(store.key_of("m")) > 50_000  # the expiry is not touched either
    if history:
        assert store.history("m").messages == [UserMessage("a")]
    assert client.exists(lock_key(store.key_of("m")), lock_key(store.key_of("new"))) == 0


def test_the_held_lock_is_never_listed_exported_or_copied(url: str, client: Redis | RedisCluster, prefix: str) -> None:
    store = _store(client, prefix)
    store.update_messages("{u}victim", [UserMessage("a")])
    seen: dict[str, object] = {}

    def look(messages: list[ChatMessage]) -> list[ChatMessage]:
        seen["held"] = client.get(lock_key(store.key_of("{u}victim")))
        seen["ids"] = sorted(store.memory_ids())
        source = LangChain4jRedisSource(url, key_prefix=prefix)
        try:
            seen["copied"] = sorted(source.memory_ids())
            seen["skipped"] = source.skipped_keys
        finally:
            source.close()
        seen["exported"] = sorted(StoreSource(_store(client, prefix)).memory_ids())
        return [*messages, UserMessage("b")]

    store.modify("{u}victim", look)
    assert isinstance(seen["held"], bytes) and len(seen["held"]) == 16  # the lock was there, a string
    assert seen["ids"] == seen["copied"] == seen["exported"] == ["{u}victim"]
    assert seen["skipped"] == 0
    assert store.get_messages("{u}victim") == [UserMessage("a"), UserMessage("b")]


# ------------------------------------------------------------------------------------- a dead holder


def test_a_lock_left_by_a_dead_holder_delays_the_next_writer_by_its_lease_at_most(
    client: Redis | RedisCluster, prefix: str, history: bool
) -> None:
    store = _store(client, prefix, history=history)
    store.modify("m", _append("a"))
    key = lock_key(store.key_of("m"))
    assert client.set(key, b"foreign token", px=int(LEASE * 1000), nx=True)  # its holder died holding it
    started = time.perf_counter()
    store.modify("m", _append("b"))
    waited = time.perf_counter() - started
    assert LEASE - 0.1 < waited < LEASE + SLACK  # it did wait for the lease, and no longer
    assert store.get_messages("m") == [UserMessage("a"), UserMessage("b")]


def test_a_writer_gives_up_after_lock_wait_with_nothing_written(client: Redis | RedisCluster, prefix: str) -> None:
    store = LangChain4jRedisChatMemoryStore(client, key_prefix=prefix, lock_lease=30, lock_wait=0.3)
    store.update_messages("m", [UserMessage("a")])
    client.set(lock_key(store.key_of("m")), b"a live holder", px=30_000)
    started = time.perf_counter()
    with pytest.raises(ConcurrentUpdateError, match="'m'"):
        store.modify("m", _append("b"))
    assert time.perf_counter() - started < 0.3 + SLACK
    assert store.get_messages("m") == [UserMessage("a")]
    assert client.get(lock_key(store.key_of("m"))) == b"a live holder"  # not its to give back


HOLDER = textwrap.dedent(
    """
    import sys, time
    from chatmemory import UserMessage
    from chatmemory.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore

    url, prefix, lease = sys.argv[1], sys.argv[2], float(sys.argv[3])

    def hold(messages):
        print("holding", flush=True)
        time.sleep(60)  # killed here, in its turn
        return [*messages, UserMessage("never")]

    LangChain4jRedisChatMemoryStore(url, key_prefix=prefix, lock_lease=lease).modify("m", hold)
    """
)


def test_a_holder_killed_in_its_turn_delays_the_next_writer_by_its_lease_at_most(
    url: str, client: Redis | RedisCluster, prefix: str
) -> None:
    store = _store(client, prefix)
    store.modify("m", _append("a"))
    with subprocess.Popen(
        [sys.executable, "-c", HOLDER, url, prefix, str(LEASE)], stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "holding"
            assert client.exists(lock_key(store.key_of("m"))) == 1
            os.kill(holder.pid, signal.SIGKILL)
            killed = time.perf_counter()
            holder.wait(JOIN)
            store.modify("m", _append("b"))
            assert time.perf_counter() - killed < LEASE + SLACK
        finally:
            with contextlib.suppress(ProcessLookupError):
                holder.kill()
    assert store.get_messages("m") == [UserMessage("a"), UserMessage("b")]


def test_a_holder_whose_lease_ran_out_writes_only_at_the_version_it_read_and_keeps_the_next_lock(
    client: Redis | RedisCluster, prefix: str, history: bool
) -> None:
    slow, other = _store(client, prefix, history=history), _store(client, prefix, history=history)
    slow.modify("m", _append("a"))
    key = lock_key(slow.key_of("m"))
    in_turn, go_on = threading.Event(), threading.Event()
    calls: list[list[ChatMessage]] = []

    def hung(messages: list[ChatMessage]) -> list[ChatMessage]:
        calls.append(messages)
        in_turn.set()
        assert go_on.wait(JOIN)
        return [*messages, UserMessage("slow")]

    thread, errors = _in_thread(lambda: slow.modify("m", hung))
    assert in_turn.wait(JOIN)
    deadline = time.monotonic() + LEASE + SLACK
    while client.exists(key) and time.monotonic() < deadline:  # the lease runs out
        time.sleep(0.02)
    assert client.exists(key) == 0
    other.modify("m", _append("next"))  # the next holder writes...
    assert client.set(key, b"the next holder", px=30_000, nx=True)  # ...and another one holds the lock now
    go_on.set()
    thread.join(JOIN)
    assert not thread.is_alive() and not errors, errors
    # The stale write conflicted and was made again over what the next holder wrote: nothing overwritten.
    assert calls == [[UserMessage("a")], [UserMessage("a"), UserMessage("next")]]
    assert other.get_messages("m") == [UserMessage("a"), UserMessage("next"), UserMessage("slow")]
    assert client.get(key) == b"the next holder"  # the stale holder gave back only its own lock


# ------------------------------------------------------------------------------------ window memories


class _Watched:
    """The store, its ``modify`` calls counted, and another writer's write let in after one chosen ``load``."""

    def __init__(self, store: LangChain4jRedisChatMemoryStore) -> None:
        self._store = store
        self.modify_calls = 0
        self.after_next_load: Callable[[], object] | None = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def load(self, memory_id: str) -> Any:
        snapshot = self._store.load(memory_id)
        hook, self.after_next_load = self.after_next_load, None
        if hook is not None:
            hook()
        return snapshot

    def modify(self, memory_id: str, change: Any) -> int:
        self.modify_calls += 1
        return self._store.modify(memory_id, change)


def test_a_window_memory_takes_modify_only_after_a_conflict(client: Redis | RedisCluster, prefix: str) -> None:
    watched = _Watched(_store(client, prefix))
    memory = MessageWindowChatMemory("m", max_messages=100, store=watched)
    for n in range(5):
        memory.add(UserMessage(f"alone {n}"))
    assert watched.modify_calls == 0  # uncontended: the optimistic write, nothing more
    other = _store(client, prefix)
    watched.after_next_load = lambda: other.modify("m", _append("someone else"))  # the next save conflicts
    memory.add(UserMessage("after"))
    assert watched.modify_calls == 1
    texts = _texts(other.get_messages("m"))
    assert texts == [*(f"alone {n}" for n in range(5)), "someone else", "after"]


WORKER = textwrap.dedent(
    """
    import json, sys
    from chatmemory import MessageWindowChatMemory, UserMessage
    from chatmemory.stores.langchain4j_redis import LangChain4jRedisChatMemoryStore

    url, prefix, tag, adds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    errors = []
    with LangChain4jRedisChatMemoryStore(url, key_prefix=prefix, lock_lease=0.5) as store:
        memory = MessageWindowChatMemory("m", max_messages=10_000, store=store)
        for n in range(adds):
            try:
                memory.add(UserMessage(f"{tag} {n}"))
            except Exception as exc:
                errors.append(repr(exc))
    print(json.dumps(errors))
    """
)


def test_threads_and_processes_each_with_its_own_memory_keep_every_add(
    url: str, client: Redis | RedisCluster, prefix: str
) -> None:
    store = _store(client, prefix)
    errors: list[BaseException] = []

    def add(memory: MessageWindowChatMemory, text: str) -> None:
        try:
            memory.add(UserMessage(text))
        except Exception as exc:  # counted, reported below
            errors.append(exc)

    def thread_writer(tag: str) -> None:
        memory = MessageWindowChatMemory("m", max_messages=10_000, store=store)
        for n in range(ADDS):
            add(memory, f"{tag} {n}")

    started = time.perf_counter()
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, url, prefix, f"p{n}", str(ADDS)], stdout=subprocess.PIPE, text=True
        )
        for n in range(PROCESSES)
    ]
    threads = [threading.Thread(target=thread_writer, args=(f"t{n}",), daemon=True) for n in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN)
    for process in processes:
        output, _ = process.communicate(timeout=JOIN)
        assert process.returncode == 0, output
        errors += [RuntimeError(text) for text in json.loads(output)]
    elapsed = time.perf_counter() - started
    assert not any(thread.is_alive() for thread in threads)

    texts = _texts(store.get_messages("m"))
    tags = [f"t{n}" for n in range(THREADS)] + [f"p{n}" for n in range(PROCESSES)]
    expected = {f"{tag} {n}" for tag in tags for n in range(ADDS)}
    doubled = sum(count - 1 for count in Counter(texts).values())
    print(
        f"\nlangchain4j-redis: {THREADS} threads + {PROCESSES} processes x {ADDS} adds: "
        f"kept {len(set(texts) & expected)}/{len(expected)}, doubled {doubled}, errors {len(errors)}; {elapsed:.1f} s"
    )
    assert not errors, errors[:3]
    assert set(texts) == expected and doubled == 0
    for tag in tags:  # each writer's adds in its own order
        assert [text for text in texts if text.split()[0] == tag] == [f"{tag} {n}" for n in range(ADDS)]
    assert client.exists(lock_key(store.key_of("m"))) == 0
