"""A bounded, thread-safe map that drops its least recently used entry first.

The one LRU of the package: store snapshot caches, the token-count cache of token windows and the
memory cache of providers all keep a bounded number of entries the same way.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["LRU"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most ``size`` entries; reading or writing an entry makes it the most recently used.

    Args:
        size: the number of entries kept (``0``: nothing is kept; ``None``: no bound).

    Raises:
        ValueError: ``size`` is negative.
        TypeError: ``size`` is not an int or ``None``.
    """

    def __init__(self, size: int | None) -> None:
        if size is not None and (isinstance(size, bool) or not isinstance(size, int)):
            raise TypeError(f"an LRU size must be an int or None, not {type(size).__name__}")
        if size is not None and size < 0:
            raise ValueError(f"an LRU size must be >= 0, got {size!r}")
        self._size = size
        self._entries: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    @property
    def size(self) -> int | None:
        """The bound on the number of entries (``None``: unbounded)."""
        return self._size

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: K) -> V | None:
        """The value of ``key`` (now the most recently used), or ``None``."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V, *, unless: Callable[[V], bool] | None = None) -> None:
        """Store ``value`` under ``key``, unless ``unless(current value)`` says the current one wins."""
        if self._size == 0:
            return
        with self._lock:
            current = self._entries.get(key)
            if current is not None and unless is not None and unless(current):
                return
            self._entries[key] = value
            self._entries.move_to_end(key)
            if self._size is not None:
                while len(self._entries) > self._size:
                    self._entries.popitem(last=False)

    def get_or_create(self, key: K, create: Callable[[], V]) -> V:
        """The value of ``key``; ``create()`` makes and stores it first when absent (under the lock)."""
        with self._lock:
            value = self._entries.get(key)
            if value is None:
                value = create()
                if self._size != 0:
                    self._entries[key] = value
                    if self._size is not None:
                        while len(self._entries) > self._size:
                            self._entries.popitem(last=False)
            else:
                self._entries.move_to_end(key)
            return value

    def pop(self, key: K) -> V | None:
        """Remove ``key``; its value, or ``None``."""
        with self._lock:
            return self._entries.pop(key, None)

    def clear(self) -> None:
        """Remove every entry."""
        with self._lock:
            self._entries.clear()
