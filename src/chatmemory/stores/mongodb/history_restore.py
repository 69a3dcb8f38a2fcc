"""Putting history entries back into a MongoDB history store (``restore_history``): what to send (pure).

The layout is :mod:`~chatmemory.stores.mongodb.history`'s. A restore reads the window document's head
(``version``, ``hid``, ``hseq``, the staged groups) and which of the entries' sequences the history
collection holds; the missing ones are inserted as entry documents of the head's history, after a
conditional update of the head that moves ``hseq`` past them and takes a new version (so a store that
cached the head re-reads it instead of giving a restored sequence again). A memory without a document is
created with its window and a new history whose ``hseq`` is the last restored sequence. There is no
atomic step over the two collections: an insert cut short leaves entries missing, and the next restore
adds them (entries are keyed by history and sequence, so none is ever doubled or changed).
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from typing import Any, Final

from chatmemory.core.history import HistoryEntry
from chatmemory.core.messages import ChatMessage
from chatmemory.serialization.records import PLAIN, RecordCodec
from chatmemory.stored_memories import NewMemory
from chatmemory.stores.mongodb.batch_creates import new_document
from chatmemory.stores.mongodb.history import Document, HistoryConfig, groups_of, is_int
from chatmemory.stores.mongodb.layout import Record, encode_record

__all__ = [
    "RESTORE_ATTEMPTS",
    "RESTORE_PROJECTION",
    "entry_documents_of",
    "entry_records",
    "head_update",
    "new_head_document",
    "present_filter",
    "staged_sequences",
    "version_of",
]

RESTORE_PROJECTION: Final = {"_id": 0, "version": 1, "hid": 1, "hseq": 1, "hpend": 1, "hlast": 1}
"""What a restore needs of the window document."""
RESTORE_ATTEMPTS: Final = 20
"""How many times a restore reads the head again after writers moved it between its read and its update."""


def present_filter(memory_id: str, hid: int, entries: Sequence[HistoryEntry]) -> Document:
    """The entries of history ``hid`` among those to restore (read with ``{"s": 1}``)."""
    return {"m": memory_id, "h": hid, "s": {"$in": [entry.sequence for entry in entries]}}


def staged_sequences(memory_id: str, document: Mapping[str, Any]) -> set[int]:
    """The sequences of the groups the window document stages (readers merge them: they are entries too).

    Raises:
        CorruptedMemoryError: a group is not one this store wrote.
    """
    return {group.first + offset for group in groups_of(memory_id, document) for offset in range(len(group.records))}


def entry_records(memory_id: str, entries: Sequence[HistoryEntry], codec: RecordCodec = PLAIN) -> dict[int, Record]:
    """Each entry's stored record by sequence, encoded before anything is sent.

    Raises:
        SerializationError: a message does not encode.
    """
    return {entry.sequence: encode_record(entry.message, memory_id, codec) for entry in entries}


def entry_documents_of(
    memory_id: str,
    hid: int,
    entries: Sequence[HistoryEntry],
    records: Mapping[int, Record],
    config: HistoryConfig,
    server_now: datetime.datetime,
) -> list[Document]:
    """The entry documents of ``entries`` (their ``records``) in history ``hid``, each with its own time.

    With a lifetime, an entry expires ``2 * lifetime`` after ``server_now`` (not after its old write time,
    which would let the TTL monitor take it at once); the head's ``hrefresh`` is at most ``server_now``.
    """
    expiry: Document = {}
    if config.lifetime is not None:
        expiry["x"] = server_now + datetime.timedelta(seconds=2 * config.lifetime)
    return [
        {"m": memory_id, "h": hid, "s": entry.sequence, "r": records[entry.sequence], "t": entry.written_at, **expiry}
        for entry in entries
    ]


def head_update(memory_id: str, version: int, hid: int, top: int, clock_micros: int) -> tuple[Document, list[Document]]:
    """The conditional update of the head before entries up to ``top`` are inserted.

    It matches only the version and history read; ``hseq`` becomes at least ``top``; the version moves
    on (to the clock in µs, or one more), so writers that cached the head read it again.
    """
    filter: Document = {"_id": memory_id, "version": version, "hid": hid}
    next_version = {"$max": [{"$add": ["$version", 1]}, {"$literal": clock_micros}]}
    update = [{"$set": {"version": next_version, "hseq": {"$max": [{"$ifNull": ["$hseq", 0]}, {"$literal": top}]}}}]
    return filter, update


def new_head_document(
    memory_id: str,
    window: Sequence[ChatMessage],
    hid: int,
    top: int,
    config: HistoryConfig,
    server_now: datetime.datetime,
    codec: RecordCodec = PLAIN,
) -> Document:
    """The document of a memory created with ``window`` and a new history ``hid`` numbered up to ``top``.

    Raises:
        StoreError: the document would be past MongoDB's size limit.
    """
    document = new_document(NewMemory(memory_id, list(window), False, None), server_now, None, codec)
    assignments, _ = config.expiry_operators(server_now)
    document.update(assignments)
    document.update(hid=hid, hseq=top, hrefresh=server_now)
    return document


def version_of(document: Mapping[str, Any]) -> int | None:
    """The window document's version, if it holds one this store wrote."""
    version = document.get("version")
    return version if is_int(version) else None
