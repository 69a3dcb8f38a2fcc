"""Store URLs and namespace options as operators type them, against the real servers."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import orjson
import pytest
from cli_results import run_main

from chatmemory import SystemMessage, UserMessage
from chatmemory.stores.mongodb import MongoChatMemoryStore
from chatmemory.stores.redis import RedisChatMemoryStore
from chatmemory.stores.sql import SQLChatMemoryStore
from support.backends.mongodb import DATABASE, mongodb_url
from support.backends.postgres import open_backend as postgres_backend
from support.backends.redis import drop_prefix, fresh_prefix, redis_url

WINDOW = [SystemMessage("s"), UserMessage("u")]


@pytest.fixture
def redis_store() -> Iterator[tuple[RedisChatMemoryStore, str]]:
    """A Redis store under a fresh key prefix, and the prefix."""
    prefix = fresh_prefix()
    store = RedisChatMemoryStore(redis_url(), key_prefix=prefix)
    yield store, prefix
    drop_prefix(store.client, prefix)
    store.close()


@pytest.mark.sqlite
def test_sqlite_table_prefix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'chat.db'}"
    with SQLChatMemoryStore(url, table_prefix="app_") as store:
        store.create_schema()
        store.update_messages("m", WINDOW)
    listed = run_main(["ls", url, "--table-prefix", "app_", "--json"], capsys)
    assert listed.status == 0, listed.err
    assert [row["id"] for row in orjson.loads(listed.out)] == ["m"]
    # The default prefix has no tables: one line naming the command that creates them.
    unmigrated = run_main(["ls", url], capsys)
    assert unmigrated.status == 1
    assert "Run: chatmemory migrate" in unmigrated.err
    assert len(unmigrated.err.splitlines()) == 1
    wrong = run_main(["ls", url, "--key-prefix", "x:"], capsys)
    assert wrong.status == 2
    assert "--key-prefix does not apply to" in wrong.err
    assert "(a sql store)" in wrong.err


@pytest.mark.redis
def test_redis_key_prefix_and_ttl(redis_store, tmp_path: Path, capsys) -> None:
    redis_store, prefix = redis_store
    redis_store.update_messages("m", WINDOW)
    url = redis_url()
    shown = run_main(["show", url, "m", "--key-prefix", prefix, "--format", "native"], capsys)
    assert shown.status == 0, shown.err
    assert len(orjson.loads(shown.out)["messages"]) == 2
    path = tmp_path / "m.jsonl"
    assert run_main(["export", url, "--key-prefix", prefix, "-o", str(path)], capsys).status == 0
    other = fresh_prefix()
    try:
        imported = run_main(["import", url, str(path), "--key-prefix", other, "--ttl", "120"], capsys)
        assert imported.status == 0, imported.err
        with RedisChatMemoryStore(url, key_prefix=other) as target:
            assert target.get_messages("m") == WINDOW
            remaining = [target.client.pttl(key) for key in target.keys_of("m")]
            assert any(0 < ms <= 120_000 for ms in remaining)
    finally:
        drop_prefix(redis_store.client, other)
    assert run_main(["ls", url, "--table-prefix", "t_"], capsys).status == 2


@pytest.mark.mongodb
def test_mongodb_database_and_collection(capsys: pytest.CaptureFixture[str]) -> None:
    url = mongodb_url()
    collection = f"cli_{uuid.uuid4().hex}"
    with MongoChatMemoryStore(url, database=DATABASE, collection=collection) as store:
        try:
            store.update_messages("m", WINDOW)
            listed = run_main(["ls", url, "--database", DATABASE, "--collection", collection, "--json"], capsys)
            assert listed.status == 0, listed.err
            assert [row["id"] for row in orjson.loads(listed.out)] == ["m"]
        finally:
            store.collection.drop()


@pytest.mark.redis
@pytest.mark.postgres
def test_copy_redis_to_postgres_with_one_prefix_per_side(redis_store, capsys) -> None:
    redis_store, prefix = redis_store
    backend = postgres_backend()
    target = backend.make_store()
    try:
        redis_store.update_messages("m", WINDOW)
        argv = ["copy", redis_url(), backend.url, "--key-prefix", prefix]
        copied = run_main([*argv, "--table-prefix", target.table_prefix], capsys)
        assert copied.status == 0, copied.err
        assert target.get_messages("m") == WINDOW
        ambiguous = run_main(["copy", redis_url(), redis_url(), "--key-prefix", "a:"], capsys)
        assert ambiguous.status == 2
        assert "--key-prefix fits both stores; say which: --src-key-prefix / --dst-key-prefix" in ambiguous.err
        neither = run_main([*argv, "--database", "x"], capsys)
        assert neither.status == 2
        assert "--database applies to neither store" in neither.err
    finally:
        backend.close_store(target)


def test_bad_urls_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["ls", "nosuch://x"], ["ls", "no-scheme"], ["show", "memory://", "m", "--format", "yaml"]):
        result = run_main(argv, capsys)
        assert result.status == 2, argv
    assert "no chatmemory store for URL scheme 'nosuch'" in run_main(["ls", "nosuch://x"], capsys).err


@pytest.mark.postgres
def test_a_password_is_never_printed(capsys: pytest.CaptureFixture[str]) -> None:
    result = run_main(["ls", "postgresql+psycopg://user:s3cret@127.0.0.1:5432/x", "--key-prefix", "a"], capsys)
    assert result.status == 2
    assert "s3cret" not in result.err
    assert "user:***@" in result.err


@pytest.mark.mongodb
def test_mongodb_database_in_the_url(capsys: pytest.CaptureFixture[str]) -> None:
    base = mongodb_url()
    other = f"{DATABASE}_url"
    in_url = urlsplit(base)._replace(path=f"/{other}").geturl()
    collection = f"cli_{uuid.uuid4().hex}"
    with MongoChatMemoryStore(in_url, database=other, collection=collection) as store:
        try:
            store.update_messages("m", WINDOW)
            listed = run_main(["ls", in_url, "--collection", collection, "--json"], capsys)
            assert listed.status == 0, listed.err
            assert [row["id"] for row in orjson.loads(listed.out)] == ["m"]
            stats = run_main(["stats", in_url, "--collection", collection, "--json"], capsys)
            assert stats.status == 0, stats.err
            assert orjson.loads(stats.out)["memories"] == 1
            # --database names another database, and wins over the URL's.
            explicit = run_main(["ls", in_url, "--database", DATABASE, "--collection", collection, "--json"], capsys)
            assert explicit.status == 0, explicit.err
            assert orjson.loads(explicit.out) == []
        finally:
            store.collection.drop()
