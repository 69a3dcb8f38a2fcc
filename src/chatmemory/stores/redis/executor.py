"""The blocking executor of the Redis stores: sends each command with redis-py's blocking client.

``perform(command)`` sends one command of :mod:`.commands` and returns the reply; a driver exception is
translated (:func:`store_error`: the store's error, the driver's exception as ``__cause__``) before it is
thrown back into the operation. A script is sent as ``EVALSHA``, and again as ``EVAL`` when the server
answers ``NOSCRIPT`` (:func:`send`); on a cluster a command refused while its slot migrates is sent again
for a few seconds (:func:`send_resending`); a write that waits for replicas goes with its ``WAIT`` on one
connection of the slot's owner (:func:`send_acknowledged`). The LangChain4j-layout store sends with these
too. :class:`RedisExecutor` is the executor half of the blocking Redis store.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from chatmemory.core.driving import Sleep, Steps, drive
from chatmemory.core.errors import ChatMemoryError, CorruptedMemoryError, Operation, StoreError
from chatmemory.core.optional import require
from chatmemory.stores.redis.base import ClientTarget, StoreOptions
from chatmemory.stores.redis.commands import Acknowledged, Command, Pipelined, Request, Scan, ScriptCall
from chatmemory.stores.redis.operations import acknowledged
from chatmemory.stores.redis.outcomes import Ask, Moved, Redirects, Refresh, replied

require("redis", feature="RedisChatMemoryStore", extra="redis")

from redis import Redis  # noqa: E402 - only once the extra is known to be installed
from redis.cluster import RedisCluster  # noqa: E402
from redis.exceptions import (  # noqa: E402
    AskError,
    ClusterDownError,
    ClusterError,
    ConnectionError,
    MovedError,
    NoScriptError,
    RedisClusterException,
    RedisError,
    ResponseError,
    SlotNotCoveredError,
    TimeoutError,
    TryAgainError,
)

__all__ = [
    "DRIVER_ERRORS",
    "RESEND_FOR",
    "RedisExecutor",
    "redirects",
    "send",
    "send_acknowledged",
    "send_one",
    "send_pipelined",
    "send_resending",
    "store_error",
]

_T = TypeVar("_T")

DRIVER_ERRORS = (RedisError, RedisClusterException)
"""What the driver raises (a cluster client's ``RedisClusterException`` is not a ``RedisError``); the
asyncio client raises the same classes."""

RESEND_PAUSE = 0.1
RESEND_FOR = 5.0
"""Seconds a command refused while its slot migrates is sent again for."""


def store_error(exc: BaseException, operation: str, memory_id: str | None = None) -> ChatMemoryError:
    """The store's error for the driver's ``exc`` (raise it ``from exc``).

    A ``WRONGTYPE`` reply means a key of the memory holds a value of a type this store never writes
    there: the memory is damaged, not the server.
    """
    if isinstance(exc, ResponseError) and str(exc).startswith("WRONGTYPE") and memory_id is not None:
        return CorruptedMemoryError(
            memory_id, f"a key of the memory holds another type of value than this store writes ({exc})"
        )
    return StoreError(operation, memory_id, str(exc))


def send(client: Any, command: Request) -> Any:
    """Call the client method ``command`` names and return its reply (``EVAL`` after a ``NOSCRIPT``)."""
    if type(command) is ScriptCall:  # the store's every read and write: its request() without the detour
        names = command.names
        try:
            return client.execute_command("EVALSHA", command.script.sha, len(names), *names, *command.args)
        except NoScriptError:
            return client.eval(*command.fallback())
    method, args = command.request()
    try:
        return getattr(client, method)(*args)
    except NoScriptError:
        return client.eval(*command.fallback())  # type: ignore[attr-defined]  # only scripts get NOSCRIPT


def send_pipelined(client: Any, commands: Sequence[Request]) -> list[Any]:
    """Send ``commands`` in one pipeline (no transaction); their replies in order.

    A script the server did not know is sent again on its own as ``EVAL``. Any other error the server
    answered a command with is its reply (an exception instance): the caller raises it for that command.
    """
    pipeline = client.pipeline(transaction=False)
    for command in commands:
        method, args = command.request()
        getattr(pipeline, method)(*args)
    replies: list[Any] = pipeline.execute(raise_on_error=False)
    for index, reply in enumerate(replies):
        if isinstance(reply, NoScriptError):
            replies[index] = send(client, commands[index])
    return replies


def exhausted(exc: ClusterError, started: float) -> bool:
    """Whether ``exc`` is redis-py giving up on redirections (``TTL exhausted``), with time left to send again.

    redis-py's cluster client follows ``MOVED`` and ``ASK`` and retries ``TRYAGAIN`` itself, 16 times within
    about 0.4 s; a slot of many keys migrated a batch at a time can refuse a script's keys for longer. The
    command is then sent again after a pause, for up to :data:`RESEND_FOR` seconds: safe for a write, whose
    write id makes the script recognise a run that had landed (none had: a refused command does not run).
    """
    return "TTL exhausted" in str(exc) and time.monotonic() - started < RESEND_FOR


def send_resending(client: Any, command: Request) -> Any:
    """:func:`send`, sent again while redis-py's redirections run out (see :func:`exhausted`)."""
    started = time.monotonic()
    while True:
        try:
            return send(client, command)
        except ClusterError as exc:
            if not exhausted(exc, started):
                raise
        time.sleep(RESEND_PAUSE)


# ------------------------------------------------------------------------ writes acknowledged by replicas


def redirects() -> Redirects:
    """What a write pinned to one cluster node does after each of the driver's refusals."""
    return Redirects(
        MovedError, AskError, TryAgainError, (ConnectionError, TimeoutError, ClusterDownError, SlotNotCoveredError)
    )


def _pair(client: Redis, command: Acknowledged, asking: bool) -> tuple[object, int]:
    fallback = False
    while True:
        pipeline: Any = client.pipeline(transaction=False)
        for request in command.requests(asking, fallback):
            pipeline.execute_command(*request)
        replies = pipeline.execute(raise_on_error=False)
        if isinstance(replies[-2], NoScriptError) and not fallback:
            fallback = True  # the node does not know the script (restarted, new): EVAL caches it there
            continue
        return replied(replies)


def send_acknowledged(client: Redis | RedisCluster, command: Acknowledged) -> tuple[object, int]:
    """Send ``command``'s write and its ``WAIT`` on one connection; the write's reply and the count acked.

    A standalone client's pipeline does that. A cluster client would send ``WAIT`` to every node, so the
    pair goes to the node that owns the memory's slot, through that node's own connection pool, following
    the cluster's refusals as :class:`~.outcomes.Redirects` decides. A write's error reply is raised.
    """
    if not isinstance(client, RedisCluster):
        return _pair(client, command, asking=False)
    cluster: Any = client  # redis-py's cluster client is not typed
    steps = redirects()
    asked: Any = None
    refresh = False
    while True:
        sent, error = _cluster_attempt(cluster, command, asked, refresh)
        if error is None:
            return sent  # type: ignore[return-value]
        step = steps.after(error)
        if step is None:
            raise error
        asked, refresh = None, False
        if isinstance(step, Moved):
            cluster.nodes_manager.move_slot(step.error)
        elif isinstance(step, Ask):
            asked = cluster.get_node(step.host, step.port)
            refresh = asked is None  # a node the client does not know yet
        else:
            time.sleep(step.seconds)
            refresh = isinstance(step, Refresh)


def send_one(client: Any, cluster: bool, command: Request | Acknowledged) -> Any:
    """Send ``command`` as both Redis layouts' executors do; its reply.

    A write with its ``WAIT`` (:func:`send_acknowledged`); else, on a cluster, sent again while its slot
    migrates (:func:`send_resending`); else once (:func:`send`).
    """
    if isinstance(command, Acknowledged):
        return send_acknowledged(client, command)
    return send_resending(client, command) if cluster else send(client, command)


def _cluster_attempt(
    cluster: Any, command: Acknowledged, asked: Any, refresh: bool
) -> tuple[tuple[object, int] | None, Exception | None]:
    """One attempt on the slot's owner (or the node ``asked``): its replies, or the error it met."""
    try:
        if refresh:
            cluster.nodes_manager.initialize()
        node = asked if asked is not None else cluster.get_node_from_key(command.key)
        return _pair(cluster.get_redis_connection(node), command, asking=asked is not None), None
    except Exception as exc:  # the caller decides, with Redirects
        return None, exc


# ------------------------------------------------------------------------------------ the executor


class RedisExecutor:
    """The blocking Redis store's executor half: builds its client and drives its operations with it."""

    _client: Any
    _cluster: bool
    _closed: bool
    _owns_client: bool
    _options: StoreOptions

    if TYPE_CHECKING:  # the store's lifecycle

        def _check_open(self, operation: str, memory_id: str | None = None) -> None: ...

    def _from_url(self, url: str) -> Any:
        target = ClientTarget.parse(url)
        try:
            if target.cluster:
                return RedisCluster.from_url(target.url, **self._options.client_options())
            return Redis.from_url(target.url, **self._options.client_options())
        except DRIVER_ERRORS as exc:
            raise store_error(exc, Operation.CONNECT) from exc

    def _discard(self, client: Any) -> None:
        if self._owns_client:
            client.close()

    def _release(self) -> None:
        self._client.close()

    def _perform(self, command: Command | Acknowledged) -> object:
        if isinstance(command, Sleep):
            time.sleep(command.seconds)
            return None
        try:
            if isinstance(command, Scan):
                return set(self._scan(command.pattern))
            return send_one(self._client, self._cluster, command)
        except DRIVER_ERRORS as exc:
            raise store_error(exc, command.operation, command.memory_id) from exc

    def _drive(self, operation: str, memory_id: str | None, step: Steps[Command, _T]) -> _T:
        if self._closed:
            self._check_open(operation, memory_id)
        replication = self._options.replication
        if replication is None:
            return drive(step, self._perform)
        return drive(acknowledged(step, replication), self._perform)

    def _scan(self, pattern: bytes) -> Iterator[bytes]:
        """The keys matching ``pattern`` (on every primary of a cluster); SCAN may give a key twice."""
        if isinstance(self._client, RedisCluster):
            return self._client.scan_iter(match=pattern, count=1000, target_nodes=RedisCluster.PRIMARIES)
        return self._client.scan_iter(match=pattern, count=1000)  # type: ignore[no-any-return]

    def _perform_or_pipeline(self, command: Command | Pipelined) -> object:
        return self._send_pipelined(command) if isinstance(command, Pipelined) else self._perform(command)

    def _send_pipelined(self, batch: Pipelined) -> list[object]:
        try:
            replies = send_pipelined(self._client, batch.commands)
        except DRIVER_ERRORS as exc:
            raise store_error(exc, batch.operation) from exc
        for command, reply in zip(batch.commands, replies, strict=True):
            if isinstance(reply, DRIVER_ERRORS):
                raise store_error(reply, command.operation, command.memory_id) from reply
        return replies
