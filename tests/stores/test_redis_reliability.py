"""Issue 10 on Redis: server clock, exactly-once writes under lost replies, half-evicted and damaged
memories, ttl checked by the script, caches that never outlive a repair, closing and construction."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from redis.backoff import AbstractBackoff
from redis.retry import Retry

from chatmemory import (
    ConcurrentUpdateError,
    CorruptedMemoryError,
    MessageWindowChatMemory,
    StoreError,
    UserMessage,
)
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Snapshot
from chatmemory.serialization.native import dumps_message
from chatmemory.stores.redis import Redis, RedisChatMemoryStore
from chatmemory.stores.redis.scripts import WRITE
from support.backends.redis import drop_prefix, fresh_prefix, redis_url
from support.tcp_proxy import TcpProxy

pytestmark = pytest.mark.redis


@pytest.fixture
def prefix(redis_direct: Redis) -> Iterator[str]:
    chosen = fresh_prefix()
    yield chosen
    drop_prefix(redis_direct, chosen)


def _server_micros(client: Redis) -> int:
    seconds, micros = client.time()
    return int(seconds) * 1_000_000 + int(micros)


# ---------------------------------------------------------------------------- 2: the server's clock


@pytest.mark.parametrize("skew", [-3600.0, 3600.0])
def test_versions_and_expiry_follow_the_server_clock_whatever_the_client_clock(
    redis_direct: Redis, prefix: str, monkeypatch: pytest.MonkeyPatch, skew: float
) -> None:
    store = RedisChatMemoryStore(redis_direct, key_prefix=prefix, ttl=10)
    real_time, real_time_ns = time.time, time.time_ns
    monkeypatch.setattr(time, "time", lambda: real_time() + skew)
    monkeypatch.setattr(time, "time_ns", lambda: real_time_ns() + int(skew * 1e9))
    before = _server_micros(redis_direct)
    version = store.save("m", [UserMessage("a")], 0)
    after = _server_micros(redis_direct)
    assert before <= version <= after
    expiry_ms = int(redis_direct.execute_command("PEXPIRETIME", store.keys_of("m")[0]))
    assert before // 1000 + 10_000 <= expiry_ms <= after // 1000 + 10_000
    # Deleted and created again, by a client whose clock is an hour off: the version still grows.
    store.delete_messages("m")
    assert store.save("m", [UserMessage("b")], 0) > version


# ---------------------------------------------------------------- 4: lost reply plus another writer


class _OtherWriterFirst(AbstractBackoff):
    """A driver backoff that lets another writer in before the driver resends (once).

    The driver deep-copies its retry policy into each connection; the pending action lives in a list the
    copies share through a function (functions are not copied).
    """

    def __init__(self) -> None:
        pending: list[Callable[[], None]] = []
        self.pending = lambda: pending

    def reset(self) -> None:
        """Nothing to reset."""

    def compute(self, failures: int) -> float:
        pending = self.pending()
        while pending:
            pending.pop()()
        return 0


def test_a_turn_resent_after_a_lost_reply_and_another_writer_is_applied_once(
    redis_proxy: TcpProxy, redis_direct: Redis, prefix: str
) -> None:
    backoff = _OtherWriterFirst()
    database = redis_direct.connection_pool.connection_kwargs.get("db", 0)
    client = Redis(host=redis_proxy.host, port=redis_proxy.port, db=database, retry=Retry(backoff, 1))
    other = MessageWindowChatMemory("m", store=RedisChatMemoryStore(redis_direct, key_prefix=prefix), max_messages=9)

    class LoseTheNextWriteReply(RedisChatMemoryStore):
        def load(self, memory_id: str) -> Snapshot:
            loaded = super().load(memory_id)
            if not redis_proxy.cuts:
                redis_proxy.cut_reply()  # the save that follows runs, and its reply is lost
                backoff.pending().append(lambda: other.add(UserMessage("from B")))
            return loaded

    store = LoseTheNextWriteReply(client, key_prefix=prefix)
    try:
        store.update_messages("m", [UserMessage("start")])
        MessageWindowChatMemory("m", store=store, max_messages=9).add(UserMessage("from A"))
        assert redis_proxy.cuts == 1 and not backoff.pending()
        assert [m.text for m in other.messages()] == ["start", "from A", "from B"]  # type: ignore[attr-defined]
    finally:
        client.close()


def test_a_resent_save_reports_the_version_it_wrote_so_the_next_save_conflicts(
    redis_direct: Redis, prefix: str
) -> None:
    store = RedisChatMemoryStore(redis_direct, key_prefix=prefix)
    first = store.save("m", [UserMessage("a")], 0)
    plan = store._operations.planner.full("m", (UserMessage("a"), UserMessage("b")), first)
    keys = plan.call.keys
    reply = redis_direct.evalsha(WRITE.sha, 2, keys.meta, keys.messages, *plan.call.args)
    written = int(reply[1])
    RedisChatMemoryStore(redis_direct, key_prefix=prefix).update_messages("m", [UserMessage("other")])
    for _ in range(10):  # later writes push it down the list, but not out
        RedisChatMemoryStore(redis_direct, key_prefix=prefix).update_messages("m", [UserMessage("other")])
    again = redis_direct.evalsha(WRITE.sha, 2, keys.meta, keys.messages, *plan.call.args)
    assert again == [b"r", b"%d" % written]
    with pytest.raises(ConcurrentUpdateError):
        store.save("m", [UserMessage("c")], written)


def test_a_turn_stores_a_short_history_entry_and_the_metadata_stays_bounded(redis_direct: Redis, prefix: str) -> None:
    store = RedisChatMemoryStore(redis_direct, key_prefix=prefix)
    meta, _ = store.keys_of("m")
    window: list[ChatMessage] = [UserMessage(f"m{n}") for n in range(3)]
    store.update_messages("m", window)
    for turn in range(40):
        window = [*window[1:], UserMessage(f"turn {turn}")]
        store.update_messages("m", window)
    fields = redis_direct.hgetall(meta)
    # version, incarnation, length, written, seq and one slot per remembered write: no field grows per turn.
    assert len(fields) == 5 + 16
    assert fields[b"seq"] == b"41"
    assert max(len(value) for value in fields.values()) < 64
    assert store.get_messages("m") == window


def test_a_write_id_in_the_history_of_a_memory_written_before_the_ring_is_still_found(
    redis_direct: Redis, prefix: str
) -> None:
    store = RedisChatMemoryStore(redis_direct, key_prefix=prefix)
    store.update_messages("m", [UserMessage("a")])
    meta, messages = store.keys_of("m")
    version = int(redis_direct.hget(meta, "version"))
    # The metadata as the store wrote it before the ring: the history in one field, no seq, no slots.
    redis_direct.hdel(meta, "seq", *[f"w{slot}" for slot in range(16)])
    redis_direct.hset(meta, "writes", b"abc0=%d;abc1=5" % version)
    plan = store._operations.planner.full("m", (UserMessage("a"), UserMessage("b")), 1)
    args = (plan.call.args[0], b"abc0", *plan.call.args[2:])
    assert redis_direct.evalsha(WRITE.sha, 2, meta, messages, *args) == [b"r", b"%d" % version]
    args = (plan.call.args[0], b"abc1", *plan.call.args[2:])
    assert redis_direct.evalsha(WRITE.sha, 2, meta, messages, *args) == [b"r", b"5"]
    store.update_messages("m", [UserMessage("c")])  # and the ring starts from there
    assert redis_direct.hget(meta, "seq") == b"1"
    assert store.get_messages("m") == [UserMessage("c")]


# ------------------------------------------------------------------ 5 and 8: damaged and half memories


def _keys(store: RedisChatMemoryStore) -> tuple[bytes, bytes]:
    return store.keys_of("m")


@pytest.mark.parametrize(
    "damage",
    ["list evicted", "meta evicted", "no incarnation", "version 0", "version missing", "length wrong"],
)
def test_a_damaged_or_half_evicted_memory_is_corrupted_never_empty_and_never_overwritten(
    redis_direct: Redis, prefix: str, damage: str
) -> None:
    store = RedisChatMemoryStore(redis_direct, key_prefix=prefix)
    cold = RedisChatMemoryStore(redis_direct, key_prefix=prefix, snapshot_cache_size=0)
    window = [UserMessage(f"m{n}") for n in range(3)]
    store.update_messages("m", window)
    assert store.get_messages("m") == window  # cached now
    meta, messages = _keys(store)
    if damage == "list evicted":
        redis_direct.delete(messages)
    elif damage == "meta evicted":
        redis_direct.delete(meta)
    elif damage == "no incarnation":
        redis_direct.hdel(meta, "incarnation")
    elif damage == "version 0":
        redis_direct.hset(meta, "version", "0")
    elif damage == "version missing":
        redis_direct.hdel(meta, "version")
    else:
        redis_direct.rpush(messages, dumps_message(UserMessage("stray")))
    raw = redis_direct.lrange(messages, 0, -1)
    for reader in (store, cold, store):
        with pytest.raises(CorruptedMemoryError, match="'m'"):
            reader.get_messages("m")
    memory = MessageWindowChatMemory("m", store=store, max_messages=5)
    with pytest.raises(CorruptedMemoryError):
        memory.add(UserMessage("would overwrite"))
    with pytest.raises(CorruptedMemoryError):
        store.save("m", [UserMessage("would overwrite")], 0)
    assert redis_direct.lrange(messages, 0, -1) == raw  # left as it was, for inspection
    assert store.read_raw("m") == raw
    # A repair through another store: this store's cache does not outlive it.
    cold.update_messages("m", [UserMessage("repaired")])
    assert store.get_messages("m") == [UserMessage("repaired")]
    memory.add(UserMessage("after"))
    assert cold.get_messages("m") == [UserMessage("repaired"), UserMessage("after")]


def _damage_list(client: Redis, messages: bytes, damage: str) -> None:
    if damage == "list evicted":
        client.delete(messages)
    elif damage == "record added":
        client.rpush(messages, dumps_message(UserMessage("stray")))
    else:
        client.rpop(messages)


@pytest.mark.parametrize("appended", [1, 2])
@pytest.mark.parametrize("damage", ["list evicted", "record added", "record lost"])
def test_a_diff_onto_a_list_of_the_wrong_length_writes_nothing(
    redis_direct: Redis, prefix: str, damage: str, appended: int
) -> None:
    # The diffs are sent from a warm cache (no read first): the script finds the damage itself. It appends
    # before it knows the list's length, so it must take the append back.
    store = RedisChatMemoryStore(redis_direct, key_prefix=prefix, ttl=60)
    window = [UserMessage(f"m{n}") for n in range(3)]
    new = [*window[1:], *(UserMessage(f"new{n}") for n in range(appended))]
    version = store.save("m", window, 0)
    store.update_messages("n", window)
    for memory_id in ("m", "n"):
        _damage_list(redis_direct, store.keys_of(memory_id)[1], damage)
    meta, messages = _keys(store)
    raw, head = redis_direct.lrange(messages, 0, -1), redis_direct.hgetall(meta)
    with pytest.raises(CorruptedMemoryError, match="'m'"):
        store.save("m", new, version)
    assert redis_direct.lrange(messages, 0, -1) == raw and redis_direct.hgetall(meta) == head
    assert redis_direct.exists(messages) == (damage != "list evicted")
    # Through the plain contract the refused diff is followed by a whole write: the new list, nothing more.
    store.update_messages("n", new)
    assert store.read_raw("n") == [dumps_message(message) for message in new]
    assert RedisChatMemoryStore(redis_direct, key_prefix=prefix, snapshot_cache_size=0).get_messages("n") == new


def test_invalidate_drops_a_cached_snapshot_after_a_hand_edit(redis_direct: Redis, prefix: str) -> None:
    store = RedisChatMemoryStore(redis_direct, key_prefix=prefix)
    store.update_messages("m", [UserMessage("typo")])
    store.update_messages("n", [UserMessage("typo")])
    assert store.get_messages("m") == [UserMessage("typo")]
    # An operator fixes a record in place (version and incarnation untouched): only invalidating tells.
    for memory_id in ("m", "n"):
        redis_direct.lset(store.keys_of(memory_id)[1], 0, dumps_message(UserMessage("fixed")))
    assert store.get_messages("m") == [UserMessage("typo")]
    store.invalidate("m")
    assert store.get_messages("m") == [UserMessage("fixed")]
    assert store.get_messages("n") == [UserMessage("typo")]
    store.invalidate_all()
    assert store.get_messages("n") == [UserMessage("fixed")]


# -------------------------------------------------------------------- 7: ttl range, checked by scripts


def test_a_ttl_beyond_a_century_is_refused_at_construction(redis_direct: Redis) -> None:
    for ttl in (1e16, 1e12, float("inf")):
        with pytest.raises(ValueError, match="ttl"):
            RedisChatMemoryStore(redis_direct, ttl=ttl)


@pytest.mark.parametrize("ttl_ms", [b"10000000000000000000", b"-5", b"1.5", b"soon"])
def test_the_write_script_refuses_a_bad_ttl_before_writing_anything(
    redis_direct: Redis, prefix: str, ttl_ms: bytes
) -> None:
    store = RedisChatMemoryStore(redis_direct, key_prefix=prefix)
    store.update_messages("m", [UserMessage("old")])
    plan = store._operations.planner.full("m", (UserMessage("new"),), None)
    args = list(plan.call.args)
    args[2] = ttl_ms
    with pytest.raises(Exception, match="ttl"):
        redis_direct.evalsha(WRITE.sha, 2, plan.call.keys.meta, plan.call.keys.messages, *args)
    assert store.read_raw("m") == [dumps_message(UserMessage("old"))]
    assert redis_direct.pttl(plan.call.keys.messages) == -1


# ---------------------------------------------------------------------- closing and construction


def test_a_closed_store_refuses_every_operation(redis_direct: Redis, prefix: str) -> None:
    store = RedisChatMemoryStore(redis_url(), key_prefix=prefix)
    store.update_messages("m", [UserMessage("a")])
    store.close()
    store.close()
    operations: list[Callable[[], object]] = [
        lambda: store.get_messages("m"),
        lambda: store.load("m"),
        lambda: store.save("m", [], 1),
        lambda: store.update_messages("m", []),
        lambda: store.delete_messages("m"),
        lambda: store.read_raw("m"),
        lambda: store.write_raw("m", []),
        lambda: list(store.memory_ids()),
    ]
    for operation in operations:
        with pytest.raises(StoreError, match="closed"):
            operation()
    assert RedisChatMemoryStore(redis_direct, key_prefix=prefix).get_messages("m") == [UserMessage("a")]


def test_a_key_prefix_of_none_is_refused_at_construction(redis_direct: Redis) -> None:
    with pytest.raises(TypeError, match="key_prefix must be a str"):
        RedisChatMemoryStore(redis_direct, key_prefix=None)  # type: ignore[arg-type]


def test_a_client_built_from_a_url_has_short_timeouts_the_url_can_override() -> None:
    with RedisChatMemoryStore(redis_url()) as store:
        kwargs = store.client.connection_pool.connection_kwargs  # type: ignore[union-attr]
        assert (kwargs["socket_connect_timeout"], kwargs["socket_timeout"]) == (5.0, 10.0)
    separator = "&" if "?" in redis_url() else "?"
    with RedisChatMemoryStore(f"{redis_url()}{separator}socket_timeout=30", socket_connect_timeout=2) as store:
        kwargs = store.client.connection_pool.connection_kwargs  # type: ignore[union-attr]
        assert (kwargs["socket_connect_timeout"], kwargs["socket_timeout"]) == (2.0, 30.0)
    with pytest.raises(ValueError, match="socket_timeout"):
        RedisChatMemoryStore(redis_url(), socket_timeout=0)


def test_a_url_that_is_not_a_redis_url_says_what_to_use() -> None:
    with pytest.raises(ValueError, match=r"redis\+cluster://"):
        RedisChatMemoryStore("postgresql://localhost/db")


def test_messages_from_a_generator_are_taken_once(redis_direct: Redis, prefix: str) -> None:
    store = RedisChatMemoryStore(redis_direct, key_prefix=prefix)
    messages: list[ChatMessage] = [UserMessage("a"), UserMessage("b")]
    store.update_messages("m", (message for message in messages))
    assert store.get_messages("m") == messages
    version = store.load("m").version
    store.save("m", (message for message in [*messages, UserMessage("c")]), version)
    assert store.get_messages("m") == [*messages, UserMessage("c")]
