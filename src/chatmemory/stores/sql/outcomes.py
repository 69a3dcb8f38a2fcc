"""What the SQL store's replies mean: typed outcomes, the window read decoded, and driver failures by kind.

A read's rows become a :class:`ReadResult` (or :class:`StaleCache`, :class:`Corrupted`, :class:`Headless`);
a write says :class:`Written`, :class:`Unchanged` or :class:`Conflict`. The executors raise a driver's
exception as :class:`SQLFailure` (a ``StoreError`` saying what kind of failure it is, the driver's
exception its cause), on which :class:`WriteLoop` and :class:`ReadAttempts` decide retries. Pure: no
driver, no I/O.
"""

from __future__ import annotations

import datetime
import enum
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import gt, itemgetter
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from chatmemory import telemetry
from chatmemory.core.errors import ConcurrentUpdateError, CorruptedMemoryError, StoreError
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Snapshot
from chatmemory.memory_times import MemoryTimes
from chatmemory.serialization.records import PLAIN, RecordCodec
from chatmemory.stores.base import Attempts, Operation, RetryPolicy

if TYPE_CHECKING:
    from chatmemory.stores.sql.plan import LockedWrite, WriteRequest

__all__ = [
    "Abort",
    "CachedSnapshot",
    "Conflict",
    "Corrupted",
    "Failure",
    "Headless",
    "LockedHead",
    "ReadAttempts",
    "ReadHead",
    "ReadResult",
    "SQLFailure",
    "StaleCache",
    "Unchanged",
    "WriteLoop",
    "Written",
    "absent_read",
    "aware",
    "decode_read",
    "locked_head",
    "raw_records",
    "stray_detail",
    "stray_records",
    "times_of",
]


class Failure(enum.Enum):
    """What kind of driver failure an executor met (:attr:`SQLFailure.kind`)."""

    LOST = "lost connection"
    """The connection died under the call: its outcome is unknown; a retry takes a new connection."""
    CONFLICT = "conflict"
    """Another writer got there first (a serialization failure, a duplicate key, a lock wait timeout)."""
    DEADLOCK = "deadlock"
    """The database broke a deadlock by failing this transaction."""
    PACKET_TOO_LARGE = "packet too large"
    """MySQL/MariaDB: a statement that may be over ``max_allowed_packet``."""
    MISSED_BLOCK = "missed block"
    """MariaDB: the store's compound turn found its head row at another version (nothing was changed)."""
    OTHER = "other"


class SQLFailure(StoreError):
    """A driver failure, as an executor raises it: its :attr:`kind` and message (the driver's exception the cause).

    Operations branch on :attr:`kind`, and report it as their own operation with :meth:`error`. The
    executor fills in :attr:`sent_operation` and :attr:`sent_memory_id` from the command that failed.
    """

    def __init__(self, kind: Failure, detail: str) -> None:
        super().__init__("sending a SQL statement", None, detail)
        self.kind = kind
        self.detail = detail
        self.sent_operation: str | None = None
        """The operation the failed command named (``None``: it named none)."""
        self.sent_memory_id: str | None = None
        """The memory id the failed command named."""

    def sent(self, operation: str | None, memory_id: str | None) -> SQLFailure:
        """This failure, for a command that named ``operation`` and ``memory_id`` (the executor's)."""
        self.sent_operation = operation
        self.sent_memory_id = memory_id
        return self

    @property
    def retryable(self) -> bool:
        """Whether another writer, or a deadlock, caused it (tried again within the retry budget)."""
        return self.kind is Failure.CONFLICT or self.kind is Failure.DEADLOCK

    def error(self, operation: str | None = None, memory_id: str | None = None) -> StoreError:
        """The error ``operation`` raises for ``memory_id``, the driver's exception still its cause.

        Without ``operation``: the operation and memory id the failed command named.
        """
        if operation is None:
            operation, memory_id = self.sent_operation or self.operation, self.sent_memory_id
        error = StoreError(operation, memory_id, self.detail)
        error.__cause__ = self.__cause__
        return error


class Abort(Exception):
    """Rolls a locked write's transaction back with an outcome (stray rows found)."""

    def __init__(self, outcome: Corrupted) -> None:
        super().__init__(type(outcome).__name__)
        self.outcome = outcome


# ------------------------------------------------------------------------------------------ state


@dataclass(frozen=True, slots=True)
class CachedSnapshot:
    """The stored state of one memory at one version: message ``i`` is the row with sequence ``seqs[i]``.

    ``window_start`` is the head row's (see :func:`~chatmemory.stores.sql.plan.cover_window`): the window's rows below
    it form its pinned run.
    """

    version: int
    incarnation: int
    next_seq: int
    seqs: tuple[int, ...]
    messages: tuple[ChatMessage, ...]
    window_start: int = 0


# --------------------------------------------------------------------------------------- outcomes


@dataclass(frozen=True, slots=True)
class Written:
    """The write is stored at ``version``; ``state`` is the memory's state then (``None``: unknown)."""

    version: int
    state: CachedSnapshot | None


@dataclass(frozen=True, slots=True)
class Unchanged:
    """Nothing was written (a change left the memory as it was); it is at ``version``."""

    version: int


@dataclass(frozen=True, slots=True)
class Conflict:
    """Another writer got there first: the memory is not at the version the write was conditioned on."""


@dataclass(frozen=True, slots=True)
class Corrupted:
    """The stored memory is damaged; ``detail`` says how (for :class:`~chatmemory.CorruptedMemoryError`)."""

    detail: str

    def error(self, memory_id: str) -> CorruptedMemoryError:
        """The exception to raise for ``memory_id``."""
        return CorruptedMemoryError(memory_id, self.detail)


@dataclass(frozen=True, slots=True)
class ReadResult:
    """What a read found: the snapshot, and the state to cache (``None``: nothing is stored)."""

    snapshot: Snapshot
    state: CachedSnapshot | None


@dataclass(frozen=True, slots=True)
class Headless:
    """The read found no head row: the memory is absent, unless message rows exist without it (damage).

    The window read leaves headless rows out (they cost every read a probe); the executor then sends the
    stray read (:attr:`~chatmemory.stores.sql.statements.Statements.fast_strays`) and
    :func:`absent_read` says which it is.
    """


@dataclass(frozen=True, slots=True)
class StaleCache:
    """The rows name a message the cached snapshot does not hold (rows edited by hand): read again uncached."""


def stray_detail(count: int) -> str:
    """How message rows without a head row are reported."""
    return f"{count} message rows exist without the memory's head row; delete_messages or update_messages replaces them"


# ------------------------------------------------------------------------------------ read replies


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


@dataclass(frozen=True, slots=True)
class LockedHead:
    """The head row as the locked write found it (``present=False``: there is none), and the server clock.

    ``history_live``: the window expired but its history has not (a store with ``history_ttl``).
    """

    present: bool
    version: int
    incarnation: int
    next_seq: int
    live: bool
    recent_writes: str | None
    max_seq: int | None
    clock: int
    history_live: bool = False


class HeadRow(NamedTuple):
    """A row of the lock statement, as the driver hands it back (its columns in the statement's order)."""

    version: int
    incarnation: int
    next_seq: int
    live: int
    recent_writes: str | None
    max_seq: int | None
    clock: int
    history_live: int | None


def locked_head(row: HeadRow | None, clock: int | None) -> LockedHead:
    """The typed reply of the lock statement (``row``), or of the clock statement when there was no row."""
    if row is None:
        if clock is None:
            raise ValueError("a write creating a memory needs the server clock")
        return LockedHead(False, 0, 0, 0, False, None, None, int(clock))
    return LockedHead(
        True,
        row.version,
        row.incarnation,
        row.next_seq,
        bool(row.live),
        row.recent_writes,
        row.max_seq,
        int(row.clock),
        bool(row.history_live),
    )


def locked_read(
    memory_id: str, head: LockedHead, cached: CachedSnapshot | None, rows: Sequence[ReadRow], codec: RecordCodec
) -> ReadResult | StaleCache | Corrupted:
    """What a locked read-modify-write starts from: the rows read under the head row's lock.

    No rows were read when the head is absent or expired: the memory is empty at version 0. A stale
    cache asks the executor to read again without it, still under the lock.
    """
    if not (head.present and head.live) or not rows:
        return ReadResult(Snapshot([], 0), None)
    result = decode_read(memory_id, rows, cached, codec)
    if isinstance(result, Headless):  # pragma: no cover - the head row is locked, and read with the rows
        raise AssertionError("a locked read without its head row")
    return result


def cached_window(head: LockedHead, cached: CachedSnapshot | None) -> ReadResult | None:
    """The window a locked read-modify-write starts from without reading it: the cached one, if it is the head's.

    The head row, locked, is at the cached version and incarnation (and sequence): every write bumps the
    version, a new incarnation replaces every row, so the rows are those the cache describes, as a diffed
    turn takes them to be. ``None``: the head is absent, expired or elsewhere; read the window.
    """
    if cached is None or not (head.present and head.live):
        return None
    if (cached.version, cached.incarnation, cached.next_seq) != (head.version, head.incarnation, head.next_seq):
        return None
    return ReadResult(Snapshot(list(cached.messages), cached.version), cached)


def stray_rows(plan: LockedWrite, deleted: int) -> Corrupted | None:
    """Whether the rows a write creating a memory found without a head row stop it.

    Message rows without a head row are nothing this store leaves behind (deletes and purges are
    transactions): they are damage. A conditional write (a window memory's add) must not silently
    replace them; an unconditional one is the operator's way to do exactly that.
    """
    if plan.insert_head and deleted and plan.conditional:
        return Corrupted(stray_detail(deleted))
    return None


def aware(value: Any) -> datetime.datetime | None:
    """A timestamp column's value as an aware UTC datetime (``None`` for anything else)."""
    # PostgreSQL returns aware datetimes; SQLite and MySQL DATETIME return naive ones, which the store
    # always writes in UTC (the server clock expressions and expiry_parameter below).
    if not isinstance(value, datetime.datetime):
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=datetime.timezone.utc)
    return value.astimezone(datetime.timezone.utc)


def times_of(row: Sequence[Any] | None) -> MemoryTimes | None:
    """The times of a live head row ``(updated_at, expires_at)``; ``None`` when there is none."""
    if row is None:
        return None
    return MemoryTimes(aware(row[0]), aware(row[1]))


# ----------------------------------------------------------------------------------------- retries

_DISCONNECT_RETRIES = 1


class WriteLoop:
    """The attempts of one write (or of another operation that changes rows: a delete, a trim, a purge).

    A lost connection is tried once more on a new one (a write through the locked path, which finds its
    write id if the first send landed); conflicts and deadlocks again after a jittered backoff, within
    ``policy``'s time budget; a diffed write whose snapshot went stale reports the conflict (conditional)
    or falls back to the locked path at once.

    Args:
        request: the write (``None`` for the others, which have no outcome to settle).
        policy: how long database-level conflicts are retried.
        operation: what the error says failed when conflicts outlast ``policy``.
        memory_id: the memory it names, when there is no ``request`` (``None``: every memory).
    """

    def __init__(
        self,
        request: WriteRequest | None,
        policy: RetryPolicy,
        operation: str = Operation.WRITE,
        memory_id: str | None = None,
    ) -> None:
        self._request = request
        self._operation = operation
        self._memory_id = memory_id if request is None else request.memory_id
        self._policy = policy
        self._started = time.monotonic()
        self._attempts: Attempts | None = None  # made at the first retry: most writes never need one
        self._disconnects = 0
        self._last_error: SQLFailure | None = None
        self._conflicted = False
        self.may_diff = True
        """Whether the next attempt may take the diffed path (not after a lost connection or a stale diff)."""

    def retryable(self, failure: SQLFailure) -> bool:
        """Whether the attempt that failed so may be tried again (after :meth:`delay`)."""
        if failure.kind is Failure.LOST and self._disconnects < _DISCONNECT_RETRIES:
            self._disconnects += 1
        elif failure.retryable:
            telemetry.conflicted()
        else:
            return False
        self.may_diff = False
        self._last_error = failure
        return True

    def settle(self, outcome: Written | Conflict | Corrupted) -> Written | None:
        """The written outcome, or ``None`` to try again (after :meth:`delay`).

        Raises:
            ConcurrentUpdateError: a conditional write found the memory at another version.
            CorruptedMemoryError: the write found the memory damaged.
        """
        request = self._request
        assert request is not None
        if isinstance(outcome, Written):
            telemetry.note(version=outcome.version)
            return outcome
        if isinstance(outcome, Corrupted):
            raise outcome.error(request.memory_id)
        if request.conditional:
            raise ConcurrentUpdateError(request.memory_id, request.expected_version)
        # An unconditional write whose cached snapshot was stale writes under the lock instead.
        self.may_diff = False
        self._last_error = None
        return None

    def conflicted(self) -> None:
        """The attempt lost to another writer (its outcome said so): back off before the next one."""
        self._conflicted = True
        telemetry.conflicted()

    def delay(self) -> float:
        """Seconds to wait before the next attempt.

        Raises:
            StoreError: conflicts went on for the whole time budget.
        """
        error, self._last_error = self._last_error, None
        conflicted, self._conflicted = self._conflicted, False
        if (error is None and not conflicted) or (error is not None and error.kind is Failure.LOST):
            Attempts.again()
            return 0.0
        attempts = self._attempts
        if attempts is None:
            attempts = self._attempts = self._policy.start(started=self._started)
        delay = attempts.backoff()
        if delay is None:
            raise StoreError(
                self._operation,
                self._memory_id,
                f"conflicted with other writers on each of {attempts.count} attempts",
            ) from (None if error is None else error.__cause__)
        return delay


class ReadAttempts:
    """The attempts of one read: with the cached snapshot, then without it if the rows disagree with it."""

    def __init__(self) -> None:
        self._disconnects = 0
        self.use_cache = True
        """Whether this attempt may leave out the payloads of cached messages (an attribute: read per attempt)."""

    def stale(self) -> None:
        """The rows named a message the cache does not hold: read everything next time."""
        if not self.use_cache:
            raise AssertionError("a read without the cache cannot find the cache stale")
        self.use_cache = False
        telemetry.retried()

    def lost(self, failure: SQLFailure) -> bool:
        """Whether the attempt lost its connection and may be sent again (once, on a new one)."""
        if failure.kind is not Failure.LOST or self._disconnects >= _DISCONNECT_RETRIES:
            return False
        self._disconnects += 1
        telemetry.retried()
        return True

    def __iter__(self) -> Iterator[ReadAttempts]:
        """This object once per attempt allowed: at most a lost connection, a stale cache, and the read."""
        return repeat(self, _DISCONNECT_RETRIES + 2)
