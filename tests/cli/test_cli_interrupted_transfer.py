"""An ``import`` or ``copy`` interrupted between any two of its store calls, then run again, ends as exported.

Writing a memory and setting its expiry are separate store calls: a run stopped between them (Ctrl-C, a
store error) once left the memory without its expiry, and the re-run called it ``unchanged``. Here the
destination store is the real one of the backend; the test only counts its calls and raises before the
n-th, for every n until a run gets through, and checks after each re-run that every memory has the
messages and the expiry it was exported with.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatmemory import AiMessage, ChatMemoryStore, StoreError, SystemMessage, UserMessage
from chatmemory.memory_times import SupportsExpiryAt, SupportsMemoryTimes
from chatmemory.stored_memories import SupportsBatchCreates
from chatmemory.transfer import EXPIRY_TOLERANCE, ExportedMemory, StoreSource, encode_line

NOW = datetime.datetime.now(datetime.timezone.utc)
MEMORIES = [
    ExportedMemory("in-an-hour", [SystemMessage("s"), UserMessage("one")], NOW + datetime.timedelta(hours=1)),
    ExportedMemory("never", [UserMessage("two"), AiMessage("2")], None),
    ExportedMemory("tomorrow", [UserMessage("three")], NOW + datetime.timedelta(days=1)),
]
STORE_CALLS = (
    "save",
    "load",
    "get_messages",
    "update_messages",
    "expire_at",
    "memory_times",
    "modify",
    "read_batch",
    "create_batch",
)


class Interrupted(KeyboardInterrupt):
    """The operator's Ctrl-C, at a chosen store call."""


@contextlib.contextmanager
def interrupt_before_call(store: ChatMemoryStore, number: int, error: BaseException) -> Iterator[list[str]]:
    """Raise ``error`` instead of the store's ``number``-th call (1-based); yields the calls made."""
    calls: list[str] = []

    def counted(name: str, method: Any) -> Any:
        def call(*arguments: Any, **options: Any) -> Any:
            calls.append(name)
            if len(calls) == number:
                raise error
            return method(*arguments, **options)

        return call

    patched = [name for name in STORE_CALLS if callable(getattr(store, name, None))]
    for name in patched:
        setattr(store, name, counted(name, getattr(store, name)))
    try:
        yield calls
    finally:
        for name in patched:
            delattr(store, name)


def needs_expiry(store: ChatMemoryStore) -> None:
    if not (isinstance(store, SupportsExpiryAt) and isinstance(store, SupportsMemoryTimes)):
        pytest.skip(f"{type(store).__name__} cannot set and tell one memory's expiry")


def assert_as_exported(store: ChatMemoryStore, memories: list[ExportedMemory], where: str) -> None:
    for memory in memories:
        assert store.get_messages(memory.memory_id) == memory.messages, (where, memory.memory_id)
        assert isinstance(store, SupportsMemoryTimes)
        times = store.memory_times(memory.memory_id)
        assert times is not None, (where, memory.memory_id)
        if memory.expires_at is None:
            assert times.expires_at is None, (where, memory.memory_id, times)
        else:
            assert isinstance(memory.expires_at, datetime.datetime)
            assert times.expires_at is not None, (where, memory.memory_id, "lost its expiry")
            assert abs(times.expires_at - memory.expires_at) < EXPIRY_TOLERANCE, (where, memory.memory_id, times)


INTERRUPTIONS = {
    "ctrl-c": lambda: Interrupted(),
    "store-error": lambda: StoreError("writing the memory", detail="the connection was lost (injected)"),
}


@pytest.mark.parametrize("interruption", sorted(INTERRUPTIONS))
def test_an_import_interrupted_anywhere_and_run_again_ends_as_exported(
    stores, run, tmp_path: Path, interruption: str
) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(encode_line(memory) + b"\n" for memory in MEMORIES))
    needs_expiry(stores[stores.url("probe")])
    number = 1
    while True:
        url = stores.url(f"target-{number}")
        target = stores[url]
        with interrupt_before_call(target, number, INTERRUPTIONS[interruption]()) as calls:
            first = run("import", url, str(path), "-q")
        where = f"interrupted before store call {number} ({calls[-1] if len(calls) >= number else 'none'})"
        again = run("import", url, str(path))
        assert again.status == 0, (where, again.err)
        assert_as_exported(target, MEMORIES, where)
        settled = run("import", url, str(path))
        assert f"{len(MEMORIES)} unchanged" in settled.err, (where, settled.err)
        if len(calls) < number:  # the run made fewer calls: it went through without an interruption
            assert first.status == 0, first.err
            break
        # A failed batch read or create only costs its shortcut: each memory then goes its own way.
        recovered = calls[number - 1] in ("read_batch", "create_batch") and interruption == "store-error"
        assert first.status == (0 if recovered else 1), (where, first.err)
        number += 1
    # Every memory's write and expiry were steps of their own (inside a batch: test_cli_batched_reads.py).
    if not isinstance(target, SupportsBatchCreates):
        assert number > 2 * len(MEMORIES)


def test_a_copy_interrupted_anywhere_and_run_again_ends_as_exported(stores, run) -> None:
    source_url = stores.url("source")
    source = stores[source_url]
    needs_expiry(source)
    for memory in MEMORIES:
        source.update_messages(memory.memory_id, memory.messages)
        source.expire_at(memory.memory_id, memory.expires_at)  # type: ignore[attr-defined, arg-type]
    exported = [StoreSource(source).read(memory.memory_id) for memory in MEMORIES]
    assert all(memory is not None for memory in exported)
    number = 1
    while True:
        url = stores.url(f"target-{number}")
        target = stores[url]
        with interrupt_before_call(target, number, Interrupted()) as calls:
            first = run("copy", source_url, url, "-q")
        where = f"interrupted before store call {number}"
        again = run("copy", source_url, url)
        assert again.status == 0, (where, again.err)
        assert_as_exported(target, exported, where)  # type: ignore[arg-type]
        if len(calls) < number:
            assert first.status == 0, first.err
            break
        assert first.status == 1, (where, first.err)
        number += 1


def test_an_expired_export_expires_the_copy_an_earlier_run_left(stores, run, tmp_path: Path) -> None:
    url = stores.url("target")
    target = stores[url]
    needs_expiry(target)
    memory = MEMORIES[0]
    target.update_messages(memory.memory_id, memory.messages)  # left by a run stopped before its expiry
    target.update_messages("other", [UserMessage("not the export's")])
    gone = ExportedMemory(memory.memory_id, memory.messages, NOW - datetime.timedelta(minutes=1))
    other = ExportedMemory("other", [UserMessage("exported")], NOW - datetime.timedelta(minutes=1))
    path = tmp_path / "in.jsonl"
    path.write_bytes(encode_line(gone) + b"\n" + encode_line(other) + b"\n")
    result = run("import", url, str(path))
    assert result.status == 0, result.err
    assert "2 expired" in result.err
    assert target.get_messages(memory.memory_id) == []
    assert target.get_messages("other") == [UserMessage("not the export's")]
