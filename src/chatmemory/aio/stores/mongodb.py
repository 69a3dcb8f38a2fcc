"""The MongoDB store on asyncio: PyMongo's native ``AsyncMongoClient``, executing the sync store's plans.

Same constructor arguments, same document layout, same decisions (:mod:`chatmemory.stores.mongodb.plan`)
as :class:`chatmemory.stores.mongodb.MongoChatMemoryStore`: a memory written by one is read and extended
by the other. Every write is one ``find_one_and_update``, which the server applies whole or not at all,
so a task cancelled at any ``await`` leaves the memory at its old or its new list.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from chatmemory.core.errors import ConcurrentUpdateError, StoreError
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Snapshot
from chatmemory.memory_times import MemoryTimes
from chatmemory.stores._optional import require
from chatmemory.stores.base import AsyncStoreLifecycle, Operation, RetryPolicy, SnapshotCache, ttl_seconds
from chatmemory.stores.base.options import TTL
from chatmemory.stores.base.telemetry import StoreTelemetry

require("pymongo", feature="MongoChatMemoryStore", extra="mongodb")

from pymongo import ASCENDING, AsyncMongoClient, ReturnDocument  # noqa: E402 - imported once the driver is known

from chatmemory.stores.mongodb.clock import ServerClock, expired  # noqa: E402
from chatmemory.stores.mongodb.driver import (  # noqa: E402
    DRIVER_ERRORS,
    EXPIRY_INDEX,
    INDEX_CONFLICT_CODES,
    collection_of,
    describe,
    equivalent_expiry_index,
    expiry_index_conflict,
    reply_to_error,
    resend_error,
    write_error,
)
from chatmemory.stores.mongodb.driver import client_options as client_options_for  # noqa: E402
from chatmemory.stores.mongodb.layout import MemoryState, decode_document, materialize, raw_records  # noqa: E402
from chatmemory.stores.mongodb.plan import (  # noqa: E402
    Conflict,
    Document,
    Resend,
    Verify,
    WritePlan,
    WriteReply,
    Written,
    live_filter,
    memory_times_of,
    outcome_of,
    plan_expire_at,
    plan_raw_write,
    plan_replace,
    plan_save,
    read_filter,
    verified_outcome,
)

if TYPE_CHECKING:
    from pymongo.asynchronous.collection import AsyncCollection

__all__ = ["EXPIRY_INDEX", "MongoChatMemoryStore"]

_traced = StoreTelemetry("mongodb", __name__)


class MongoChatMemoryStore(AsyncStoreLifecycle):
    """An asyncio store in a MongoDB collection; supports versioning, listing, TTL and raw records.

    Args:
        url_or_client: a ``mongodb://`` / ``mongodb+srv://`` URL (the store builds the client and closes it
            in :meth:`aclose`), or a :class:`pymongo.AsyncMongoClient` (the caller owns and closes it).
        database: the database name.
        collection: the collection name; it holds nothing but memories.
        ttl: seconds (or a ``timedelta``) a memory lives after its last write, by the server's clock;
            ``None``: forever (see the sync store).
        snapshot_cache_size: how many memories' last snapshots to keep (0: none).
        retry: how long a write whose reply was lost (or that raced another writer creating the memory)
            is resent; its write id makes a resend apply at most once.
        client_options: keyword arguments for the client the store builds from a URL (the default
            timeouts are the sync store's).

    Raises:
        TypeError: ``url_or_client`` is neither a URL nor an ``AsyncMongoClient``.
        ValueError: an invalid ttl, cache size, database or collection name.
        StoreError: the URL cannot be parsed.
    """

    def __init__(
        self,
        url_or_client: str | AsyncMongoClient[Any],
        *,
        database: str = "chatmemory",
        collection: str = "memories",
        ttl: TTL = None,
        snapshot_cache_size: int = 1024,
        retry: RetryPolicy | None = None,
        client_options: dict[str, Any] | None = None,
    ) -> None:
        self._ttl = ttl_seconds(ttl)
        self._cache: SnapshotCache[MemoryState] = SnapshotCache(snapshot_cache_size)
        self._retry = retry if retry is not None else RetryPolicy()
        if isinstance(url_or_client, str):
            try:
                self._client: AsyncMongoClient[Any] = AsyncMongoClient(
                    url_or_client, **client_options_for(url_or_client, client_options)
                )
            except (*DRIVER_ERRORS, ValueError, TypeError) as exc:
                raise StoreError(Operation.CONNECT, detail=describe(exc)) from exc
            self._owns_client = True
        elif isinstance(url_or_client, AsyncMongoClient):
            self._client = url_or_client
            self._owns_client = False
        else:
            raise TypeError(f"expected a MongoDB URL or a pymongo.AsyncMongoClient, got {type(url_or_client).__name__}")
        self._collection: AsyncCollection[Document] = collection_of(self._client, database, collection)
        self._indexed = self._ttl is None
        self._clock = ServerClock()

    @classmethod
    def from_url(cls, url: str, **options: Any) -> MongoChatMemoryStore:
        """Build from a ``mongodb://`` or ``mongodb+srv://`` URL (options go to the constructor)."""
        if not url.startswith(("mongodb://", "mongodb+srv://")):
            raise ValueError(f"MongoChatMemoryStore takes mongodb:// or mongodb+srv:// URLs, not {url!r}")
        return cls(url, **options)

    # ----------------------------------------------------------------------------------------- resources

    @property
    def ttl(self) -> float | None:
        """Seconds a memory lives after its last write, or ``None``."""
        return self._ttl

    @property
    def collection(self) -> AsyncCollection[Document]:
        """The collection holding the memories (for inspection and administration)."""
        return self._collection

    async def _release(self) -> None:
        await self._client.close()

    def invalidate(self, memory_id: str) -> None:
        """Forget the cached snapshot of ``memory_id`` (after repairing its document by hand)."""
        self._cache.forget(validate_memory_id(memory_id))

    def invalidate_all(self) -> None:
        """Forget every cached snapshot."""
        self._cache.clear()

    def __repr__(self) -> str:
        return (
            f"aio.MongoChatMemoryStore(database={self._collection.database.name!r}, "
            f"collection={self._collection.name!r}, ttl={self._ttl!r})"
        )

    # ------------------------------------------------------------------------------------------- helpers

    async def _ensure_expiry_index(self) -> None:
        if self._indexed:
            return
        try:
            await self._collection.create_index([("expires_at", ASCENDING)], name=EXPIRY_INDEX, expireAfterSeconds=0)
        except DRIVER_ERRORS as exc:
            detail = describe(exc)
            if getattr(exc, "code", None) in INDEX_CONFLICT_CODES:
                try:
                    indexes = [dict(index) async for index in await self._collection.list_indexes()]
                    if equivalent_expiry_index(indexes):
                        self._indexed = True
                        return
                except DRIVER_ERRORS:
                    pass
                detail = expiry_index_conflict(self._collection.name)
            raise StoreError(Operation.SCHEMA, detail=f"creating the TTL index: {detail}") from exc
        self._indexed = True

    async def _find(self, memory_id: str) -> Document | None:
        try:
            server_now = self._clock.now()
            document = await self._collection.find_one(read_filter(memory_id, server_now is not None))
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.READ, memory_id, describe(exc)) from exc
        if document is not None and server_now is not None and expired(document, server_now):
            return None
        return document

    async def _send(self, plan: WritePlan) -> tuple[WriteReply, BaseException | None]:
        try:
            if not plan.returns_document:
                result = await self._collection.update_one(plan.filter, plan.update)
                return WriteReply(matched=result.matched_count), None
            document = await self._collection.find_one_and_update(
                plan.filter,
                plan.update,
                projection=plan.projection,
                upsert=plan.upsert,
                return_document=ReturnDocument.AFTER,
            )
        except DRIVER_ERRORS as exc:
            reply = reply_to_error(exc)
            if reply is None:
                raise write_error(plan.memory_id, exc) from exc
            return reply, exc
        return WriteReply(document), None

    async def _verify(self, plan: WritePlan) -> Document | None:
        try:
            return await self._collection.find_one(plan.verify_filter, plan.verify_projection)
        except DRIVER_ERRORS as exc:
            raise write_error(plan.memory_id, exc) from exc

    async def _execute(self, plan: WritePlan) -> Written | Conflict:
        await self._ensure_expiry_index()
        # A task cancelled while the write is in flight keeps the cached state it started from; if the write
        # landed, that state is stale, and the version and incarnation in every later write's filter make
        # such a write a conflict, never a diff against the wrong array.
        attempts = self._retry.start()
        resent = False
        while True:
            sent = self._clock.local()
            reply, error = await self._send(plan)
            received = self._clock.local()
            outcome = outcome_of(plan, reply, resent=resent)
            if isinstance(outcome, Verify):
                outcome = verified_outcome(plan, await self._verify(plan))
            if not isinstance(outcome, Resend):
                break
            resent = True
            delay = attempts.backoff()
            if delay is None:
                self._cache.forget(plan.memory_id)
                raise resend_error(plan.memory_id, attempts.count, error)
            await asyncio.sleep(delay)
        if isinstance(outcome, Written) and outcome.state is not None:
            self._clock.observe(sent, received, outcome.server_time)
            self._cache.put(plan.memory_id, outcome.state)
        else:
            self._cache.forget(plan.memory_id)
        return outcome

    # ---------------------------------------------------------------------------------------------- read

    @_traced.coroutine("load")
    async def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version (one ``find_one``)."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.READ, memory_id)
        document = await self._find(memory_id)
        if document is None:
            self._cache.forget(memory_id)
            return Snapshot([], 0)
        try:
            state = decode_document(memory_id, document, self._cache.get(memory_id))
        except Exception:
            self._cache.forget(memory_id)
            raise
        self._cache.put(memory_id, state)
        return Snapshot(state.layout.messages(), state.version)

    @_traced.coroutine("get")
    async def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return (await self.load(memory_id)).messages

    @_traced.coroutine("read_raw")
    async def read_raw(self, memory_id: str) -> list[bytes]:
        """The stored records of ``memory_id`` in window order, undecoded; ``[]`` for an unknown id."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.READ, memory_id)
        document = await self._find(memory_id)
        return [] if document is None else raw_records(memory_id, document)

    @_traced.async_iterator("list")
    async def memory_ids(self) -> AsyncIterator[str]:
        """The ids of the memories that have not expired, streamed from a cursor."""
        self._check_open(Operation.LIST)
        try:
            async for document in self._collection.find(live_filter(), {"_id": 1}):
                yield document["_id"]
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.LIST, detail=describe(exc)) from exc

    # --------------------------------------------------------------------------------------------- write

    @_traced.coroutine("save")
    async def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``; return the new version."""
        memory_id = validate_memory_id(memory_id)
        taken = materialize(messages)
        if isinstance(expected_version, bool) or not isinstance(expected_version, int) or expected_version < 0:
            raise ValueError(f"expected_version must be an int >= 0, got {expected_version!r}")
        self._check_open(Operation.WRITE, memory_id)
        cached = self._cache.get(memory_id)
        plan = plan_save(memory_id, taken, expected_version, cached, self._ttl, server_now=self._clock.now())
        outcome = await self._execute(plan)
        if isinstance(outcome, Conflict):
            raise ConcurrentUpdateError(memory_id, expected_version)
        return outcome.version

    @_traced.coroutine("update")
    async def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id`` (one write, whatever version it is at)."""
        memory_id = validate_memory_id(memory_id)
        taken = materialize(messages)
        self._check_open(Operation.WRITE, memory_id)
        await self._execute(plan_replace(memory_id, taken, self._ttl))

    @_traced.coroutine("write_raw")
    async def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Replace the memory with ``records`` as they are; they are decoded only when read."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.WRITE, memory_id)
        await self._execute(plan_raw_write(memory_id, records, self._ttl))

    @_traced.coroutine("memory_times")
    async def memory_times(self, memory_id: str) -> MemoryTimes | None:
        """When ``memory_id`` was last written (by the server's clock) and when it expires; ``None`` if absent."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.READ, memory_id)
        try:
            document = await self._collection.find_one(read_filter(memory_id), {"written_at": 1, "expires_at": 1})
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.READ, memory_id, describe(exc)) from exc
        return memory_times_of(document)

    @_traced.coroutine("expire_at")
    async def expire_at(self, memory_id: str, when: datetime.datetime | None) -> None:
        """Make a live ``memory_id`` expire at ``when`` (aware), or never with ``None``; unknown ids stay absent."""
        memory_id = validate_memory_id(memory_id)
        query, update = plan_expire_at(memory_id, when)
        self._check_open(Operation.WRITE, memory_id)
        if when is not None:
            self._indexed = False  # a store without a ttl makes its TTL index on first need
            await self._ensure_expiry_index()
        try:
            await self._collection.update_one(query, update)
        except DRIVER_ERRORS as exc:
            raise write_error(memory_id, exc) from exc

    @_traced.coroutine("delete")
    async def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id``; idempotent."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.DELETE, memory_id)
        self._cache.forget(memory_id)
        try:
            await self._collection.delete_one({"_id": memory_id})
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.DELETE, memory_id, describe(exc)) from exc
