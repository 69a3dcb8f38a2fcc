"""Sending a write with ``WAIT`` behind it on the same connection, blocking or asyncio, server or cluster.

``WAIT`` counts the replicas that hold the writes of *its own connection*, so the write and the ``WAIT``
go in one pipeline (no transaction) on one connection. A standalone client's pipeline does that. A
cluster client would send ``WAIT`` to every node, so the pair goes to the node that owns the memory's
slot, through that node's own connection pool, and this module follows the cluster's refusals itself,
as :class:`~.replication.Redirects` decides: ``MOVED`` (the client's slot map is told), ``ASK`` (the
pair again on the importing node, after ``ASKING``), ``TRYAGAIN`` (a short wait), a lost node (the
layout read again; the write sent again is recognised by its write id). The replies are
``(write's reply, replicas that acknowledged)``; a write's error reply is raised. The write is a Redis
store's script run or ``DEL``, or another layout's :class:`~.replication.PinnedWrite`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from chatmemory.stores.redis.commands import Call, ScriptCall
from chatmemory.stores.redis.driver import NoScriptError
from chatmemory.stores.redis.replication import Acknowledged, Ask, Moved, Redirects, Refresh

from redis import Redis  # isort: skip - after driver.py checked that the extra is installed
from redis.asyncio.cluster import PipelineCommand  # isort: skip
from redis.asyncio.cluster import RedisCluster as AsyncRedisCluster  # isort: skip
from redis.cluster import RedisCluster  # isort: skip
from redis.exceptions import (  # isort: skip
    AskError,
    ClusterDownError,
    ConnectionError,
    MovedError,
    SlotNotCoveredError,
    TimeoutError,
    TryAgainError,
)

__all__ = ["send_acknowledged", "send_acknowledged_async"]


def _redirects() -> Redirects:
    return Redirects(
        MovedError, AskError, TryAgainError, (ConnectionError, TimeoutError, ClusterDownError, SlotNotCoveredError)
    )


def _requests(command: Acknowledged, asking: bool, fallback: bool) -> list[tuple[Any, ...]]:
    """The pipeline's commands, as ``execute_command`` arguments."""
    write = command.command
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
    return [*((("ASKING",),) if asking else ()), sent, ("WAIT", command.replicas, command.timeout_ms)]


def _replied(replies: list[Any]) -> tuple[object, int]:
    reply, acked = replies[-2], replies[-1]
    if isinstance(reply, Exception):
        raise reply
    if isinstance(acked, Exception):
        raise acked
    return reply, int(acked)


# ------------------------------------------------------------------------------------- blocking


def _pair(client: Redis, command: Acknowledged, asking: bool) -> tuple[object, int]:
    fallback = False
    while True:
        pipeline: Any = client.pipeline(transaction=False)
        for request in _requests(command, asking, fallback):
            pipeline.execute_command(*request)
        replies = pipeline.execute(raise_on_error=False)
        if isinstance(replies[-2], NoScriptError) and not fallback:
            fallback = True  # the node does not know the script (restarted, new): EVAL caches it there
            continue
        return _replied(replies)


def send_acknowledged(client: Redis | RedisCluster, command: Acknowledged) -> tuple[object, int]:
    """Send ``command``'s write and its ``WAIT`` on one connection; the write's reply and the count acked."""
    if not isinstance(client, RedisCluster):
        return _pair(client, command, asking=False)
    cluster: Any = client  # redis-py's cluster client is not typed
    redirects = _redirects()
    asked: Any = None
    refresh = False
    while True:
        replied, error = _cluster_attempt(cluster, command, asked, refresh)
        if error is None:
            return replied  # type: ignore[return-value]
        step = redirects.after(error)
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


# -------------------------------------------------------------------------------------- asyncio


async def _pair_async(node: Any, command: Acknowledged, asking: bool) -> tuple[object, int]:
    fallback = False
    while True:
        commands = [
            PipelineCommand(index, *request) for index, request in enumerate(_requests(command, asking, fallback))
        ]
        await node.execute_pipeline(commands)
        replies = [sent.result for sent in commands]
        if isinstance(replies[-2], NoScriptError) and not fallback:
            fallback = True
            continue
        return _replied(replies)


async def send_acknowledged_async(client: Any, command: Acknowledged) -> tuple[object, int]:
    """As :func:`send_acknowledged`, with a ``redis.asyncio`` client."""
    if not isinstance(client, AsyncRedisCluster):
        fallback = False
        while True:
            async with client.pipeline(transaction=False) as pipeline:
                for request in _requests(command, False, fallback):
                    pipeline.execute_command(*request)
                replies = await pipeline.execute(raise_on_error=False)
            if isinstance(replies[-2], NoScriptError) and not fallback:
                fallback = True
                continue
            return _replied(replies)
    cluster: Any = client
    await cluster.initialize()
    redirects = _redirects()
    asked: Any = None
    refresh = False
    while True:
        replied, error = await _cluster_attempt_async(cluster, command, asked, refresh)
        if error is None:
            return replied  # type: ignore[return-value]
        step = redirects.after(error)
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
