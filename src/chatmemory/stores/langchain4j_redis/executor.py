"""The blocking executor of the LangChain4j-layout store: sends each command with redis-py's blocking client.

``perform(command)`` sends one command of :mod:`.commands` with the Redis store's sending
(:mod:`chatmemory.stores.redis.executor`: ``EVAL`` after ``NOSCRIPT``, a command sent again while a
cluster slot migrates, a write with its ``WAIT`` on one connection); a driver exception is translated
(:func:`layout_error`) before it is thrown back into the operation. :class:`LangChain4jExecutor` is the
executor half of the blocking store.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from chatmemory.core.driving import Sleep, Steps, drive
from chatmemory.core.errors import Operation, StoreError
from chatmemory.core.optional import require
from chatmemory.stores.base.turns import LocalTurns
from chatmemory.stores.langchain4j_redis.commands import Command, LayoutWrite, Scan
from chatmemory.stores.langchain4j_redis.keys import glob_literal, memory_id_of
from chatmemory.stores.langchain4j_redis.outcomes import ReplyError
from chatmemory.stores.redis.base import ClientTarget

require("redis", feature="LangChain4jRedisChatMemoryStore", extra="redis")

from chatmemory.stores.redis.commands import Acknowledged, Replication  # noqa: E402 - once the extra is known
from chatmemory.stores.redis.executor import DRIVER_ERRORS, send_one  # noqa: E402

from redis import Redis  # noqa: E402  # isort: skip
from redis.cluster import RedisCluster  # noqa: E402  # isort: skip
from redis.exceptions import ResponseError  # noqa: E402  # isort: skip

__all__ = ["LangChain4jExecutor", "client_from_url", "layout_error"]

_T = TypeVar("_T")


def client_from_url(url: str, standalone: Callable[[str], Any], cluster: Any) -> Any:
    """A client for ``url``: ``cluster.from_url`` for ``redis[s]+cluster://``, else ``standalone(url)``.

    Raises:
        ValueError: ``url`` is not a Redis URL.
        StoreError: a cluster whose nodes cannot be reached (the blocking client looks for them at once).
    """
    target = ClientTarget.parse(url)
    try:
        return cluster.from_url(target.url) if target.cluster else standalone(target.url)
    except DRIVER_ERRORS as exc:
        raise StoreError(Operation.CONNECT, detail=str(exc)) from exc


def layout_error(exc: BaseException, command: Command | Acknowledged) -> StoreError:
    """The store's error for the driver's ``exc`` met sending ``command`` (raise it ``from exc``).

    An error reply of the server is a :class:`~.outcomes.ReplyError`, which an operation may read as a
    damaged memory (``WRONGTYPE``); any other failure a :class:`StoreError`.
    """
    sent: Any = command
    if isinstance(command, Acknowledged) and isinstance(command.command, LayoutWrite):
        sent = command.command.command  # the operation's own command names its error
    if isinstance(exc, ResponseError):
        return ReplyError(sent.operation, sent.memory_id, str(exc))
    return StoreError(sent.operation, sent.memory_id, str(exc))


class LangChain4jExecutor:
    """The blocking LangChain4j-layout store's executor half: sends its operations' commands."""

    _client: Any
    _cluster: bool
    _owns_client: bool
    _prefix: bytes
    _replication: Replication | None

    if TYPE_CHECKING:  # the store's lifecycle and base

        def _check_open(self, operation: str, memory_id: str | None = None) -> None: ...

        def _acknowledged(self, operation: str, step: Steps[Command, _T]) -> Steps[Command | Acknowledged, _T]: ...

    def _client_from_url(self, url: str) -> Any:
        return client_from_url(url, Redis.from_url, RedisCluster)

    def _discard(self, client: Any) -> None:
        if self._owns_client:
            client.close()

    def _release(self) -> None:
        self._client.close()

    def _started(self) -> None:
        self._turns = LocalTurns()

    def _perform(self, command: Command | Acknowledged) -> object:
        if isinstance(command, Sleep):
            time.sleep(command.seconds)
            return None
        try:
            if isinstance(command, Scan):
                return set(self._scan(command.pattern, command.type))
            return send_one(self._client, self._cluster, command)
        except DRIVER_ERRORS as exc:
            raise layout_error(exc, command) from exc

    def _drive(self, operation: str, memory_id: str | None, step: Steps[Command, _T]) -> _T:
        self._check_open(operation, memory_id)
        if self._replication is None:
            return drive(step, self._perform)
        return drive(self._acknowledged(operation, step), self._perform)

    def _scan(self, pattern: bytes, kind: str) -> Iterator[bytes]:
        """The keys of type ``kind`` matching ``pattern`` (on every primary of a cluster); maybe twice."""
        if isinstance(self._client, RedisCluster):
            return self._client.scan_iter(match=pattern, count=1000, _type=kind, target_nodes=RedisCluster.PRIMARIES)
        return self._client.scan_iter(match=pattern, count=1000, _type=kind)  # type: ignore[no-any-return]

    def _memory_ids(self) -> Iterator[str]:
        """The ids of the string keys under the prefix, each once (keys whose rest is no valid id skipped)."""
        seen: set[str] = set()
        try:
            for found in self._scan(glob_literal(self._prefix) + b"*", "string"):
                memory_id = memory_id_of(found, self._prefix)
                if memory_id is not None and memory_id not in seen:  # SCAN may return a key twice
                    seen.add(memory_id)
                    yield memory_id
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.LIST, detail=str(exc)) from exc
