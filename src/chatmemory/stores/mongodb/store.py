"""The MongoDB store (pymongo): one document per memory, each write one ``find_one_and_update``.

The store sends what :mod:`chatmemory.stores.mongodb.plan` decides and hands the replies back to it;
the document layout is described in :mod:`chatmemory.stores.mongodb.layout`. Everything runs on
MongoDB 7 and newer: no multi-document transactions, no 8.0-only commands or options, errors recognised
by code.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from chatmemory.core.errors import ConcurrentUpdateError, StoreError
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Snapshot
from chatmemory.memory_times import MemoryTimes
from chatmemory.stores._optional import require
from chatmemory.stores.base import Operation, RetryPolicy, SnapshotCache, StoreLifecycle, ttl_seconds
from chatmemory.stores.base.options import TTL
from chatmemory.stores.base.telemetry import StoreTelemetry

require("pymongo", feature="MongoChatMemoryStore", extra="mongodb")

from pymongo import ASCENDING, MongoClient, ReturnDocument  # noqa: E402 - imported once the driver is known

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
    from pymongo.collection import Collection

__all__ = ["EXPIRY_INDEX", "MongoChatMemoryStore"]

_traced = StoreTelemetry("mongodb", __name__)


class MongoChatMemoryStore(StoreLifecycle):
    """A store in a MongoDB collection; supports versioning, listing, TTL and raw records.

    Args:
        url_or_client: a ``mongodb://`` / ``mongodb+srv://`` URL (the store builds the client and closes it
            in :meth:`close`), or a :class:`pymongo.MongoClient` (the caller owns and closes it).
        database: the database name.
        collection: the collection name; it holds nothing but memories.
        ttl: seconds (or a ``timedelta``) a memory lives after its last write, by the server's clock;
            ``None``: forever. With a ttl the store creates a TTL index on ``expires_at`` (once,
            idempotently) so the server removes expired documents; until it does (its TTL monitor runs
            about once a minute) they read as empty.
        snapshot_cache_size: how many memories' last snapshots to keep, so that a turn writes a diff and a
            read decodes only new records (0: none).
        retry: how long a write whose reply was lost (or that raced another writer creating the memory)
            is resent; its write id makes a resend apply at most once.
        client_options: keyword arguments for the client the store builds from a URL. Unless these or the
            URL set them, the store uses ``serverSelectionTimeoutMS=5000``, ``connectTimeoutMS=5000`` and
            ``socketTimeoutMS=30000`` (see :data:`~chatmemory.stores.mongodb.driver.DEFAULT_TIMEOUTS_MS`).

    Raises:
        TypeError: ``url_or_client`` is neither a URL nor a ``MongoClient``.
        ValueError: an invalid ttl, cache size, database or collection name.
        StoreError: the URL cannot be parsed.
    """

    def __init__(
        self,
        url_or_client: str | MongoClient[Any],
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
                self._client: MongoClient[Any] = MongoClient(
                    url_or_client, **client_options_for(url_or_client, client_options)
                )
            except (
                *DRIVER_ERRORS,
                ValueError,
                TypeError,
            ) as exc:  # the URI parser raises ConfigurationError/ValueError
                raise StoreError(Operation.CONNECT, detail=describe(exc)) from exc
            self._owns_client = True
        elif isinstance(url_or_client, MongoClient):
            self._client = url_or_client
            self._owns_client = False
        else:
            raise TypeError(f"expected a MongoDB URL or a pymongo.MongoClient, got {type(url_or_client).__name__}")
        self._collection: Collection[Document] = collection_of(self._client, database, collection)
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
    def collection(self) -> Collection[Document]:
        """The collection holding the memories (for inspection and administration)."""
        return self._collection

    def _release(self) -> None:
        self._client.close()

    def invalidate(self, memory_id: str) -> None:
        """Forget the cached snapshot of ``memory_id`` (after repairing its document by hand)."""
        self._cache.forget(validate_memory_id(memory_id))

    def invalidate_all(self) -> None:
        """Forget every cached snapshot."""
        self._cache.clear()

    def __repr__(self) -> str:
        return (
            f"MongoChatMemoryStore(database={self._collection.database.name!r}, "
            f"collection={self._collection.name!r}, ttl={self._ttl!r})"
        )

    # ------------------------------------------------------------------------------------------- helpers

    def _ensure_expiry_index(self) -> None:
        if self._indexed:
            return
        try:
            # create_index is idempotent for the same key and options.
            self._collection.create_index([("expires_at", ASCENDING)], name=EXPIRY_INDEX, expireAfterSeconds=0)
        except DRIVER_ERRORS as exc:
            detail = describe(exc)
            if getattr(exc, "code", None) in INDEX_CONFLICT_CODES:
                try:
                    if equivalent_expiry_index([dict(index) for index in self._collection.list_indexes()]):
                        self._indexed = True
                        return
                except DRIVER_ERRORS:
                    pass
                detail = expiry_index_conflict(self._collection.name)
            raise StoreError(Operation.SCHEMA, detail=f"creating the TTL index: {detail}") from exc
        self._indexed = True

    def _find(self, memory_id: str) -> Document | None:
        try:
            server_now = self._clock.now()
            document = self._collection.find_one(read_filter(memory_id, server_now is not None))
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.READ, memory_id, describe(exc)) from exc
        if document is not None and server_now is not None and expired(document, server_now):
            return None
        return document

    def _send(self, plan: WritePlan) -> tuple[WriteReply, BaseException | None]:
        """Send ``plan`` once; a driver error that the plan can interpret becomes its reply."""
        try:
            if not plan.returns_document:
                result = self._collection.update_one(plan.filter, plan.update)
                return WriteReply(matched=result.matched_count), None
            document = self._collection.find_one_and_update(
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

    def _verify(self, plan: WritePlan) -> Document | None:
        try:
            return self._collection.find_one(plan.verify_filter, plan.verify_projection)
        except DRIVER_ERRORS as exc:
            raise write_error(plan.memory_id, exc) from exc

    def _execute(self, plan: WritePlan) -> Written | Conflict:
        self._ensure_expiry_index()
        attempts = self._retry.start()
        resent = False
        while True:
            sent = self._clock.local()
            reply, error = self._send(plan)
            received = self._clock.local()
            outcome = outcome_of(plan, reply, resent=resent)
            if isinstance(outcome, Verify):
                outcome = verified_outcome(plan, self._verify(plan))
            if not isinstance(outcome, Resend):
                break
            resent = True
            delay = attempts.backoff()
            if delay is None:
                self._cache.forget(plan.memory_id)
                raise resend_error(plan.memory_id, attempts.count, error)
            time.sleep(delay)
        if isinstance(outcome, Written) and outcome.state is not None:
            self._clock.observe(sent, received, outcome.server_time)
            self._cache.put(plan.memory_id, outcome.state)
        else:
            self._cache.forget(plan.memory_id)
        return outcome

    # ---------------------------------------------------------------------------------------------- read

    @_traced("load")
    def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version (one ``find_one``)."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.READ, memory_id)
        document = self._find(memory_id)
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

    @_traced("get")
    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return self.load(memory_id).messages

    @_traced("read_raw")
    def read_raw(self, memory_id: str) -> list[bytes]:
        """The stored records of ``memory_id`` in window order, undecoded; ``[]`` for an unknown id."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.READ, memory_id)
        document = self._find(memory_id)
        return [] if document is None else raw_records(memory_id, document)

    @_traced.iterator("list")
    def memory_ids(self) -> Iterator[str]:
        """The ids of the memories that have not expired, streamed from a cursor."""
        self._check_open(Operation.LIST)
        try:
            for document in self._collection.find(live_filter(), {"_id": 1}):
                yield document["_id"]
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.LIST, detail=describe(exc)) from exc

    # --------------------------------------------------------------------------------------------- write

    @_traced("save")
    def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``; return the new version."""
        memory_id = validate_memory_id(memory_id)
        taken = materialize(messages)
        if isinstance(expected_version, bool) or not isinstance(expected_version, int) or expected_version < 0:
            raise ValueError(f"expected_version must be an int >= 0, got {expected_version!r}")
        self._check_open(Operation.WRITE, memory_id)
        cached = self._cache.get(memory_id)
        plan = plan_save(memory_id, taken, expected_version, cached, self._ttl, server_now=self._clock.now())
        outcome = self._execute(plan)
        if isinstance(outcome, Conflict):
            raise ConcurrentUpdateError(memory_id, expected_version)
        return outcome.version

    @_traced("update")
    def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id`` (one write, whatever version it is at)."""
        memory_id = validate_memory_id(memory_id)
        taken = materialize(messages)
        self._check_open(Operation.WRITE, memory_id)
        self._execute(plan_replace(memory_id, taken, self._ttl))

    @_traced("write_raw")
    def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Replace the memory with ``records`` as they are; they are decoded only when read."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.WRITE, memory_id)
        self._execute(plan_raw_write(memory_id, records, self._ttl))

    @_traced("memory_times")
    def memory_times(self, memory_id: str) -> MemoryTimes | None:
        """When ``memory_id`` was last written (by the server's clock) and when it expires; ``None`` if absent."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.READ, memory_id)
        try:
            document = self._collection.find_one(read_filter(memory_id), {"written_at": 1, "expires_at": 1})
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.READ, memory_id, describe(exc)) from exc
        return memory_times_of(document)

    @_traced("expire_at")
    def expire_at(self, memory_id: str, when: datetime.datetime | None) -> None:
        """Make a live ``memory_id`` expire at ``when`` (aware), or never with ``None``; unknown ids stay absent."""
        memory_id = validate_memory_id(memory_id)
        query, update = plan_expire_at(memory_id, when)
        self._check_open(Operation.WRITE, memory_id)
        if when is not None:
            self._indexed = False  # a store without a ttl makes its TTL index on first need
            self._ensure_expiry_index()
        try:
            self._collection.update_one(query, update)
        except DRIVER_ERRORS as exc:
            raise write_error(memory_id, exc) from exc

    @_traced("delete")
    def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id``; idempotent."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.DELETE, memory_id)
        self._cache.forget(memory_id)
        try:
            self._collection.delete_one({"_id": memory_id})
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.DELETE, memory_id, describe(exc)) from exc
