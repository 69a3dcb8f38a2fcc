"""What a LangChain4j-layout store's operations ask an executor to send (pure: no driver, no I/O).

The operations (:mod:`.operations`) are generators that yield these commands and receive the driver's
replies; the executors (:mod:`.executor`, :mod:`.aio`) send them with redis-py and translate a driver
exception into the store's error (each command names the operation a failure is reported as, and its
memory) before it is thrown back in at the ``yield``. A writer waiting for a memory's lease lock yields
:class:`~chatmemory.core.driving.Sleep` between tries. A write that waits for replicas goes as a
:class:`LayoutWrite` inside the Redis store's ``Acknowledged``. Named tuples: one or two are built on
every turn, several times faster than frozen dataclasses.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from chatmemory.core.driving import Sleep

__all__ = ["Command", "Get", "LayoutWrite", "Scan", "Script", "Set", "SetIfAbsent"]


class Get(NamedTuple):
    """``GET key``: the reply is the value, or ``None``."""

    key: bytes
    operation: str
    memory_id: str

    def request(self) -> tuple[str, tuple[Any, ...]]:
        """The client method and its arguments."""
        return "get", (self.key,)


class Script(NamedTuple):
    """``EVALSHA sha len(keys) *keys *args`` (``EVAL source ...`` when the server does not know it)."""

    source: str
    sha: str
    keys: tuple[bytes, ...]
    args: tuple[bytes, ...]
    operation: str
    memory_id: str

    def request(self) -> tuple[str, tuple[Any, ...]]:
        """The client method and its arguments: ``evalsha(sha, len(keys), *keys, *args)``."""
        return "evalsha", (self.sha, len(self.keys), *self.keys, *self.args)

    def fallback(self) -> tuple[Any, ...]:
        """``eval``'s arguments, for a server that does not know the script: its source in place of its sha."""
        return (self.source, len(self.keys), *self.keys, *self.args)


class Set(NamedTuple):
    """``SET key value [PX px]``, as LangChain4j writes (``px`` ``None``: no expiry)."""

    key: bytes
    value: bytes
    px: int | None
    operation: str
    memory_id: str

    def request(self) -> tuple[str, tuple[Any, ...]]:
        """The client method and its arguments (``set(name, value, ex, px)``)."""
        return "set", (self.key, self.value, None, self.px)


class SetIfAbsent(NamedTuple):
    """``SET key value NX PX px``: the reply is ``True`` when it was set, ``None`` when the key was there."""

    key: bytes
    value: bytes
    px: int
    operation: str
    memory_id: str

    def request(self) -> tuple[str, tuple[Any, ...]]:
        """The client method and its arguments (``set(name, value, ex, px, nx)``)."""
        return "set", (self.key, self.value, None, self.px, True)


class Scan(NamedTuple):
    """Every key of type ``type`` matching ``pattern`` (over every primary of a cluster), replied as a set."""

    pattern: bytes
    type: str
    operation: str
    memory_id: None = None


class LayoutWrite(NamedTuple):
    """A write of this layout as the Redis store's acknowledged sending takes it (a ``PinnedWrite``).

    Attributes:
        command: the script run or the plain ``SET``.
        operation: what a :class:`~chatmemory.stores.redis.ReplicationError` is reported as.
        memory_id: the memory written.
    """

    command: Script | Set
    operation: str
    memory_id: str

    @property
    def key(self) -> bytes:
        """The memory's key, or its history's for a trim: where a cluster sends the write."""
        command = self.command
        return command.keys[0] if isinstance(command, Script) else command.key

    def sent(self, fallback: bool) -> tuple[Any, ...]:
        """The write as ``execute_command``'s arguments (``EVAL`` of the source if ``fallback``)."""
        command = self.command
        if isinstance(command, Set):
            expiry = () if command.px is None else ("PX", command.px)
            return ("SET", command.key, command.value, *expiry)
        if fallback:
            return ("EVAL", *command.fallback())
        return ("EVALSHA", command.sha, len(command.keys), *command.keys, *command.args)


Command = Get | Script | Set | SetIfAbsent | Scan | Sleep
"""Anything an operation yields (a :class:`~chatmemory.core.driving.Sleep` while a writer waits its turn)."""
