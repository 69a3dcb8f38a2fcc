"""The MongoDB store on asyncio: PyMongo's native ``AsyncMongoClient``, running the sync store's operations.

Same constructor arguments, same document layout, same operations (:mod:`chatmemory.stores.mongodb.operations`)
and decisions (:mod:`chatmemory.stores.mongodb.plan`) as :class:`chatmemory.stores.mongodb.MongoChatMemoryStore`:
a memory written by one is read and extended by the other. Every write is one ``find_one_and_update``,
which the server applies whole or not at all, so a task cancelled at any ``await`` leaves the memory at
its old or its new list. Commands are admitted first come, first served, as many at once as the client's
pool has connections (:mod:`chatmemory.aio.stores.admission`).
"""

from __future__ import annotations

import asyncio
import datetime
import functools
import inspect
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from chatmemory.aio.stores.admission import Admission
from chatmemory.core.errors import StoreError
from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryPage
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Snapshot
from chatmemory.memory_times import MemoryTimes
from chatmemory.stores._optional import require
from chatmemory.stores.base import AsyncStoreLifecycle, Operation
from chatmemory.stores.base.driving import drive_async
from chatmemory.stores.base.telemetry import StoreTelemetry

require("pymongo", feature="MongoChatMemoryStore", extra="mongodb")

from pymongo import AsyncMongoClient  # noqa: E402 - the driver is known

from chatmemory.stores.mongodb.commands import Command, Result, Sleep, Steps, result_of  # noqa: E402
from chatmemory.stores.mongodb.driver import DRIVER_ERRORS, EXPIRY_INDEX, describe  # noqa: E402
from chatmemory.stores.mongodb.layout import MemoryState  # noqa: E402
from chatmemory.stores.mongodb.operations import MongoOperations  # noqa: E402
from chatmemory.stores.mongodb.plan import Document, live_filter  # noqa: E402

if TYPE_CHECKING:
    from pymongo.asynchronous.collection import AsyncCollection

__all__ = ["EXPIRY_INDEX", "MongoChatMemoryStore"]

_traced = StoreTelemetry("mongodb", __name__)

_T = TypeVar("_T")


class MongoChatMemoryStore(AsyncStoreLifecycle, MongoOperations[AsyncMongoClient[Any]]):
    """An asyncio store in a MongoDB collection; supports versioning, listing, TTL and raw records.

    Takes the arguments of :class:`chatmemory.stores.mongodb.MongoChatMemoryStore`, with an
    :class:`pymongo.AsyncMongoClient` in place of a ``MongoClient`` (a store built from a URL closes its
    client in :meth:`aclose`).

    Raises:
        TypeError: ``url_or_client`` is neither a URL nor an ``AsyncMongoClient``; ``history`` is not a bool.
        ValueError: an invalid ttl, history_ttl, cache size, database or collection name.
        StoreError: the URL cannot be parsed.
    """

    _repr_name = "aio.MongoChatMemoryStore"
    _client_type = AsyncMongoClient

    @property
    def collection(self) -> AsyncCollection[Document]:
        """The collection holding the memories (for inspection and administration)."""
        return self._collection  # type: ignore[no-any-return]

    @property
    def history_collection(self) -> AsyncCollection[Document] | None:
        """The collection holding the histories (``None``: the store keeps none)."""
        return self._history_collection  # type: ignore[no-any-return]

    async def _release(self) -> None:
        await self._client.close()

    # ---------------------------------------------------------------------------------------- the driver

    @functools.cached_property
    def _admission(self) -> Admission | None:
        """What admits the store's commands in order, as many at once as the client's pool connects.

        ``maxPoolSize`` of them (``None`` for ``maxPoolSize=0``, no bound), each waiting at most
        ``waitQueueTimeoutMS``: PyMongo's pool gives a returned connection to whoever asks next, the
        task that returned it, and with more tasks than connections the others would wait until it is done.
        """
        pool = self._client.options.pool_options
        limit = int(pool.max_pool_size)
        if not limit:
            return None
        timeout = pool.wait_queue_timeout
        wait = "no waitQueueTimeoutMS" if timeout is None else f"waitQueueTimeoutMS={timeout * 1000:g}"
        return Admission(limit, timeout, f"maxPoolSize={limit}, {wait}")

    async def _perform(self, command: Command | Sleep) -> Any:
        if isinstance(command, Sleep):
            await asyncio.sleep(command.seconds)
            return None
        admission = self._admission
        if admission is None:
            return await self._call(command)
        async with admission:
            return await self._call(command)

    async def _call(self, command: Command) -> Any:
        value = self._method(command)(*command.args, **command.kwargs)
        if inspect.isawaitable(value):  # find() returns its cursor at once, the rest are coroutines
            value = await value
        return await value.to_list() if command.result is Result.LIST else result_of(command, value)

    async def _run(self, steps: Steps[_T]) -> _T:
        """Send each command ``steps`` yields; a driver error goes back in where it was yielded."""
        return await drive_async(steps, self._perform)

    # ---------------------------------------------------------------------------------------------- read

    async def _load_state(self, memory_id: str) -> MemoryState | None:
        return await self._run(self._load_state_steps(memory_id))

    @_traced.coroutine("load")
    async def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version (one ``find_one``)."""
        return await self._run(self._load(memory_id))

    @_traced.coroutine("get")
    async def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return (await self.load(memory_id)).messages

    @_traced.coroutine("read_raw")
    async def read_raw(self, memory_id: str) -> list[bytes]:
        """The stored records of ``memory_id`` in window order, undecoded; ``[]`` for an unknown id."""
        return await self._run(self._read_raw(memory_id))

    @_traced.async_iterator("list")
    async def memory_ids(self) -> AsyncIterator[str]:
        """The ids of the memories that have not expired, streamed from a cursor."""
        self._check_open(Operation.LIST)
        try:
            async for document in self._collection.find(live_filter(self._window_field), {"_id": 1}):
                yield document["_id"]
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.LIST, detail=describe(exc)) from exc

    @_traced.coroutine("memory_times")
    async def memory_times(self, memory_id: str) -> MemoryTimes | None:
        """When ``memory_id`` was last written (by the server's clock) and when it expires; ``None`` if absent."""
        return await self._run(self._memory_times(memory_id))

    # --------------------------------------------------------------------------------------------- write

    @_traced.coroutine("save")
    async def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``; return the new version."""
        return await self._run(self._save(memory_id, messages, expected_version))

    @_traced.coroutine("update")
    async def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id``, whatever version it is at.

        One write: the diff against the cached snapshot, pinned to its version (a second write, the
        whole window, if another writer got there first), or the whole window if none is cached.
        A store with history reads the window first and saves against it (again if another writer got
        there first), so that the history records what this write appended to the window it replaced.
        """
        await self._run(self._update(memory_id, messages))

    @_traced.coroutine("write_raw")
    async def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Replace the memory with ``records`` as they are; they are decoded only when read.

        A store with history records nothing in it for them.
        """
        await self._run(self._write_raw(memory_id, records))

    @_traced.coroutine("expire_at")
    async def expire_at(self, memory_id: str, when: datetime.datetime | None) -> None:
        """Make a live ``memory_id`` expire at ``when`` (aware), or never with ``None``; unknown ids stay absent."""
        await self._run(self._expire_at(memory_id, when))

    @_traced.coroutine("delete")
    async def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id`` (its history too); idempotent."""
        await self._run(self._delete(memory_id))

    # ------------------------------------------------------------------------------------------- history

    @_traced.coroutine("history")
    async def history(
        self, memory_id: str, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        """One page of the history of ``memory_id`` (see :meth:`chatmemory.SupportsHistory.history`).

        Raises:
            HistoryNotEnabledError: the store was built without history.
        """
        return await self._run(self._history_page(memory_id, after, limit, reverse))

    @_traced.coroutine("trim_history")
    async def trim_history(
        self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None
    ) -> int:
        """Remove history entries written before ``older_than`` (of ``memory_id``, or of every memory).

        ``older_than`` is an aware datetime, or a ``timedelta`` back from the server's clock. The window is
        never changed. Returns how many entries were removed.

        Raises:
            HistoryNotEnabledError: the store was built without history.
        """
        return await self._run(self._trim(older_than, memory_id))
