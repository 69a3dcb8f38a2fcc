"""What the sync and asyncio LangChain4j-layout stores share before any I/O: options, client, operations, repr.

:class:`LangChain4jStoreBase` checks the constructor's options, builds or adopts the client and holds the
planner (:class:`~chatmemory.stores.langchain4j_redis.plan.Planner`) and the operations
(:class:`~chatmemory.stores.langchain4j_redis.operations.Operations`, with the version book and the known
values); the executors (:mod:`.executor`, :mod:`.aio`) build on it and build its clients from URLs. No driver
here: nothing is sent.
"""

from __future__ import annotations

import datetime
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, TypeVar, cast

from chatmemory.core.driving import Steps
from chatmemory.core.store import validate_memory_id
from chatmemory.stores.base.options import TTL, history_ttl_seconds, ttl_seconds, validate_prefix
from chatmemory.stores.base.turns import DEFAULT_LOCK_LEASE, DEFAULT_LOCK_WAIT, LockOptions
from chatmemory.stores.langchain4j_redis.commands import Command
from chatmemory.stores.langchain4j_redis.operations import Operations
from chatmemory.stores.langchain4j_redis.outcomes import replayed
from chatmemory.stores.langchain4j_redis.plan import KnownValues, Planner, VersionBook, check_client, client_url
from chatmemory.stores.redis.base import DEFAULT_REPLICAS_TIMEOUT, ClientHolder, HistoryArguments
from chatmemory.stores.redis.commands import Acknowledged, Replication
from chatmemory.stores.redis.operations import acknowledged

__all__ = ["LangChain4jStoreBase"]

_Client = TypeVar("_Client")
_T = TypeVar("_T")
_Store = TypeVar("_Store", bound="LangChain4jStoreBase[Any]")


class LangChain4jStoreBase(ClientHolder[_Client], HistoryArguments[Command]):
    """The state every LangChain4j-layout store keeps, checked at construction (see the executors' arguments).

    Raises:
        TypeError: ``url_or_client`` is neither a URL nor a ``client_types`` client; ``key_prefix`` is not a str;
            ``lock_lease`` or ``lock_wait`` is neither a number nor a ``timedelta``; ``replicas_to_ack`` is
            not an int.
        ValueError: a bad ``ttl``, ``key_prefix``, ``lock_lease``, ``lock_wait``, ``replicas_to_ack`` or
            ``replicas_timeout``, a client with ``decode_responses=True``, an ``encryption`` (the layout has none).
        StoreError: the URL's server cannot be reached to build a cluster client.
    """

    def __init__(
        self,
        url_or_client: str | _Client,
        *,
        key_prefix: str = "",
        ttl: float | datetime.timedelta | None = None,
        version_book_size: int = 1024,
        history: bool = False,
        history_ttl: TTL = None,
        lock_lease: float | datetime.timedelta = DEFAULT_LOCK_LEASE,
        lock_wait: float | datetime.timedelta = DEFAULT_LOCK_WAIT,
        replicas_to_ack: int = 0,
        replicas_timeout: float | datetime.timedelta = DEFAULT_REPLICAS_TIMEOUT,
        encryption: object = None,
    ) -> None:
        if encryption is not None:
            raise ValueError(
                "the LangChain4j layout has no encryption=: a JVM service reads these keys as they are (encrypt "
                "at rest with a chatmemory store: redis://, sql, mongodb; see docs/encryption.md)"
            )
        self._key_prefix = validate_prefix("key_prefix", key_prefix)
        self._lock_options = LockOptions.validate(lock_lease, lock_wait)
        self._replication = Replication.validate(replicas_to_ack, replicas_timeout)
        self._prefix = key_prefix.encode("utf-8")
        self._ttl = ttl_seconds(ttl)
        ttl_ms = 0 if self._ttl is None else max(1, round(self._ttl * 1000))
        book = VersionBook(version_book_size)
        history_seconds = history_ttl_seconds(history, history_ttl, self._ttl)
        self._history_ttl = history_seconds
        history_ms = None if history_seconds is None else max(1, round(history_seconds * 1000))
        self._planner = Planner(self._prefix, ttl_ms, self._lock_options, history, history_ms)
        self._operations: Operations = Operations(self._planner, book, KnownValues(version_book_size))
        self._hold(url_or_client, self._client_from_url, self._check)

    def _check(self, client: Any) -> None:
        check_client(client, self._owns_client, type(self).__name__)

    if TYPE_CHECKING:  # the executors build clients

        def _client_from_url(self, url: str) -> Any: ...

    @classmethod
    def from_url(cls: type[_Store], url: str, **options: Any) -> _Store:
        """Build from ``redis+langchain4j://host:6379/0?key_prefix=chat:&ttl=3600`` (or any URL of the class)."""
        driver_url, from_query = client_url(url)
        merged: dict[str, Any] = {**from_query, **options}
        if "ttl" in from_query and "ttl" not in options:
            merged["ttl"] = float(from_query["ttl"])
        return cls(driver_url, **merged)

    @property
    def ttl(self) -> float | None:
        """Seconds a memory lives after each chatmemory write, or ``None``."""
        return self._ttl

    @property
    def key_prefix(self) -> str:
        """What is put before memory ids."""
        return self._key_prefix

    @property
    def replicas_to_ack(self) -> int:
        """How many replicas acknowledge each write before it returns (``0``: none waited for)."""
        return 0 if self._replication is None else self._replication.replicas

    @property
    def keeps_history(self) -> bool:
        """Whether this store was built with history on."""
        return self._planner.keeps_history

    def key_of(self, memory_id: str) -> bytes:
        """The Redis key of ``memory_id``."""
        return self._planner.key_of(validate_memory_id(memory_id))

    def invalidate(self, memory_id: str) -> None:
        """Forget the version handed out for ``memory_id`` (a save at it then conflicts)."""
        self._operations.book.forget(validate_memory_id(memory_id))

    def invalidate_all(self) -> None:
        """Forget every version handed out."""
        self._operations.book.clear()
        self._operations.known.clear()

    def _acknowledged(self, operation: str, step: Steps[Command, _T]) -> Steps[Command | Acknowledged, _T]:
        """``step`` with each write that changes a memory followed by ``WAIT`` (``replicas_to_ack`` set).

        Raises:
            ReplicationError: the operation's write landed but fewer replicas acknowledged it in time.
        """
        assert self._replication is not None
        waiting = acknowledged(step, self._replication, pin=self._planner.pinning(operation), replayed=replayed)
        return cast("Generator[Command | Acknowledged, object, _T]", waiting)

    def __repr__(self) -> str:
        history = "" if not self.keeps_history else f", history=True, history_ttl={self._history_ttl!r}"
        replicas = "" if self._replication is None else f", replicas_to_ack={self._replication.replicas}"
        return f"{self._repr_name}(key_prefix={self._key_prefix!r}, ttl={self._ttl!r}{history}{replicas})"
