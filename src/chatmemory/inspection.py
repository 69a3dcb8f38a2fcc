"""What operators look at: one memory summed up (count, size, times), and its stored records one by one.

Built on the public capabilities only: messages through ``load``/``get_messages``, sizes and damaged
records through :class:`~chatmemory.core.store.SupportsRawRecords`, times through
:class:`~chatmemory.memory_times.SupportsMemoryTimes`; many memories at once through
:class:`~chatmemory.stored_memories.SupportsBatchReads` (:func:`summarize_many`), one round trip per batch.
What a store cannot tell is ``None``, never guessed.
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from chatmemory.core.errors import ChatMemoryError, CorruptedMemoryError, SerializationError
from chatmemory.core.messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.core.store import ChatMemoryStore, SupportsRawRecords, SupportsVersioning
from chatmemory.memory_times import SupportsMemoryTimes
from chatmemory.serialization.native import dumps_message
from chatmemory.serialization.records import PLAIN, RecordCodec, codec_of_store
from chatmemory.stored_memories import StoredMemory, SupportsBatchReads

__all__ = [
    "SUMMARY_BATCH",
    "MemorySummary",
    "RawRecord",
    "read_raw_records",
    "role_of",
    "summarize",
    "summarize_many",
    "summarize_stored",
]

SUMMARY_BATCH = 200
"""Memories :func:`summarize_many` reads per batch from a store with batch reads."""


_ROLE_OF_TYPE: dict[type, str] = {
    SystemMessage: "system",
    UserMessage: "user",
    AiMessage: "ai",
    ToolExecutionResultMessage: "tool_result",
}
"""The role of each message type :func:`role_of` names, looked up by exact type."""


def role_of(message: ChatMessage) -> str:
    """``system``, ``user``, ``ai``, ``tool_result`` or ``custom``: the native format's name for the message type."""
    if isinstance(message, SystemMessage):
        return "system"
    if isinstance(message, UserMessage):
        return "user"
    if isinstance(message, AiMessage):
        return "ai"
    if isinstance(message, ToolExecutionResultMessage):
        return "tool_result"
    return "custom"


def _roles(messages: Sequence[ChatMessage]) -> Counter[str]:
    """Message count per role: counted by type (one lookup per type, not per message), as :func:`role_of` names them."""
    roles: Counter[str] = Counter()
    for kind, count in Counter(map(type, messages)).items():
        role = _ROLE_OF_TYPE.get(kind)
        if role is None:  # a subclass, or a custom message
            roles.update(role_of(message) for message in messages if type(message) is kind)
        else:
            roles[role] += count
    return roles


@dataclass(frozen=True, slots=True)
class MemorySummary:
    """One memory at a glance.

    Attributes:
        memory_id: the id.
        messages: how many messages (records, when it does not decode).
        size: bytes of its message records: as stored where the store shows its records, else as encoded
            in the native format.
        last_write: when it was last written, ``None`` when the store does not tell.
        expires_at: when it expires, ``None`` for never or when the store does not tell (see ``times_known``).
        times_known: whether the store told ``last_write`` and ``expires_at``.
        error: why it does not decode, or ``None``.
        roles: message count per role (empty when the caller did not ask for it: ``roles=False``).
    """

    memory_id: str
    messages: int
    size: int | None
    last_write: datetime.datetime | None
    expires_at: datetime.datetime | None
    times_known: bool
    error: str | None = None
    roles: Counter[str] = field(default_factory=Counter)


def summarize(store: ChatMemoryStore, memory_id: str) -> MemorySummary | None:
    """Sum up ``memory_id``; ``None`` when it does not exist.

    A memory that does not decode is summed up too, with ``error`` saying why (and its size and record
    count where the store shows its records).

    Raises:
        StoreError: the store failed.
    """
    times = store.memory_times(memory_id) if isinstance(store, SupportsMemoryTimes) else None
    last_write = times.last_write if times else None
    expires_at = times.expires_at if times else None
    known = isinstance(store, SupportsMemoryTimes)
    raw = store.read_raw(memory_id) if isinstance(store, SupportsRawRecords) else None
    try:
        if isinstance(store, SupportsVersioning):
            snapshot = store.load(memory_id)
            exists, messages = snapshot.version != 0, snapshot.messages
        else:
            messages = store.get_messages(memory_id)
            exists = bool(messages)
    except SerializationError as exc:  # corrupted or from a newer format: show it, do not stop
        size = sum(map(len, raw)) if raw is not None else None
        count = len(raw) if raw is not None else 0
        return MemorySummary(memory_id, count, size, last_write, expires_at, known, error=str(exc))
    if not exists:
        return None
    size = sum(map(len, raw)) if raw is not None else sum(len(dumps_message(m)) for m in messages)
    roles = _roles(messages)
    return MemorySummary(memory_id, len(messages), size, last_write, expires_at, known, roles=roles)


def summarize_stored(
    stored: StoredMemory, *, times_known: bool = True, codec: RecordCodec = PLAIN, roles: bool = True
) -> MemorySummary:
    """Sum up a memory read by :meth:`~chatmemory.stored_memories.SupportsBatchReads.read_batch`.

    Its records are decoded one by one, as a read decodes them; one that does not decode (or a damaged
    memory) gives a summary with ``error`` saying why, its record count and size as stored. ``roles=False``
    leaves the count per role empty (``ls`` shows none).
    """
    times = stored.times
    last_write = times.last_write if times else None
    expires_at = times.expires_at if times else None
    size = sum(map(len, stored.records))
    try:
        if stored.damage is not None:
            raise CorruptedMemoryError(stored.memory_id, stored.damage)
        loads = codec.loads
        messages = [loads(record, stored.memory_id) for record in stored.records]
    except SerializationError as exc:
        count = len(stored.records)
        return MemorySummary(stored.memory_id, count, size, last_write, expires_at, times_known, error=str(exc))
    counted = _roles(messages) if roles else Counter()
    return MemorySummary(stored.memory_id, len(messages), size, last_write, expires_at, times_known, roles=counted)


def summarize_many(
    store: ChatMemoryStore, memory_ids: Sequence[str], *, batch: int = SUMMARY_BATCH, roles: bool = True
) -> Iterator[tuple[str, MemorySummary | None]]:
    """``(id, summary)`` for each of ``memory_ids`` in order, the summary ``None`` when it does not exist.

    A store with batch reads is read ``batch`` memories per round trip; any other one memory at a time
    (:func:`summarize`). A batch that raises a :class:`~chatmemory.SerializationError` (a memory too
    damaged for the batch read) is read again one memory at a time, so every memory is still summed up.
    ``roles=False``: batch-read summaries leave the count per role empty (see :func:`summarize_stored`).

    Raises:
        StoreError: the store failed.
    """
    if not isinstance(store, SupportsBatchReads):
        for memory_id in memory_ids:
            yield memory_id, summarize(store, memory_id)
        return
    known = isinstance(store, SupportsMemoryTimes)
    codec = codec_of_store(store)
    for start in range(0, len(memory_ids), batch):
        ids = memory_ids[start : start + batch]
        try:
            found = store.read_batch(ids)
        except SerializationError:
            for memory_id in ids:
                yield memory_id, summarize(store, memory_id)
            continue
        for memory_id, stored in zip(ids, found, strict=True):
            summary = None if stored is None else summarize_stored(stored, times_known=known, codec=codec, roles=roles)
            yield memory_id, summary


@dataclass(frozen=True, slots=True)
class RawRecord:
    """One stored record and what decoding it gives.

    Attributes:
        position: its index in the window (0: oldest).
        data: the record as stored.
        message: the decoded message, or ``None`` when it does not decode.
        error: why it does not decode, or ``None``.
    """

    position: int
    data: bytes
    message: ChatMessage | None
    error: str | None


def read_raw_records(store: SupportsRawRecords, memory_id: str) -> list[RawRecord]:
    """The stored records of ``memory_id``, each decoded on its own, so one broken record does not hide the rest.

    Raises:
        StoreError: the store failed.
    """
    records: list[RawRecord] = []
    codec = codec_of_store(store)
    for position, data in enumerate(store.read_raw(memory_id)):
        try:
            message: ChatMessage | None = codec.loads(data, memory_id)
            error = None
        except ChatMemoryError as exc:
            message, error = None, getattr(exc, "reason", None) or str(exc)
        records.append(RawRecord(position, bytes(data), message, error))
    return records
