r"""History on the MongoDB store: how it is laid out and what its reads, writes and trims send (pure).

A store built with ``history=True`` keeps a second collection, ``<collection>_history``, of one document
per entry (``m`` memory id, ``h`` history id, ``s`` sequence, ``r`` record, ``t`` time), unique on
``(m, h, s)``. The window document is the history's head: the update that writes the window also sets the
history id (``hid``) and the last sequence committed (``hseq``) and stages the write's entries (``hlast``;
earlier ones not yet confirmed copied in ``hpend``). A writer copies the staged groups into the history
collection once :data:`COPY_AT_GROUPS` groups or :data:`COPY_AT_BYTES` of records are staged (one
unordered insert, idempotent by the unique key); readers merge what is staged. Entries expire by a TTL
index on ``x``, set again in steps (``hrefresh``) rather than on every turn. The layout, the copies and
the expiry step by step: *History* in ``docs/store-mongodb.md``. No I/O here, and no driver import.
"""

from __future__ import annotations

import datetime
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, TypeGuard

from chatmemory.core.errors import CorruptedMemoryError
from chatmemory.stores.mongodb.expressions import not_expired
from chatmemory.stores.mongodb.layout import MemoryState

__all__ = [
    "ENTRY_PROJECTION",
    "COPY_AT_BYTES",
    "COPY_AT_GROUPS",
    "HEAD_PROJECTION",
    "STAGED_PROJECTION",
    "UPDATE_ATTEMPTS",
    "WRITE_PROJECTION",
    "HISTORY_EXPIRY_INDEX",
    "HISTORY_INDEX",
    "HISTORY_KEY",
    "HistoryConfig",
    "HistoryGroup",
    "HistoryHead",
    "HistoryState",
    "entry_documents",
    "head_filter",
    "state_after",
    "with_history",
    "groups_of",
    "head_of",
    "history_collection_name",
    "new_history_id",
    "refresh_due",
    "refreshed_of",
    "refresh_update",
    "should_copy",
    "staged_filter",
    "staged_operations",
]

Document = dict[str, Any]

HISTORY_INDEX: Final = "chatmemory_history"
"""The unique index of the history collection: ``(m, h, s)``."""
HISTORY_KEY: Final = [("m", 1), ("h", 1), ("s", 1)]
HISTORY_EXPIRY_INDEX: Final = "chatmemory_history_x"
"""The TTL index of the history collection, on ``x``."""
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


def history_collection_name(collection: str) -> str:
    """The name of the history collection beside ``collection``."""
    return f"{collection}_history"


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
            return {"expires_at": _later(self.ttl)}
        return {
            "window_expires_at": _later(self.ttl),
            "hexp": _later(self.history_ttl),
            "expires_at": _later(self.history_ttl) if self.ttl is not None else "$$REMOVE",
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


def _later(seconds: float | None) -> Any:
    return "$$REMOVE" if seconds is None else {"$add": ["$$NOW", round(seconds * 1000)]}


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


def with_history(state: MemoryState, document: Mapping[str, Any], previous: MemoryState | None) -> MemoryState:
    """``state`` (decoded from ``document``) with its history head.

    The groups the document holds are known to be copied only if ``previous`` (what the store cached)
    is the same version and knew it; else the next write keeps them and copies them again.
    """
    hid, hseq = document.get("hid"), document.get("hseq")
    if not is_int(hid):
        return replace(state, history=HistoryState(None, 0, True))
    before = previous.history if previous is not None and previous.version == state.version else None
    if before is None or before.hid != hid:
        return replace(state, history=HistoryState(hid, hseq if is_int(hseq) else 0, False, _date(document)))
    return replace(state, history=replace(before, refreshed=_date(document)))


def refreshed_of(document: Mapping[str, Any]) -> datetime.datetime | None:
    """The head's ``hrefresh`` (``None``: none)."""
    return _date(document)


def _date(document: Mapping[str, Any]) -> datetime.datetime | None:
    value = document.get("hrefresh")
    return value if isinstance(value, datetime.datetime) else None


def refresh_due(
    state: HistoryState | None, config: HistoryConfig, server_now: datetime.datetime
) -> datetime.datetime | None:
    """The time to set every entry's expiry from before a write (``None``: no need), and ``hrefresh`` with it."""
    lifetime = config.lifetime
    if lifetime is None or state is None or state.hid is None:
        return None
    if state.refreshed is not None and server_now <= state.refreshed + datetime.timedelta(seconds=lifetime):
        return None
    return server_now


def refresh_update(
    config: HistoryConfig, memory_id: str, hid: int, now: datetime.datetime
) -> tuple[Document, Document]:
    """The ``update_many`` that sets the expiry of every entry of a history to ``now + 2L``."""
    assert config.lifetime is not None
    return {"m": memory_id, "h": hid}, {"$set": {"x": now + datetime.timedelta(seconds=2 * config.lifetime)}}


def _group(memory_id: str, value: object) -> HistoryGroup:
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
    groups = [_group(memory_id, group) for group in pending] if isinstance(pending, list) else []
    if document.get("hlast") is not None:
        groups.append(_group(memory_id, document["hlast"]))
    return tuple(groups)


def head_filter(memory_id: str, config: HistoryConfig) -> Document:
    """The query of a history read's head: the window document, if its history has not expired."""
    return {"_id": memory_id, "$expr": not_expired(config.history_field)}


def head_of(memory_id: str, document: Mapping[str, Any] | None) -> HistoryHead | None:
    """The history head of a window document read with :func:`head_filter` (``None``: no history).

    Raises:
        CorruptedMemoryError: a group is not one this store wrote.
    """
    if document is None or not is_int(document.get("hid")):
        return None
    return HistoryHead(document["hid"], groups_of(memory_id, document))


def should_copy(groups: Sequence[HistoryGroup]) -> bool:
    """Whether a write whose reply shows ``groups`` staged copies them now (see the module's notes)."""
    staged = sum(len(record) for group in groups for record in group.records)
    return len(groups) >= COPY_AT_GROUPS or staged >= COPY_AT_BYTES


def staged_filter(memory_id: str | None) -> Document:
    """The window documents that may hold staged groups (of ``memory_id``, or all)."""
    filter: Document = {"$or": [{"hlast": {"$type": "object"}}, {"hpend": {"$type": "array"}}]}
    return filter if memory_id is None else {"_id": memory_id, **filter}


STAGED_PROJECTION: Final = {"_id": 1, "hid": 1, "hpend": 1, "hlast": 1, "hrefresh": 1}


def staged_operations(documents: Iterable[Mapping[str, Any]], lifetime: float | None) -> list[Document]:
    """The entries that copy the groups staged in ``documents`` (read with :data:`STAGED_PROJECTION`).

    Raises:
        CorruptedMemoryError: a group is not one this store wrote.
    """
    operations = []
    for document in documents:
        memory_id, hid = document.get("_id"), document.get("hid")
        if isinstance(memory_id, str) and is_int(hid):
            groups = groups_of(memory_id, document)
            operations += entry_documents(memory_id, hid, groups, lifetime, refreshed_of(document))
    return operations


def entry_documents(
    memory_id: str,
    hid: int,
    groups: Iterable[HistoryGroup],
    lifetime: float | None = None,
    refreshed: datetime.datetime | None = None,
) -> list[Document]:
    """The entry documents that copy ``groups`` into the history collection.

    They are inserted unordered; a duplicate key means the entry is there already (its key is its
    history and sequence, and an entry never changes), so a copy is idempotent.

    With a ``lifetime`` each entry expires ``2 * lifetime`` after its write, or after ``refreshed`` (the
    head's ``hrefresh``) if that is later: a group staged while the entries' expiry slid gets the slid one.
    """
    operations = []
    for group in groups:
        fields: Document = {"t": group.written_at}
        if lifetime is not None:
            start = group.written_at if refreshed is None else max(group.written_at, refreshed)
            fields["x"] = start + datetime.timedelta(seconds=2 * lifetime)
        for offset, record in enumerate(group.records):
            operations.append({"m": memory_id, "h": hid, "s": group.first + offset, "r": record, **fields})
    return operations


HAS_HID: Final = {"$isNumber": "$hid"}
HAS_LAST: Final = {"$eq": [{"$type": "$hlast"}, "object"]}
PENDING: Final = {
    "$concatArrays": [
        {"$cond": [{"$isArray": "$hpend"}, "$hpend", []]},
        {"$cond": [HAS_LAST, ["$hlast"], []]},
    ]
}
"""Every group the document holds, as one array (what a write that does not know them keeps)."""


def state_after(memory_id: str, document: Mapping[str, Any], copied: bool) -> HistoryState | None:
    """The head a write's reply ``document`` shows (``copied``: its groups are now in the history collection)."""
    hid, hseq = document.get("hid"), document.get("hseq")
    if not is_int(hid) or not is_int(hseq):
        return None
    last = _group(memory_id, document["hlast"]) if isinstance(document.get("hlast"), Mapping) else None
    return HistoryState(hid, hseq, copied, _date(document), True, last)
