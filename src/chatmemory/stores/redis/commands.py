"""What a Redis store's operations ask an executor to send (pure: no driver, no I/O).

The operations (:mod:`.operations`) are generators: each yields a command below, receives the driver's
reply through ``send`` and, when the driver fails, gets the store's error for that failure thrown back in
at the same ``yield`` (see :func:`chatmemory.core.driving.drive`). Each command names the operation a
failure is reported as and its memory. The executors (:mod:`.executor`, :mod:`.aio`) run a
:class:`ScriptCall` as ``EVALSHA``, falling back to ``EVAL`` when the server does not know the script; a
:class:`Pipelined` batch in one pipeline; an :class:`Acknowledged` write with ``WAIT`` behind it on its
connection; a :class:`~chatmemory.core.driving.Sleep` with ``time.sleep`` or ``asyncio.sleep``.
"""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from chatmemory.core.driving import Sleep
from chatmemory.stores.redis.keys import MemoryKeys
from chatmemory.stores.redis.scripts import LuaScript

__all__ = [
    "Acknowledged",
    "Call",
    "Command",
    "PinnedWrite",
    "Pipelined",
    "Replication",
    "Request",
    "Scan",
    "ScriptCall",
    "positive_seconds",
]


class Request(Protocol):
    """A command that is one client call."""

    def request(self) -> tuple[str, tuple[Any, ...]]:
        """The client method and its arguments."""
        ...


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


class Pipelined(NamedTuple):
    """Commands sent in one pipeline; the reply is the list of their replies, in order.

    The executor sends a script the server did not know again as ``EVAL``, and raises the store's error
    for a command the server refused (naming its memory).

    Attributes:
        commands: the commands.
        operation: what a driver failure is reported as.
        memory_id: always ``None``: a batch is for no one memory.
    """

    commands: tuple[ScriptCall | Call, ...]
    operation: str
    memory_id: None = None


class PinnedWrite(Protocol):
    """A write of another key layout that :class:`Acknowledged` can carry (the LangChain4j store's)."""

    @property
    def operation(self) -> str:
        """What a failure is reported as."""
        ...

    @property
    def memory_id(self) -> str:
        """The memory written."""
        ...

    @property
    def key(self) -> bytes:
        """A key of the write (all of them share its hash slot): where a cluster sends it."""
        ...

    def sent(self, fallback: bool) -> tuple[Any, ...]:
        """The write as ``execute_command``'s arguments (``EVAL`` in place of ``EVALSHA`` if ``fallback``)."""
        ...


def positive_seconds(name: str, value: float) -> float:
    """``value`` as seconds, checked: a finite number above zero.

    Raises:
        ValueError: ``value`` is not a finite number above zero (the message names the option ``name``).
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number of seconds above zero, got {value!r}")
    return float(value)


@dataclass(frozen=True, slots=True)
class Replication:
    """How many replicas must hold a write before it counts as done, and how long to wait for them.

    Attributes:
        replicas: the ``numreplicas`` of ``WAIT`` (at least 1).
        timeout_ms: its timeout in milliseconds (at least 1: ``WAIT`` takes 0 as "forever").
    """

    replicas: int
    timeout_ms: int

    @classmethod
    def validate(cls, replicas_to_ack: int, replicas_timeout: float | datetime.timedelta) -> Replication | None:
        """The replication a store waits for; ``None`` for ``replicas_to_ack=0`` (no waiting).

        Raises:
            TypeError: ``replicas_to_ack`` is not an int.
            ValueError: ``replicas_to_ack`` is negative, or ``replicas_timeout`` is not a positive finite time.
        """
        if isinstance(replicas_to_ack, bool) or not isinstance(replicas_to_ack, int):
            raise TypeError(f"replicas_to_ack must be an int (0: do not wait for replicas), got {replicas_to_ack!r}")
        if replicas_to_ack < 0:
            raise ValueError(f"replicas_to_ack must be 0 or more, got {replicas_to_ack}")
        if isinstance(replicas_timeout, datetime.timedelta):
            replicas_timeout = replicas_timeout.total_seconds()
        seconds = positive_seconds("replicas_timeout", replicas_timeout)
        if replicas_to_ack == 0:
            return None
        return cls(replicas_to_ack, max(1, math.ceil(seconds * 1000)))


class Acknowledged(NamedTuple):
    """A write followed by ``WAIT replicas timeout_ms`` on the same connection; replied ``(reply, acked)``.

    Attributes:
        command: the write (a script run, or ``DEL``; another layout's :class:`PinnedWrite`).
        replicas: how many replicas to wait for.
        timeout_ms: for how long at most.
    """

    command: ScriptCall | Call | PinnedWrite
    replicas: int
    timeout_ms: int

    @property
    def operation(self) -> str:
        """What a driver failure is reported as: the write's."""
        return self.command.operation

    @property
    def memory_id(self) -> str:
        """The memory written."""
        return self.command.memory_id

    @property
    def key(self) -> bytes:
        """A key of the write (all of them share its hash slot): where a cluster sends it."""
        command = self.command
        if isinstance(command, ScriptCall):
            return command.names[0]
        return command.args[0] if isinstance(command, Call) else command.key

    def requests(self, asking: bool, fallback: bool) -> list[tuple[Any, ...]]:
        """The pipeline's commands as ``execute_command`` arguments: [``ASKING``,] the write, ``WAIT``."""
        write = self.command
        if isinstance(write, ScriptCall):
            sent: tuple[Any, ...] = (
                ("EVAL", *write.fallback())
                if fallback
                else ("EVALSHA", write.script.sha, len(write.names), *write.names, *write.args)
            )
        elif not isinstance(write, Call):  # another layout's write (a PinnedWrite) says how it is sent
            sent = write.sent(fallback)
        elif write.method == "delete":
            sent = ("DEL", *write.args)
        else:  # pragma: no cover - the writes an operation acknowledges are scripts and DEL
            raise AssertionError(f"no acknowledged form for {write.method}")
        return [*((("ASKING",),) if asking else ()), sent, ("WAIT", self.replicas, self.timeout_ms)]


Command = ScriptCall | Call | Scan | Sleep
"""Anything an operation yields (a :class:`~chatmemory.core.driving.Sleep` while a writer waits its turn)."""
