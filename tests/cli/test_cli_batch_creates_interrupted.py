"""An import stopped inside a SQL or MongoDB batch create, run again, ends with every memory as exported.

The batch create is stopped before each statement (SQL) or command (MongoDB) it sends, by Ctrl-C or by
a lost connection, and once after its last one went through; the import run again ends with every
memory's messages and expiry as exported, and a third run finds them all unchanged.
"""

from __future__ import annotations

import contextlib
import datetime
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chatmemory import AiMessage, SystemMessage, UserMessage
from chatmemory.stored_memories import SupportsBatchCreates
from chatmemory.transfer import EXPIRY_TOLERANCE, ExportedMemory, encode_line

NOW = datetime.datetime.now(datetime.timezone.utc)


def exported() -> list[ExportedMemory]:
    return [
        ExportedMemory(
            f"user-{n:02d}",
            [SystemMessage("s"), UserMessage(f"question {n}"), AiMessage(f"answer {n}")],
            NOW + datetime.timedelta(hours=1) if n % 2 else None,
        )
        for n in range(9)
    ]


class Stop:
    """Stops the ``number``-th send of a batch create (``after``: once it went through)."""

    def __init__(self, number: int, interruption: str, *, after: bool = False) -> None:
        self.number = number
        self.interruption = interruption
        self.after = after
        self.inside = False
        self.sent = 0

    def error(self) -> BaseException:
        if self.interruption == "ctrl-c":
            return KeyboardInterrupt()
        return self.lost()

    def lost(self) -> BaseException:  # overridden per backend
        raise NotImplementedError

    def __call__(self, send: Any, *arguments: Any, **options: Any) -> Any:
        if not self.inside:
            return send(*arguments, **options)
        self.sent += 1
        if self.sent == self.number and not self.after:
            raise self.error()
        reply = send(*arguments, **options)
        if self.sent == self.number:
            raise self.error()
        return reply


@contextlib.contextmanager
def stopping(store: Any, stop: Stop, monkeypatch: pytest.MonkeyPatch, backend: str) -> Iterator[None]:
    """Route the store's sends through ``stop``, counting only those of ``create_batch``."""
    if backend == "mongodb":
        from pymongo.collection import Collection
        from pymongo.database import Database
        from pymongo.errors import AutoReconnect

        stop.lost = lambda: AutoReconnect("lost (injected)")  # type: ignore[method-assign]
        targets = [(Collection, name) for name in ("insert_many", "find", "find_one", "update_many")]
        targets.append((Database, "command"))
    else:
        from sqlalchemy.exc import OperationalError

        from chatmemory.stores.sql.executor import Session

        stop.lost = lambda: OperationalError("INSERT", {}, Exception("lost (injected)"))  # type: ignore[method-assign]
        targets = [(Session, "send")]
    for owner, name in targets:
        original = getattr(owner, name)

        def routed(*arguments: Any, _original: Any = original, **options: Any) -> Any:
            return stop(_original, *arguments, **options)

        monkeypatch.setattr(owner, name, routed)
    create = store.create_batch

    def create_batch(memories: Any) -> Any:
        stop.inside = True
        try:
            return create(memories)
        finally:
            stop.inside = False

    store.create_batch = create_batch
    try:
        yield
    finally:
        del store.create_batch
        monkeypatch.undo()


@pytest.mark.parametrize("interruption", ["ctrl-c", "lost-connection"])
def test_an_import_stopped_inside_a_batch_create_and_run_again_ends_as_exported(
    stores, run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, interruption: str
) -> None:
    name = stores.backend.name
    if name not in ("sqlite", "postgres", "mysql", "mongodb"):
        pytest.skip("the statements of a SQL or MongoDB batch create")
    memories = exported()
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(encode_line(memory) + b"\n" for memory in memories))
    cases = [(number, after) for number in range(1, 12) for after in (False, True)]
    stopped = 0
    for number, after in cases:
        url = stores.url(f"target-{number}-{int(after)}")
        store = stores[url]
        assert isinstance(store, SupportsBatchCreates)
        stop = Stop(number, interruption, after=after)
        with stopping(store, stop, monkeypatch, name):
            first = run("import", url, str(path), "-q")
        if stop.sent < number:  # the batch create sent fewer: nothing was stopped
            assert first.status == 0, first.err
            break
        stopped += 1
        again = run("import", url, str(path))
        assert again.status == 0, (number, after, again.err)
        for memory in memories:
            assert store.get_messages(memory.memory_id) == memory.messages, (number, after, memory.memory_id)
            times = store.memory_times(memory.memory_id)
            assert times is not None
            if memory.expires_at is None:
                assert times.expires_at is None, (number, after, memory.memory_id)
            else:
                assert times.expires_at is not None, (number, after, memory.memory_id)
                assert abs(times.expires_at - memory.expires_at) < EXPIRY_TOLERANCE
        settled = run("import", url, str(path))
        assert f"{len(memories)} unchanged" in settled.err, (number, after, settled.err)
    # Each send stopped before and after: BEGIN, the reads, the clock, the inserts, COMMIT (SQL); the
    # server's clock (hello) and the insert_many (MongoDB).
    assert stopped >= (4 if name == "mongodb" else 12), stopped
