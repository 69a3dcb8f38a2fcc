"""Closing a store: who owns the client, ``with`` / ``async with``, and no use after close."""

from __future__ import annotations

from types import TracebackType
from typing import TypeVar

from chatmemory.core.errors import StoreError

__all__ = ["AsyncStoreLifecycle", "StoreLifecycle"]

_Sync = TypeVar("_Sync", bound="StoreLifecycle")
_Async = TypeVar("_Async", bound="AsyncStoreLifecycle")

_CLOSED = "the store is closed; create a new store (a closed store never reconnects)"


class StoreLifecycle:
    """Mixin: ``close()`` releases what the store owns once; any later use raises ``StoreError``.

    A subclass sets ``self._owns_client`` in ``__init__`` and implements :meth:`_release` (close the
    client, dispose of the engine) and calls :meth:`_check_open` at the start of each operation.
    """

    _closed: bool = False
    _owns_client: bool = False

    def _release(self) -> None:
        """Close the client or engine the store built itself; called once, by :meth:`close`."""

    def _check_open(self, operation: str, memory_id: str | None = None) -> None:
        if self._closed:
            raise StoreError(operation, memory_id, _CLOSED)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def close(self) -> None:
        """Close the client or engine if the store built it from a URL; one passed in is left open."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            self._release()

    def __enter__(self: _Sync) -> _Sync:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


class AsyncStoreLifecycle:
    """The asyncio twin of :class:`StoreLifecycle`: ``await store.aclose()`` and ``async with store``."""

    _closed: bool = False
    _owns_client: bool = False

    async def _release(self) -> None:
        """Close the client or engine the store built itself; awaited once, by :meth:`aclose`."""

    def _check_open(self, operation: str, memory_id: str | None = None) -> None:
        if self._closed:
            raise StoreError(operation, memory_id, _CLOSED)

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called."""
        return self._closed

    async def aclose(self) -> None:
        """Close the client or engine if the store built it from a URL; one passed in is left open."""
        if self._closed:
            return
        self._closed = True
        if self._owns_client:
            await self._release()

    async def __aenter__(self: _Async) -> _Async:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self.aclose()
