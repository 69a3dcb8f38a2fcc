"""Connections cut mid-update (through a loopback redis_proxy) leave the old memory or the new one, never a mix.

A write is one script call: a command the server received only in part never runs, and a command whose
reply was lost ran whole. A write the driver retries after a lost reply is recognised as already done,
so it neither runs twice nor reports a conflict that would make a window memory apply its turn again.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redis.asyncio import Redis as AsyncRedis
from redis.asyncio.retry import Retry as AsyncRetry
from redis.backoff import NoBackoff
from redis.retry import Retry

from chatmemory import MessageWindowChatMemory, StoreError, SystemMessage, UserMessage, aio
from chatmemory.aio.stores.redis import RedisChatMemoryStore as AsyncRedisStore
from chatmemory.core.messages import ChatMessage
from chatmemory.stores.redis import Redis, RedisChatMemoryStore
from support.backends.redis import drop_prefix, fresh_prefix
from support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.redis


@pytest.fixture
def prefix(redis_direct: Redis) -> Iterator[str]:
    chosen = fresh_prefix()
    yield chosen
    drop_prefix(redis_direct, chosen)


def _through(redis_proxy: TcpProxy, redis_direct: Redis, retries: int) -> Redis:
    db = redis_direct.connection_pool.connection_kwargs.get("db", 0)
    return Redis(
        host=redis_proxy.host,
        port=redis_proxy.port,
        db=db,
        retry=Retry(NoBackoff(), retries),
        socket_timeout=5,
        socket_connect_timeout=5,
    )


def _turn(window: list[ChatMessage], turn: int) -> list[ChatMessage]:
    """The next window behind a system message: evict the oldest turn, append one (a diff write)."""
    return [window[0], *window[2:], UserMessage(f"turn {turn:04d} " + "x" * 200)]


def _start(store: RedisChatMemoryStore) -> list[ChatMessage]:
    window: list[ChatMessage] = [SystemMessage("sys"), *(UserMessage(f"turn {n:04d} " + "x" * 200) for n in range(8))]
    store.update_messages("m", window)
    return window


def _write_size(redis_proxy: TcpProxy, store: RedisChatMemoryStore, window: list[ChatMessage], turn: int) -> int:
    snapshot = store.load("m")
    redis_proxy.reset_counters()
    store.save("m", _turn(window, turn), snapshot.version)
    return redis_proxy.bytes_up


@pytest.mark.parametrize("snapshot_cache_size", [1024, 0], ids=["diff", "full"])
def test_a_write_cut_while_sending_leaves_the_old_memory(
    redis_proxy: TcpProxy, redis_direct: Redis, prefix: str, snapshot_cache_size: int
) -> None:
    client = _through(redis_proxy, redis_direct, retries=0)
    store = RedisChatMemoryStore(client, key_prefix=prefix, snapshot_cache_size=snapshot_cache_size)
    reader = RedisChatMemoryStore(redis_direct, key_prefix=prefix, snapshot_cache_size=0)
    window = _start(store)
    size = _write_size(redis_proxy, store, window, 100)
    window = _turn(window, 100)
    for turn, cut in enumerate(sorted({1, 7, 40, size // 2, size - 2, size - 1}), start=101):
        snapshot = store.load("m")
        redis_proxy.cut_upstream_after(cut)
        with pytest.raises(StoreError) as raised:
            store.save("m", _turn(window, turn), snapshot.version)
        assert raised.value.__cause__ is not None
        assert redis_proxy.cuts == turn - 100 and not redis_proxy.armed
        assert reader.get_messages("m") == window  # the half-sent command never ran
    client.close()


@pytest.mark.parametrize("snapshot_cache_size", [1024, 0], ids=["diff", "full"])
def test_a_write_whose_reply_is_lost_is_whole(
    redis_proxy: TcpProxy, redis_direct: Redis, prefix: str, snapshot_cache_size: int
) -> None:
    client = _through(redis_proxy, redis_direct, retries=0)
    store = RedisChatMemoryStore(client, key_prefix=prefix, snapshot_cache_size=snapshot_cache_size)
    reader = RedisChatMemoryStore(redis_direct, key_prefix=prefix, snapshot_cache_size=0)
    window = _start(store)
    snapshot = store.load("m")
    redis_proxy.cut_reply()
    with pytest.raises(StoreError):
        store.save("m", _turn(window, 100), snapshot.version)
    assert redis_proxy.cuts == 1
    assert reader.get_messages("m") == _turn(window, 100)  # it ran, and ran whole
    # The writer recovers: a window memory re-reads and carries on from the new state.
    memory = MessageWindowChatMemory("m", store=store, max_messages=9, always_keep_system_message_first=True)
    memory.add(UserMessage("after the fault"))
    after = _turn(window, 100)
    assert reader.get_messages("m") == [after[0], *after[2:], UserMessage("after the fault")]
    client.close()


def test_a_retried_write_after_a_lost_reply_is_neither_repeated_nor_a_conflict(
    redis_proxy: TcpProxy, redis_direct: Redis, prefix: str
) -> None:
    client = _through(redis_proxy, redis_direct, retries=2)
    store = RedisChatMemoryStore(client, key_prefix=prefix)
    reader = RedisChatMemoryStore(redis_direct, key_prefix=prefix, snapshot_cache_size=0)
    memory = MessageWindowChatMemory("m", store=store, max_messages=4, always_keep_system_message_first=True)
    memory.add(SystemMessage("sys"))
    expected: list[ChatMessage] = [SystemMessage("sys")]
    for turn in range(8):
        redis_proxy.cut_reply()  # the load's reply is lost: the driver reads again
        memory.add(UserMessage(f"turn {turn}"))
        expected.append(UserMessage(f"turn {turn}"))
        del expected[1:-3]
        assert reader.get_messages("m") == expected
    assert redis_proxy.cuts == 8
    snapshot = store.load("m")
    version = store.save("m", [*snapshot.messages, UserMessage("once")], snapshot.version)
    redis_proxy.cut_reply()
    # A save whose reply is lost is sent again by the driver; the script sees its own token and says done.
    retried = store.save("m", [*snapshot.messages, UserMessage("once"), UserMessage("twice")], version)
    assert redis_proxy.cuts == 9
    assert retried > version
    assert reader.load("m") == store.load("m")
    assert reader.get_messages("m") == [*snapshot.messages, UserMessage("once"), UserMessage("twice")]
    client.close()


def test_a_read_cut_mid_reply_fails_cleanly_and_the_next_read_is_whole(
    redis_proxy: TcpProxy, redis_direct: Redis, prefix: str
) -> None:
    client = _through(redis_proxy, redis_direct, retries=0)
    store = RedisChatMemoryStore(client, key_prefix=prefix, snapshot_cache_size=0)
    window = _start(store)
    redis_proxy.cut_downstream_after(300)
    with pytest.raises(StoreError):
        store.get_messages("m")
    assert redis_proxy.cuts == 1
    assert store.get_messages("m") == window
    client.close()


async def test_an_asyncio_write_resent_after_a_lost_reply_is_neither_repeated_nor_a_conflict(
    redis_proxy: TcpProxy, redis_direct: Redis, prefix: str
) -> None:
    # The asyncio store sends the same script calls with redis.asyncio: its resend is recognised the same way.
    db = redis_direct.connection_pool.connection_kwargs.get("db", 0)
    client = AsyncRedis(
        host=redis_proxy.host, port=redis_proxy.port, db=db, retry=AsyncRetry(NoBackoff(), 2), socket_timeout=5
    )
    store = AsyncRedisStore(client, key_prefix=prefix)
    reader = RedisChatMemoryStore(redis_direct, key_prefix=prefix, snapshot_cache_size=0)
    try:
        memory = aio.MessageWindowChatMemory("m", store=store, max_messages=4, always_keep_system_message_first=True)
        await memory.add(SystemMessage("sys"))
        expected: list[ChatMessage] = [SystemMessage("sys")]
        for turn in range(4):
            redis_proxy.cut_reply()  # the turn's reply is lost: the driver sends it again
            await memory.add(UserMessage(f"turn {turn}"))
            expected.append(UserMessage(f"turn {turn}"))
            del expected[1:-3]
            assert reader.get_messages("m") == expected
        assert redis_proxy.cuts == 4
        snapshot = await store.load("m")
        version = await store.save("m", [*snapshot.messages, UserMessage("once")], snapshot.version)
        redis_proxy.cut_reply()
        retried = await store.save("m", [*snapshot.messages, UserMessage("once"), UserMessage("twice")], version)
        assert redis_proxy.cuts == 5
        assert retried > version
        assert reader.get_messages("m") == [*snapshot.messages, UserMessage("once"), UserMessage("twice")]
    finally:
        await client.aclose()
