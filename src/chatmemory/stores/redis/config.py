"""The Redis store's constructor options and URLs, validated once for the sync and the asyncio store."""

from __future__ import annotations

import datetime
import math
from dataclasses import dataclass
from typing import Any

from chatmemory.stores.base.options import (
    TTL,
    history_ttl_seconds,
    ttl_seconds,
    validate_prefix,
    validate_snapshot_cache_size,
)
from chatmemory.stores.base.turns import DEFAULT_LOCK_LEASE, DEFAULT_LOCK_WAIT, LockOptions

__all__ = [
    "DEFAULT_REPLICAS_TIMEOUT",
    "DEFAULT_SOCKET_CONNECT_TIMEOUT",
    "DEFAULT_SOCKET_TIMEOUT",
    "ClientTarget",
    "Replication",
    "StoreOptions",
]

DEFAULT_SOCKET_CONNECT_TIMEOUT = 5.0
"""Seconds to wait for a connection to a server, for clients a store builds from a URL."""
DEFAULT_SOCKET_TIMEOUT = 10.0
"""Seconds to wait for a reply (a script run of a memory is far shorter), for clients built from a URL."""

DEFAULT_REPLICAS_TIMEOUT = 1.0
"""Seconds a write waits for ``replicas_to_ack`` replicas before it raises ``ReplicationError``."""

_CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
_SCHEMES = ("redis", "rediss", "unix", *_CLUSTER_SCHEMES)


@dataclass(frozen=True, slots=True)
class ClientTarget:
    """The client a URL asks for.

    Attributes:
        url: the URL as the driver takes it (``redis[s]+cluster`` becomes ``redis[s]``).
        cluster: build a cluster client.
    """

    url: str
    cluster: bool

    @classmethod
    def parse(cls, url: str) -> ClientTarget:
        """The target of ``url``.

        Raises:
            ValueError: ``url`` is not a Redis URL; the message shows one.
        """
        scheme, separator, rest = url.partition("://")
        if not separator or scheme.lower() not in _SCHEMES:
            raise ValueError(
                f"{url!r} is not a Redis URL: use redis://host:6379/0, rediss:// (TLS), unix:///path/redis.sock "
                "or redis+cluster://host:7000 (Redis Cluster)"
            )
        base = _CLUSTER_SCHEMES.get(scheme.lower())
        if base is not None:
            return cls(f"{base}://{rest}", cluster=True)
        return cls(url, cluster=False)


def _timeout(name: str, value: float) -> float:
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
        seconds = _timeout("replicas_timeout", replicas_timeout)
        if replicas_to_ack == 0:
            return None
        return cls(replicas_to_ack, max(1, math.ceil(seconds * 1000)))


@dataclass(frozen=True, slots=True)
class StoreOptions:
    """The options of a Redis store, validated (see ``RedisChatMemoryStore`` for their meaning)."""

    key_prefix: str
    ttl: float | None
    refresh_ttl_on_read: bool
    snapshot_cache_size: int
    socket_timeout: float
    socket_connect_timeout: float
    history: bool = False
    history_ttl: float | None = None
    lock: LockOptions = LockOptions()  # noqa: RUF009 - frozen, so one shared default is safe
    replication: Replication | None = None

    @classmethod
    def validate(
        cls,
        *,
        key_prefix: str,
        ttl: TTL,
        refresh_ttl_on_read: bool,
        snapshot_cache_size: int,
        socket_timeout: float,
        socket_connect_timeout: float,
        history: bool = False,
        history_ttl: TTL = None,
        lock_lease: float | datetime.timedelta = DEFAULT_LOCK_LEASE,
        lock_wait: float | datetime.timedelta = DEFAULT_LOCK_WAIT,
        replicas_to_ack: int = 0,
        replicas_timeout: float | datetime.timedelta = DEFAULT_REPLICAS_TIMEOUT,
    ) -> StoreOptions:
        """The options, or the error that says which one is wrong and what to pass.

        Raises:
            TypeError: an option has the wrong type (e.g. ``key_prefix=None``).
            ValueError: an option is out of range.
        """
        seconds = ttl_seconds(ttl)
        return cls(
            validate_prefix("key_prefix", key_prefix),
            seconds,
            bool(refresh_ttl_on_read),
            validate_snapshot_cache_size(snapshot_cache_size),
            _timeout("socket_timeout", socket_timeout),
            _timeout("socket_connect_timeout", socket_connect_timeout),
            history,
            history_ttl_seconds(history, history_ttl, seconds),
            LockOptions.validate(lock_lease, lock_wait),
            Replication.validate(replicas_to_ack, replicas_timeout),
        )

    def client_options(self) -> dict[str, Any]:
        """Keyword arguments for a client built from a URL; the URL's own query options take precedence."""
        return {"socket_timeout": self.socket_timeout, "socket_connect_timeout": self.socket_connect_timeout}
