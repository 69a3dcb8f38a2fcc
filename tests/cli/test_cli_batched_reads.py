"""``ls``, ``stats`` and ``import`` read (and create) in batches, not one memory per round trip.

On every backend with batch reads: the store's one-memory reads and writes are counted while the command
runs. A re-import of memories that are there already makes one batch read per batch and nothing else;
one whose expiry went missing adds only that expiry's write; ``ls`` and ``stats`` make batch reads only.
The figures they print are those of the one-memory reads (tests/cli/test_cli_inspect.py checks them).
Where the store creates batches, an import creates the absent memories one batch at a time with their
expiries, and one stopped between the pipelines of a batch ends as exported when run again.
"""

from __future__ import annotations

import contextlib
import datetime
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from chatmemory import AiMessage, ChatMemoryStore, SystemMessage, UserMessage
from chatmemory.cli.transfer_commands import WRITE_BATCH
from chatmemory.inspection import SUMMARY_BATCH
from chatmemory.stored_memories import SupportsBatchCreates, SupportsBatchReads
from chatmemory.transfer import EXPIRY_TOLERANCE, ExportedMemory, encode_line

NOW = datetime.datetime.now(datetime.timezone.utc)
COUNT = WRITE_BATCH + 7  # two batches
READS = (
    "load",
    "get_messages",
    "read_raw",
    "memory_times",
    "save",
    "update_messages",
    "expire_at",
    "read_batch",
    "create_batch",
)


@contextlib.contextmanager
def counted_calls(store: ChatMemoryStore) -> Iterator[Counter[str]]:
    """Count the store's reads and writes while the block runs."""
    calls: Counter[str] = Counter()

    def counting(name: str, method: Any) -> Any:
        def call(*arguments: Any, **options: Any) -> Any:
            calls[name] += 1
            return method(*arguments, **options)

        return call

    patched = [name for name in READS if callable(getattr(store, name, None))]
    for name in patched:
        setattr(store, name, counting(name, getattr(store, name)))
    try:
        yield calls
    finally:
        for name in patched:
            delattr(store, name)


def memories() -> list[ExportedMemory]:
    return [
        ExportedMemory(
            f"user-{n:04d}",
            [SystemMessage("s"), UserMessage(f"question {n}"), AiMessage(f"answer {n}")],
            NOW + datetime.timedelta(hours=1) if n % 2 else None,
        )
        for n in range(COUNT)
    ]


def batched(stores: Any, label: str) -> tuple[str, Any]:
    url = stores.url(label)
    store = stores[url]
    if not isinstance(store, SupportsBatchReads):
        pytest.skip(f"{type(store).__name__} has no batch reads")
    return url, store


def test_a_re_import_reads_in_batches_and_writes_only_what_differs(stores, run, tmp_path: Path) -> None:
    url, store = batched(stores, "target")
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(encode_line(memory) + b"\n" for memory in memories()))
    first = run("import", url, str(path))
    assert first.status == 0 and f"{COUNT} created" in first.err, first.err
    with counted_calls(store) as calls:
        again = run("import", url, str(path))
    assert again.status == 0 and f"{COUNT} unchanged" in again.err, again.err
    assert calls == Counter(read_batch=2)
    store.expire_at("user-0001", None)  # as a run stopped before setting it left it
    with counted_calls(store) as calls:
        repaired = run("import", url, str(path))
    assert repaired.status == 0, repaired.err
    assert f"{COUNT - 1} unchanged, 1 expiry set" in repaired.err, repaired.err
    assert calls == Counter(read_batch=2, expire_at=1)
    times = store.memory_times("user-0001")
    assert times is not None and times.expires_at is not None


def test_a_batch_read_that_fails_leaves_each_write_to_read_its_own(stores, run, tmp_path: Path) -> None:
    url, store = batched(stores, "target")
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(encode_line(memory) + b"\n" for memory in memories()[:5]))
    assert run("import", url, str(path)).status == 0

    def failing(memory_ids: Any) -> Any:
        from chatmemory import StoreError

        raise StoreError("reading memories", detail="the connection was lost (injected)")

    store.read_batch = failing
    try:
        again = run("import", url, str(path))
    finally:
        del store.read_batch
    assert again.status == 0 and "5 unchanged" in again.err, again.err


@pytest.mark.parametrize("command", ["ls", "stats"])
def test_ls_and_stats_read_in_batches(stores, run, command: str) -> None:
    url, store = batched(stores, "listed")
    for memory in memories()[: SUMMARY_BATCH + 3]:
        store.update_messages(memory.memory_id, memory.messages)
    with counted_calls(store) as calls:
        result = run(command, url, "--json")
    assert result.status == 0, result.err
    assert calls == Counter(read_batch=2)
    shown = orjson.loads(result.out)
    if command == "ls":
        assert len(shown) == SUMMARY_BATCH + 3 and {row["messages"] for row in shown} == {3}
    else:
        assert shown["memories"] == SUMMARY_BATCH + 3 and shown["messages"] == 3 * (SUMMARY_BATCH + 3)


def test_an_import_creates_in_batches_with_their_expiries(stores, run, tmp_path: Path) -> None:
    url, store = batched(stores, "target")
    if not isinstance(store, SupportsBatchCreates):
        pytest.skip(f"{type(store).__name__} has no batch creates")
    exported = memories()
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(encode_line(memory) + b"\n" for memory in exported))
    with counted_calls(store) as calls:
        first = run("import", url, str(path))
    assert first.status == 0 and f"{COUNT} created" in first.err, first.err
    assert calls == Counter(read_batch=2, create_batch=2)
    for memory in exported:
        assert store.get_messages(memory.memory_id) == memory.messages
        times = store.memory_times(memory.memory_id)
        assert times is not None
        if memory.expires_at is None:
            assert times.expires_at is None
        else:
            assert times.expires_at is not None and abs(times.expires_at - memory.expires_at) < EXPIRY_TOLERANCE


@pytest.mark.parametrize("interruption", ["ctrl-c", "store-error"])
def test_an_import_stopped_between_the_pipelines_of_a_batch_and_run_again_ends_as_exported(
    stores, run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, interruption: str
) -> None:
    """Stopped before each pipeline a Redis batch sends (the reads, the creates, the expiries)."""
    if stores.backend.name not in ("redis", "redis_cluster"):
        pytest.skip("the pipelines of a batch are the Redis store's")
    from redis.exceptions import ConnectionError as RedisConnectionError

    import chatmemory.stores.redis.executor as redis_store

    exported = memories()[:9]
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(encode_line(memory) + b"\n" for memory in exported))
    sent = redis_store.send_pipelined
    number = 1
    while True:
        url, store = batched(stores, f"target-{number}")
        pipelines: list[int] = []

        def stopping(client: Any, commands: Any, number: int = number, pipelines: list[int] = pipelines) -> Any:
            pipelines.append(len(commands))
            if len(pipelines) == number:
                raise KeyboardInterrupt if interruption == "ctrl-c" else RedisConnectionError("lost (injected)")
            return sent(client, commands)

        monkeypatch.setattr(redis_store, "send_pipelined", stopping)
        first = run("import", url, str(path), "-q")
        monkeypatch.setattr(redis_store, "send_pipelined", sent)
        again = run("import", url, str(path))
        assert again.status == 0, (number, again.err)
        for memory in exported:
            assert store.get_messages(memory.memory_id) == memory.messages, (number, memory.memory_id)
            times = store.memory_times(memory.memory_id)
            assert times is not None
            assert (times.expires_at is None) == (memory.expires_at is None), (number, memory.memory_id, times)
        settled = run("import", url, str(path))
        assert f"{len(exported)} unchanged" in settled.err, (number, settled.err)
        if len(pipelines) < number:
            assert first.status == 0, first.err
            break
        assert first.status == (1 if interruption == "ctrl-c" else 0), (number, first.err)
        number += 1
    assert number == 4  # the reads, the creates, the expiries, then a run that went through


def test_export_and_copy_read_their_source_in_batches(stores, run, tmp_path: Path) -> None:
    source_url, source = batched(stores, "source")
    target_url = stores.url("target")
    exported = memories()
    for memory in exported:
        source.update_messages(memory.memory_id, memory.messages)
        source.expire_at(memory.memory_id, memory.expires_at)
    stores.backend.write_raw(source, "broken", [b"{not json"])
    path = tmp_path / "out.jsonl"
    with counted_calls(source) as calls:
        result = run("export", source_url, "-o", str(path))
    assert result.status == 1 and f"{COUNT} exported" in result.err, result.err
    assert "'broken' does not decode at the source and was skipped" in result.err
    assert calls == Counter(read_batch=2)
    lines = {line["id"]: line for line in map(orjson.loads, path.read_bytes().splitlines())}
    assert set(lines) == {memory.memory_id for memory in exported}
    assert lines["user-0000"]["expires_at"] is None and lines["user-0001"]["expires_at"] is not None
    with counted_calls(source) as calls:
        copied = run("copy", source_url, target_url)
    assert copied.status == 1 and f"{COUNT} created" in copied.err, copied.err
    assert calls == Counter(read_batch=2)
    target = stores[target_url]
    assert target.get_messages("user-0003") == exported[3].messages
