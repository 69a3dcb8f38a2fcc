"""Writes acknowledged by replicas (``replicas_to_ack``): what is sent, what the replies mean (pure: no I/O).

``WAIT`` counts the replicas that hold the writes of its own connection, so a store asked for
``replicas_to_ack`` sends each write of a memory with a ``WAIT`` right behind it on the same connection
(an :class:`Acknowledged` command: one pipeline on the node that owns the memory's slot, see
:mod:`.acknowledged_sending`). :func:`acknowledged` wraps an operation of :mod:`.steps` (or, given ``pin``,
another key layout's, as :class:`PinnedWrite`) and raises :class:`ReplicationError` after a write that
fewer replicas acknowledged in time: the write stays. The lease lock of ``modify`` is not waited for.
:class:`Redirects` decides what a write pinned to one node does after each refusal of the cluster
(``MOVED``, ``ASK``, ``TRYAGAIN``, a lost node). The guide: *Durability you can choose* in ``docs/scaling.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, TypeVar

from chatmemory.core.errors import StoreError
from chatmemory.stores.redis.commands import Call, Command, ScriptCall, Sends
from chatmemory.stores.redis.config import Replication
from chatmemory.stores.redis.scripts import EXPIRE, RESTORE, TRIM, WRITE

__all__ = [
    "Acknowledged",
    "Ask",
    "Moved",
    "Pause",
    "PinnedWrite",
    "Redirects",
    "Refresh",
    "AcknowledgedSends",
    "ReplicationError",
    "acknowledged",
]

_T = TypeVar("_T")

_ACKNOWLEDGED_SCRIPTS = (WRITE, EXPIRE, TRIM, RESTORE)
"""The scripts that change what a memory holds (not the lock's, not the reads)."""


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


def _changes_the_memory(command: object) -> ScriptCall | Call | None:
    """``command`` if it is a write of this layout that changes the memory (one to wait for), else ``None``."""
    if isinstance(command, ScriptCall):
        return command if command.script in _ACKNOWLEDGED_SCRIPTS else None
    return command if isinstance(command, Call) and command.method == "delete" else None


def _replayed(command: object, reply: object) -> bool:
    """Whether ``reply`` says the write script found this write applied already (its first reply was lost)."""
    return (
        isinstance(command, ScriptCall) and command.script is WRITE and isinstance(reply, list) and reply[:1] == [b"r"]
    )


AcknowledgedSends = Generator[Command | Acknowledged, object, _T]
"""An operation whose writes wait for replicas."""


def acknowledged(
    operation: Sends[_T] | Generator[Any, object, _T],
    replication: Replication,
    *,
    pin: Callable[[object], ScriptCall | Call | PinnedWrite | None] = _changes_the_memory,
    replayed: Callable[[Any, object], bool] = _replayed,
) -> AcknowledgedSends[_T]:
    """``operation`` with each write that changes the memory sent as :class:`Acknowledged`.

    ``pin`` gives the write to wait for in a command the operation yields (``None``: send it as it is),
    ``replayed`` whether the write's reply says it had landed already (sent again after a lost reply):
    this layout's by default.

    Raises:
        ReplicationError: the operation's last write (the one that landed) had fewer acknowledgements than
            asked for; raised once the operation is done, its result (and the snapshot cache) in place.
    """
    reply: object = None
    failure: BaseException | None = None
    shortfall: tuple[ScriptCall | Call | PinnedWrite, int | None] | None = None
    while True:
        try:
            command = operation.send(reply) if failure is None else operation.throw(failure)
        except StopIteration as done:
            if shortfall is not None:
                write, acked = shortfall
                raise ReplicationError(
                    write.operation,
                    write.memory_id or "",
                    acked,
                    replication.replicas,
                    replication.timeout_ms,
                ) from None
            return done.value  # type: ignore[no-any-return]
        reply, failure = None, None
        try:
            pinned = pin(command)
            if pinned is not None:
                replied: Any = yield Acknowledged(pinned, replication.replicas, replication.timeout_ms)
                reply, acked = replied
                if replayed(pinned, reply):
                    shortfall = (pinned, None)
                else:
                    shortfall = None if acked >= replication.replicas else (pinned, acked)
            else:
                reply = yield command
        except Exception as exc:  # thrown in by the executor: the operation handles it
            failure = exc


# --------------------------------------------------------------------- a write pinned to one node


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
        names: the error classes, by what they mean: ``moved``, ``ask``, ``tryagain`` and ``lost`` (a tuple:
            connection lost, timeout, cluster down, slot not covered).
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
