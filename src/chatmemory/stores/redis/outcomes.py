"""What the Redis scripts' replies and the cluster's refusals mean: typed outcomes (pure: no driver, no I/O).

A read's and a write's reply become the outcomes below; the times, batch-read, history and restore
scripts' replies become :class:`~chatmemory.memory_times.MemoryTimes`, :class:`StoredMemory`, history
records or counts. The frequent outcomes are named tuples (built several times faster than dataclasses: a
turn makes one), the rare ones frozen dataclasses. A reply no script of this store gives is a
:class:`StoreError` naming the script: another program may be using the script's hash. Also here: the
state a snapshot cache keeps (:class:`CachedMemory`), :class:`ReplicationError`, and :class:`Redirects`,
which says what a write pinned to one cluster node does after each refusal.
"""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from chatmemory.core.errors import StoreError
from chatmemory.core.history import HistoryEntry, HistoryPage, HistoryQuery, UnrestorableHistoryError
from chatmemory.core.messages import ChatMessage
from chatmemory.memory_times import MemoryTimes
from chatmemory.serialization.records import PLAIN, RecordCodec
from chatmemory.stored_memories import StoredMemory
from chatmemory.stores.redis.commands import ScriptCall
from chatmemory.stores.redis.keys import MemoryKeys

__all__ = [
    "Absent",
    "Ask",
    "CachedMemory",
    "Conflict",
    "Corrupted",
    "HistoryRecord",
    "Loaded",
    "Moved",
    "Pause",
    "ReadOutcome",
    "Redirects",
    "Refresh",
    "ReplicationError",
    "StaleIncarnation",
    "WriteOutcome",
    "Written",
    "expire_at_done",
    "history_page",
    "history_records",
    "read_outcome",
    "replied",
    "restored_count",
    "stored_of",
    "times_of",
    "unexpected",
    "write_outcome",
]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MILLISECOND = datetime.timedelta(milliseconds=1)


class CachedMemory(NamedTuple):
    """What a store last read or wrote of one memory (the state its snapshot cache keeps).

    A named tuple (immutable and typed like a frozen dataclass, built several times faster: a turn makes
    one or two).

    Attributes:
        version: the version it was read or written at.
        incarnation: the memory's incarnation token then.
        messages: the list, decoded.
        keys: the memory's keys (computed once).
        version_arg: ``version`` as the scripts compare it, encoded once.
    """

    version: int
    incarnation: bytes
    messages: tuple[ChatMessage, ...]
    keys: MemoryKeys
    version_arg: bytes


class Loaded(NamedTuple):
    """The read returned the memory's records (not decoded yet)."""

    version: int
    incarnation: bytes
    records: list[bytes]


@dataclass(frozen=True, slots=True)
class Absent:
    """There is no memory under the id."""


class Written(NamedTuple):
    """The write landed at ``version``.

    Attributes:
        version: the memory's version after the write.
        incarnation: the incarnation written (``None`` when ``replayed``).
        replayed: the write had landed already (its first reply was lost and the driver sent it again);
            the memory may have moved on since, so nothing is known of its current state.
    """

    version: int
    incarnation: bytes | None
    replayed: bool = False


@dataclass(frozen=True, slots=True)
class Conflict:
    """The memory is not at the expected version; nothing was written."""


@dataclass(frozen=True, slots=True)
class StaleIncarnation:
    """A diff's cached list is not the stored one (another incarnation); nothing was written."""


@dataclass(frozen=True, slots=True)
class Corrupted:
    """The memory's head is damaged (``reason`` says how); nothing was written."""

    reason: str


ReadOutcome = CachedMemory | Loaded | Absent | Corrupted
"""A read's outcome; the cached state itself when the read confirmed it (still at its version and incarnation)."""
WriteOutcome = Written | Conflict | StaleIncarnation | Corrupted


def unexpected(call: ScriptCall, reply: object) -> StoreError:
    """The error for a ``reply`` that the script of ``call`` never gives."""
    return StoreError(
        call.operation,
        call.memory_id,
        f"the {call.script.name} script replied {reply!r}; is another program using these keys' script hash?",
    )


def _version(call: ScriptCall, raw: object) -> int:
    if not isinstance(raw, bytes) or not raw.isdigit():
        raise unexpected(call, raw)
    return int(raw)


def read_outcome(call: ScriptCall, cached: CachedMemory | None, reply: object) -> ReadOutcome:
    """What the read script's ``reply`` to ``call`` (sent with ``cached``, if any) means.

    ``cached`` itself when the server still holds it ("unchanged": nothing new is made for the most
    frequent reply).

    Raises:
        StoreError: the reply is not one the read script gives.
    """
    if reply == 1:
        if cached is None:
            raise unexpected(call, reply)
        return cached
    if isinstance(reply, list) and reply:
        status = reply[0]
        if status == b"m" and len(reply) == 4 and isinstance(reply[2], bytes) and isinstance(reply[3], list):
            return Loaded(_version(call, reply[1]), reply[2], reply[3])
        if status == b"a":
            return Absent()
        if status == b"c" and len(reply) == 2 and isinstance(reply[1], bytes):
            return Corrupted(reply[1].decode("utf-8", "replace"))
    raise unexpected(call, reply)


def write_outcome(call: ScriptCall, incarnation: bytes | None, reply: object) -> WriteOutcome:
    """What the write script's ``reply`` to ``call`` (a diff on ``incarnation``, or a full write) means.

    Raises:
        StoreError: the reply is not one the write script gives.
    """
    if isinstance(reply, int) and incarnation is not None and reply > 0:
        return Written(reply, incarnation)
    if isinstance(reply, list) and reply:
        status = reply[0]
        if status == b"w" and len(reply) == 3 and isinstance(reply[2], bytes):
            return Written(_version(call, reply[1]), reply[2])
        if status == b"r" and len(reply) == 2:
            return Written(_version(call, reply[1]), None, replayed=True)
        if status == b"x":
            return Conflict()
        if status == b"s":
            return StaleIncarnation()
        if status == b"c" and len(reply) == 2 and isinstance(reply[1], bytes):
            return Corrupted(reply[1].decode("utf-8", "replace"))
    raise unexpected(call, reply)


# ------------------------------------------------------------------------------ times and batch reads


def _time_of(call: ScriptCall, raw: object) -> datetime.datetime | None:
    if raw == b"":
        return None
    if not isinstance(raw, bytes) or not raw.isdigit():
        raise StoreError(call.operation, call.memory_id, f"the {call.script.name} script replied a time of {raw!r}")
    return _EPOCH + int(raw) * _MILLISECOND


def times_of(call: ScriptCall, reply: object) -> MemoryTimes | None:
    """The times the times script's ``reply`` tells; ``None`` when the memory does not exist.

    Raises:
        StoreError: the reply is not one the times script gives.
    """
    if reply == 0:
        return None
    if isinstance(reply, list) and len(reply) == 2:
        return MemoryTimes(_time_of(call, reply[0]), _time_of(call, reply[1]))
    raise StoreError(call.operation, call.memory_id, f"the times script replied {reply!r}")


def expire_at_done(call: ScriptCall, reply: object) -> None:
    """Check the expire script's ``reply``.

    Raises:
        StoreError: the reply is not one the expire script gives.
    """
    if reply != 1:
        raise StoreError(call.operation, call.memory_id, f"the expire script replied {reply!r}")


def _records(call: ScriptCall, raw: object) -> list[bytes]:
    if not isinstance(raw, list):
        raise unexpected(call, raw)
    return raw


def stored_of(call: ScriptCall, reply: object) -> StoredMemory | None:
    """The memory ``stored.lua``'s ``reply`` to ``call`` tells; ``None`` when it does not exist.

    A memory whose head is damaged comes back with its records as ``read_raw`` reads them.

    Raises:
        StoreError: a reply the script never gives.
    """
    if reply == 0:
        return None
    if isinstance(reply, list):
        status = reply[0] if reply else None
        if status == b"m" and len(reply) == 6:
            version = reply[1]
            if not isinstance(version, bytes) or not version.isdigit() or not isinstance(reply[2], bytes):
                raise unexpected(call, reply)
            times = MemoryTimes(_time_of(call, reply[3]), _time_of(call, reply[4]))
            return StoredMemory(call.memory_id, _records(call, reply[5]), int(version), times)
        if status == b"c" and len(reply) == 5 and isinstance(reply[1], bytes):
            times = MemoryTimes(_time_of(call, reply[2]), _time_of(call, reply[3]))
            reason = reply[1].decode("utf-8", "replace")
            return StoredMemory(call.memory_id, _records(call, reply[4]), 0, times, damage=reason)
    raise unexpected(call, reply)


# ------------------------------------------------------------------------------------------ history


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


def history_records(operation: str, memory_id: str, reply: object) -> list[HistoryRecord]:
    """The entries of the history script's ``reply``, in the order it gave them (for any Redis layout).

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
        HistoryEntry(record.sequence, codec.loads(record.record, memory_id), _EPOCH + record.written_ms * _MILLISECOND)
        for record in records
    ]
    return query.page(entries)


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


# ------------------------------------------------------------------------ writes acknowledged by replicas


class ReplicationError(StoreError):
    """A write landed on the master, but fewer replicas than ``replicas_to_ack`` acknowledged it in time.

    The write is done and stays (do not send it again: an add would be stored twice). What is not known is
    whether it survives a failover of its master before a replica copies it. Causes: a replica down or
    resyncing, a master left without replicas after a failover (until the old master is back as a
    replica), a ``replicas_timeout`` shorter than the replicas' lag.

    Attributes:
        acked: how many replicas acknowledged the write (``None``: not known, for a write found already
            applied when it was sent again after a lost reply).
        wanted: ``replicas_to_ack``.
    """

    def __init__(self, operation: str, memory_id: str, acked: int | None, wanted: int, timeout_ms: int) -> None:
        self.acked = acked
        self.wanted = wanted
        told = (
            "its replication is not known (it had landed already when it was sent again after a lost reply)"
            if acked is None
            else f"{acked} of the {wanted} replicas asked for (replicas_to_ack) acknowledged it within {timeout_ms} ms"
        )
        super().__init__(
            operation,
            memory_id,
            f"the write is done on the master but {told}; it is kept (do not write it again), and it may be "
            "lost if its master fails before a replica has it",
        )


def replied(replies: list[Any]) -> tuple[object, int]:
    """``(write's reply, replicas that acknowledged)`` of an acknowledged write's pipeline; an error reply is raised."""
    reply, acked = replies[-2], replies[-1]
    if isinstance(reply, Exception):
        raise reply
    if isinstance(acked, Exception):
        raise acked
    return reply, int(acked)


@dataclass(frozen=True, slots=True)
class Moved:
    """The slot has a new owner: tell the client (its slot map), then send to the owner."""

    error: Exception


@dataclass(frozen=True, slots=True)
class Ask:
    """The slot is migrating and the memory's keys are gone to ``host:port``: send there after ``ASKING``."""

    host: str
    port: int


@dataclass(frozen=True, slots=True)
class Pause:
    """Wait ``seconds``, then send again to the same owner (``TRYAGAIN``: the memory's keys are moving)."""

    seconds: float


@dataclass(frozen=True, slots=True)
class Refresh:
    """Wait ``seconds``, have the client read the cluster's layout again, then send (a node lost or failing over).

    The write may have run before its connection was lost; sending it again is safe: the write script
    recognises its write id and replies what it wrote.
    """

    seconds: float


Redirect = Moved | Ask | Pause | Refresh

_REDIRECT_ATTEMPTS = 16
"""Redirections and ``TRYAGAIN`` followed at most (redis-py's ``RedisClusterRequestTTL``)."""
_TRYAGAIN_PAUSE = 0.05
_REFRESH_PAUSES = (0.1, 0.25, 0.5, 1.0, 1.0, 1.0)
"""Waits before each new attempt after a lost node: about 4 s in all, past a failover's few seconds."""


class Redirects:
    """What to do after each refusal of a pinned write, within a bounded number of attempts.

    Args:
        moved, ask, tryagain: the driver's error classes for ``MOVED``, ``ASK`` and ``TRYAGAIN``.
        lost: the driver's error classes for a lost node (connection lost, timeout, cluster down, slot not
            covered).
    """

    def __init__(
        self, moved: type[Exception], ask: type[Exception], tryagain: type[Exception], lost: tuple[type[Exception], ...]
    ) -> None:
        self._moved, self._ask, self._tryagain, self._lost = moved, ask, tryagain, lost
        self._redirects = 0
        self._refreshes = 0

    def after(self, error: Exception) -> Redirect | None:
        """The next step after ``error``; ``None``: give up and raise it."""
        if isinstance(error, self._lost):
            if self._refreshes >= len(_REFRESH_PAUSES):
                return None
            self._refreshes += 1
            return Refresh(_REFRESH_PAUSES[self._refreshes - 1])
        if not isinstance(error, (self._moved, self._ask, self._tryagain)):
            return None
        self._redirects += 1
        if self._redirects > _REDIRECT_ATTEMPTS:
            return None
        if isinstance(error, self._moved):
            return Moved(error)
        if isinstance(error, self._ask):
            return Ask(error.host, int(error.port))  # type: ignore[attr-defined]
        return Pause(_TRYAGAIN_PAUSE if self._redirects > _REDIRECT_ATTEMPTS // 2 else 0.0)
