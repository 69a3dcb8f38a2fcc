"""``chatmemory copy --from langchain4j-redis``: off a LangChain4j Redis store onto every backend.

The source is LangChain4j's layout on a real Redis (standalone and Cluster): one string key per memory,
``key prefix + memory id``, holding ``ChatMessageSerializer.messagesToJson`` JSON, some with an expiry.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Iterator

import pytest

from chatmemory import AiMessage, SystemMessage, ToolExecutionRequest, ToolExecutionResultMessage, UserMessage
from chatmemory.memory_times import SupportsExpiryAt
from chatmemory.serialization import langchain4j
from chatmemory.stores.redis import Redis, RedisCluster
from chatmemory.transfer import LangChain4jRedisSource
from support.backends.redis import cluster_url, drop_prefix, redis_url


def conversation(n: int) -> list:
    return [
        SystemMessage("You are a travel assistant."),
        UserMessage(f"weather in city {n}?"),
        AiMessage(tool_execution_requests=[ToolExecutionRequest(f"c{n}", "weather", f'{{"city": "city {n}"}}')]),
        ToolExecutionResultMessage(f"c{n}", "weather", "sunny"),
        AiMessage(f"sunny in city {n}"),
    ]


@pytest.fixture(
    params=[
        pytest.param("redis", marks=pytest.mark.redis),
        pytest.param("redis_cluster", marks=pytest.mark.redis_cluster),
    ]
)
def legacy(request: pytest.FixtureRequest) -> Iterator[tuple[str, Redis | RedisCluster, str]]:
    """(URL, client, key prefix) of a LangChain4j layout under a fresh prefix; removed afterwards."""
    url = redis_url() if request.param == "redis" else cluster_url()
    client: Redis | RedisCluster = (
        Redis.from_url(url) if request.param == "redis" else RedisCluster.from_url(url.replace("+cluster", "", 1))
    )
    prefix = f"l4j:{uuid.uuid4().hex[:8]}:*?:"
    yield url, client, prefix
    drop_prefix(client, prefix)
    client.close()


def test_copy_from_a_langchain4j_redis_layout(legacy, stores, run) -> None:
    url, client, prefix = legacy
    memories = {f"user-{n}": conversation(n) for n in range(12)}
    for memory_id, messages in memories.items():
        client.set(f"{prefix}{memory_id}", langchain4j.dumps(messages))
    client.set(f"{prefix}expiring", langchain4j.dumps(conversation(99)), px=3_600_000)
    client.set(f"{prefix}broken", '[{"type": "USER", "contents": 5}]')
    client.rpush(f"{prefix}a-list", b"not a LangChain4j memory")
    target = stores.url("target")
    source_flag = "--src-key-prefix" if stores.backend.name.startswith("redis") else "--key-prefix"

    first = run("copy", url, target, "--from", "langchain4j-redis", source_flag, prefix)
    assert first.status == 1  # the broken one
    assert "memory 'broken'" in first.err
    assert "13 created, 1 failed" in first.err
    assert "memory 'broken' does not decode at the source and was skipped" in first.err
    if not isinstance(stores[target], SupportsExpiryAt):
        assert "expiry times were not kept" in first.err  # the 'expiring' key had one
    for memory_id, messages in memories.items():
        assert stores[target].get_messages(memory_id) == messages
    assert stores[target].get_messages("expiring") == conversation(99)

    # Re-runnable while the LangChain4j service keeps writing: equal memories are skipped, changed ones refused
    # until --replace, new ones created.
    client.delete(f"{prefix}broken")
    client.set(f"{prefix}user-3", langchain4j.dumps([*conversation(3), UserMessage("one more")]))
    client.set(f"{prefix}late", langchain4j.dumps(conversation(7)))
    second = run("copy", url, target, "--from", "langchain4j-redis", source_flag, prefix)
    assert second.status == 1
    assert "1 created, 12 unchanged, 1 failed" in second.err
    assert "memory 'user-3' already exists with other messages" in second.err
    third = run("copy", url, target, "--from", "langchain4j-redis", source_flag, prefix, "--replace", "--ttl", "60")
    assert third.status == 0, third.err
    assert "expiry times were not kept" not in third.err
    assert "1 replaced, 13 unchanged" in third.err
    assert stores[target].get_messages("user-3")[-1] == UserMessage("one more")


def test_the_source_reads_ids_values_and_expiry(legacy) -> None:
    url, client, prefix = legacy
    client.set(f"{prefix}用户-七", langchain4j.dumps(conversation(1)), px=60_000)
    client.set(f"{prefix}forever", langchain4j.dumps(conversation(2)))
    client.set(b"l4j-elsewhere:" + uuid.uuid4().hex.encode(), b"[]", px=60_000)  # outside the prefix
    source = LangChain4jRedisSource(url, key_prefix=prefix)
    try:
        assert sorted(source.memory_ids()) == ["forever", "用户-七"]
        read = source.read("用户-七")
        assert read is not None
        assert read.messages == conversation(1)
        assert isinstance(read.expires_at, datetime.datetime)
        remaining = read.expires_at - datetime.datetime.now(datetime.timezone.utc)
        assert datetime.timedelta(seconds=50) < remaining <= datetime.timedelta(seconds=60)
        forever = source.read("forever")
        assert forever is not None
        assert forever.expires_at is None
        assert source.read("nobody") is None
    finally:
        source.close()


def test_langchain4j_source_needs_a_redis_url(stores, run) -> None:
    target = stores.url("target")
    result = run("copy", "sqlite:///x.db", target, "--from", "langchain4j-redis")
    assert result.status == 2
    assert "--from langchain4j-redis needs a Redis source URL" in result.err
