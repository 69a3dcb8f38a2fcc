"""Where ``export`` and ``copy`` read memories from: a chatmemory store, or a LangChain4j Redis layout.

A source lists memory ids and reads one memory at a time as an :class:`ExportedMemory`, expiry included
where the source can tell it. A memory that does not decode raises, naming the memory, and the command
reports it and goes on with the next. A store source reads many memories at once
(:meth:`StoreSource.read_many`), one round trip per batch where the store reads batches
(:class:`~chatmemory.stored_memories.SupportsBatchReads`). A store source built with ``history=True``
reads each memory's history too (every page), for ``export --history`` and ``copy --history``.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from chatmemory.core.errors import (
    ChatMemoryError,
    CorruptedMemoryError,
    MissingDependencyError,
    SerializationError,
    StoreError,
)
from chatmemory.core.history import MAX_HISTORY_PAGE, HistoryEntry, SupportsHistory
from chatmemory.core.store import ChatMemoryStore, SupportsListing, SupportsVersioning, validate_memory_id
from chatmemory.memory_times import SupportsMemoryTimes
from chatmemory.serialization.records import PLAIN, RecordCodec, codec_of_store
from chatmemory.stored_memories import StoredMemory, SupportsBatchReads
from chatmemory.transfer.export_format import UNKNOWN_EXPIRY, ExportedMemory

if TYPE_CHECKING:
    from redis import Redis
    from redis.cluster import RedisCluster

__all__ = ["HistoryNotKeptError", "LangChain4jRedisSource", "MemorySource", "StoreSource", "UnlistableStoreError"]


class MemorySource(Protocol):
    """What ``export`` and ``copy`` read from."""

    def memory_ids(self) -> Iterator[str]:
        """Every memory id the source holds (under its prefix)."""
        ...

    def read(self, memory_id: str) -> ExportedMemory | None:
        """The memory ``memory_id``, or ``None`` when it does not exist."""
        ...


class UnlistableStoreError(StoreError):
    """The store cannot list its memories, so the command needs the ids to be named."""

    def __init__(self, store: object) -> None:
        super().__init__("listing memory ids", detail=f"{type(store).__name__} cannot list its memories; name the ids")


class HistoryNotKeptError(ChatMemoryError):
    """``--history`` was asked of a store that keeps no history (a source) or cannot restore one (a destination)."""

    def __init__(self, side: str, store: object, fix: str, *, keeps_one: bool = False) -> None:
        self.side = side
        what = "keeps a history but cannot restore one" if keeps_one else "keeps no history"
        super().__init__(f"the {side} ({type(store).__name__}) {what}; {fix}")


class StoreSource:
    """Memories of a chatmemory store, optionally only those whose id starts with ``id_prefix``.

    Args:
        store: the store to read.
        id_prefix: list only ids starting with it (``""``: all).
        history: read each memory's history too (:attr:`ExportedMemory.history`).

    Raises:
        HistoryNotKeptError: ``history`` is asked of a store that keeps none.
    """

    def __init__(self, store: ChatMemoryStore, *, id_prefix: str = "", history: bool = False) -> None:
        if history and not (isinstance(store, SupportsHistory) and store.keeps_history):
            raise HistoryNotKeptError(
                "source", store, "open it with history=True (the store your application writes with history)"
            )
        self.store = store
        self.id_prefix = id_prefix
        self.history = history

    def _with_history(self, memory: ExportedMemory) -> ExportedMemory:
        if not self.history:
            return memory
        store = self.store
        assert isinstance(store, SupportsHistory)
        entries: list[HistoryEntry] = []
        after: int | None = None
        while True:
            page = store.history(memory.memory_id, after=after, limit=MAX_HISTORY_PAGE)
            entries.extend(page.entries)
            if page.next_after is None:
                break
            after = page.next_after
        return ExportedMemory(memory.memory_id, memory.messages, memory.expires_at, tuple(entries))

    def memory_ids(self) -> Iterator[str]:
        """The ids of the store's memories that start with the prefix.

        Raises:
            UnlistableStoreError: the store does not support listing.
        """
        if not isinstance(self.store, SupportsListing):
            raise UnlistableStoreError(self.store)
        return (memory_id for memory_id in self.store.memory_ids() if memory_id.startswith(self.id_prefix))

    def read(self, memory_id: str) -> ExportedMemory | None:
        """The memory with its expiry (unknown unless the store tells it; see :mod:`chatmemory.memory_times`).

        With ``history``, its history entries too (one read per :data:`~chatmemory.core.history.MAX_HISTORY_PAGE`).
        """
        memory = self._read_window(memory_id)
        return None if memory is None else self._with_history(memory)

    def _read_window(self, memory_id: str) -> ExportedMemory | None:
        store = self.store
        if isinstance(store, SupportsVersioning):
            snapshot = store.load(memory_id)
            if snapshot.version == 0:
                return None
            messages = snapshot.messages
        else:
            messages = store.get_messages(memory_id)
            if not messages:
                return None
        if isinstance(store, SupportsMemoryTimes):
            times = store.memory_times(memory_id)
            if times is not None:
                return ExportedMemory(memory_id, messages, times.expires_at)
        # A store's configured ttl says nothing of when this memory was written: its expiry stays unknown.
        return ExportedMemory(memory_id, messages, UNKNOWN_EXPIRY)

    def read_many(self, memory_ids: Sequence[str]) -> list[ExportedMemory | ChatMemoryError | None]:
        """Each memory as :meth:`read` gives it (``None``: absent); one that does not decode, as its error.

        One round trip where the store reads batches, else one :meth:`read` per memory.

        Raises:
            StoreError: the store failed.
        """
        store = self.store
        if not isinstance(store, SupportsBatchReads):
            return [self._read_or_error(memory_id) for memory_id in memory_ids]
        known = isinstance(store, SupportsMemoryTimes)
        codec = codec_of_store(store)
        found = [
            None if stored is None else _exported_or_error(stored, known, codec)
            for stored in store.read_batch(memory_ids)
        ]
        if not self.history:
            return found
        return [
            self._with_history_or_error(memory) if isinstance(memory, ExportedMemory) else memory for memory in found
        ]

    def _with_history_or_error(self, memory: ExportedMemory) -> ExportedMemory | ChatMemoryError:
        try:
            return self._with_history(memory)
        except StoreError:
            raise
        except ChatMemoryError as exc:  # a history entry that does not decode: the memory is reported
            return exc

    def _read_or_error(self, memory_id: str) -> ExportedMemory | ChatMemoryError | None:
        try:
            return self.read(memory_id)
        except StoreError:
            raise
        except ChatMemoryError as exc:
            return exc


def _exported_or_error(stored: StoredMemory, times_known: bool, codec: RecordCodec) -> ExportedMemory | ChatMemoryError:
    try:
        return exported_of(stored, times_known=times_known, codec=codec)
    except SerializationError as exc:
        return exc


def exported_of(stored: StoredMemory, *, times_known: bool, codec: RecordCodec = PLAIN) -> ExportedMemory:
    """The memory a batch read found, as ``StoreSource.read`` gives it (``times_known``: the store tells times).

    Raises:
        CorruptedMemoryError: it is damaged, or a record does not decode.
        UnsupportedFormatVersionError: a record is from a newer format.
    """
    if stored.damage is not None:
        raise CorruptedMemoryError(stored.memory_id, stored.damage)
    messages = [codec.loads(record, stored.memory_id) for record in stored.records]
    if times_known and stored.times is not None:
        return ExportedMemory(stored.memory_id, messages, stored.times.expires_at)
    return ExportedMemory(stored.memory_id, messages, UNKNOWN_EXPIRY)


def _redis_client(url: str) -> Redis | RedisCluster:
    try:
        from redis import Redis
        from redis.cluster import RedisCluster
    except ImportError as exc:
        raise MissingDependencyError("copy --from langchain4j-redis", "redis", "redis") from exc
    scheme, _, rest = url.partition("://")
    base = {"redis+cluster": "redis", "rediss+cluster": "rediss"}.get(scheme.lower())
    if base is not None:
        return RedisCluster.from_url(f"{base}://{rest}")
    return Redis.from_url(url)


def _glob_literal(text: bytes) -> bytes:
    """``text`` with Redis glob characters escaped, so a prefix matches only itself."""
    return bytes(b for char in text for b in ((92, char) if char in b"*?[]\\" else (char,)))


class LangChain4jRedisSource:
    """A LangChain4j ``RedisChatMemoryStore`` layout: one string key per memory.

    The key is ``key_prefix + memory_id``, holding ``ChatMessageSerializer.messagesToJson`` JSON, with
    the key's own expiry.

    Args:
        url: ``redis://``, ``rediss://`` or ``redis+cluster://`` URL.
        key_prefix: the prefix the LangChain4j service puts before memory ids (``""``: none).
    """

    def __init__(self, url: str, *, key_prefix: str = "") -> None:
        self.key_prefix = key_prefix
        self._prefix = key_prefix.encode("utf-8")
        self.client = _redis_client(url)
        self.skipped_keys = 0
        """Keys under the prefix that are not strings (e.g. another library's), counted while listing."""

    def close(self) -> None:
        """Close the Redis client."""
        self.client.close()

    def _scan(self) -> Iterator[bytes]:
        from redis.cluster import RedisCluster

        pattern = _glob_literal(self._prefix) + b"*"
        if isinstance(self.client, RedisCluster):
            yield from self.client.scan_iter(
                match=pattern, count=1000, _type="string", target_nodes=RedisCluster.PRIMARIES
            )
        else:
            yield from self.client.scan_iter(match=pattern, count=1000, _type="string")

    def memory_ids(self) -> Iterator[str]:
        """The memory ids of the string keys under the prefix (keys whose rest is not a valid id are skipped)."""
        from redis.exceptions import RedisError

        from chatmemory.stores.langchain4j_redis.keys import LOCK_MARK

        seen: set[str] = set()
        try:
            for key in self._scan():
                try:
                    memory_id = validate_memory_id(key[len(self._prefix) :].decode("utf-8"))
                except (UnicodeDecodeError, ValueError, TypeError):
                    if LOCK_MARK not in key:  # a chatmemory writer's lock beside a memory is no other library's
                        self.skipped_keys += 1
                    continue
                if memory_id not in seen:  # SCAN may return a key twice
                    seen.add(memory_id)
                    yield memory_id
        except RedisError as exc:
            raise StoreError("listing LangChain4j memories", detail=str(exc)) from exc

    def read(self, memory_id: str) -> ExportedMemory | None:
        """The memory stored under ``key_prefix + memory_id``, with the key's expiry.

        Raises:
            CorruptedMemoryError: the key is not a string or does not hold LangChain4j JSON.
        """
        from redis.exceptions import RedisError, ResponseError

        key = self._prefix + memory_id.encode("utf-8")
        try:
            pipeline: Any = self.client.pipeline(transaction=False)
            pipeline.get(key)
            pipeline.pttl(key)
            value, pttl = pipeline.execute()
        except ResponseError as exc:  # WRONGTYPE: another kind of key under the prefix
            raise CorruptedMemoryError(memory_id, f"key {key!r} is not a string ({exc})") from None
        except RedisError as exc:
            raise StoreError("reading a LangChain4j memory", memory_id, str(exc)) from exc
        if value is None:
            return None
        # As the LangChain4j Redis store reads it: parts LangChain4j would fill in come back as they were given.
        from chatmemory.stores.langchain4j_redis.plan import decode

        messages = decode(value, memory_id)
        expires_at = None
        if isinstance(pttl, int) and pttl >= 0:
            expires_at = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(milliseconds=pttl)
        return ExportedMemory(memory_id, messages, expires_at)
