"""Every command against every URL scheme ``open_store`` documents, on the real servers.

Each reachable scheme gets the whole round of commands in a fresh namespace: ``migrate``, ``import``, ``ls``,
``stats``, ``show``, ``export``, ``copy`` (the scheme on both sides), ``history``, ``trim-history``,
``purge-expired``, ``delete`` and ``demo``. ``unix://`` reaches the test Redis server through a Unix socket
forwarded to its TCP port. The schemes no test server speaks (TLS, DNS SRV) must still get each command as
far as connecting, and fail there in one line naming the failure, never with a traceback.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
from cli_results import Result, run_main

from chatmemory import SystemMessage, UserMessage
from chatmemory.cli.stores import NAMESPACE_OPTIONS, store_kind
from chatmemory.serialization import native
from chatmemory.stores.url import STORE_SCHEMES, open_store
from chatmemory.transfer import ExportedMemory, encode_line

WINDOWS = {"a": [SystemMessage("s"), UserMessage("to a")], "b": [UserMessage("to b")]}


class UnixSocketForwarder:
    """A Unix socket whose connections are forwarded to a TCP server (the test Redis)."""

    def __init__(self, path: Path, upstream: tuple[str, int]) -> None:
        self.path = path
        self._upstream = upstream
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen()
        self._listener.settimeout(0.05)
        self._closed = False
        self._sockets: list[socket.socket] = []
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except (TimeoutError, OSError):
                continue
            server = socket.create_connection(self._upstream)
            self._sockets += [client, server]
            for source, target in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := source.recv(65536):
                target.sendall(chunk)
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self._closed = True
        self._thread.join()
        self._listener.close()
        for opened in self._sockets:
            opened.close()


@dataclass
class Place:
    """A URL and the namespace options of one fresh namespace there, and how to drop it afterwards."""

    url: str
    kind: str
    options: list[str] = field(default_factory=list)
    second: list[str] = field(default_factory=list)
    """The options of a second fresh namespace on the same server (``copy``'s destination)."""
    cleanups: list[Callable[[], None]] = field(default_factory=list)
    persistent: bool = True
    demo: bool = True


def _redis_place(url: str, kind: str, cluster: bool = False) -> Place:
    from chatmemory.stores.redis import Redis, RedisCluster
    from support.backends.langchain4j_redis import drop_prefix
    from support.backends.redis import cluster_url, fresh_prefix, redis_url

    first, second = fresh_prefix(), fresh_prefix()
    client: Any = RedisCluster.from_url(cluster_url().replace("redis+cluster", "redis")) if cluster else None
    client = client or Redis.from_url(redis_url())

    def drop() -> None:
        for prefix in (first, second):
            drop_prefix(client, prefix)
        client.close()

    return Place(
        url,
        kind,
        ["--key-prefix", first],
        ["--key-prefix", second],
        [drop],
    )


def _sql_place(url: str) -> Place:
    from chatmemory.stores.sql import SQLChatMemoryStore

    first, second = (f"cm{uuid.uuid4().hex[:10]}_" for _ in range(2))

    def drop() -> None:
        for prefix in (first, second):
            with SQLChatMemoryStore(url, table_prefix=prefix) as store:
                store.drop_schema()

    # The demo creates the default tables of the database it is given: not in a shared test database.
    shared = not url.startswith("sqlite")
    return Place(
        url,
        "sql",
        ["--table-prefix", first],
        ["--table-prefix", second],
        [drop],
        demo=not shared,
    )


def _mongodb_place(url: str) -> Place:
    from pymongo import MongoClient

    from support.backends.mongodb import DATABASE

    first, second = (f"cli_{uuid.uuid4().hex}" for _ in range(2))

    def drop() -> None:
        with MongoClient(url) as client:
            for name in (first, second, "memories"):
                client[DATABASE].drop_collection(name)
                client[DATABASE].drop_collection(f"{name}_history")

    # The URL names the test database (the demo, without --database, writes its "memories" collection).
    parts = urlsplit(url)
    url = parts._replace(path=f"/{DATABASE}").geturl()
    return Place(
        url,
        "mongodb",
        ["--database", DATABASE, "--collection", first],
        ["--database", DATABASE, "--collection", second],
        [drop],
    )


def _with_scheme(url: str, scheme: str) -> str:
    return scheme + url[url.index("://") :]


def _place(scheme: str, tmp_path: Path) -> Place:
    from support.backends.mongodb import mongodb_url
    from support.backends.mysql import open_backend as mysql_backend
    from support.backends.postgres import open_backend as postgres_backend
    from support.backends.redis import cluster_url, redis_url

    if scheme == "memory":
        return Place("memory://", "memory", persistent=False)
    if scheme in ("redis", "redis+langchain4j"):
        kind = "redis" if scheme == "redis" else "langchain4j_redis"
        return _redis_place(_with_scheme(redis_url(), scheme), kind)
    if scheme == "redis+cluster":
        return _redis_place(cluster_url(), "redis", cluster=True)
    if scheme == "unix":
        upstream = urlsplit(redis_url())
        forwarder = UnixSocketForwarder(tmp_path / "redis.sock", (upstream.hostname or "", upstream.port or 6379))
        place = _redis_place(f"unix://{forwarder.path}?db={upstream.path.strip('/') or 0}", "redis")
        place.cleanups.append(forwarder.close)
        return place
    if scheme == "sqlite":
        return _sql_place(f"sqlite:///{tmp_path / 'chat.db'}")
    if scheme in ("postgresql", "postgres"):
        return _sql_place(_with_scheme(postgres_backend().url, scheme))  # type: ignore[attr-defined]
    if scheme in ("mysql", "mariadb"):
        return _sql_place(_with_scheme(mysql_backend().url, scheme))  # type: ignore[attr-defined]
    if scheme == "mongodb":
        return _mongodb_place(mongodb_url())
    raise AssertionError(f"no test server for {scheme}")


REACHABLE = {
    "memory": "memory",
    "redis": "redis",
    "redis+cluster": "redis_cluster",
    "unix": "redis",
    "redis+langchain4j": "redis",
    "sqlite": "sqlite",
    "postgresql": "postgres",
    "postgres": "postgres",
    "mysql": "mysql",
    "mariadb": "mysql",
    "mongodb": "mongodb",
}
"""Scheme → the pytest marker of the server it is tested on."""

# Ports nothing listens on and a name no DNS resolves: each command must fail at the connection.
UNREACHABLE = {
    "rediss": "rediss://127.0.0.1:1/0",
    "rediss+cluster": "rediss+cluster://127.0.0.1:1",
    "rediss+langchain4j": "rediss+langchain4j://127.0.0.1:1/0",
    "mongodb+srv": "mongodb+srv://chatmemory-test.invalid/?serverSelectionTimeoutMS=200",
}


def test_every_documented_scheme_is_tested_and_has_namespace_options() -> None:
    assert set(REACHABLE) | set(UNREACHABLE) == set(STORE_SCHEMES)
    for scheme in STORE_SCHEMES:
        assert store_kind(f"{scheme}://x") in NAMESPACE_OPTIONS, scheme


@pytest.fixture(params=[pytest.param(s, id=s, marks=getattr(pytest.mark, m)) for s, m in REACHABLE.items()])
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Place]:
    made = _place(request.param, tmp_path)
    try:
        yield made
    finally:
        for cleanup in made.cleanups:
            cleanup()


def _export_file(tmp_path: Path) -> Path:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(encode_line(ExportedMemory(i, m, None)) + b"\n" for i, m in WINDOWS.items()))
    return path


def test_every_command_takes_the_scheme(place: Place, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url, options = place.url, place.options

    def run(*argv: str, expect: int = 0) -> Result:
        result = run_main(list(argv), capsys)
        assert result.status == expect, (argv, result.err)
        return result

    if place.kind == "sql":
        run("migrate", url, *options)
        run("migrate", url, *place.second)
    else:
        assert "migrations are for SQL databases" in run("migrate", url, expect=2).err
    assert "2 created" in run("import", url, str(_export_file(tmp_path)), *options).err
    if not place.persistent:  # memory://: every command opens an empty store of its own
        assert orjson.loads(run("ls", url, "--json").out) == []
        assert orjson.loads(run("stats", url, "--json").out)["memories"] == 0
        run("show", url, "a", expect=1)
        run("export", url, "-o", str(tmp_path / "out.jsonl"))
        run("copy", url, url)
        run("history", url, "a")
        run("trim-history", url, "--older-than", "30d", "--yes")
        run("purge-expired", url)
        assert "1 did not exist" in run("delete", url, "a", "--yes").err
        run("demo", "--store", url, "--memory-id", "demo-x")
        return
    assert sorted(row["id"] for row in orjson.loads(run("ls", url, "--json", *options).out)) == ["a", "b"]
    assert orjson.loads(run("stats", url, "--json", *options).out)["memories"] == 2
    shown = run("show", url, "a", "--format", "native", *options).out
    assert native.loads(shown.strip()) == WINDOWS["a"]
    out = tmp_path / "out.jsonl"
    run("export", url, "-o", str(out), *options)
    assert sorted(orjson.loads(line)["id"] for line in out.read_bytes().splitlines()) == ["a", "b"]
    sides = [
        f"--{side}-{part[2:]}" if part.startswith("--") else part
        for side, given in (("src", options), ("dst", place.second))
        for part in given
    ]
    assert "2 created" in run("copy", url, url, *sides).err
    assert sorted(row["id"] for row in orjson.loads(run("ls", url, "--json", *place.second).out)) == ["a", "b"]
    run("history", url, "a", *options)
    run("trim-history", url, "--older-than", "30d", "--yes", *options)
    run("purge-expired", url, *options)
    assert "1 deleted" in run("delete", url, "a", "--yes", *options).err
    assert [row["id"] for row in orjson.loads(run("ls", url, "--json", *options).out)] == ["b"]
    if place.demo:
        memory_id = f"demo-{uuid.uuid4().hex}"
        try:
            assert "Turn" in run("demo", "--store", url, "--memory-id", memory_id).out
        finally:
            store = open_store(url)
            try:
                store.delete_messages(memory_id)
            finally:
                getattr(store, "close", lambda: None)()


COMMANDS: list[list[str]] = [
    ["ls", "{url}"],
    ["stats", "{url}"],
    ["show", "{url}", "a"],
    ["export", "{url}", "-o", "{out}"],
    ["import", "{url}", "{file}"],
    ["copy", "{url}", "memory://"],
    ["copy", "memory://", "{url}", "--ids", "a"],
    ["delete", "{url}", "a", "--yes"],
    ["purge-expired", "{url}"],
    ["history", "{url}", "a"],
    ["trim-history", "{url}", "--older-than", "30d", "--yes"],
    ["migrate", "{url}"],
    ["demo", "--store", "{url}"],
]


@pytest.mark.parametrize("scheme", sorted(UNREACHABLE))
@pytest.mark.parametrize("command", COMMANDS, ids=lambda argv: "-".join(argv[:2]).replace("{url}", "src"))
def test_every_command_gets_a_scheme_no_server_speaks_as_far_as_connecting(
    scheme: str, command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = UNREACHABLE[scheme]
    values = {"url": url, "out": str(tmp_path / "out.jsonl"), "file": str(_export_file(tmp_path))}
    argv = [part.format(**values) for part in command]
    result = run_main(argv, capsys)
    name = argv[0]
    if name == "migrate":
        assert result.status == 2
        assert "migrations are for SQL databases" in result.err
        return
    if name == "purge-expired" and result.status == 0:  # a store that expires by itself is not asked
        assert "nothing to purge" in result.err
        return
    # demo: 2 when the store cannot be opened, 1 when it fails on first use; the others 1.
    assert result.status in ((1, 2) if name == "demo" else (1,)), result.err
    lines = result.err.strip().splitlines()
    assert lines, argv
    assert all(line.startswith(f"chatmemory {name}") for line in lines), result.err
    # A store that connects only when first used is never used by a copy out of an empty memory://.
    said = ("connect", "dns", "refused", "timeout", "no memory 'a' in the source")
    assert any(words in result.err.lower() for words in said), result.err
