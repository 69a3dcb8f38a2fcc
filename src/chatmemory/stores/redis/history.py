"""A Redis memory's history, for any Redis layout: the page read's arguments and reply, the trim's arguments.

The history list, its scripts (``history.lua``, ``trim.lua``) and these helpers are shared with the
LangChain4j-layout store, which keeps the same kind of list beside its string key. No I/O, no driver.
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Sequence
from typing import NamedTuple

from chatmemory.core.errors import StoreError
from chatmemory.core.history import (
    HistoryEntry,
    HistoryPage,
    HistoryQuery,
    UnrestorableHistoryError,
    trim_cutoff,
)
from chatmemory.serialization.records import PLAIN, RecordCodec

__all__ = [
    "HistoryRecord",
    "history_page",
    "history_read_args",
    "history_records",
    "restore_args",
    "restored_count",
    "trim_args",
]

_MICROSECOND = datetime.timedelta(microseconds=1)
_MILLISECOND = datetime.timedelta(milliseconds=1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MAX_SEQUENCE = 2**53
"""Sequences stay below this (exact in the scripts' doubles); a larger ``after`` reads as this."""


class HistoryRecord(NamedTuple):
    """One history entry as stored, its message not decoded yet.

    Attributes:
        sequence: its sequence number.
        written_ms: the server clock in ms at the write that added it.
        record: the message's record.
    """

    sequence: int
    written_ms: int
    record: bytes


def history_read_args(query: HistoryQuery) -> tuple[bytes, ...]:
    """The history script's arguments for ``query``: ``limit + 1`` entries, in the query's order."""
    after = b"" if query.after is None else b"%d" % min(query.after, _MAX_SEQUENCE)
    return (after, b"%d" % (query.limit + 1), b"1" if query.reverse else b"0")


def history_records(operation: str, memory_id: str, reply: object) -> list[HistoryRecord]:
    """The entries of the history script's ``reply``, in the order it gave them.

    Raises:
        StoreError: the reply is not a list of entries as the write scripts store them.
    """
    if not isinstance(reply, list):
        raise StoreError(operation, memory_id, f"the history script replied {reply!r}")
    records = []
    for entry in reply:
        parts = entry.split(b":", 2) if isinstance(entry, bytes) else ()
        if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
            raise StoreError(operation, memory_id, f"the history holds an entry this store did not write: {entry!r}")
        records.append(HistoryRecord(int(parts[0]), int(parts[1]), parts[2]))
    return records


def history_page(
    memory_id: str, records: Sequence[HistoryRecord], query: HistoryQuery, codec: RecordCodec = PLAIN
) -> HistoryPage:
    """The page ``records`` (read for ``query``) make, their messages decoded.

    Raises:
        CorruptedMemoryError: an entry's message does not decode.
    """
    entries = [
        HistoryEntry(
            record.sequence,
            codec.loads(record.record, memory_id),
            _EPOCH + record.written_ms * _MILLISECOND,
        )
        for record in records
    ]
    return query.page(entries)


def restore_args(
    memory_id: str,
    entries: Sequence[HistoryEntry],
    window: Sequence[bytes] | None,
    head: tuple[bytes, bytes, bytes],
    codec: RecordCodec = PLAIN,
) -> tuple[bytes, ...]:
    """The restore script's arguments (``head``: ttl, history ttl and write id; ``window``: its records).

    ``entries`` are checked already (:func:`chatmemory.core.history.checked_restore`).

    Raises:
        UnrestorableHistoryError: the sequences are not consecutive, or reach 2**53 (a Redis history numbers
            its entries one after another: a page is read by position).
        SerializationError: a message does not encode.
    """
    for before, entry in itertools.pairwise(entries):
        if entry.sequence != before.sequence + 1:
            raise UnrestorableHistoryError(
                memory_id,
                f"Redis keeps consecutive sequence numbers, and entry {entry.sequence} follows {before.sequence} "
                "(a history from a store that numbers with gaps can be restored into one that allows them, "
                "e.g. the in-memory store)",
            )
    if entries and entries[-1].sequence >= _MAX_SEQUENCE:
        raise UnrestorableHistoryError(memory_id, f"sequence {entries[-1].sequence} is beyond 2**53")
    args = [*head, b"%d" % len(entries), b"" if window is None else b"%d" % len(window)]
    for entry in entries:
        args += [
            b"%d" % entry.sequence,
            b"%d" % ((entry.written_at - _EPOCH) // _MILLISECOND),
            codec.dumps(entry.message, memory_id),
        ]
    return (*args, *(window or ()))


def restored_count(operation: str, memory_id: str, reply: object) -> int:
    """How many entries the restore script's ``reply`` says it added.

    Raises:
        UnrestorableHistoryError: the entries would leave a gap beside those the history holds.
        StoreError: the reply is not one the script gives.
    """
    if isinstance(reply, int) and not isinstance(reply, bool) and reply >= 0:
        return reply
    if isinstance(reply, list) and len(reply) == 3 and reply[0] == b"g":
        raise UnrestorableHistoryError(
            memory_id,
            f"the history holds sequences {reply[1]} to {reply[2]}, and Redis keeps them consecutive: the entries "
            "restored must continue that run without a gap",
        )
    raise StoreError(operation, memory_id, f"the restore script replied {reply!r}")


def trim_args(older_than: datetime.datetime | datetime.timedelta) -> tuple[bytes, ...]:
    """The trim script's arguments for ``older_than`` (a ``timedelta`` is counted on the server's clock).

    Raises:
        TypeError: ``older_than`` is neither an aware datetime nor a timedelta.
        ValueError: a naive datetime or a negative timedelta.
    """
    if isinstance(older_than, datetime.timedelta):
        if older_than < datetime.timedelta(0):
            trim_cutoff(older_than, _EPOCH)  # raises the shared error
        return (b"r", b"%d" % (older_than // _MICROSECOND))
    cutoff = trim_cutoff(older_than, _EPOCH)
    return (b"a", b"%d" % max(0, (cutoff - _EPOCH) // _MICROSECOND))
