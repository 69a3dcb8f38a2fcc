"""The SQL store's read plans: the window read (one statement, decoded into a snapshot) and history pages."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from operator import gt, itemgetter
from typing import Any, NamedTuple, Protocol, cast

from chatmemory import telemetry
from chatmemory.core.history import HistoryEntry, HistoryPage, HistoryQuery
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Snapshot
from chatmemory.serialization.records import PLAIN, RecordCodec
from chatmemory.stores.sql.outcomes import CachedSnapshot, Corrupted, Headless, ReadResult, StaleCache, stray_detail
from chatmemory.stores.sql.times import aware

__all__ = [
    "HISTORY_OFFSET",
    "HistoryRow",
    "ReadHead",
    "ReadRow",
    "absent_read",
    "decode_history",
    "decode_read",
    "history_parameters",
    "raw_records",
    "read_parameters",
    "stray_records",
]

HEADLESS = Headless()

_MISSING = object()
"""A cached message the rows name but the cache does not hold."""

ReadRow = Sequence[Any]
"""A row of the window read: ``(seq, payload)`` (a driver's tuple or a SQLAlchemy row)."""


class ReadHead(NamedTuple):
    """The head row's fields, as the window read sends them packed in its row with ``seq`` ``NULL``."""

    version: int
    incarnation: int
    next_seq: int
    live: int
    """1, or 0 once the memory has expired."""
    window_start: int

    @classmethod
    def unpack(cls, packed: bytes | str | memoryview) -> ReadHead:
        """The fields from their packed form: ASCII digits separated by spaces (bytes from most drivers)."""
        text = bytes(packed) if isinstance(packed, memoryview) else packed
        return cls._make(map(int, text.split()))

    def pack(self) -> bytes:
        """The packed form (what the statement sends; for tests)."""
        return " ".join(map(str, self)).encode()


def read_parameters(memory_id: str, cached: CachedSnapshot | None) -> dict[str, Any]:
    """Parameters of the read statement: rows the cached snapshot holds are sent without their payload."""
    return {
        "p_id": memory_id,
        # -1 matches no incarnation (they are non-negative): every payload is sent.
        "p_known_incarnation": -1 if cached is None else cached.incarnation,
        "p_known_next": 0 if cached is None else cached.next_seq,
    }


_SEQ = itemgetter(0)
_PAYLOAD = itemgetter(1)


def _split(rows: Sequence[ReadRow]) -> tuple[ReadHead | None, list[int], list[bytes | None]]:
    """The head (``None``: no head row), and the message rows' seqs and payloads, in the rows' order.

    Each column is taken out in one pass at C speed: a read runs on every turn, mostly to find every row
    as it was.
    """
    seqs: list[Any] = list(map(_SEQ, rows))
    payloads: list[Any] = list(map(_PAYLOAD, rows))
    try:
        at = seqs.index(None)  # the head row (one at most: memory_id is the head table's key)
    except ValueError:
        return None, seqs, payloads
    head = ReadHead.unpack(payloads[at])
    del seqs[at], payloads[at]
    return head, seqs, payloads


def _in_order(seqs: list[int], payloads: list[bytes | None]) -> tuple[list[int], list[bytes | None]]:
    """The message rows in ``seq`` order.

    The statement has no ``ORDER BY`` (see :func:`~chatmemory.stores.sql.statements.window_read`): the rows
    come in whatever order the server finds them (on PostgreSQL a long window's rows mostly out of order),
    and are sorted here when they are not in order.
    """
    if not any(map(gt, seqs, seqs[1:])):
        return seqs, payloads
    pairs = sorted(zip(seqs, payloads, strict=True), key=_SEQ)
    return list(map(_SEQ, pairs)), list(map(_PAYLOAD, pairs))


def decode_read(
    memory_id: str, rows: Sequence[ReadRow], cached: CachedSnapshot | None, codec: RecordCodec = PLAIN
) -> ReadResult | StaleCache | Corrupted | Headless:
    """Turn the read statement's rows (in any order) into a snapshot, reusing the cached messages they left out.

    Within one incarnation a sequence number is written once and never reused (rewrites take new ones),
    so a row below the cached ``next_seq`` is a message of the cached snapshot and is not decoded again.
    No head row: :class:`~chatmemory.stores.sql.outcomes.Headless` (absent, or damage: see
    :func:`absent_read`).

    Raises:
        CorruptedMemoryError: a payload does not decode.
        UnsupportedFormatVersionError: a payload is from a newer format.
    """
    head, seqs, payloads = _split(rows)
    if head is None:
        return HEADLESS
    if not head.live:
        return ReadResult(Snapshot([], 0), None)
    if (
        cached is not None
        and head.version == cached.version
        and head.incarnation == cached.incarnation
        and payloads.count(None) == len(payloads)
        and (tuple(seqs) == cached.seqs or sorted(seqs) == list(cached.seqs))
    ):
        # Unchanged since the cached snapshot: every row came without its payload, the same rows (in any
        # order: the cached seqs are in order).
        telemetry.note(bytes=0)
        return ReadResult(Snapshot(list(cached.messages), head.version), cached)
    seqs, payloads = _in_order(seqs, payloads)
    known = (
        dict(zip(cached.seqs, cached.messages, strict=True))
        if cached is not None and cached.incarnation == head.incarnation
        else {}
    )
    telemetry.note(bytes=sum(len(payload) for payload in payloads if payload is not None))
    lookup = known.get
    messages: list[ChatMessage | object] = [
        lookup(seq, _MISSING) if payload is None else codec.loads(payload, memory_id, seq)
        for seq, payload in zip(seqs, payloads, strict=True)
    ]
    if any(message is _MISSING for message in messages):
        return StaleCache()
    # A row appended by hand past the head's next_seq must not collide with the next insert.
    next_seq = max(head.next_seq, seqs[-1] + 1) if seqs else head.next_seq
    decoded = cast("list[ChatMessage]", messages)
    state = CachedSnapshot(head.version, head.incarnation, next_seq, tuple(seqs), tuple(decoded), head.window_start)
    return ReadResult(Snapshot(decoded, head.version), state)


def absent_read(strays: Sequence[ReadRow]) -> ReadResult | Corrupted:
    """What a read without a head row found, given the stray read's rows: an absent memory, or damage."""
    if strays:
        return Corrupted(stray_detail(len(strays)))
    return ReadResult(Snapshot([], 0), None)


def raw_records(rows: Sequence[ReadRow]) -> list[bytes] | Headless:
    """The payloads of a read made without a cached snapshot; with no head row, ``Headless``.

    Then the stray read's rows are what an operator inspects (:func:`stray_records`).
    """
    head, seqs, payloads = _split(rows)
    if head is None:
        return HEADLESS
    if not head.live:
        return []
    return [bytes(payload) for payload in _in_order(seqs, payloads)[1] if payload is not None]


def stray_records(strays: Sequence[ReadRow]) -> list[bytes]:
    """The payloads of message rows without a head row, in ``seq`` order."""
    return [bytes(payload) for _, payload in sorted(strays, key=itemgetter(0))]


class HistoryRow(Protocol):
    """A row of a history page statement."""

    seq: int
    payload: bytes
    written_at: Any


HISTORY_OFFSET = 1
"""A history entry's sequence is its row's ``seq`` plus this (rows number from 0, entries from 1)."""


def history_parameters(memory_id: str, query: HistoryQuery) -> dict[str, Any]:
    """Parameters of the history page statement of ``query`` (one row more than the page: see ``page``)."""
    parameters: dict[str, Any] = {"p_id": memory_id, "p_limit": query.limit + 1}
    if query.after is not None:
        parameters["p_after"] = query.after - HISTORY_OFFSET
    return parameters


def decode_history(
    memory_id: str, rows: Sequence[HistoryRow], query: HistoryQuery, codec: RecordCodec = PLAIN
) -> HistoryPage:
    """The page of the rows a history statement read, in the query's order.

    Raises:
        CorruptedMemoryError: a payload does not decode.
    """
    entries = []
    for row in rows:
        written_at = aware(row.written_at)
        if written_at is None:  # pragma: no cover - the statement reads rows with a write time only
            raise AssertionError("a history row without its write time")
        message = codec.loads(bytes(row.payload), memory_id, int(row.seq))
        entries.append(HistoryEntry(int(row.seq) + HISTORY_OFFSET, message, written_at))
    return query.page(entries)


def clock_time(micros: int) -> datetime.datetime:
    """The server clock's reading (microseconds since the epoch) as an aware UTC datetime."""
    return datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc) + datetime.timedelta(microseconds=int(micros))
