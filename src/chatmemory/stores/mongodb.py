"""A MongoDB store (pymongo): one document per memory, written as a diff in one ``update_one``.

Document layout (field order is never relied on)::

    {
        "_id": <memory id>,              # the id as a plain string value, never an operator
        "version": <int64>,              # optimistic concurrency; never repeats for an id
        "incarnation": <ObjectId>,       # new on every full write; guards cached snapshots
        "messages": [<record>, ...],     # dumps_message JSON text, oldest first, system message left out
        "system": <record>,              # the held system message, if any ...
        "system_at": <int>,              # ... and its position in the memory
        "expires_at": <date>,            # with a ttl: a TTL index (expireAfterSeconds=0) removes the document
    }

Each message is kept as its native record (JSON text), not as a BSON sub-document: message attributes
may have keys such as ``"$where"``, ``"a.b"`` or ``"\\x00"`` that BSON field names cannot hold safely.

The held system message lives outside the array because a window memory that keeps it first evicts
from position 1, not from the head; with the system message aside, every steady-state turn (evict the
oldest, append the newest) is a head trim of the array, which ``$push`` with ``$each``/``$slice`` does
in one small ``update_one`` filtered on the version.

Everything here runs on MongoDB 7 and newer: no multi-document transactions, no 8.0-only commands or
options, errors recognised by code.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chatmemory.core.errors import ConcurrentUpdateError, CorruptedMemoryError, StoreError
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage, require_message
from chatmemory.core.store import Snapshot
from chatmemory.serialization.native import dumps_message, loads_message
from chatmemory.stores._optional import require
from chatmemory.stores.base.options import ttl_seconds
from chatmemory.stores.mongodb_layout import MongoLayout, MongoWritePlan, plan_layout, plan_write

require("pymongo", feature="MongoChatMemoryStore", extra="mongodb")

from bson import ObjectId  # noqa: E402 - imported once the driver is known to be installed
from bson.codec_options import CodecOptions  # noqa: E402
from bson.errors import BSONError  # noqa: E402
from pymongo import ASCENDING, MongoClient  # noqa: E402
from pymongo.errors import DocumentTooLarge, PyMongoError  # noqa: E402

if TYPE_CHECKING:
    from pymongo.collection import Collection

__all__ = ["MongoChatMemoryStore", "MongoLayout", "MongoWritePlan", "plan_layout", "plan_write"]

Document = dict[str, Any]
Record = str | bytes

DUPLICATE_KEY = 11000
"""Another writer created the document first (an upsert race on a new memory)."""
WRITE_CONFLICT = 112
"""Two operations touched the document at once; nothing of ours was applied."""
NO_SUCH_TRANSACTION = 251
"""A transaction the server aborted under us (only inside a caller's session); nothing was applied."""
CONFLICT_CODES = frozenset({DUPLICATE_KEY, WRITE_CONFLICT, NO_SUCH_TRANSACTION})
INDEX_CONFLICT_CODES = frozenset({85, 86})
"""IndexOptionsConflict / IndexKeySpecsConflict: an index of that name or key exists with other options."""

DOCUMENT_TOO_LARGE = 10334
"""BSONObjectTooLarge: the update would grow the document past the server's limit (16 MiB)."""
DRIVER_ERRORS = (PyMongoError, BSONError)
"""What pymongo raises: its own errors, and BSON errors such as DocumentTooLarge (not a PyMongoError)."""

EXPIRY_INDEX = "chatmemory_expires_at"
_UNCONDITIONAL_ATTEMPTS = 5


# ------------------------------------------------------------------------------------------------- store


@dataclass(frozen=True, slots=True)
class _Cached:
    """The layout of a memory at a version, as this store last read or wrote it."""

    version: int
    incarnation: ObjectId | None
    """``None`` for a document written by other means: it is read, never diffed against."""
    layout: MongoLayout
    records: tuple[Record, ...]
    """The stored records of ``layout.array`` (and of the held message, last, if any)."""

    def decoded(self) -> dict[Record, ChatMessage]:
        """Record → message, so a later read decodes only the records it has not seen."""
        messages = self.layout.array if self.layout.system is None else (*self.layout.array, self.layout.system)
        return dict(zip(self.records, messages, strict=True))


def _version_floor() -> int:
    # Versions never fall below the wall clock in microseconds: a memory deleted and created again starts
    # above every version its earlier incarnation reached (which also sat below the clock of its writes).
    return time.time_ns() // 1000


def _record(message: ChatMessage) -> str:
    # orjson's output is valid UTF-8, so the JSON text can be a BSON string (readable in mongosh).
    return dumps_message(message).decode("utf-8")


def _write_error(memory_id: str, exc: Exception) -> StoreError:
    detail = str(exc)
    if isinstance(exc, DocumentTooLarge) or getattr(exc, "code", None) == DOCUMENT_TOO_LARGE:
        detail = (
            f"{detail}. A memory is one document, which MongoDB limits to 16 MiB; keep the window "
            "smaller (max_messages / max_tokens) or the messages shorter. Nothing was changed"
        )
    return StoreError("writing", memory_id, detail)


class MongoChatMemoryStore:
    """A store in a MongoDB collection; supports versioning, listing and TTL.

    Args:
        url_or_client: a ``mongodb://`` / ``mongodb+srv://`` URL (the store builds the client and closes it
            in :meth:`close`), or a :class:`pymongo.MongoClient` (the caller owns and closes it).
        database: the database name.
        collection: the collection name; it holds nothing but memories.
        ttl: seconds (or a ``timedelta``) a memory lives after its last write; ``None``: forever. With a
            ttl the store creates a TTL index on ``expires_at`` (once, idempotently) so the server removes
            expired documents; until it does (its TTL monitor runs about once a minute) they read as empty.
        snapshot_cache_size: how many memories' last snapshots to keep, so that a turn writes a diff and a
            read decodes only new records (0: none).
    """

    def __init__(
        self,
        url_or_client: str | MongoClient[Any],
        *,
        database: str = "chatmemory",
        collection: str = "memories",
        ttl: float | datetime.timedelta | None = None,
        snapshot_cache_size: int = 1024,
    ) -> None:
        self._ttl = ttl_seconds(ttl)
        if snapshot_cache_size < 0:
            raise ValueError(f"snapshot_cache_size must be >= 0, got {snapshot_cache_size!r}")
        self._cache_size = snapshot_cache_size
        if isinstance(url_or_client, str):
            try:
                self._client: MongoClient[Any] = MongoClient(url_or_client)
            except (PyMongoError, ValueError) as exc:  # the URI parser raises ConfigurationError or ValueError
                raise StoreError("connecting to MongoDB", detail=str(exc)) from exc
            self._owns_client = True
        elif isinstance(url_or_client, MongoClient):
            self._client = url_or_client
            self._owns_client = False
        else:
            raise TypeError(f"expected a MongoDB URL or a pymongo.MongoClient, got {type(url_or_client).__name__}")
        # Our own codec options: documents as dicts and aware UTC dates, whatever the caller's client uses.
        codec: CodecOptions[Document] = CodecOptions(document_class=dict, tz_aware=True, tzinfo=datetime.timezone.utc)
        self._collection: Collection[Document] = self._client[database].get_collection(collection, codec_options=codec)
        self._cache: OrderedDict[str, _Cached] = OrderedDict()
        self._lock = threading.Lock()
        self._indexed = self._ttl is None

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

    def close(self) -> None:
        """Close the client if the store built it from a URL; a caller's client is left open."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> MongoChatMemoryStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

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
            detail = str(exc)
            if getattr(exc, "code", None) in INDEX_CONFLICT_CODES:
                if self._has_equivalent_expiry_index():
                    self._indexed = True
                    return
                detail = (
                    f"an index on 'expires_at' or named {EXPIRY_INDEX!r} exists with other options; "
                    f"drop it (db.{self._collection.name}.dropIndex(...)) so the store can create "
                    "its TTL index with expireAfterSeconds: 0"
                )
            raise StoreError("creating the TTL index", detail=detail) from exc
        self._indexed = True

    def _has_equivalent_expiry_index(self) -> bool:
        # An operator may have created the same TTL index under another name; MongoDB then refuses ours.
        try:
            indexes = list(self._collection.list_indexes())
        except DRIVER_ERRORS:
            return False
        return any(
            list(dict(index["key"]).items()) == [("expires_at", 1)] and index.get("expireAfterSeconds") == 0
            for index in indexes
        )

    def _expiry(self, now: datetime.datetime) -> datetime.datetime | None:
        return None if self._ttl is None else now + datetime.timedelta(seconds=self._ttl)

    @staticmethod
    def _live(now: datetime.datetime) -> Document:
        # Absent (no ttl) or still in the future: expired documents count as gone before the TTL monitor
        # removes them.
        return {"$not": {"$lte": now}}

    def _remember(self, memory_id: str, cached: _Cached | None) -> None:
        with self._lock:
            if cached is None:
                self._cache.pop(memory_id, None)
                return
            self._cache[memory_id] = cached
            self._cache.move_to_end(memory_id)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def _cached(self, memory_id: str, version: int) -> _Cached | None:
        with self._lock:
            cached = self._cache.get(memory_id)
        if cached is None or cached.version != version or cached.incarnation is None:
            return None
        return cached

    def _document(self, layout: MongoLayout, version: int, incarnation: ObjectId, now: datetime.datetime) -> Document:
        document: Document = {
            "version": version,
            "incarnation": incarnation,
            "messages": [_record(message) for message in layout.array],
        }
        if layout.system is not None:
            document["system"] = _record(layout.system)
            document["system_at"] = layout.system_at
        expires_at = self._expiry(now)
        if expires_at is not None:
            document["expires_at"] = expires_at
        return document

    # ---------------------------------------------------------------------------------------------- read

    def _decode(self, memory_id: str, document: Document, previous: _Cached | None) -> _Cached:
        version = document.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version <= 0:
            raise CorruptedMemoryError(memory_id, f"the document's 'version' is {version!r}, not a positive integer")
        if "messages" not in document:
            raise CorruptedMemoryError(memory_id, "the document has no 'messages' field")
        records = document["messages"]
        if not isinstance(records, list):
            raise CorruptedMemoryError(memory_id, f"'messages' is a {type(records).__name__}, not an array")
        # Decoding is most of a read's cost; a steady-state turn changes only a record or two.
        known = previous.decoded() if previous is not None else {}
        array = tuple(
            self._message(memory_id, record, f"messages[{index}]", known) for index, record in enumerate(records)
        )
        system: ChatMessage | None = None
        system_at = 0
        if "system" in document:
            records = [*records, document["system"]]
            system = self._message(memory_id, document["system"], "system", known)
            system_at = document.get("system_at")  # type: ignore[assignment]
            if not isinstance(system_at, int) or isinstance(system_at, bool) or not 0 <= system_at <= len(array):
                raise CorruptedMemoryError(
                    memory_id, f"'system_at' is {system_at!r}, not a position within the {len(array) + 1} messages"
                )
        incarnation = document.get("incarnation")
        return _Cached(
            version,
            incarnation if isinstance(incarnation, ObjectId) else None,
            MongoLayout(array, system, system_at),
            tuple(records),
        )

    @staticmethod
    def _message(memory_id: str, record: object, where: str, known: dict[Record, ChatMessage]) -> ChatMessage:
        if not isinstance(record, (str, bytes)):
            raise CorruptedMemoryError(memory_id, f"{where} is a BSON {type(record).__name__}, not a message record")
        message = known.get(record)
        return message if message is not None else loads_message(record, memory_id=memory_id)

    def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version (one ``find_one``)."""
        memory_id = validate_memory_id(memory_id)
        try:
            document = self._collection.find_one({"_id": memory_id})
        except DRIVER_ERRORS as exc:
            raise StoreError("reading", memory_id, str(exc)) from exc
        if document is None:
            self._remember(memory_id, None)
            return Snapshot([], 0)
        expires_at = document.get("expires_at")
        if isinstance(expires_at, datetime.datetime) and expires_at <= datetime.datetime.now(datetime.timezone.utc):
            self._remember(memory_id, None)
            return Snapshot([], 0)
        with self._lock:
            previous = self._cache.get(memory_id)
        cached = self._decode(memory_id, document, previous)
        self._remember(memory_id, cached)
        return Snapshot(cached.layout.messages(), cached.version)

    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return self.load(memory_id).messages

    def memory_ids(self) -> Iterator[str]:
        """The ids of the memories that have not expired, streamed from a cursor."""
        now = datetime.datetime.now(datetime.timezone.utc)
        try:
            cursor = self._collection.find({"expires_at": self._live(now)}, {"_id": 1})
            for document in cursor:
                yield document["_id"]
        except DRIVER_ERRORS as exc:
            raise StoreError("listing memory ids", detail=str(exc)) from exc

    # --------------------------------------------------------------------------------------------- write

    def save(self, memory_id: str, messages: Sequence[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``; return the new version."""
        memory_id = validate_memory_id(memory_id)
        for message in messages:
            require_message(message)
        if not isinstance(expected_version, int) or expected_version < 0:
            raise ValueError(f"expected_version must be an int >= 0, got {expected_version!r}")
        layout = plan_layout(messages)
        now = datetime.datetime.now(datetime.timezone.utc)
        version = max(expected_version + 1, _version_floor())
        cached = self._cached(memory_id, expected_version) if expected_version else None
        plan = plan_write(cached.layout, layout) if cached is not None else None
        self._ensure_expiry_index()
        try:
            if cached is not None and cached.incarnation is not None and plan is not None:
                incarnation = cached.incarnation
                records = self._records_after(cached, plan, layout)
                matched = self._update_in_place(
                    memory_id, expected_version, incarnation, plan, records, layout, version, now
                )
            else:
                incarnation = ObjectId()
                document = self._document(layout, version, incarnation, now)
                records = (*document["messages"], *([document["system"]] if "system" in document else []))
                matched = self._replace(memory_id, expected_version, document, now)
        except DRIVER_ERRORS as exc:
            self._remember(memory_id, None)
            if getattr(exc, "code", None) in CONFLICT_CODES:
                raise ConcurrentUpdateError(memory_id, expected_version) from exc
            raise _write_error(memory_id, exc) from exc
        if not matched:
            self._remember(memory_id, None)
            raise ConcurrentUpdateError(memory_id, expected_version)
        self._remember(memory_id, _Cached(version, incarnation, layout, records))
        return version

    @staticmethod
    def _records_after(cached: _Cached, plan: MongoWritePlan, layout: MongoLayout) -> tuple[Record, ...]:
        """The records the document holds after ``plan``: the array's, then the held message's."""
        old_array = cached.records[: len(cached.layout.array)]
        array = (*old_array[plan.head_trim :], *(_record(message) for message in plan.appended))
        if layout.system is None:
            return array
        held = cached.records[-1] if not plan.system_changed else _record(layout.system)
        return (*array, held)

    def _update_in_place(
        self,
        memory_id: str,
        expected_version: int,
        incarnation: ObjectId,
        plan: MongoWritePlan,
        records: tuple[Record, ...],
        layout: MongoLayout,
        version: int,
        now: datetime.datetime,
    ) -> bool:
        assignments: Document = {"version": version}
        removals: Document = {}
        if layout.system is not None:
            if plan.system_changed:
                assignments["system"] = records[-1]
            assignments["system_at"] = layout.system_at
        elif plan.system_changed:
            removals.update(system="", system_at="")
        expires_at = self._expiry(now)
        if expires_at is None:
            removals["expires_at"] = ""
        else:
            assignments["expires_at"] = expires_at
        update: Document = {"$set": assignments}
        if removals:
            update["$unset"] = removals
        if plan.appended or plan.head_trim:
            array_end = len(records) - (layout.system is not None)
            push: Document = {"$each": list(records[array_end - len(plan.appended) : array_end])}
            if plan.head_trim:
                # A negative $slice keeps the last n elements: exactly the evicted head goes.
                push["$slice"] = -plan.array_length
            update["$push"] = {"messages": push}
        # The incarnation pins the exact document the cached layout came from, so a memory deleted and
        # created again can never receive a diff computed against its predecessor.
        result = self._collection.update_one(
            {"_id": memory_id, "version": expected_version, "incarnation": incarnation, "expires_at": self._live(now)},
            update,
        )
        return result.matched_count == 1

    def _replace(self, memory_id: str, expected_version: int, document: Document, now: datetime.datetime) -> bool:
        if expected_version == 0:
            # Create, or take the place of an expired document the TTL monitor has not removed yet. A live
            # document makes the upsert's insert fail with a duplicate key (11000): a conflict.
            self._collection.replace_one({"_id": memory_id, "expires_at": {"$lte": now}}, document, upsert=True)
            return True
        result = self._collection.replace_one(
            {"_id": memory_id, "version": expected_version, "expires_at": self._live(now)}, document
        )
        return result.matched_count == 1

    def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id`` (one update, whatever version it is at)."""
        memory_id = validate_memory_id(memory_id)
        for message in messages:
            require_message(message)
        layout = plan_layout(messages)
        now = datetime.datetime.now(datetime.timezone.utc)
        fields = self._document(layout, 0, ObjectId(), now)
        del fields["version"]
        removals = [name for name in ("system", "system_at", "expires_at") if name not in fields]
        # An update pipeline moves the version on server-side, above both the stored version (whatever
        # type a damaged document holds there) and the clock floor; $literal keeps every value inert.
        current = {"$cond": [{"$isNumber": "$version"}, "$version", 0]}
        stages: list[Document] = [
            {
                "$set": {
                    "version": {"$max": [{"$add": [current, 1]}, _version_floor()]},
                    **{name: {"$literal": value} for name, value in fields.items()},
                }
            }
        ]
        if removals:
            stages.append({"$unset": removals})
        self._ensure_expiry_index()
        self._remember(memory_id, None)
        for attempt in range(1, _UNCONDITIONAL_ATTEMPTS + 1):
            error = self._upsert(memory_id, stages)
            if error is None:
                return
            # Two upserts creating one new document race on the _id index; the loser's retry updates.
            if getattr(error, "code", None) not in CONFLICT_CODES or attempt == _UNCONDITIONAL_ATTEMPTS:
                raise _write_error(memory_id, error) from error

    def _upsert(self, memory_id: str, stages: list[Document]) -> Exception | None:
        try:
            self._collection.update_one({"_id": memory_id}, stages, upsert=True)
        except DRIVER_ERRORS as exc:
            return exc
        return None

    def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id``; idempotent."""
        memory_id = validate_memory_id(memory_id)
        self._remember(memory_id, None)
        try:
            self._collection.delete_one({"_id": memory_id})
        except DRIVER_ERRORS as exc:
            raise StoreError("deleting", memory_id, str(exc)) from exc
