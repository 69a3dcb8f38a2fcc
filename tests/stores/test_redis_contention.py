"""Contention on one memory: 16 writers (8 threads, 8 processes) x 100 adds, two CPU-burning processes
beside them. Nothing is lost or doubled and no writer gives up; the add latency is printed (p50/p99).

Each add is the read-modify-write of a window memory of 100 messages (load, evict, append, save at the
loaded version) retried under :class:`~chatmemory.stores.base.RetryPolicy`'s time budget with jittered
backoff, as the memories do. Every successful save reports the version it started from and the one it
wrote: the 1,600 saves must form one chain from the first version to the last (a lost update shows as two
saves from one version, a doubled add as two links with its text), and the stored window must be the
last 100 texts of that chain.
"""

from __future__ import annotations

import itertools
import json
import statistics
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator

import pytest

from chatmemory import ConcurrentUpdateError, UserMessage
from chatmemory.stores.base import RetryPolicy
from chatmemory.stores.redis import Redis, RedisChatMemoryStore
from support.backends.redis import drop_prefix, fresh_prefix, redis_url

pytestmark = pytest.mark.redis

THREADS, PROCESSES, ADDS, WINDOW = 8, 8, 100, 100

ADD = textwrap.dedent(
    """
    import time
    from chatmemory import ConcurrentUpdateError, UserMessage

    def add(store, policy, text):
        started = time.perf_counter()
        attempts = policy.start()
        while True:
            snapshot = store.load("m")
            try:
                written = store.save("m", [*snapshot.messages[-99:], UserMessage(text)], snapshot.version)
                return snapshot.version, written, text, time.perf_counter() - started
            except ConcurrentUpdateError:
                delay = attempts.backoff()
                if delay is None:
                    raise
                time.sleep(delay)
    """
)
WORKER = ADD + textwrap.dedent(
    """
    import json, sys
    from chatmemory.stores.base import RetryPolicy
    from chatmemory.stores.redis import RedisChatMemoryStore

    url, prefix, tag, adds = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    with RedisChatMemoryStore(url, key_prefix=prefix) as store:
        print(json.dumps([add(store, RetryPolicy(), f"{tag} {n}") for n in range(adds)]))
    """
)
namespace: dict[str, object] = {}
exec(ADD, namespace)  # the threads run the very code the processes run


@pytest.fixture
def burners() -> Iterator[None]:
    started = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    yield
    for process in started:
        process.kill()
        process.wait()


def test_sixteen_writers_on_one_memory_lose_and_double_nothing(burners: None) -> None:
    prefix = fresh_prefix()
    client = Redis.from_url(redis_url())
    try:
        store = RedisChatMemoryStore(client, key_prefix=prefix)
        links: list[tuple[int, int, str, float]] = []
        errors: list[BaseException] = []

        def thread_writer(tag: str) -> None:
            try:
                for n in range(ADDS):
                    links.append(namespace["add"](store, RetryPolicy(), f"{tag} {n}"))  # type: ignore[operator]
            except BaseException as exc:  # reported below
                errors.append(exc)

        started = time.perf_counter()
        processes = [
            subprocess.Popen(
                [sys.executable, "-c", WORKER, redis_url(), prefix, f"p{n}", str(ADDS)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for n in range(PROCESSES)
        ]
        threads = [threading.Thread(target=thread_writer, args=(f"t{n}",)) for n in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for process in processes:
            output, _ = process.communicate(timeout=300)
            assert process.returncode == 0, output
            links += [tuple(link) for link in json.loads(output)]  # type: ignore[misc]
        elapsed = time.perf_counter() - started

        chain = sorted(links, key=lambda link: link[1])
        window = [message.text for message in store.get_messages("m")]  # type: ignore[attr-defined]
        tags = [f"t{n}" for n in range(THREADS)] + [f"p{n}" for n in range(PROCESSES)]
        expected = [f"{tag} {n}" for tag in tags for n in range(ADDS)]
        texts = [link[2] for link in chain]
        kept, doubled = len(set(texts) & set(expected)), len(texts) - len(set(texts))
        latencies = [link[3] for link in links]
        p50, p99 = statistics.median(latencies), statistics.quantiles(latencies, n=100)[98]
        print(
            f"\nredis: {THREADS + PROCESSES} writers x {ADDS} adds: kept {kept}/{len(expected)}, doubled {doubled}, "
            f"errors {len(errors)}; add p50 {p50 * 1000:.1f} ms, p99 {p99 * 1000:.1f} ms; {elapsed:.1f} s"
        )
        assert not errors, errors[:3]
        assert sorted(texts) == sorted(expected)
        assert chain[0][0] == 0 and all(link[0] == before[1] for before, link in itertools.pairwise(chain))
        assert window == texts[-WINDOW:]
        for tag in tags:  # and each writer's adds in its own order
            assert [text for text in texts if text.split()[0] == tag] == [f"{tag} {n}" for n in range(ADDS)]
    finally:
        drop_prefix(client, prefix)
        client.close()


def test_a_conflict_is_what_the_retry_sees(burners: None) -> None:
    # The retried operation: a save at a version another writer moved on is a ConcurrentUpdateError.
    prefix = fresh_prefix()
    client = Redis.from_url(redis_url())
    try:
        store = RedisChatMemoryStore(client, key_prefix=prefix)
        version = store.save("m", [UserMessage("a")], 0)
        RedisChatMemoryStore(client, key_prefix=prefix).update_messages("m", [UserMessage("b")])
        with pytest.raises(ConcurrentUpdateError):
            store.save("m", [UserMessage("a"), UserMessage("c")], version)
    finally:
        drop_prefix(client, prefix)
        client.close()
