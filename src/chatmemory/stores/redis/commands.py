"""What a Redis store's operations ask an executor to send (pure: no driver, no I/O).

The operations (:mod:`.steps`) are generators: each yields a command below, receives the driver's reply
through ``send`` and, when the driver fails, gets the store's error for that failure thrown back in at
the same ``yield`` (see :func:`chatmemory.core.driving.drive`). The blocking executor sends a
command with redis-py's ``Redis`` / ``RedisCluster``, the asyncio one with ``redis.asyncio``; both run a
:class:`ScriptCall` as ``EVALSHA``, falling back to ``EVAL`` when the server does not know the script.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any, NamedTuple, TypeVar

from chatmemory.core.memory_steps import Sleep
from chatmemory.stores.redis.keys import MemoryKeys
from chatmemory.stores.redis.scripts import LuaScript

__all__ = ["Call", "Command", "Scan", "ScriptCall", "Sends", "Sleep"]

_T = TypeVar("_T")


class ScriptCall(NamedTuple):
    """One script run: ``EVALSHA script.sha len(names) *names *args``.

    Attributes:
        script: the script to run.
        keys: the keys of the memory it is for.
        args: its arguments (bytes: the driver sends them as they are).
        operation: what a driver failure is reported as (an :class:`~chatmemory.stores.base.Operation`).
        memory_id: the memory it is for.
        names: the keys sent (``KEYS`` in the script): ``keys.window``, ``keys.with_history`` or
            ``(keys.history,)``.
    """

    script: LuaScript
    keys: MemoryKeys
    args: tuple[bytes, ...]
    operation: str
    memory_id: str
    names: tuple[bytes, ...]

    def request(self) -> tuple[str, tuple[Any, ...]]:
        """The client method and its arguments: ``EVALSHA sha len(names) *names *args``.

        Sent with ``execute_command`` (what ``evalsha`` calls, two calls fewer per run).
        """
        return "execute_command", ("EVALSHA", self.script.sha, len(self.names), *self.names, *self.args)

    def fallback(self) -> tuple[Any, ...]:
        """``eval``'s arguments, for a server that does not know the script: its source in place of its sha."""
        return (self.script.source, len(self.names), *self.names, *self.args)


class Call(NamedTuple):
    """One plain client command: ``client.<method>(*args)`` (``lrange``, ``delete``), its reply as it comes.

    Attributes:
        method: the client method.
        args: its arguments.
        operation: what a driver failure is reported as.
        memory_id: the memory it is for.
    """

    method: str
    args: tuple[Any, ...]
    operation: str
    memory_id: str

    def request(self) -> tuple[str, tuple[Any, ...]]:
        """The client method and its arguments."""
        return self.method, self.args


class Scan(NamedTuple):
    """Every key matching ``pattern`` (``SCAN`` over every primary of a cluster), replied as a set.

    Attributes:
        pattern: the ``MATCH`` pattern.
        operation: what a driver failure is reported as.
        memory_id: always ``None``: a scan is for no one memory.
    """

    pattern: bytes
    operation: str
    memory_id: None = None


Command = ScriptCall | Call | Scan | Sleep
"""Anything an operation yields (a :class:`~chatmemory.core.memory_steps.Sleep` while a writer waits its turn)."""

Sends = Generator[Command, object, _T]
"""An operation: yields commands, receives each reply, returns its result."""
