"""What a LangChain4j-layout store's operations ask an executor to send (pure: no driver, no I/O).

The operations (:mod:`.operations`, :class:`.history.HistorySteps`) are generators that yield these
commands and receive the driver's replies; the sync executor sends them with redis-py's blocking client,
the asyncio one with ``redis.asyncio``, and both throw a driver exception back in at the ``yield`` where
the command was made (:func:`chatmemory.core.driving.drive`). A writer waiting for a memory's lease
lock yields :class:`~chatmemory.core.memory_steps.Sleep` between tries. Named tuples: one or two are
built on every turn, several times faster than frozen dataclasses.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple, TypeVar

from chatmemory.core.memory_steps import Sleep

__all__ = ["Command", "Get", "Scan", "Script", "Sends", "Set", "SetIfAbsent", "Sleep"]

_T = TypeVar("_T")


class Get(NamedTuple):
    """``GET key``: the reply is the value, or ``None``."""

    key: bytes

    def request(self) -> tuple[str, tuple[Any, ...]]:
        """The client method and its arguments."""
        return "get", (self.key,)


class Script(NamedTuple):
    """``EVALSHA sha len(keys) *keys *args`` (``EVAL source ...`` when the server does not know it)."""

    source: str
    sha: str
    keys: tuple[bytes, ...]
    args: tuple[bytes, ...]

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

    def request(self) -> tuple[str, tuple[Any, ...]]:
        """The client method and its arguments (``set(name, value, ex, px)``)."""
        return "set", (self.key, self.value, None, self.px)


class SetIfAbsent(NamedTuple):
    """``SET key value NX PX px``: the reply is ``True`` when it was set, ``None`` when the key was there."""

    key: bytes
    value: bytes
    px: int

    def request(self) -> tuple[str, tuple[Any, ...]]:
        """The client method and its arguments (``set(name, value, ex, px, nx)``)."""
        return "set", (self.key, self.value, None, self.px, True)


class Scan(NamedTuple):
    """Every key of type ``type`` matching ``pattern`` (over every primary of a cluster), replied as a set."""

    pattern: bytes
    type: str


Command = Get | Script | Set | SetIfAbsent | Scan | Sleep
"""Anything an operation yields (a :class:`~chatmemory.core.memory_steps.Sleep` while a writer waits its turn)."""

Sends = Generator[Command, object, _T]
"""An operation: yields commands, receives each reply, returns its result."""
