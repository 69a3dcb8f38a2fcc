r"""How a memory is laid out in its MongoDB document, and how a stored document is read back.

One document per memory: ``_id`` (the memory id), ``version``, ``incarnation``, ``messages`` (native
records as JSON text, oldest first), the held first system message (``system``, ``system_at``),
``expires_at``, the last few write ids with their versions (``writes``) and ``written_at``; a history
store's head fields are :mod:`chatmemory.stores.mongodb.history`'s. Messages are JSON text, not BSON
sub-documents, since attribute keys such as ``"$where"`` or ``"a.b"`` are no safe BSON field names; the
first system message is held aside so that a steady-state turn is a head trim plus an append. Field by
field: *Layout* in ``docs/store-mongodb.md``.

No I/O here, and no driver import.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, count, repeat
from operator import is_
from typing import TYPE_CHECKING, Any, TypeGuard

from chatmemory import telemetry
from chatmemory.core.errors import CorruptedMemoryError
from chatmemory.core.messages import ChatMessage, SystemMessage, checked_messages
from chatmemory.core.sequence_diff import diff_messages
from chatmemory.serialization.records import PLAIN, RecordCodec

if TYPE_CHECKING:
    from chatmemory.stores.mongodb.history import HistoryState

__all__ = [
    "HeadTrim",
    "MemoryState",
    "MongoLayout",
    "Record",
    "decode_document",
    "encode_record",
    "materialize",
    "plan_head_trim",
    "plan_layout",
    "raw_records",
    "record_fields",
]

Record = str | bytes
"""A stored message record: JSON text (what the store writes) or bytes (what ``write_raw`` may plant)."""


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
