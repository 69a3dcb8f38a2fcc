"""What the Redis store plans and reads back for operators' tools: a memory's write time and expiry.

The scripts (``scripts/times.lua``, ``scripts/expire.lua``) use the server's clock; this module turns an
aware datetime into the milliseconds they take and their replies into :class:`MemoryTimes`. No I/O, no
driver (see :mod:`chatmemory.memory_times` for the capabilities).
"""

from __future__ import annotations

import datetime

from chatmemory.core.errors import StoreError
from chatmemory.memory_times import MemoryTimes
from chatmemory.stores.base.operations import Operation
from chatmemory.stores.redis.commands import ScriptCall
from chatmemory.stores.redis.keys import KeySpace
from chatmemory.stores.redis.scripts import EXPIRE, TIMES

__all__ = ["expire_at_call", "expire_at_done", "memory_times_of", "times_call", "times_of"]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MILLISECOND = datetime.timedelta(milliseconds=1)


def _time_of(call: ScriptCall, raw: object) -> datetime.datetime | None:
    if raw == b"":
        return None
    if not isinstance(raw, bytes) or not raw.isdigit():
        raise StoreError(call.operation, call.memory_id, f"the {call.script.name} script replied a time of {raw!r}")
    return _EPOCH + int(raw) * _MILLISECOND


def times_call(key_space: KeySpace, memory_id: str) -> ScriptCall:
    """The script run that reads ``memory_id``'s last write time and expiry (``memory_id`` validated here)."""
    keys = key_space.keys_of(memory_id)
    return ScriptCall(TIMES, keys, (), Operation.READ, memory_id, keys.window)


def times_of(call: ScriptCall, reply: object) -> MemoryTimes | None:
    """The times the script's ``reply`` tells; ``None`` when the memory does not exist.

    Raises:
        StoreError: the reply is not one the times script gives.
    """
    if reply == 0:
        return None
    if isinstance(reply, list) and len(reply) == 2:
        return MemoryTimes(_time_of(call, reply[0]), _time_of(call, reply[1]))
    raise StoreError(call.operation, call.memory_id, f"the times script replied {reply!r}")


def memory_times_of(call: ScriptCall, written: object, expires: object) -> MemoryTimes:
    """The times of a reply's ``written`` and ``expires`` fields, as the times script gives them (``stored.lua``).

    Raises:
        StoreError: a field is neither ``''`` nor a count of milliseconds.
    """
    return MemoryTimes(_time_of(call, written), _time_of(call, expires))


def expire_at_call(
    key_space: KeySpace, memory_id: str, when: datetime.datetime | None, with_history: bool = False
) -> ScriptCall:
    """The script run that makes ``memory_id`` expire at ``when`` (``None``: never).

    A time before 1970 is taken as 1970: either way the memory expires at once. With ``with_history``
    (a store whose history expires with the window) the history gets the same expiry.

    Raises:
        ValueError: ``when`` is not an aware datetime.
    """
    if when is None:
        at = b""
    elif isinstance(when, datetime.datetime) and when.utcoffset() is not None:
        at = b"%d" % max(0, (when - _EPOCH) // _MILLISECOND)
    else:
        raise ValueError(f"expire_at takes an aware datetime (e.g. in UTC) or None, not {when!r}")
    keys = key_space.keys_of(memory_id)
    return ScriptCall(
        EXPIRE, keys, (at,), Operation.WRITE, memory_id, keys.with_history if with_history else keys.window
    )


def expire_at_done(call: ScriptCall, reply: object) -> None:
    """Check the expire script's ``reply``.

    Raises:
        StoreError: the reply is not one the expire script gives.
    """
    if reply != 1:
        raise StoreError(call.operation, call.memory_id, f"the expire script replied {reply!r}")
