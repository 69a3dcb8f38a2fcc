"""The MongoDB store (pymongo): one document per memory, each write one ``find_one_and_update``.

The store sends what :mod:`chatmemory.stores.mongodb.plan` decides and hands the replies back to it;
the document layout is described in :mod:`chatmemory.stores.mongodb.layout`. Everything runs on
MongoDB 7 and newer: no multi-document transactions (history included: see
:mod:`chatmemory.stores.mongodb.history`), no 8.0-only commands or options, errors recognised
by code.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from chatmemory.core.errors import ConcurrentUpdateError, HistoryNotEnabledError, SerializationError, StoreError
from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryPage, history_query, trim_cutoff
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Snapshot
from chatmemory.memory_times import MemoryTimes
from chatmemory.stores._optional import require
from chatmemory.stores.base import Operation, RetryPolicy, SnapshotCache, StoreLifecycle, ttl_seconds
from chatmemory.stores.base.options import TTL, history_ttl_seconds
from chatmemory.stores.base.telemetry import StoreTelemetry

require("pymongo", feature="MongoChatMemoryStore", extra="mongodb")

from pymongo import ASCENDING, MongoClient, ReturnDocument  # noqa: E402 - imported once the driver is known

from chatmemory.stores.mongodb.clock import ServerClock, expired  # noqa: E402
from chatmemory.stores.mongodb.driver import (  # noqa: E402
    DRIVER_ERRORS,
    EXPIRY_INDEX,
    INDEX_CONFLICT_CODES,
    collection_of,
    copy_landed,
    describe,
    equivalent_expiry_index,
    expiry_index_conflict,
    reply_to_error,
    resend_error,
    server_time,
    write_error,
)
from chatmemory.stores.mongodb.driver import client_options as client_options_for  # noqa: E402
from chatmemory.stores.mongodb.history import (  # noqa: E402
    ENTRY_PROJECTION,
    HEAD_PROJECTION,
    HISTORY_EXPIRY_INDEX,
    HISTORY_INDEX,
    HISTORY_KEY,
    STAGED_PROJECTION,
    UPDATE_ATTEMPTS,
    HistoryConfig,
    entry_documents,
    groups_of,
    head_filter,
    head_of,
    history_collection_name,
    page_of,
    read_entries_filter,
    refresh_due,
    refresh_update,
    refreshed_of,
    should_copy,
    staged_filter,
    staged_operations,
    stale_filter,
    state_after,
    trim_filter,
    trim_head,
    with_history,
)
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
        history: keep every message ever added to a memory in ``<collection>_history`` (see
            :mod:`chatmemory.stores.mongodb.history`); read it with :meth:`history`.
        history_ttl: seconds (or a ``timedelta``) a history lives after the memory's last write (at least
            ``ttl``); ``None``: as long as the window. Needs ``history=True``.

    Raises:
        TypeError: ``url_or_client`` is neither a URL nor a ``MongoClient``; ``history`` is not a bool.
        ValueError: an invalid ttl, history_ttl, cache size, database or collection name.
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
        history: bool = False,
        history_ttl: TTL = None,
    ) -> None:
        self._ttl = ttl_seconds(ttl)
        history_seconds = history_ttl_seconds(history, history_ttl, self._ttl)
        self._history = HistoryConfig(self._ttl, history_seconds) if history else None
        self._window_field = self._history.window_field if self._history is not None else "expires_at"
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
        self._history_collection: Collection[Document] | None = None
        if self._history is not None:
            self._history_collection = collection_of(self._client, database, history_collection_name(collection))
        self._indexed = self._ttl is None
        self._history_indexed = self._history is None
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

    @property
    def keeps_history(self) -> bool:
        """Whether this store was built with history on."""
        return self._history is not None

    @property
    def history_collection(self) -> Collection[Document] | None:
        """The collection holding the histories (``None``: the store keeps none)."""
        return self._history_collection

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
            f"collection={self._collection.name!r}, ttl={self._ttl!r}"
            + ("" if self._history is None else f", history=True, history_ttl={self._history.history_ttl!r}")
            + ")"
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

    def _ensure_history_index(self) -> None:
        if self._history_indexed or self._history_collection is None:
            return
        try:
            self._history_collection.create_index(HISTORY_KEY, name=HISTORY_INDEX, unique=True)
            if self._history is not None and self._history.lifetime is not None:
                self._history_collection.create_index(
                    [("x", ASCENDING)], name=HISTORY_EXPIRY_INDEX, expireAfterSeconds=0
                )
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.SCHEMA, detail=f"creating the history index: {describe(exc)}") from exc
        self._history_indexed = True

    def _find(self, memory_id: str) -> Document | None:
        try:
            server_now = self._clock.now()
            # No projection leaves the staged history groups out: one costs a server more than their bytes.
            query = read_filter(memory_id, server_now is not None, self._window_field)
            document = self._collection.find_one(query)
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.READ, memory_id, describe(exc)) from exc
        if document is not None and server_now is not None and expired(document, server_now, self._window_field):
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

    def _copy(self, memory_id: str, document: Mapping[str, Any]) -> bool:
        """Copy the history groups a write reply shows into the history collection; whether all landed."""
        assert self._history_collection is not None
        assert self._history is not None
        lifetime = self._history.lifetime
        groups = groups_of(memory_id, document)
        operations = entry_documents(memory_id, document["hid"], groups, lifetime, refreshed_of(document))
        if not operations:
            return True
        try:
            self._history_collection.insert_many(operations, ordered=False)
        except DRIVER_ERRORS as exc:
            # The groups stay in the window document, which readers merge; the next write copies them.
            return copy_landed(exc)
        return True

    def _refresh(self, memory_id: str, hid: int | None, now: datetime.datetime) -> None:
        """Set the expiry of every entry of history ``hid`` to ``now`` plus twice the history's lifetime."""
        assert self._history is not None and self._history_collection is not None and hid is not None
        query, update = refresh_update(self._history, memory_id, hid, now)
        try:
            self._history_collection.update_many(query, update)
        except DRIVER_ERRORS as exc:
            raise write_error(memory_id, exc) from exc

    def _refresh_before(self, memory_id: str, state: MemoryState | None) -> datetime.datetime | None:
        """Before a write pinned to ``state``: set the entries' expiry if it is due; the time it was set from."""
        assert self._history is not None
        if state is None or state.history is None:
            return None
        due = refresh_due(state.history, self._history, self._clock.now() or self._clock.local())
        if due is not None:
            self._refresh(memory_id, state.history.hid, due)
        return due

    def _record(self, plan: WritePlan, outcome: Written, document: Mapping[str, Any] | None) -> MemoryState | None:
        """Copy what a history store's write left in the document; the state to cache."""
        if document is None or not isinstance(document.get("hid"), int):
            return None
        groups = groups_of(plan.memory_id, document)
        copied = not groups
        if should_copy(groups):
            copied = self._copy(plan.memory_id, document)
        if plan.history_id is not None and document["hid"] == plan.history_id:
            assert self._history_collection is not None
            try:  # a new history: entries of an expired or deleted one go
                self._history_collection.delete_many(stale_filter(plan.memory_id, plan.history_id))
            except DRIVER_ERRORS:
                pass  # never read (their history id differs); trim_history removes them too
        head = state_after(plan.memory_id, document, copied)
        assert self._history is not None
        if head is not None and outcome.server_time is not None:
            # A write that went on a history without setting its entries' expiry first (it created
            # the window again) sets it now; the next write that knows the head records when.
            due = refresh_due(head, self._history, outcome.server_time)
            if due is not None:
                self._refresh(plan.memory_id, head.hid, due)
        if outcome.state is None or head is None:
            return None
        return replace(outcome.state, history=head)

    def _execute(self, plan: WritePlan) -> Written | Conflict:
        self._ensure_expiry_index()
        self._ensure_history_index()
        attempts = self._retry.start()
        resent = False
        while True:
            sent = self._clock.local()
            reply, error = self._send(plan)
            received = self._clock.local()
            document = reply.document
            outcome = outcome_of(plan, reply, resent=resent)
            if isinstance(outcome, Verify):
                document = self._verify(plan)
                outcome = verified_outcome(plan, document)
            if not isinstance(outcome, Resend):
                break
            resent = True
            delay = attempts.backoff()
            if delay is None:
                self._cache.forget(plan.memory_id)
                raise resend_error(plan.memory_id, attempts.count, error)
            time.sleep(delay)
        state = outcome.state if isinstance(outcome, Written) else None
        if isinstance(outcome, Written) and plan.keeps_history:
            state = self._record(plan, outcome, document)
        if isinstance(outcome, Written) and state is not None:
            self._clock.observe(sent, received, outcome.server_time)
            self._cache.put(plan.memory_id, state)
        else:
            self._cache.forget(plan.memory_id)
        return outcome

    # ---------------------------------------------------------------------------------------------- read

    def _load_state(self, memory_id: str) -> MemoryState | None:
        document = self._find(memory_id)
        if document is None:
            self._cache.forget(memory_id)
            return None
        previous = self._cache.get(memory_id)
        try:
            state = decode_document(memory_id, document, previous)
            if self._history is not None:
                state = with_history(state, document, previous)
        except Exception:
            self._cache.forget(memory_id)
            raise
        self._cache.put(memory_id, state)
        return state

    @_traced("load")
    def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version (one ``find_one``)."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.READ, memory_id)
        state = self._load_state(memory_id)
        if state is None:
            return Snapshot([], 0)
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
            for document in self._collection.find(live_filter(self._window_field), {"_id": 1}):
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
        if (
            self._history is not None
            and expected_version
            and (cached is None or cached.version != expected_version or cached.history is None)
        ):
            # The history records what the write appends to the stored window: plan against it.
            cached = self._load_state(memory_id)
            if cached is None or cached.version != expected_version:
                raise ConcurrentUpdateError(memory_id, expected_version)
        refreshed = None
        if self._history is not None and expected_version:
            refreshed = self._refresh_before(memory_id, cached)
        plan = plan_save(
            memory_id, taken, expected_version, cached, self._ttl, server_now=self._clock.now(),
            history=self._history, refreshed=refreshed,
        )  # fmt: skip
        outcome = self._execute(plan)
        if isinstance(outcome, Conflict):
            raise ConcurrentUpdateError(memory_id, expected_version)
        return outcome.version

    @_traced("update")
    def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id`` (one write, whatever version it is at).

        A store with history reads the window first and saves against it (again if another writer got
        there first), so that the history records what this write appended to the window it replaced.
        """
        memory_id = validate_memory_id(memory_id)
        taken = materialize(messages)
        self._check_open(Operation.WRITE, memory_id)
        if self._history is None:
            self._execute(plan_replace(memory_id, taken, self._ttl))
            return
        for _ in range(UPDATE_ATTEMPTS):
            try:
                state = self._load_state(memory_id)
            except SerializationError:
                # A window it cannot read is replaced whole; the history records the new one whole.
                self._execute(plan_replace(memory_id, taken, self._ttl, self._history))
                return
            version = 0 if state is None else state.version
            refreshed = self._refresh_before(memory_id, state)
            plan = plan_save(
                memory_id, taken, version, state, self._ttl, server_now=self._clock.now(),
                history=self._history, refreshed=refreshed,
            )  # fmt: skip
            if isinstance(self._execute(plan), Written):
                return
        raise StoreError(
            Operation.WRITE, memory_id, f"other writers won {UPDATE_ATTEMPTS} times in a row; nothing was written"
        )

    @_traced("write_raw")
    def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Replace the memory with ``records`` as they are; they are decoded only when read.

        A store with history records nothing in it for them.
        """
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.WRITE, memory_id)
        self._execute(plan_raw_write(memory_id, records, self._ttl, self._history))

    @_traced("memory_times")
    def memory_times(self, memory_id: str) -> MemoryTimes | None:
        """When ``memory_id`` was last written (by the server's clock) and when it expires; ``None`` if absent."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.READ, memory_id)
        try:
            document = self._collection.find_one(
                read_filter(memory_id, field=self._window_field), {"written_at": 1, self._window_field: 1}
            )
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.READ, memory_id, describe(exc)) from exc
        return memory_times_of(document, self._window_field)

    @_traced("expire_at")
    def expire_at(self, memory_id: str, when: datetime.datetime | None) -> None:
        """Make a live ``memory_id`` expire at ``when`` (aware), or never with ``None``; unknown ids stay absent."""
        memory_id = validate_memory_id(memory_id)
        query, update = plan_expire_at(memory_id, when, self._history)
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
        """Remove ``memory_id`` (its history too); idempotent."""
        memory_id = validate_memory_id(memory_id)
        self._check_open(Operation.DELETE, memory_id)
        self._cache.forget(memory_id)
        try:
            self._collection.delete_one({"_id": memory_id})
            if self._history_collection is not None:
                self._history_collection.delete_many({"m": memory_id})
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.DELETE, memory_id, describe(exc)) from exc

    # ------------------------------------------------------------------------------------------- history

    def _require_history(self) -> tuple[HistoryConfig, Collection[Document]]:
        if self._history is None or self._history_collection is None:
            raise HistoryNotEnabledError(repr(self))
        return self._history, self._history_collection

    def history(
        self, memory_id: str, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        """One page of the history of ``memory_id`` (see :meth:`chatmemory.SupportsHistory.history`).

        Two reads: the history head in the window document, then the entries (an indexed range).

        Raises:
            HistoryNotEnabledError: the store was built without history.
        """
        query = history_query(after, limit, reverse)
        memory_id = validate_memory_id(memory_id)
        config, entries = self._require_history()
        self._check_open(Operation.READ, memory_id)
        try:
            head = head_of(memory_id, self._collection.find_one(head_filter(memory_id, config), HEAD_PROJECTION))
            if head is None:
                return HistoryPage([], None)
            filter, sort = read_entries_filter(memory_id, head.hid, query)
            documents = list(entries.find(filter, ENTRY_PROJECTION, sort=sort, limit=query.limit + 1))
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.READ, memory_id, describe(exc)) from exc
        return page_of(memory_id, query, documents, head)

    def _server_now(self) -> datetime.datetime:
        now = self._clock.now()
        if now is not None:
            return now
        try:
            now = server_time(self._client.admin.command("hello"))
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.READ, detail=describe(exc)) from exc
        return now if now is not None else self._clock.local()

    def trim_history(self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None) -> int:
        """Remove history entries written before ``older_than`` (of ``memory_id``, or of every memory).

        ``older_than`` is an aware datetime, or a ``timedelta`` back from the server's clock. The window is
        never changed. Returns how many entries were removed.

        Raises:
            HistoryNotEnabledError: the store was built without history.
        """
        trim_cutoff(older_than, self._clock.local())  # checks older_than before anything else
        if memory_id is not None:
            memory_id = validate_memory_id(memory_id)
        _, entries = self._require_history()
        self._check_open(Operation.DELETE, memory_id)
        cutoff = trim_cutoff(older_than, self._server_now())
        head_query, head_update = trim_head(cutoff, memory_id)
        assert self._history is not None
        try:
            # Staged groups are copied first, so that the count covers them.
            cursor = self._collection.find(staged_filter(memory_id), STAGED_PROJECTION)
            documents = list(cursor)
            operations = staged_operations(documents, self._history.lifetime)
            if operations:
                try:
                    entries.insert_many(operations, ordered=False)
                except DRIVER_ERRORS as exc:
                    if not copy_landed(exc):
                        raise
            removed = entries.delete_many(trim_filter(cutoff, memory_id)).deleted_count
            self._collection.update_many(head_query, head_update)
        except DRIVER_ERRORS as exc:
            raise StoreError(Operation.DELETE, memory_id, describe(exc)) from exc
        return removed
