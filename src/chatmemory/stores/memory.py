"""A store in this process's memory: for tests, demos and single-process services."""

from __future__ import annotations

import datetime
import itertools
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from chatmemory import telemetry
from chatmemory.core.errors import ConcurrentUpdateError, HistoryNotEnabledError, Operation
from chatmemory.core.history import (
    DEFAULT_HISTORY_PAGE,
    HistoryEntry,
    HistoryPage,
    checked_restore,
    history_query,
    trim_cutoff,
)
from chatmemory.core.memory import use_default_store
from chatmemory.core.messages import ChatMessage, checked_messages
from chatmemory.core.store import Snapshot, validate_memory_id
from chatmemory.core.window import SequenceDiff, diff_messages
from chatmemory.memory_times import MemoryTimes
from chatmemory.serialization.native import dumps_message
from chatmemory.serialization.records import RecordCodec, Resealed, codec_of, require_keyring, reseal_plan
from chatmemory.stores.base.facade import StoreLifecycle, StoreTelemetry
from chatmemory.stores.base.options import TTL, history_ttl_seconds, ttl_seconds

__all__ = ["InMemoryChatMemoryStore"]

_traced = StoreTelemetry("memory", __name__)


@dataclass(slots=True)
class _Entry:
    version: int
    messages: tuple[ChatMessage, ...] | None
    raw: tuple[bytes, ...] | None
    expires_at: float | None
    """On the store's (monotonic) clock."""
    written_at: datetime.datetime
    """On the wall clock (UTC), for :meth:`InMemoryChatMemoryStore.memory_times`."""


@dataclass(slots=True)
class _History:
    entries: list[HistoryEntry]
    expires_at: float | None
    """On the store's (monotonic) clock."""


class InMemoryChatMemoryStore(StoreLifecycle):
    """A thread-safe store in a dict; supports versioning, listing, TTL, raw records and per-memory times.

    It keeps its own tuple of the (immutable) messages, never the caller's list. Versions come from one
    counter per store, so a memory deleted and written again never repeats a version. ``close()`` forgets
    every memory; a closed store raises :class:`~chatmemory.StoreError`, like the others. Expiries are kept
    on the monotonic ``clock`` (a wall clock stepping does not expire memories); ``memory_times`` and
    ``expire_at`` translate them to and from UTC datetimes at the moment of the call.
    With ``history=True`` it keeps every message written beside the window (see
    :mod:`chatmemory.core.history`); sequence numbers come from one counter per store.
    :class:`chatmemory.stores.memory.InMemoryChatMemoryStore` and its asyncio twin
    :class:`chatmemory.aio.InMemoryChatMemoryStore` share that code: the asyncio store's coroutines call a sync
    store directly (each call is a few dictionary steps under a lock held for microseconds, so nothing blocks
    the event loop).

    Args:
        ttl: seconds (or a ``timedelta``) a memory lives after its last write (``None``: forever).
        clock: the time source for ``ttl`` (monotonic seconds).
        history: keep the history of every memory.
        history_ttl: how long a history lives after the memory's last write (``None``: as the window).
        encryption: a :class:`chatmemory.encryption.Keyring`: the window is then kept as sealed records,
            opened on every read, as a persistent store keeps it (the history stays as message objects).
    """

    def __init__(
        self,
        *,
        ttl: TTL = None,
        clock: Callable[[], float] = time.monotonic,
        history: bool = False,
        history_ttl: TTL = None,
        encryption: RecordCodec | None = None,
    ) -> None:
        self._codec = codec_of(encryption)
        self._opened: dict[str, tuple[tuple[bytes, ...], tuple[ChatMessage, ...]]] = {}
        """Sealed windows this store opened, by memory: the records as stored, and their messages."""
        self._ttl = ttl_seconds(ttl)
        self._history_ttl = history_ttl_seconds(history, history_ttl, self._ttl)
        self._keeps_history = history
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._histories: dict[str, _History] = {}
        self._sequences = itertools.count(1)
        self._versions = itertools.count(1)
        self._lock = threading.Lock()
        self._owns_client = True

    @classmethod
    def from_url(cls, url: str, **options: object) -> InMemoryChatMemoryStore:
        """Build from ``memory://`` (options are passed to the constructor)."""
        if not url.lower().startswith("memory:"):
            raise ValueError(f"InMemoryChatMemoryStore takes memory:// URLs, not {url!r}")
        return cls(**options)  # type: ignore[arg-type]

    @property
    def ttl(self) -> float | None:
        """Seconds a memory lives after its last write, or ``None``."""
        return self._ttl

    def _sealed(
        self, memory_id: str, entry: _Entry | None, change: SequenceDiff, messages: tuple[ChatMessage, ...]
    ) -> tuple[bytes, ...]:
        """The sealed records of ``messages``: the kept ones as stored, only the appended ones sealed now."""
        if entry is None or entry.raw is None or entry.messages is None or len(entry.raw) != len(entry.messages):
            return tuple(self._codec.dumps(message, memory_id) for message in messages)
        raw = entry.raw
        appended = (self._codec.dumps(message, memory_id) for message in change.appended)
        return (*(raw[index] for index in change.kept), *appended)

    def _live(self, memory_id: str) -> _Entry | None:
        entry = self._entries.get(memory_id)
        if entry is not None and entry.expires_at is not None and entry.expires_at <= self._clock():
            del self._entries[memory_id]
            self._opened.pop(memory_id, None)
            return None
        return entry

    def _write(
        self, memory_id: str, messages: tuple[ChatMessage, ...], also_recorded: tuple[ChatMessage, ...] = ()
    ) -> int:
        entry = self._entries.get(memory_id)
        old = entry.messages if entry is not None and entry.messages is not None else ()
        # Encode what is new, as a persistent store would, so that a message no store can hold (an
        # unencodable string, an attribute changed after construction) fails here too, changing nothing.
        change = diff_messages(old, messages)
        appended = change.appended
        encoded = sum(len(dumps_message(message)) for message in also_recorded + appended)
        sealed = self._sealed(memory_id, entry, change, messages) if self._codec.sealed else None
        telemetry.note_write(appended=len(appended), evicted=len(change.deleted), bytes=encoded)
        version = next(self._versions)
        telemetry.note(version=version)
        now = self._clock()
        written_at = _utc_now()
        expires_at = None if self._ttl is None else now + self._ttl
        self._entries[memory_id] = _Entry(version, messages, sealed, expires_at, written_at)
        if sealed is not None:  # what this store sealed, it knows: its next read opens nothing
            self._opened[memory_id] = (sealed, messages)
        if self._keeps_history:
            self._record(memory_id, also_recorded + appended, now, written_at)
        return version

    def _record(
        self, memory_id: str, appended: tuple[ChatMessage, ...], now: float, written_at: datetime.datetime
    ) -> None:
        history = self._live_history(memory_id)
        if history is None:
            history = self._histories[memory_id] = _History([], None)
        history.entries.extend(HistoryEntry(next(self._sequences), message, written_at) for message in appended)
        lifetime = self._history_ttl if self._history_ttl is not None else self._ttl
        history.expires_at = None if lifetime is None else now + lifetime

    def _live_history(self, memory_id: str) -> _History | None:
        history = self._histories.get(memory_id)
        if history is not None and history.expires_at is not None and history.expires_at <= self._clock():
            del self._histories[memory_id]
            return None
        return history

    @_traced("load")
    def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.READ, memory_id)
        with self._lock:
            entry = self._live(memory_id)
            if entry is None:
                return Snapshot([], 0)
            if entry.raw is not None:  # records: sealed ones are opened once per stored version by this store
                opened = self._opened.get(memory_id)
                if self._codec.sealed and opened is not None and opened[0] is entry.raw:
                    return Snapshot(list(opened[1]), entry.version)
                messages = tuple(self._codec.loads(record, memory_id) for record in entry.raw)
                if self._codec.sealed:
                    self._opened[memory_id] = (entry.raw, messages)
                if not self._codec.sealed and entry.messages is None:
                    entry.messages, entry.raw = messages, None
                return Snapshot(list(messages), entry.version)
            assert entry.messages is not None
            if self._codec.sealed:  # messages a plain store kept are plain data to a keyring
                return Snapshot([self._codec.loads(dumps_message(m), memory_id) for m in entry.messages], entry.version)
            return Snapshot(list(entry.messages), entry.version)

    @_traced("get")
    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return self.load(memory_id).messages

    @_traced("save")
    def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``."""
        return self.save_recorded(memory_id, messages, expected_version, ())

    def save_recorded(
        self,
        memory_id: str,
        messages: Iterable[ChatMessage],
        expected_version: int,
        also_recorded: Sequence[ChatMessage],
    ) -> int:
        """``save`` recording ``also_recorded`` before what it appends (see ``SupportsRecordedWrites``)."""
        memory_id = validate_memory_id(memory_id)
        messages = checked_messages(messages)  # taken once: a generator is as good as a list
        also_recorded = checked_messages(also_recorded) if self._keeps_history else ()
        self._check_open(Operation.WRITE, memory_id)
        with self._lock:
            entry = self._live(memory_id)
            current = 0 if entry is None else entry.version
            if current != expected_version:
                raise ConcurrentUpdateError(memory_id, expected_version)
            return self._write(memory_id, messages, also_recorded)

    @_traced("update")
    def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id``."""
        memory_id = validate_memory_id(memory_id)
        messages = checked_messages(messages)  # taken once: a generator is as good as a list
        self._check_open(Operation.WRITE, memory_id)
        with self._lock:
            self._write(memory_id, messages)

    @_traced("delete")
    def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id``; idempotent."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.DELETE, memory_id)
        with self._lock:
            self._entries.pop(memory_id, None)
            self._opened.pop(memory_id, None)
            self._histories.pop(memory_id, None)

    @property
    def keeps_history(self) -> bool:
        """Whether this store keeps the history of its memories (``history=True``)."""
        return self._keeps_history

    @property
    def encryption(self) -> RecordCodec | None:
        """The keyring this store seals records with (``None``: records are plain)."""
        return self._codec if self._codec.sealed else None

    @_traced("history")
    def history(
        self, memory_id: str, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        """One page of the history of ``memory_id`` (see :meth:`chatmemory.SupportsHistory.history`).

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        memory_id = validate_memory_id(memory_id)
        query = history_query(after, limit, reverse)
        if not self._keeps_history:
            raise HistoryNotEnabledError(repr(self))
        self._check_open(Operation.READ, memory_id)
        with self._lock:
            history = self._live_history(memory_id)
            entries = [] if history is None else history.entries
            ordered = reversed(entries) if reverse else iter(entries)
            page = list(itertools.islice((entry for entry in ordered if query.includes(entry.sequence)), limit + 1))
        return query.page(page)

    @_traced("trim_history")
    def trim_history(self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None) -> int:
        """Remove history entries written before ``older_than``; the windows stay as they are.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        cutoff = trim_cutoff(older_than, _utc_now())
        if memory_id is not None:
            memory_id = validate_memory_id(memory_id)
        if not self._keeps_history:
            raise HistoryNotEnabledError(repr(self))
        self._check_open(Operation.WRITE, memory_id)
        removed = 0
        with self._lock:
            for each in [memory_id] if memory_id is not None else list(self._histories):
                history = self._live_history(each)
                if history is None:
                    continue
                kept = [entry for entry in history.entries if entry.written_at >= cutoff]
                removed += len(history.entries) - len(kept)
                history.entries = kept
        return removed

    @_traced("restore_history")
    def restore_history(
        self, memory_id: str, entries: Sequence[HistoryEntry], *, window: Sequence[ChatMessage] | None = None
    ) -> int:
        """Add the entries the history lacks, as they are (see :class:`chatmemory.core.history.SupportsHistoryRestore`).

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        memory_id = validate_memory_id(memory_id)
        restored = checked_restore(memory_id, entries)
        messages = checked_messages(window) if window is not None else None
        if not self._keeps_history:
            raise HistoryNotEnabledError(repr(self))
        for entry in restored:  # a message no store can hold fails here, changing nothing
            dumps_message(entry.message)
        self._check_open(Operation.WRITE, memory_id)
        with self._lock:
            now = self._clock()
            history = self._live_history(memory_id)
            if history is None:
                history = _History([], None)
            present = {entry.sequence for entry in history.entries}
            missing = [entry for entry in restored if entry.sequence not in present]
            if missing:
                history.entries = sorted([*history.entries, *missing], key=lambda entry: entry.sequence)
                upcoming = next(self._sequences)
                self._sequences = itertools.count(max(upcoming, missing[-1].sequence + 1))
            if messages is not None and self._live(memory_id) is None:
                expires_at = None if self._ttl is None else now + self._ttl
                sealed = tuple(self._codec.dumps(m, memory_id) for m in messages) if self._codec.sealed else None
                self._entries[memory_id] = _Entry(next(self._versions), messages, sealed, expires_at, _utc_now())
            if history.entries and (missing or memory_id not in self._histories):
                lifetime = self._history_ttl if self._history_ttl is not None else self._ttl
                history.expires_at = None if lifetime is None else now + lifetime
                self._histories[memory_id] = history
        return len(missing)

    @_traced.iterator("list")
    def memory_ids(self) -> Iterator[str]:
        """The ids of the live memories, in insertion order."""
        self._check_open(Operation.LIST)
        with self._lock:
            ids = [memory_id for memory_id in list(self._entries) if self._live(memory_id) is not None]
        return iter(ids)

    @_traced("read_raw")
    def read_raw(self, memory_id: str) -> list[bytes]:
        """The stored records of ``memory_id`` (``dumps_message`` payloads), undecoded; ``[]`` if unknown."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.READ, memory_id)
        with self._lock:
            entry = self._live(memory_id)
            if entry is None:
                return []
            if entry.raw is not None:
                return list(entry.raw)
            messages = entry.messages or ()
        return [self._codec.dumps(message, memory_id) for message in messages]

    @_traced("reseal")
    def reseal(self, memory_id: str) -> Resealed:
        """Re-seal every record of ``memory_id`` under the primary key (see :class:`~chatmemory.SupportsReseal`)."""
        memory_id = validate_memory_id(memory_id)
        codec = require_keyring(self._codec, repr(self))
        self._check_open(Operation.WRITE, memory_id)
        with self._lock:
            entry = self._live(memory_id)
            if entry is None:
                return Resealed(0, 0)
            raw = entry.raw if entry.raw is not None else tuple(map(dumps_message, entry.messages or ()))
            changes, current = reseal_plan(codec, memory_id, enumerate(raw))
            if changes:
                records = list(raw)
                for index, _, new in changes:
                    records[index] = new
                entry.raw = tuple(records)
            return Resealed(len(changes), current)

    @_traced("write_raw")
    def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Store message records (``dumps_message`` payloads) as they are, decoded only when read.

        This imports data from another store without decoding it twice, and is how the contract suite
        plants corrupted data.
        """
        memory_id = validate_memory_id(memory_id)
        records = tuple(bytes(record) for record in records)
        self._check_open(Operation.WRITE, memory_id)
        with self._lock:
            expires_at = None if self._ttl is None else self._clock() + self._ttl
            self._entries[memory_id] = _Entry(next(self._versions), None, records, expires_at, _utc_now())

    @_traced("memory_times")
    def memory_times(self, memory_id: str) -> MemoryTimes | None:
        """When ``memory_id`` was last written and when it expires (UTC); ``None`` if absent or expired."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.READ, memory_id)
        with self._lock:
            entry = self._live(memory_id)
            if entry is None:
                return None
            if entry.expires_at is None:
                return MemoryTimes(entry.written_at, None)
            remaining = datetime.timedelta(seconds=entry.expires_at - self._clock())
            return MemoryTimes(entry.written_at, _utc_now() + remaining)

    @_traced("expire_at")
    def expire_at(self, memory_id: str, when: datetime.datetime | None) -> None:
        """Make a live ``memory_id`` expire at ``when`` (aware), or never with ``None``; unknown ids stay absent.

        A time in the past expires the memory at once, as its ``ttl`` running out would; the next write
        slides the expiry by the ``ttl`` again.

        Raises:
            ValueError: ``when`` is not an aware datetime.
        """
        memory_id = validate_memory_id(memory_id)
        if when is not None and (not isinstance(when, datetime.datetime) or when.utcoffset() is None):
            raise ValueError(f"expire_at takes an aware datetime (e.g. in UTC) or None, not {when!r}")
        self._check_open(Operation.WRITE, memory_id)
        with self._lock:
            entry = self._live(memory_id)
            if entry is None:
                return
            if when is None:
                entry.expires_at = None
            else:
                entry.expires_at = self._clock() + (when - _utc_now()).total_seconds()
            self._live(memory_id)  # a time already past removes the memory now, as reads would

    def _release(self) -> None:
        # What the other stores do with their connections: the memories go with the store.
        with self._lock:
            self._entries.clear()
            self._histories.clear()

    def __repr__(self) -> str:
        if self._keeps_history:
            return f"InMemoryChatMemoryStore(ttl={self._ttl!r}, history=True, history_ttl={self._history_ttl!r})"
        return f"InMemoryChatMemoryStore(ttl={self._ttl!r})"


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


use_default_store(InMemoryChatMemoryStore)
