"""The asyncio executor of the Redis stores: ``redis.asyncio`` clients, one per event loop, behind a gate.

``perform(command)`` sends one command of :mod:`.commands` with the running loop's client and translates a
driver exception (:func:`~.executor.store_error`) before it is thrown back into the operation; ``Sleep``
runs with ``asyncio.sleep``. As in :mod:`.executor`: ``EVAL`` after ``NOSCRIPT``, a command sent again
while a cluster slot migrates, a write with its ``WAIT`` on one connection of the slot's owner, a batch
in one pipeline. A :class:`RedisGate` initializes a cluster client once and admits commands in order, no
more at once than the client has connections (:mod:`chatmemory.stores.base.aio`); :class:`GatedClient`
keeps a client and its gate per event loop. Why: *The Redis gate* in ``docs/asyncio.md``. The
LangChain4j-layout asyncio store sends with these too.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from chatmemory.core.driving import Sleep, Steps, drive_async
from chatmemory.core.errors import Operation, StoreError
from chatmemory.stores.base.aio import Admission, PerLoop
from chatmemory.stores.redis.base import ClientTarget, StoreOptions
from chatmemory.stores.redis.commands import Acknowledged, Command, Pipelined, Request, Scan, ScriptCall
from chatmemory.stores.redis.executor import (
    DRIVER_ERRORS,
    RESEND_PAUSE,
    exhausted,
    redirects,
    store_error,
)
from chatmemory.stores.redis.operations import acknowledged
from chatmemory.stores.redis.outcomes import Ask, Moved, Refresh, replied

from redis.asyncio import BlockingConnectionPool, Redis  # isort: skip - after executor.py checked the extra
from redis.asyncio.cluster import PipelineCommand, RedisCluster  # isort: skip
from redis.exceptions import ClusterError, NoScriptError, RedisClusterException, RedisError  # isort: skip

__all__ = [
    "AsyncRedisExecutor",
    "GatedClient",
    "RedisGate",
    "admission_for",
    "send_acknowledged_async",
    "send_async",
    "send_one_async",
    "send_pipelined_async",
    "send_resending_async",
]

_T = TypeVar("_T")

_DEFAULT_MAX_CONNECTIONS = 100
"""redis-py's default ``max_connections`` per node of ``redis.asyncio.cluster.RedisCluster``."""


def admission_for(client: Redis | RedisCluster) -> Admission | None:
    """An admission as wide as ``client``'s connections (``None``: a pool without a usable bound)."""
    if isinstance(client, RedisCluster):
        limit = client.get_connection_kwargs().get("max_connections") or _DEFAULT_MAX_CONNECTIONS
        return Admission(int(limit), None, f"max_connections={int(limit)} per node")
    pool = client.connection_pool
    limit = getattr(pool, "max_connections", None)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        return None
    if isinstance(pool, BlockingConnectionPool):
        # It waits ``timeout`` seconds for a connection (None: for ever); the store's commands wait as long
        # for their turn, and then find a connection free.
        timeout = pool.timeout
        wait = "no timeout" if timeout is None else f"timeout={timeout:g} s"
        return Admission(limit, timeout, f"max_connections={limit}, {wait}")
    # A pool that does not wait fails a command beyond ``max_connections``: the store's commands wait instead.
    return Admission(limit, None, f"max_connections={limit}")


class RedisGate:
    """Lets commands through once the client is ready, in order, no more at once than it has connections.

    Args:
        client: the store's client.
    """

    def __init__(self, client: Redis | RedisCluster) -> None:
        self._cluster = client if isinstance(client, RedisCluster) else None
        self._lock = asyncio.Lock()
        self.turns = admission_for(client)
        """Taken for each command the store sends (``None``: the client's pool has no bound)."""

    async def ready(self) -> None:
        """Wait until the client may take commands, initializing a cluster client the first time.

        Raises:
            StoreError: the cluster could not be reached; the next call tries again.
        """
        if self._cluster is None:
            return
        async with self._lock:
            cluster = self._cluster
            if cluster is None:
                return
            try:
                await cluster.initialize()
            except (RedisError, RedisClusterException) as exc:
                raise StoreError(Operation.CONNECT, detail=str(exc)) from exc
            self._cluster = None


class _OnLoop:
    """What an asyncio Redis store uses on one event loop: a client bound to that loop and its gate."""

    __slots__ = ("client", "gate")

    def __init__(self, client: Any) -> None:
        self.client = client
        self.gate = RedisGate(client)


async def _close(on: _OnLoop) -> None:
    await on.client.aclose()


class GatedClient:
    """What the asyncio Redis stores do with their clients: one per event loop, sent through a :class:`RedisGate`.

    A store built from a URL makes a client per event loop (:class:`~chatmemory.stores.base.aio.PerLoop`),
    so ``asyncio.run`` twice, or several threads each running its own loop, share one store. A client the
    caller passed in serves the first loop only: on another the store raises
    :class:`~chatmemory.core.errors.StoreError` at once, naming the fix.

    A store sends each command with its ``_send(client, command)``; :meth:`_perform` (what its operations
    are driven with) finds the running loop's client and waits for its gate first.
    """

    _client: Any
    _owns_client: bool
    _repr_name: ClassVar[str]
    _per_loop: PerLoop[_OnLoop]

    if TYPE_CHECKING:  # the store's own, and its client holder's

        async def _send(self, client: Any, command: Any) -> object: ...

        def _another_client(self) -> Any: ...

    def _started(self) -> None:
        self._per_loop = PerLoop(self._for_loop, _close, closes_with_loop=self._owns_client)

    def _for_loop(self, first: bool) -> _OnLoop:
        client = self._client if first else self._another_client()
        if client is None:
            raise StoreError(
                Operation.CONNECT,
                detail=(
                    f"the redis-py client given to {self._repr_name} belongs to the event loop it first ran on, "
                    "and this is another one; build the store from a URL (it then keeps a client per event "
                    "loop), or build one store per event loop"
                ),
            )
        return _OnLoop(client)

    def _on_loop(self) -> _OnLoop:
        """The running loop's client and gate (made now if this loop has none yet)."""
        return self._per_loop.get()

    def _loop_client(self) -> Any:
        """The client of the running loop (made now if this loop has none yet)."""
        return self._per_loop.get().client

    async def _perform(self, command: Any) -> object:
        on = await self._per_loop.ready()
        gate = on.gate
        await gate.ready()
        if gate.turns is None:
            return await self._send(on.client, command)
        async with gate.turns:
            return await self._send(on.client, command)

    async def _release(self) -> None:
        if not self._per_loop.used:
            await self._client.aclose()
        await self._per_loop.aclose()


# ------------------------------------------------------------------------------------------ sending


async def send_async(client: Any, command: Request) -> Any:
    """Await the client method ``command`` names and return its reply (``EVAL`` after a ``NOSCRIPT``)."""
    if type(command) is ScriptCall:  # the store's every read and write: its request() without the detour
        names = command.names
        try:
            return await client.execute_command("EVALSHA", command.script.sha, len(names), *names, *command.args)
        except NoScriptError:
            return await client.eval(*command.fallback())
    method, args = command.request()
    try:
        return await getattr(client, method)(*args)
    except NoScriptError:
        return await client.eval(*command.fallback())  # type: ignore[attr-defined]  # only scripts get NOSCRIPT


async def send_pipelined_async(client: Any, commands: Sequence[Request]) -> list[Any]:
    """As :func:`~.executor.send_pipelined`, with a ``redis.asyncio`` client: one pipeline, replies in order.

    A script the server did not know is sent again on its own as ``EVAL``; any other error the server
    answered a command with is its reply (an exception instance), for the caller to raise.
    """
    async with client.pipeline(transaction=False) as pipeline:
        for command in commands:
            method, args = command.request()
            getattr(pipeline, method)(*args)
        replies: list[Any] = await pipeline.execute(raise_on_error=False)
    for index, reply in enumerate(replies):
        if isinstance(reply, NoScriptError):
            replies[index] = await send_async(client, commands[index])
    return replies


async def send_resending_async(client: Any, command: Request) -> Any:
    """:func:`send_async`, sent again while redis-py's redirections run out (see :func:`~.executor.exhausted`)."""
    started = time.monotonic()
    while True:
        try:
            return await send_async(client, command)
        except ClusterError as exc:
            if not exhausted(exc, started):
                raise
        await asyncio.sleep(RESEND_PAUSE)


async def _pair_async(node: Any, command: Acknowledged, asking: bool) -> tuple[object, int]:
    fallback = False
    while True:
        commands = [
            PipelineCommand(index, *request) for index, request in enumerate(command.requests(asking, fallback))
        ]
        await node.execute_pipeline(commands)
        replies = [sent.result for sent in commands]
        if isinstance(replies[-2], NoScriptError) and not fallback:
            fallback = True
            continue
        return replied(replies)


async def send_acknowledged_async(client: Any, command: Acknowledged) -> tuple[object, int]:
    """As :func:`~.executor.send_acknowledged`, with a ``redis.asyncio`` client."""
    if not isinstance(client, RedisCluster):
        fallback = False
        while True:
            async with client.pipeline(transaction=False) as pipeline:
                for request in command.requests(False, fallback):
                    pipeline.execute_command(*request)
                replies = await pipeline.execute(raise_on_error=False)
            if isinstance(replies[-2], NoScriptError) and not fallback:
                fallback = True
                continue
            return replied(replies)
    cluster: Any = client
    await cluster.initialize()
    steps = redirects()
    asked: Any = None
    refresh = False
    while True:
        sent, error = await _cluster_attempt_async(cluster, command, asked, refresh)
        if error is None:
            return sent  # type: ignore[return-value]
        step = steps.after(error)
        if step is None:
            raise error
        asked, refresh = None, False
        if isinstance(step, Moved):
            await cluster.nodes_manager.move_slot(step.error)
        elif isinstance(step, Ask):
            asked = cluster.get_node(step.host, step.port)
            refresh = asked is None
        else:
            await asyncio.sleep(step.seconds)
            refresh = isinstance(step, Refresh)


async def send_one_async(client: Any, cluster: bool, command: Request | Acknowledged) -> Any:
    """Send ``command`` as both Redis layouts' asyncio executors do; its reply (see :func:`~.executor.send_one`).

    A write with its ``WAIT`` (:func:`send_acknowledged_async`); else, on a cluster, sent again while its
    slot migrates (:func:`send_resending_async`); else once (:func:`send_async`).
    """
    if isinstance(command, Acknowledged):
        return await send_acknowledged_async(client, command)
    return await (send_resending_async(client, command) if cluster else send_async(client, command))


async def _cluster_attempt_async(
    cluster: Any, command: Acknowledged, asked: Any, refresh: bool
) -> tuple[tuple[object, int] | None, Exception | None]:
    try:
        if refresh:
            await cluster.nodes_manager.initialize()
        node = asked if asked is not None else cluster.get_node_from_key(command.key)
        return await _pair_async(node, command, asking=asked is not None), None
    except Exception as exc:  # the caller decides, with Redirects
        return None, exc


# ------------------------------------------------------------------------------------ the executor


class AsyncRedisExecutor(GatedClient):
    """The asyncio Redis store's executor half: builds its clients and drives its operations with them."""

    _cluster: bool
    _options: StoreOptions

    if TYPE_CHECKING:  # the store's lifecycle

        def _check_open(self, operation: str, memory_id: str | None = None) -> None: ...

    def _from_url(self, url: str) -> Any:
        # Neither connects here: a standalone client on its first command, a cluster client when it first
        # initializes (also on its first command). A client that decodes responses is just dropped then.
        target = ClientTarget.parse(url)
        try:
            if target.cluster:
                return RedisCluster.from_url(target.url, **self._options.client_options())
            # A blocking pool: when every connection is busy (hundreds of tasks on one store), a command
            # waits for a free one instead of failing with "Too many connections". ``max_connections`` and
            # ``timeout`` in the URL's query override the pool's defaults.
            return Redis.from_pool(BlockingConnectionPool.from_url(target.url, **self._options.client_options()))
        except DRIVER_ERRORS as exc:
            raise store_error(exc, Operation.CONNECT) from exc

    async def _send(self, client: Redis | RedisCluster, command: Command | Acknowledged | Pipelined) -> object:
        if isinstance(command, Sleep):
            await asyncio.sleep(command.seconds)
            return None
        if isinstance(command, Pipelined):  # a batch: one admission turn, one pipeline
            return await self._send_pipelined(client, command)
        try:
            if isinstance(command, Scan):
                return {key async for key in self._scan(client, command.pattern)}
            return await send_one_async(client, self._cluster, command)
        except DRIVER_ERRORS as exc:
            raise store_error(exc, command.operation, command.memory_id) from exc

    async def _drive(self, operation: str, memory_id: str | None, step: Steps[Command, _T]) -> _T:
        self._check_open(operation, memory_id)
        replication = self._options.replication
        if replication is None:
            return await drive_async(step, self._perform)
        return await drive_async(acknowledged(step, replication), self._perform)

    @staticmethod
    def _scan(client: Redis | RedisCluster, pattern: bytes) -> AsyncIterator[bytes]:
        """The keys matching ``pattern`` (on every primary of a cluster); SCAN may give a key twice."""
        if isinstance(client, RedisCluster):
            return client.scan_iter(match=pattern, count=1000, target_nodes=RedisCluster.PRIMARIES)
        return client.scan_iter(match=pattern, count=1000)

    @staticmethod
    async def _send_pipelined(client: Redis | RedisCluster, batch: Pipelined) -> list[object]:
        try:
            replies = await send_pipelined_async(client, batch.commands)
        except DRIVER_ERRORS as exc:
            raise store_error(exc, batch.operation) from exc
        for command, reply in zip(batch.commands, replies, strict=True):
            if isinstance(reply, DRIVER_ERRORS):
                raise store_error(reply, command.operation, command.memory_id) from reply
        return replies
