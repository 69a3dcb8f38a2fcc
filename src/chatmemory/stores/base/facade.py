"""What every public store class shares: closing and ``with``, and one span, latency sample and DEBUG line per call.

:class:`StoreLifecycle` / :class:`AsyncStoreLifecycle`: ``close()`` releases what the store owns once; a
later call raises ``StoreError``. :class:`StoreTelemetry`: an executor names its backend and logger once
(``_traced = StoreTelemetry("redis", __name__)``) and decorates each public method with one line
(``@_traced("load")``, ``.iterator``, ``.coroutine``, ``.async_iterator``): the call runs inside
:func:`chatmemory.telemetry.operation`, with ``attempts=1``, the result's version or count, and a
:class:`~chatmemory.ConcurrentUpdateError` counted as a conflict; a public method calling another of
the same store stays one operation.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from chatmemory.core.errors import ConcurrentUpdateError, StoreError
from chatmemory.core.history import HistoryPage
from chatmemory.core.store import Snapshot
from chatmemory.telemetry import Operation, _current, operation

__all__ = ["AsyncStoreLifecycle", "StoreLifecycle", "StoreTelemetry"]

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


S = TypeVar("S")
P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")

_VERSION_RESULTS = frozenset({"save", "modify"})
_COUNT_RESULTS = frozenset({"purge_expired", "trim_history"})


def _record_result(op: Operation, name: str, result: object) -> None:
    if isinstance(result, Snapshot):
        op.values["version"] = result.version
    elif isinstance(result, HistoryPage):
        op.values["items"] = len(result.entries)
    elif isinstance(result, int) and not isinstance(result, bool):
        if name in _VERSION_RESULTS:
            op.values["version"] = result
        elif name in _COUNT_RESULTS:
            op.values["items"] = result


class StoreTelemetry:
    """Decorators that report each public call of one backend's store.

    Args:
        backend: what spans and metrics call the backend (``redis``, ``sql``, ``mongodb``, ...).
        module: the executor's module name; DEBUG and WARNING lines go to its logger.
    """

    __slots__ = ("backend", "logger")

    def __init__(self, backend: str, module: str) -> None:
        self.backend = backend
        self.logger = logging.getLogger(module)

    def __call__(self, name: str) -> Callable[[Callable[Concatenate[S, P], R]], Callable[Concatenate[S, P], R]]:
        """Report each call of a blocking method as operation ``name``."""
        backend, logger = self.backend, self.logger

        def decorate(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
            @functools.wraps(method)
            def traced(store: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
                running = _current.get()
                if running is not None and running.owner is store:
                    result = method(store, *args, **kwargs)
                    if result is not None:
                        _record_result(running, name, result)
                    return result
                memory_id = args[0] if args else kwargs.get("memory_id")
                with Operation(
                    backend, name, memory_id if isinstance(memory_id, str) else None, logger, True, store
                ) as op:
                    op.values["attempts"] = 1
                    try:
                        result = method(store, *args, **kwargs)
                    except ConcurrentUpdateError:
                        op.conflict()
                        raise
                    if result is not None:
                        _record_result(op, name, result)
                    return result

            return traced

        return decorate

    def coroutine(
        self, name: str
    ) -> Callable[
        [Callable[Concatenate[S, P], Coroutine[Any, Any, R]]], Callable[Concatenate[S, P], Coroutine[Any, Any, R]]
    ]:
        """Report each call of a coroutine method as operation ``name``."""
        backend, logger = self.backend, self.logger

        def decorate(
            method: Callable[Concatenate[S, P], Coroutine[Any, Any, R]],
        ) -> Callable[Concatenate[S, P], Coroutine[Any, Any, R]]:
            @functools.wraps(method)
            async def traced(store: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
                running = _current.get()
                if running is not None and running.owner is store:
                    result = await method(store, *args, **kwargs)
                    if result is not None:
                        _record_result(running, name, result)
                    return result
                memory_id = args[0] if args else kwargs.get("memory_id")
                with Operation(
                    backend, name, memory_id if isinstance(memory_id, str) else None, logger, True, store
                ) as op:
                    op.values["attempts"] = 1
                    try:
                        result = await method(store, *args, **kwargs)
                    except ConcurrentUpdateError:
                        op.conflict()
                        raise
                    if result is not None:
                        _record_result(op, name, result)
                    return result

            return traced

        return decorate

    def iterator(
        self, name: str
    ) -> Callable[[Callable[Concatenate[S, P], Iterator[T]]], Callable[Concatenate[S, P], Iterator[T]]]:
        """Report the iteration of a method's iterator (from its first item to its end) as operation ``name``.

        The operation is not current while the caller handles an item, so nothing the caller does between
        items is counted in it or nested under its span; ``items`` is how many were yielded.
        """

        def decorate(method: Callable[Concatenate[S, P], Iterator[T]]) -> Callable[Concatenate[S, P], Iterator[T]]:
            @functools.wraps(method)
            def traced(store: S, /, *args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
                return self._iterate(name, method(store, *args, **kwargs))

            return traced

        return decorate

    def _iterate(self, name: str, items: Iterator[T]) -> Iterator[T]:
        op = self._iteration(name)
        count = 0
        failure: BaseException | None = None
        try:
            for item in items:
                count += 1
                yield item
        except GeneratorExit:  # the caller stopped early: not an error
            raise
        except BaseException as exc:
            failure = exc
            raise
        finally:
            _end_iteration(op, count, failure)
            close = getattr(items, "close", None)
            if close is not None:
                close()

    def _iteration(self, name: str) -> Operation:
        op = operation(backend=self.backend, name=name, logger=self.logger, ambient=False)
        op.__enter__()
        return op

    def async_iterator(
        self, name: str
    ) -> Callable[[Callable[Concatenate[S, P], AsyncIterator[T]]], Callable[Concatenate[S, P], AsyncIterator[T]]]:
        """The asyncio twin of :meth:`iterator`."""

        def decorate(
            method: Callable[Concatenate[S, P], AsyncIterator[T]],
        ) -> Callable[Concatenate[S, P], AsyncIterator[T]]:
            @functools.wraps(method)
            def traced(store: S, /, *args: P.args, **kwargs: P.kwargs) -> AsyncIterator[T]:
                return self._aiterate(name, method(store, *args, **kwargs))

            return traced

        return decorate

    async def _aiterate(self, name: str, items: AsyncIterator[T]) -> AsyncIterator[T]:
        op = self._iteration(name)
        count = 0
        failure: BaseException | None = None
        try:
            async for item in items:
                count += 1
                yield item
        except GeneratorExit:
            raise
        except BaseException as exc:
            failure = exc
            raise
        finally:
            _end_iteration(op, count, failure)
            aclose = getattr(items, "aclose", None)
            if aclose is not None:
                await aclose()


def _end_iteration(op: Operation, count: int, failure: BaseException | None) -> None:
    """Close an iteration's operation: ``items`` is how many were yielded; an early stop is no error."""
    op.record(items=count)
    if failure is None:
        op.__exit__(None, None, None)
    else:
        op.__exit__(type(failure), failure, failure.__traceback__)
