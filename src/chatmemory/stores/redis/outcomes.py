"""What the Redis scripts' replies mean: typed outcomes of a read and of a write (pure: no driver, no I/O).

The frequent outcomes are named tuples (built several times faster than dataclasses: a turn makes one),
the rare ones frozen dataclasses. A reply no script of this store gives is a :class:`StoreError` naming
the script: another program may be using the script's hash.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from chatmemory.core.errors import StoreError
from chatmemory.stores.redis.cached import CachedMemory
from chatmemory.stores.redis.commands import ScriptCall

__all__ = [
    "Absent",
    "Conflict",
    "Corrupted",
    "Loaded",
    "ReadOutcome",
    "StaleIncarnation",
    "WriteOutcome",
    "Written",
    "read_outcome",
    "unexpected",
    "write_outcome",
]


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
