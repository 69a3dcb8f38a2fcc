r"""How a memory is laid out in its MongoDB documents, and the expressions its updates are built from (pure).

One document per memory: ``_id``, ``version``, ``incarnation``, ``messages`` (native records as JSON
text, oldest first), the held first system message (``system``, ``system_at``), ``expires_at``, the last
few write ids with their versions (``writes``), ``written_at`` and, on a history store, the history head
(``hid``, ``hseq``, staged groups ``hpend``/``hlast``). Beside it: ``<collection>_history`` (one entry per
message) and ``<collection>_locks`` (the writers' leases). Dates are compared as milliseconds
(``$toLong``): SecantusDB, the CI server, compares a stored date with ``$$NOW`` wrongly; a sub-document's
field is read with ``$map``. Field by field: *Layout* in ``docs/store-mongodb.md``. No I/O, no driver.
"""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, count, repeat
from operator import is_
from typing import Any, Final, TypeGuard

from chatmemory import telemetry
from chatmemory.core.errors import CorruptedMemoryError, Operation, StoreError
from chatmemory.core.messages import ChatMessage, SystemMessage, checked_messages
from chatmemory.core.window import diff_messages
from chatmemory.serialization.records import PLAIN, RecordCodec
from chatmemory.stores.mongodb.commands import Result, Target, call

Document = dict[str, Any]
Record = str | bytes
"""A stored message record: JSON text (what the store writes) or bytes (what ``write_raw`` may plant)."""

# ------------------------------------------------------------------------------------------ collections

LOCKS_SUFFIX: Final = "_locks"
HISTORY_INDEX: Final = "chatmemory_history"
"""The unique index of the history collection: ``(m, h, s)``."""
HISTORY_KEY: Final = [("m", 1), ("h", 1), ("s", 1)]
HISTORY_EXPIRY_INDEX: Final = "chatmemory_history_x"
"""The TTL index of the history collection, on ``x``."""
EXPIRY_INDEX: Final = "chatmemory_expires_at"
"""The TTL index of the memories collection, on ``expires_at``."""
CREATE_EXPIRY_INDEX: Final = call(
    Operation.SCHEMA, None, Target.WINDOW, "create_index", [("expires_at", 1)], name=EXPIRY_INDEX, expireAfterSeconds=0
)
"""Creates :data:`EXPIRY_INDEX` (idempotent for the same key and options); :data:`LIST_INDEXES` on a conflict."""
LIST_INDEXES: Final = call(Operation.SCHEMA, None, Target.WINDOW, "list_indexes", result=Result.LIST)


def lock_collection_name(collection: str) -> str:
    """The collection holding the writers' locks of the memories in ``collection``."""
    return f"{collection}{LOCKS_SUFFIX}"


def history_collection_name(collection: str) -> str:
    """The name of the history collection beside ``collection``."""
    return f"{collection}_history"


# ------------------------------------------------------------------------------------------- messages


def materialize(messages: Iterable[ChatMessage]) -> tuple[ChatMessage, ...]:
    """``messages`` as a tuple, each checked to be a chat message; any iterable is consumed exactly once.

    Raises:
        TypeError: an element is not a chat message.
    """
    return checked_messages(messages)


def encode_record(message: ChatMessage, memory_id: str = "", codec: RecordCodec = PLAIN) -> Record:
    """The stored record of ``message`` in ``memory_id``.

    A plain record is a BSON string (orjson output is valid UTF-8); a sealed one is BSON binary.
    """
    record = codec.dumps(message, memory_id)
    return record if codec.sealed else record.decode("utf-8")


@dataclass(frozen=True, slots=True)
class MongoLayout:
    """How a list of messages is laid out in a document.

    Attributes:
        array: the messages in the ``messages`` array, in order.
        system: the message held outside the array (``None``: none).
        system_at: the held message's position in the full list.
    """

    array: tuple[ChatMessage, ...]
    system: ChatMessage | None = None
    system_at: int = 0

    def messages(self) -> list[ChatMessage]:
        """The full list, the held message put back at its position."""
        full = list(self.array)
        if self.system is not None:
            full.insert(self.system_at, self.system)
        return full


def plan_layout(messages: Sequence[ChatMessage]) -> MongoLayout:
    """Lay ``messages`` out: the first :class:`SystemMessage` is held aside, the rest go in the array."""
    for position, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            return MongoLayout((*messages[:position], *messages[position + 1 :]), message, position)
    return MongoLayout(tuple(messages))


@dataclass(frozen=True, slots=True)
class HeadTrim:
    """An in-place change of the array: drop ``head_trim`` elements from the head, append ``appended``.

    Attributes:
        head_trim: how many array elements go from the head.
        appended: the messages appended to the array.
        array_length: the array's length afterwards.
        system_changed: whether the held message differs from the stored one.
    """

    head_trim: int
    appended: tuple[ChatMessage, ...]
    array_length: int
    system_changed: bool


def plan_head_trim(old: MongoLayout, new: MongoLayout) -> HeadTrim | None:
    """The in-place change that turns ``old`` into ``new``, or ``None`` if the document must be written whole.

    In place means the array loses only a head and gains only a tail; the held message and its position
    are set regardless.
    """
    diff = diff_messages(old.array, new.array)
    if diff.head_trim is None:
        return None
    return HeadTrim(diff.head_trim, diff.appended, len(new.array), old.system != new.system)


@dataclass(frozen=True, slots=True)
class MemoryState:
    """A memory's layout at a version, as a store last read or wrote it (what its snapshot cache keeps).

    Attributes:
        version: the version the state was read or written at.
        incarnation: the document's incarnation token; ``None`` for a document written by other means,
            which is read but never diffed against.
        layout: the messages, laid out.
        records: the stored records of ``layout.array``, then the held message's (if any).
        history: the history head at this version (a store with history; ``None``: not known).
    """

    version: int
    incarnation: Hashable | None
    layout: MongoLayout
    records: tuple[Record, ...]
    history: HistoryState | None = None

    def decoded(self) -> dict[Record, ChatMessage]:
        """Record → message, so a later read decodes only the records it has not seen."""
        layout = self.layout
        messages = layout.array if layout.system is None else (*layout.array, layout.system)
        return dict(zip(self.records, messages, strict=True))

    def after(self, trim: HeadTrim, new: MongoLayout, memory_id: str, codec: RecordCodec) -> tuple[Record, ...]:
        """The records the document holds once ``trim`` is applied to this state: the array's, then the held one's."""
        old_array = self.records[: len(self.layout.array)]
        array = (*old_array[trim.head_trim :], *(encode_record(message, memory_id, codec) for message in trim.appended))
        if new.system is None:
            return array
        held = self.records[-1] if not trim.system_changed else encode_record(new.system, memory_id, codec)
        return (*array, held)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _message(
    memory_id: str, record: object, where: str, known: Mapping[Record, ChatMessage], codec: RecordCodec
) -> ChatMessage:
    if not isinstance(record, (str, bytes)):
        raise CorruptedMemoryError(memory_id, f"{where} is a BSON {type(record).__name__}, not a message record")
    message = known.get(record)
    return message if message is not None else codec.loads(record, memory_id)


def _messages(
    memory_id: str, records: list[Any], known: Mapping[Record, ChatMessage], codec: RecordCodec
) -> tuple[ChatMessage, ...]:
    """The messages of the ``messages`` array: those ``known`` holds found at C speed, the others checked and decoded.

    Every key of ``known`` is a record this store read before, so a record found there is one; anything
    else goes through :func:`_message` (named by its position when it is not a record).
    """
    try:
        found: list[Any] = list(map(known.get, records))
    except TypeError:  # an unhashable BSON value (an embedded document or array) where a record belongs
        found = [None] * len(records)
    for index in compress(count(), map(is_, found, repeat(None))):
        found[index] = _message(memory_id, records[index], f"messages[{index}]", known, codec)
    return tuple(found)


def _record_bytes(records: list[Any]) -> int:
    """The size of the records among ``records`` (characters of a string, bytes of binary)."""
    if set(map(type, records)) <= _RECORD_TYPES:
        return sum(map(len, records))
    return sum(len(record) for record in records if isinstance(record, (str, bytes)))


_RECORD_TYPES = frozenset((str, bytes))


def _incarnation(value: object) -> Hashable | None:
    # Any scalar the store (an int) or an earlier version of it (an ObjectId) wrote is a token; writes
    # compare it with $eq and $literal, so no value can act as an operator.
    if value is None or isinstance(value, (bool, dict, list)) or not isinstance(value, Hashable):
        return None
    return value


def _checked_array(memory_id: str, document: Mapping[str, Any]) -> list[Any]:
    version = document.get("version")
    if not _is_int(version) or version <= 0:
        raise CorruptedMemoryError(memory_id, f"the document's 'version' is {version!r}, not a positive integer")
    if "messages" not in document:
        raise CorruptedMemoryError(memory_id, "the document has no 'messages' field")
    records = document["messages"]
    if not isinstance(records, list):
        raise CorruptedMemoryError(memory_id, f"'messages' is a {type(records).__name__}, not an array")
    if "system" in document:
        system_at = document.get("system_at")
        if not _is_int(system_at) or not 0 <= system_at <= len(records):
            raise CorruptedMemoryError(
                memory_id, f"'system_at' is {system_at!r}, not a position within the {len(records) + 1} messages"
            )
    return records


def decode_document(
    memory_id: str, document: Mapping[str, Any], previous: MemoryState | None, codec: RecordCodec = PLAIN
) -> MemoryState:
    """The state a stored document holds, decoding only records ``previous`` does not already know.

    Raises:
        CorruptedMemoryError: the document is not a memory this store can read (naming the field).
        UnsupportedFormatVersionError: a record was written by a newer format version.
    """
    records = _checked_array(memory_id, document)
    telemetry.note(bytes=_record_bytes(records))
    # Decoding is most of a read's cost; a steady-state turn changes only a record or two.
    known = previous.decoded() if previous is not None else {}
    array = _messages(memory_id, records, known, codec)
    system: ChatMessage | None = None
    system_at = 0
    if "system" in document:
        records = [*records, document["system"]]
        system = _message(memory_id, document["system"], "system", known, codec)
        system_at = document["system_at"]
    return MemoryState(
        document["version"],
        _incarnation(document.get("incarnation")),
        MongoLayout(array, system, system_at),
        tuple(records),
    )


def record_fields(document: Mapping[str, Any]) -> Iterator[tuple[str, Record]]:
    """Every message record a window document holds, with its field path: the window's, then staged history's."""
    records = document.get("messages")
    if isinstance(records, list):
        yield from ((f"messages.{index}", record) for index, record in enumerate(records) if _is_record(record))
    if _is_record(document.get("system")):
        yield "system", document["system"]
    pending = document.get("hpend")
    groups = [(f"hpend.{index}", group) for index, group in enumerate(pending)] if isinstance(pending, list) else []
    if isinstance(document.get("hlast"), Mapping):
        groups.append(("hlast", document["hlast"]))
    for path, group in groups:
        staged = group.get("r") if isinstance(group, Mapping) else None
        if isinstance(staged, list):
            yield from ((f"{path}.r.{index}", record) for index, record in enumerate(staged) if _is_record(record))


def _is_record(value: object) -> TypeGuard[Record]:
    return isinstance(value, (str, bytes))


def raw_records(memory_id: str, document: Mapping[str, Any]) -> list[bytes]:
    """The stored records of a document in window order, undecoded (the held message at its position).

    Raises:
        CorruptedMemoryError: the document's structure holds no list of records.
    """
    records = _checked_array(memory_id, document)
    if "system" in document:
        records = [*records]
        records.insert(document["system_at"], document["system"])
    raw: list[bytes] = []
    for index, record in enumerate(records):
        if isinstance(record, str):
            raw.append(record.encode("utf-8", "surrogatepass"))
        elif isinstance(record, bytes):
            raw.append(record)
        else:
            raise CorruptedMemoryError(memory_id, f"record {index} is a BSON {type(record).__name__}, not a record")
    return raw


# ---------------------------------------------------------------------------------------- expressions
WRITES_KEPT: Final = 8
"""How many write ids a document remembers: a resend finds its own among them unless 8 writes came between."""

MAX_DOCUMENT_BYTES: Final = 16 * 1024 * 1024
"""MongoDB's document size limit."""
TOO_LARGE_ADVICE: Final = (
    "A memory is one document, which MongoDB limits to 16 MiB; keep the window smaller (max_messages / "
    "max_tokens) or the messages shorter. Nothing was changed"
)
_ELEMENT_OVERHEAD: Final = 16
"""BSON bytes around each array element (type, index key, length, terminator), rounded up."""
_FIELDS_OVERHEAD: Final = 4096
"""Room for every field but the records (version, incarnation, expiry, write ids, names)."""

OK_FIELD: Final = "_chatmemory_ok"
"""The temporary field holding a write's condition between the pipeline's stages."""

NOW_MS: Final = {"$toLong": "$$NOW"}


def not_expired(field: str = "expires_at") -> Document:
    """The expression: the date in ``field`` is still ahead (no date, or not a date: never expires)."""
    return {
        "$cond": [
            {"$eq": [{"$type": f"${field}"}, "date"]},
            {"$gt": [{"$toLong": f"${field}"}, NOW_MS]},
            True,
        ]
    }


NOT_EXPIRED: Final = not_expired()
IS_NEW: Final = {"$eq": [{"$size": {"$objectToArray": "$$ROOT"}}, 1]}
"""The document holds nothing but its ``_id``: the upsert is creating it."""
WRITES: Final = {"$cond": [{"$isArray": "$writes"}, "$writes", []]}
WRITE_IDS: Final = {"$map": {"input": WRITES, "in": "$$this.w"}}
NEXT_VERSION: Final = {
    "$max": [
        {"$add": [{"$cond": [{"$isNumber": "$version"}, {"$toLong": "$version"}, 0]}, 1]},
        {"$multiply": [NOW_MS, 1000]},
    ]
}


def read_filter(memory_id: str, server_now_known: bool = False, field: str = "expires_at") -> Document:
    """The filter of a read: the memory, if it has not expired by the server's clock.

    With the server's clock known to the client (``server_now_known``), the filter is the ``_id`` alone
    and the client judges expiry (:func:`~chatmemory.stores.mongodb.clock.expired`), sparing the server
    an expression per read. ``field`` holds the window's expiry.
    """
    if server_now_known:
        return {"_id": memory_id}
    return {"_id": memory_id, "$expr": NOT_EXPIRED if field == "expires_at" else not_expired(field)}


def live_filter(field: str = "expires_at") -> Document:
    """The filter of a listing: every memory that has not expired by the server's clock."""
    return {"$expr": NOT_EXPIRED if field == "expires_at" else not_expired(field)}


def under(condition: Any, **fields: Any) -> list[Document]:
    """The pipeline: evaluate ``condition``, then set each field to its new value only if it holds."""
    kept = {name: {"$cond": [f"${OK_FIELD}", value, f"${name}"]} for name, value in fields.items()}
    return [
        {"$set": {OK_FIELD: condition}},
        {"$set": {"version": {"$cond": [f"${OK_FIELD}", NEXT_VERSION, "$version"]}}},
        {"$set": kept},
        {"$unset": OK_FIELD},
    ]


def expiry(ttl: float | None) -> Any:
    """The expression of a memory's expiry time: ``ttl`` seconds after the server's now, or no field."""
    return "$$REMOVE" if ttl is None else {"$add": ["$$NOW", round(ttl * 1000)]}


def writes(write_id: int, version: Any) -> Document:
    """The expression of the recent write ids after this write (``version``: the version it makes)."""
    entry = {"w": {"$literal": write_id}, "v": version}
    return {"$slice": [{"$concatArrays": [WRITES, [entry]]}, -WRITES_KEPT]}


def check_size(memory_id: str, records: Sequence[Record]) -> None:
    """Refuse a document past MongoDB's limit before sending it (a server may not say why it failed)."""
    # Characters count at most 4 bytes each: only a window near the limit is measured exactly.
    if sum(map(len, records)) * 4 + (_ELEMENT_OVERHEAD * len(records)) + _FIELDS_OVERHEAD <= MAX_DOCUMENT_BYTES:
        return
    size = sum(len(r.encode("utf-8", "surrogatepass")) if isinstance(r, str) else len(r) for r in records)
    size += _ELEMENT_OVERHEAD * len(records) + _FIELDS_OVERHEAD
    if size > MAX_DOCUMENT_BYTES:
        raise StoreError(
            Operation.WRITE, memory_id, f"the document would hold about {size} bytes of messages. {TOO_LARGE_ADVICE}"
        )


# -------------------------------------------------------------------------------------- history head

HEAD_PROJECTION: Final = {"_id": 0, "hid": 1, "hpend": 1, "hlast": 1}
"""What a history read needs of the window document."""
WRITE_PROJECTION: Final = {
    "_id": 0, "version": 1, "writes": 1, "written_at": 1, "hid": 1, "hseq": 1, "hpend": 1, "hlast": 1,
    "hrefresh": 1,
}  # fmt: skip
"""What a history store's write reply carries: enough to copy the groups it leaves in the document."""
ENTRY_PROJECTION: Final = {"_id": 0, "s": 1, "r": 1, "t": 1}
"""What a history read needs of an entry."""
COPY_AT_GROUPS: Final = 8
"""A write copies the staged groups once its reply shows this many."""
COPY_AT_BYTES: Final = 8 * 1024
"""... or this many bytes of staged records (they make every window read of the memory bigger)."""
UPDATE_ATTEMPTS: Final = 100
"""How many times a history store's ``update_messages`` reads and saves before giving up to other writers."""


def new_history_id() -> int:
    """A random 62-bit history id (a BSON int64)."""
    return secrets.randbits(62)


@dataclass(frozen=True, slots=True)
class HistoryConfig:
    """A history store's expiry fields.

    Attributes:
        ttl: the window's ttl in seconds (``None``: never).
        history_ttl: the history's own ttl in seconds; ``None``: the history expires with the window.
    """

    ttl: float | None
    history_ttl: float | None

    @property
    def lifetime(self) -> float | None:
        """Seconds a history lives after the memory's last write (``None``: for good)."""
        return self.history_ttl if self.history_ttl is not None else self.ttl

    @property
    def window_field(self) -> str:
        """The field holding the window's expiry."""
        return "expires_at" if self.history_ttl is None else "window_expires_at"

    @property
    def history_field(self) -> str:
        """The field holding the history's expiry."""
        return "expires_at" if self.history_ttl is None else "hexp"

    def expiry_fields(self) -> Document:
        """Pipeline values of the expiry fields a write sets (``$$REMOVE``: no such field)."""
        if self.history_ttl is None:
            return {"expires_at": expiry(self.ttl)}
        return {
            "window_expires_at": expiry(self.ttl),
            "hexp": expiry(self.history_ttl),
            "expires_at": expiry(self.history_ttl) if self.ttl is not None else "$$REMOVE",
        }

    def expiry_operators(self, server_now: datetime.datetime) -> tuple[Document, Document]:
        """The ``$set`` and ``$unset`` of the expiry fields, for a write sent as update operators."""
        fields = self.expiry_fields()
        assignments: Document = {}
        removals: Document = {}
        for name, value in fields.items():
            if value == "$$REMOVE":
                removals[name] = ""
            else:
                seconds = self.ttl if name == "window_expires_at" or self.history_ttl is None else self.history_ttl
                assert seconds is not None
                assignments[name] = server_now + datetime.timedelta(seconds=seconds)
        return assignments, removals


@dataclass(frozen=True, slots=True)
class HistoryGroup:
    """The entries of one write, as the window document holds them until they are copied.

    Attributes:
        first: the sequence of the first record.
        records: the records, in order.
        written_at: the write's server time.
    """

    first: int
    records: tuple[str | bytes, ...]
    written_at: datetime.datetime


@dataclass(frozen=True, slots=True)
class HistoryState:
    """What a store knows of a memory's history head at a version (kept in its snapshot cache).

    Attributes:
        hid: the history id (``None``: the document holds no history yet).
        hseq: the last sequence committed.
        copied: whether every group the document holds is known to be in the history collection.
        refreshed: when every entry's expiry was last set (``hrefresh``); ``None``: not known.
        last_known: whether the store knows the document's ``hlast`` exactly (it wrote it): then a
            write that keeps the staged groups can push it onto ``hpend`` as update operators.
        last: that group (``None``: the document has none).
    """

    hid: int | None
    hseq: int
    copied: bool
    refreshed: datetime.datetime | None = None
    last_known: bool = False
    last: HistoryGroup | None = None


@dataclass(frozen=True, slots=True)
class HistoryHead:
    """The history head a read found: its id and the groups not known to be copied yet."""

    hid: int
    groups: tuple[HistoryGroup, ...]


def is_int(value: object) -> TypeGuard[int]:
    """Whether ``value`` is an int (a bool is not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def refreshed_of(document: Mapping[str, Any]) -> datetime.datetime | None:
    """The head's ``hrefresh`` (``None``: none)."""
    value = document.get("hrefresh")
    return value if isinstance(value, datetime.datetime) else None


def group_of(memory_id: str, value: object) -> HistoryGroup:
    """One staged group of a window document, checked.

    Raises:
        CorruptedMemoryError: it is not a group this store wrote.
    """
    if not isinstance(value, Mapping):
        raise CorruptedMemoryError(memory_id, f"a history group is a BSON {type(value).__name__}, not a document")
    first, records, written = value.get("s"), value.get("r"), value.get("t")
    if not is_int(first) or not isinstance(records, list) or not isinstance(written, datetime.datetime):
        raise CorruptedMemoryError(memory_id, "a history group lacks its sequence, records or time")
    for record in records:
        if not isinstance(record, (str, bytes)):
            raise CorruptedMemoryError(memory_id, f"a history record is a BSON {type(record).__name__}")
    assert isinstance(first, int)
    return HistoryGroup(first, tuple(records), written)


def groups_of(memory_id: str, document: Mapping[str, Any]) -> tuple[HistoryGroup, ...]:
    """The groups a window document (or a write reply) holds: ``hpend``, then ``hlast``.

    Raises:
        CorruptedMemoryError: a group is not one this store wrote.
    """
    pending = document.get("hpend")
    groups = [group_of(memory_id, group) for group in pending] if isinstance(pending, list) else []
    if document.get("hlast") is not None:
        groups.append(group_of(memory_id, document["hlast"]))
    return tuple(groups)


HAS_HID: Final = {"$isNumber": "$hid"}
HAS_LAST: Final = {"$eq": [{"$type": "$hlast"}, "object"]}
PENDING: Final = {
    "$concatArrays": [
        {"$cond": [{"$isArray": "$hpend"}, "$hpend", []]},
        {"$cond": [HAS_LAST, ["$hlast"], []]},
    ]
}
"""Every group the document holds, as one array (what a write that does not know them keeps)."""
