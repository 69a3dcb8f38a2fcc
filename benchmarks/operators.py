"""The operators' slow paths: the CLI's ``ls``, ``stats``, ``import`` and re-import, and a store's open from a URL.

    python benchmarks/operators.py URL [URL ...] [--memories 3000] [--runs 2] [--opens 20]

Per store URL, ``--memories`` memories of the realistic conversation of ``workload.py`` (windows of 4 to 40
messages, half of them with an expiry a day ahead) are written to an export file, then each command is run
in-process through ``chatmemory.cli.main`` (as an operator's shell runs it, ``-q``, output thrown away)
beside a raw-driver loop doing the same work, on the same server, in the same run:

* ``import`` into an empty namespace beside reading the file (each line decoded with the codec ``import``
  uses) and bulk writes (Redis: pipelined ``RPUSH`` + ``PEXPIREAT``; SQL: ``executemany`` per batch of
  memories in one transaction; MongoDB: ``insert_many``);
* ``re-import`` of the same file (every memory ``unchanged``) beside reading the file and one read per
  batch of memories compared with it, messages and expiry (Redis: pipelined ``LRANGE`` + ``PTTL``; SQL:
  one ``SELECT ... IN`` per batch; MongoDB: one ``find`` with ``$in`` per batch);
* ``ls`` and ``stats`` beside listing the ids (Redis: ``SCAN``; SQL and MongoDB: one query) and reading
  every memory, one read per batch, decoding each record with the same codec the store uses (so the ratio
  is round trips and the store's own Python, not the codec);
* ``open``: a store built from the URL, one read of one memory, closed, beside the driver's own connect,
  the same read on its layout (SQL: the head row and the message rows of one id, in the floor's tables;
  the first statement on a new SQLite connection reads the file's schema and opens its WAL), and close
  (a CLI command or a short-lived worker pays this on every start). SQL also prints ``open: SQLAlchemy
  alone``: the same connect, read and close through a SQLAlchemy engine made for it, with no chatmemory
  code (``create_engine``, its first connect, ``dispose``), beside the same raw side: the floor under
  any store that builds an engine from a URL.

Sides alternate from run to run (and open by open), so drift on a shared machine weighs on both alike;
garbage is collected before each side, and the benchmark's own data is kept out of full collections.
Printed: the median seconds of each side and their ratio. Each side writes into a namespace of its own
(a key prefix, table prefix or collection) and removes it afterwards. Figures only, no assertions.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import gc
import io
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]
sys.path.append(_HERE)

from workload import conversation  # noqa: E402

from chatmemory import ChatMessage, open_store  # noqa: E402
from chatmemory.cli import main as cli_main  # noqa: E402
from chatmemory.serialization.native import dumps_message, loads_message  # noqa: E402
from chatmemory.transfer import ExportedMemory, decode_line, encode_line  # noqa: E402

BATCH = 500
"""Memories per batch of the raw loops."""

UTC = datetime.timezone.utc


def memories(count: int) -> list[ExportedMemory]:
    """``count`` memories: windows of 4 to 40 messages; even ones expire a day from now, odd ones never."""
    turns = conversation(count * 8, seed=11)
    tomorrow = datetime.datetime.now(UTC) + datetime.timedelta(days=1)
    made: list[ExportedMemory] = []
    for index in range(count):
        messages: list[ChatMessage] = []
        for _ in range(1 + index % 8):
            messages.extend(next(turns))
        made.append(ExportedMemory(f"user-{index:06d}", messages, tomorrow if index % 2 == 0 else None))
    return made


def kind_of(url: str) -> str:
    scheme = url.split(":", 1)[0].lower()
    if scheme.startswith("redis"):
        return "redis"
    if scheme.startswith("mongodb"):
        return "mongodb"
    return "sql"


def summarize_records(memory_id: str, records: Sequence[bytes | str]) -> tuple[int, int]:
    """What ``ls`` shows of one memory, from its records: message count and bytes (each record decoded)."""
    for record in records:
        loads_message(record, memory_id=memory_id)
    return len(records), sum(map(len, records))


# ------------------------------------------------------------------------------------------- the floors


class RedisFloor:
    """A list of records per memory under a prefix, with the key's own expiry."""

    def __init__(self, url: str) -> None:
        from redis import Redis

        self.url = url
        self.client = Redis.from_url(url)
        self.prefix = f"floor:{uuid.uuid4().hex[:8]}:".encode()

    @staticmethod
    def connect_and_read(url: str) -> None:
        from redis import Redis

        client = Redis.from_url(url)
        pipeline = client.pipeline(transaction=False)
        pipeline.lrange(b"floor:open-probe", 0, -1)
        pipeline.pttl(b"floor:open-probe")
        pipeline.execute()
        client.close()

    def write(self, batch: Sequence[ExportedMemory]) -> None:
        pipeline = self.client.pipeline(transaction=False)
        for memory in batch:
            key = self.prefix + memory.memory_id.encode()
            pipeline.rpush(key, *map(dumps_message, memory.messages))
            if isinstance(memory.expires_at, datetime.datetime):
                pipeline.pexpireat(key, memory.expires_at)
        pipeline.execute()

    def read(self, ids: Sequence[str]) -> list[tuple[str, list[bytes], datetime.datetime | None]]:
        pipeline = self.client.pipeline(transaction=False)
        for memory_id in ids:
            key = self.prefix + memory_id.encode()
            pipeline.lrange(key, 0, -1)
            pipeline.pttl(key)
        replies = pipeline.execute()
        now = datetime.datetime.now(UTC)
        return [
            (memory_id, records, now + datetime.timedelta(milliseconds=pttl) if pttl >= 0 else None)
            for memory_id, records, pttl in zip(ids, replies[::2], replies[1::2], strict=True)
        ]

    def ids(self) -> list[str]:
        keys = self.client.scan_iter(match=self.prefix + b"*", count=1000)
        return sorted(key[len(self.prefix) :].decode() for key in keys)

    def drop(self) -> None:
        keys = list(self.client.scan_iter(match=self.prefix + b"*", count=1000))
        for start in range(0, len(keys), 1000):
            self.client.delete(*keys[start : start + 1000])
        self.client.close()


class SQLFloor:
    """A head row (id, expiry) and a row per record, by the DB-API driver the store uses."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.dialect = url.split(":", 1)[0].split("+", 1)[0].lower()
        self.prefix = f"floor_{uuid.uuid4().hex[:8]}_"
        self.connection: Any = self.connect(url)
        self.mark = "?" if self.dialect == "sqlite" else "%s"
        blob = {"postgresql": "BYTEA", "mysql": "LONGBLOB", "mariadb": "LONGBLOB"}.get(self.dialect, "BLOB")
        when = "TIMESTAMP(6) NULL" if self.dialect in ("mysql", "mariadb") else "TIMESTAMP NULL"
        with self.cursor() as cursor:
            cursor.execute(f"CREATE TABLE {self.prefix}heads (memory_id VARCHAR(255) PRIMARY KEY, expires_at {when})")
            cursor.execute(
                f"CREATE TABLE {self.prefix}rows (memory_id VARCHAR(255), seq INTEGER, data {blob}, "
                "PRIMARY KEY (memory_id, seq))"
            )
        self.commit()

    @staticmethod
    def connect(url: str) -> Any:
        from sqlalchemy.engine import make_url

        parsed = make_url(url)
        dialect = parsed.get_backend_name()
        if dialect == "sqlite":
            import sqlite3

            return sqlite3.connect(parsed.database or ":memory:")
        if dialect == "postgresql":
            import psycopg

            return psycopg.connect(
                host=parsed.host,
                port=parsed.port,
                user=parsed.username,
                password=parsed.password,
                dbname=parsed.database,
            )
        import pymysql

        return pymysql.connect(
            host=parsed.host or "localhost",
            port=parsed.port or 3306,
            user=parsed.username,
            password=parsed.password or "",
            database=parsed.database,
        )

    def connect_and_read(self, url: str) -> None:
        """Connect, read one memory from this floor's tables (its head row, then its rows), close."""
        self.read_probe(self.connect(url))

    def engine_connect_and_read(self, url: str) -> None:
        """:meth:`connect_and_read` through a SQLAlchemy engine made for it (no chatmemory code): its floor."""
        from sqlalchemy import create_engine

        engine = create_engine(url)
        self.read_probe(engine.raw_connection())
        engine.dispose()

    def read_probe(self, connection: Any) -> None:
        """On a new DBAPI ``connection``: the head row and the rows of one memory, then close it."""
        cursor = connection.cursor()
        mark = self.mark
        cursor.execute(f"SELECT expires_at FROM {self.prefix}heads WHERE memory_id = {mark}", ("open-probe",))
        cursor.fetchall()
        cursor.execute(f"SELECT data FROM {self.prefix}rows WHERE memory_id = {mark} ORDER BY seq", ("open-probe",))
        cursor.fetchall()
        cursor.close()
        connection.commit()
        connection.close()

    @contextlib.contextmanager
    def cursor(self) -> Iterator[Any]:
        cursor = self.connection.cursor()
        try:
            yield cursor
        finally:
            cursor.close()

    def commit(self) -> None:
        self.connection.commit()

    def _when(self, when: datetime.datetime | None) -> Any:
        if when is None or self.dialect == "postgresql":
            return when
        return when.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ")

    def write(self, batch: Sequence[ExportedMemory]) -> None:
        mark = self.mark
        heads = [
            (m.memory_id, self._when(m.expires_at if isinstance(m.expires_at, datetime.datetime) else None))
            for m in batch
        ]
        rows = [(m.memory_id, seq, dumps_message(message)) for m in batch for seq, message in enumerate(m.messages)]
        with self.cursor() as cursor:
            cursor.executemany(f"INSERT INTO {self.prefix}heads VALUES ({mark}, {mark})", heads)
            cursor.executemany(f"INSERT INTO {self.prefix}rows VALUES ({mark}, {mark}, {mark})", rows)
        self.commit()

    def read(self, ids: Sequence[str]) -> list[tuple[str, list[bytes], datetime.datetime | None]]:
        marks = ", ".join([self.mark] * len(ids))
        records: dict[str, list[bytes]] = {memory_id: [] for memory_id in ids}
        with self.cursor() as cursor:
            cursor.execute(f"SELECT memory_id, expires_at FROM {self.prefix}heads WHERE memory_id IN ({marks})", ids)
            expiries = dict(cursor.fetchall())
            cursor.execute(
                f"SELECT memory_id, data FROM {self.prefix}rows WHERE memory_id IN ({marks}) ORDER BY memory_id, seq",
                ids,
            )
            for memory_id, data in cursor.fetchall():
                records[memory_id].append(bytes(data))
        self.commit()
        return [(memory_id, records[memory_id], _aware(expiries.get(memory_id))) for memory_id in ids]

    def ids(self) -> list[str]:
        with self.cursor() as cursor:
            cursor.execute(f"SELECT memory_id FROM {self.prefix}heads ORDER BY memory_id")
            found = [row[0] for row in cursor.fetchall()]
        self.commit()
        return found

    def drop(self) -> None:
        with self.cursor() as cursor:
            cursor.execute(f"DROP TABLE {self.prefix}rows")
            cursor.execute(f"DROP TABLE {self.prefix}heads")
        self.commit()
        self.connection.close()


def _aware(value: Any) -> datetime.datetime | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.datetime.fromisoformat(value)
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class MongoFloor:
    """A document per memory: its records and its expiry."""

    def __init__(self, url: str) -> None:
        from pymongo import MongoClient

        self.client: Any = MongoClient(url, tz_aware=True)
        self.collection = self.client["chatmemory_bench"][f"floor_{uuid.uuid4().hex[:8]}"]

    @staticmethod
    def connect_and_read(url: str) -> None:
        from pymongo import MongoClient

        client: Any = MongoClient(url, tz_aware=True)
        client["chatmemory_bench"]["floor_open_probe"].find_one({"_id": "x"})
        client.close()

    def write(self, batch: Sequence[ExportedMemory]) -> None:
        self.collection.insert_many(
            [
                {
                    "_id": m.memory_id,
                    "records": [dumps_message(message) for message in m.messages],
                    "expires_at": m.expires_at if isinstance(m.expires_at, datetime.datetime) else None,
                }
                for m in batch
            ],
            ordered=False,
        )

    def read(self, ids: Sequence[str]) -> list[tuple[str, list[bytes], datetime.datetime | None]]:
        found = {document["_id"]: document for document in self.collection.find({"_id": {"$in": list(ids)}})}
        return [(memory_id, found[memory_id]["records"], found[memory_id]["expires_at"]) for memory_id in ids]

    def ids(self) -> list[str]:
        return sorted(document["_id"] for document in self.collection.find({}, {"_id": 1}))

    def drop(self) -> None:
        self.collection.drop()
        self.client.close()


FLOORS: dict[str, Any] = {"redis": RedisFloor, "sql": SQLFloor, "mongodb": MongoFloor}


def read_file(path: str) -> list[ExportedMemory]:
    """The export file's memories, each line decoded with the codec ``import`` uses."""
    with open(path, "rb") as stream:
        lines = stream.read().splitlines()
    decoded = [decode_line(line, number) for number, line in enumerate(lines, start=1)]
    return [memory for memory in decoded if isinstance(memory, ExportedMemory)]


def floor_import(floor: Any, path: str) -> None:
    exported = read_file(path)
    for start in range(0, len(exported), BATCH):
        floor.write(exported[start : start + BATCH])


def floor_reimport(floor: Any, path: str) -> None:
    """Read back each batch and compare messages and expiry, as a re-import decides ``unchanged``."""
    exported = read_file(path)
    for start in range(0, len(exported), BATCH):
        batch = exported[start : start + BATCH]
        for memory, (_, records, expires_at) in zip(batch, floor.read([m.memory_id for m in batch]), strict=True):
            messages = [loads_message(record, memory_id=memory.memory_id) for record in records]
            wanted = memory.expires_at if isinstance(memory.expires_at, datetime.datetime) else None
            same_expiry = (expires_at is None) == (wanted is None) and (
                wanted is None or abs(expires_at - wanted) < datetime.timedelta(seconds=1)  # type: ignore[operator]
            )
            if messages != memory.messages or not same_expiry:
                raise SystemExit(f"the floor read back {memory.memory_id!r} differently")


def floor_listing(floor: Any) -> int:
    ids = floor.ids()
    total = 0
    for start in range(0, len(ids), BATCH):
        for memory_id, records, _ in floor.read(ids[start : start + BATCH]):
            total += summarize_records(memory_id, records)[0]
    return total


# ------------------------------------------------------------------------------------------------ the CLI


def store_namespace(url: str) -> tuple[list[str], dict[str, Any]]:
    """A fresh namespace: the CLI flags and the constructor options naming it."""
    tag = uuid.uuid4().hex[:8]
    kind = kind_of(url)
    if kind == "redis":
        return ["--key-prefix", f"bench:{tag}:"], {"key_prefix": f"bench:{tag}:"}
    if kind == "mongodb":
        return ["--collection", f"bench_{tag}"], {"collection": f"bench_{tag}"}
    return ["--table-prefix", f"bench_{tag}_"], {"table_prefix": f"bench_{tag}_"}


def run_cli(arguments: list[str]) -> None:
    sink = io.StringIO()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        status = cli_main(arguments)
    if status != 0:
        raise SystemExit(f"chatmemory {' '.join(arguments)} exited {status}:\n{sink.getvalue()[-2000:]}")


def drop_store(url: str, options: dict[str, Any]) -> None:
    store: Any = open_store(url, **options)
    try:
        if hasattr(store, "drop_schema"):
            store.drop_schema()
        elif kind_of(url) == "mongodb":
            store._collection.drop()
            with contextlib.suppress(Exception):
                store._collection.database[store._collection.name + "_locks"].drop()
        else:
            for memory_id in list(store.memory_ids()):
                store.delete_messages(memory_id)
    finally:
        store.close()


def timed(action: Callable[[], object]) -> float:
    gc.collect()  # the garbage of the side before is not collected on this side's time
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def command_steps(
    url: str, path: str, flags: list[str], floor: Any
) -> list[tuple[str, Callable[[], object], Callable[[], object]]]:
    """``(what, the CLI's side, the raw loop's side)`` of each command, in the order they run."""
    return [
        ("import", lambda: run_cli(["import", url, path, "-q", *flags]), lambda: floor_import(floor, path)),
        ("re-import", lambda: run_cli(["import", url, path, "-q", *flags]), lambda: floor_reimport(floor, path)),
        ("ls", lambda: run_cli(["ls", url, "--json", "-q", *flags]), lambda: floor_listing(floor)),
        ("stats", lambda: run_cli(["stats", url, "--json", "-q", *flags]), lambda: floor_listing(floor)),
    ]


def bench_url(url: str, count: int, runs: int, opens: int) -> list[tuple[str, float, float]]:
    """``(what, store seconds, floor seconds)`` medians for one URL."""
    exported = memories(count)
    kind = kind_of(url)
    results: dict[str, tuple[list[float], list[float]]] = {
        name: ([], []) for name in ("import", "re-import", "ls", "stats", "open", "open: SQLAlchemy alone")
    }
    with tempfile.NamedTemporaryFile("wb", suffix=".jsonl", delete=False) as handle:
        for memory in exported:
            handle.write(encode_line(memory) + b"\n")
        path = handle.name
    # The benchmark's own memories stay out of the collector's full passes: a command run from a shell
    # does not carry them, and a full pass over them would land on whichever side happens to trigger it.
    gc.collect()
    gc.freeze()
    try:
        for run in range(runs):
            flags, options = store_namespace(url)
            if kind == "sql":
                schema: Any = open_store(url, **options)
                schema.create_schema()
                schema.close()
            floor = FLOORS[kind](url)
            run_cli(["ls", url, "-q", *flags])  # the command's modules imported before anything is timed
            try:
                for name, store_side, floor_side in command_steps(url, path, flags, floor):
                    store_first = run % 2 == 0
                    first, second = (store_side, floor_side) if store_first else (floor_side, store_side)
                    a, b = timed(first), timed(second)
                    results[name][0].append(a if store_first else b)
                    results[name][1].append(b if store_first else a)
                    store_time, floor_time = results[name][0][-1], results[name][1][-1]
                    print(f"  run {run + 1} {name}: store {store_time:.2f} s, raw {floor_time:.2f} s", flush=True)
            finally:
                floor.drop()
                drop_store(url, options)
        _, options = store_namespace(url)
        if kind == "sql":
            schema = open_store(url, **options)
            schema.create_schema()
            schema.close()
        opener = FLOORS[kind](url)  # the SQL floor reads its own tables, as the store reads its own
        try:
            for index in range(opens):

                def store_open() -> None:
                    store: Any = open_store(url, **options)
                    store.load("open-probe")
                    store.close()

                def floor_open() -> None:
                    opener.connect_and_read(url)

                def engine_open() -> None:
                    opener.engine_connect_and_read(url)

                sides = [("store", store_open), ("raw", floor_open)]
                if kind == "sql":
                    sides.append(("engine", engine_open))
                shift = index % len(sides)  # each side in each place in turn
                took = {name: timed(side) for name, side in sides[shift:] + sides[:shift]}
                results["open"][0].append(took["store"])
                results["open"][1].append(took["raw"])
                if kind == "sql":
                    results["open: SQLAlchemy alone"][0].append(took["engine"])
                    results["open: SQLAlchemy alone"][1].append(took["raw"])
        finally:
            opener.drop()
            drop_store(url, options)
    finally:
        os.unlink(path)
    return [
        (name, statistics.median(store), statistics.median(floor)) for name, (store, floor) in results.items() if store
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("urls", nargs="+", metavar="URL")
    parser.add_argument("--memories", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=2, help="runs of the four commands (sides alternate)")
    parser.add_argument("--opens", type=int, default=20, help="opens from the URL (sides alternate)")
    args = parser.parse_args()
    table: list[tuple[str, str, float, float]] = []
    for url in args.urls:
        name = url.split("://", 1)[0]
        print(f"{name}: {args.memories} memories, {args.runs} runs, {args.opens} opens", flush=True)
        table.extend((name, *row) for row in bench_url(url, args.memories, args.runs, args.opens))
    print(f"\n{'backend':<22}{'what':<24}{'store s':>10}{'raw s':>10}{'x':>7}")
    for name, what, store, floor in table:
        print(f"{name:<22}{what:<24}{store:10.4f}{floor:10.4f}{store / floor:7.1f}")


if __name__ == "__main__":
    main()
