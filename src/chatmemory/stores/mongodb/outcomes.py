"""What a MongoDB reply means, as typed values, and the failures the executors hand the operations (pure).

A :class:`WritePlan` (made by :class:`~chatmemory.stores.mongodb.plan.MongoPlanner`) is one
``find_one_and_update`` or ``update_one``; the operation reads the reply as :class:`Written`,
:class:`Conflict`, :class:`Resend` or :class:`Verify` with :func:`outcome_of`. A driver failure reaches an
operation as :class:`CommandFailed`, a ``StoreError`` the executor made that says what the operation may
branch on (a lost reply, a server error code, the duplicates an insert refused). No driver here.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from chatmemory import telemetry
from chatmemory.core.errors import CorruptedMemoryError, Operation, StoreError
from chatmemory.memory_times import MemoryTimes
from chatmemory.stored_memories import StoredMemory
from chatmemory.stores.mongodb.commands import Command, Result, Target, call
from chatmemory.stores.mongodb.layout import WRITE_PROJECTION, Document, MemoryState, MongoLayout, Record, raw_records

DUPLICATE_KEY: Final = 11000
"""Another upsert created the document first; resending the plan now finds it."""
WRITE_CONFLICT: Final = 112
"""Two operations touched the document at once (inside a caller's transaction); nothing was applied."""
NO_SUCH_TRANSACTION: Final = 251
"""A transaction the server aborted under us (only inside a caller's session); nothing was applied."""
RESEND_CODES: Final = frozenset({DUPLICATE_KEY, WRITE_CONFLICT, NO_SUCH_TRANSACTION})


INDEX_CONFLICT_CODES: Final = frozenset({85, 86})
"""IndexOptionsConflict / IndexKeySpecsConflict: an index of that name or key exists with other options."""

REPLY_PROJECTION: Final = {"_id": 0, "version": 1, "writes": 1, "written_at": 1}


@dataclass(frozen=True, slots=True)
class WritePlan:
    """One ``find_one_and_update`` and what the store caches once it lands.

    Attributes:
        memory_id: the memory written.
        filter: the query: the ``_id``, and for a write guarded by the filter its condition.
        update: the update: a pipeline, or update operators for a turn of a memory whose cached state
            and server clock are known (the fast path: see :func:`plan_save`).
        projection: the fields the reply carries.
        upsert: whether the write may create the document.
        write_id: the id the document remembers this write by.
        conditional: whether the write depends on the version it was planned against (``save``).
        guarded_by_filter: whether the condition is in the filter (a matched document means written)
            rather than in the pipeline (the reply's write ids say whether it was written).
        returns_document: whether the plan is sent as ``find_one_and_update`` (the reply is the projected
            document) or as ``update_one`` (the reply is the matched count; see ``next_version``).
        incarnation: the incarnation the document has once written; ``None`` for records written raw.
        layout: the messages written, laid out (``None`` for records written raw).
        records: the records of ``layout`` (array, then the held message).
        next_version: the version an ``update_one`` plan writes when it matches.
    """

    memory_id: str
    filter: Document
    update: list[Document] | Document
    projection: Document
    upsert: bool
    write_id: int
    conditional: bool
    guarded_by_filter: bool
    incarnation: int | None
    layout: MongoLayout | None
    records: tuple[Record, ...]
    returns_document: bool = True
    next_version: int | None = None
    """The version an ``update_one`` plan writes when it matches (its filter pins the previous one)."""
    keeps_history: bool = False
    """Whether the write records history: once it lands, the groups in the reply are copied."""
    history_id: int | None = None
    """The history id the write gives a history it starts (``None``: it starts none)."""

    def command(self) -> Command:
        """The command sending this plan: ``find_one_and_update`` (the document after), else ``update_one``."""
        memory_id, filter, update = self.memory_id, self.filter, self.update
        if not self.returns_document:
            return call(Operation.WRITE, memory_id, Target.WINDOW, "update_one", filter, update, result=Result.MATCHED)
        return call(
            Operation.WRITE, memory_id, Target.WINDOW, "find_one_and_update", filter, update,
            projection=self.projection, upsert=self.upsert, return_document=True,  # ReturnDocument.AFTER
        )  # fmt: skip

    def reply(self, answer: Any) -> WriteReply:
        """What the driver's ``answer`` to :meth:`command` says."""
        return WriteReply(answer) if self.returns_document else WriteReply(matched=answer)

    def verify(self) -> Command:
        """The read of a :class:`Verify`."""
        return call(
            Operation.WRITE, self.memory_id, Target.WINDOW, "find_one", self.verify_filter, self.verify_projection
        )

    @property
    def verify_filter(self) -> Document:
        """The query of a :class:`Verify` read."""
        return {"_id": self.memory_id}

    @property
    def verify_projection(self) -> Document:
        """The fields a :class:`Verify` read needs."""
        return dict(WRITE_PROJECTION if self.keeps_history else REPLY_PROJECTION)

    def state_at(self, version: int) -> MemoryState | None:
        """What a snapshot cache keeps once this write landed at ``version`` (``None``: nothing)."""
        if self.layout is None or self.incarnation is None:
            return None
        return MemoryState(version, self.incarnation, self.layout, self.records)


@dataclass(frozen=True, slots=True)
class WriteReply:
    """What the driver answered to a :class:`WritePlan`.

    Attributes:
        document: the document after the update, projected (``None``: no document matched).
        error_code: the server's error code when the write failed with one the plan knows how to
            handle (see :data:`RESEND_CODES`).
        lost: the connection failed after the command was sent: it may or may not have been applied.
        matched: how many documents an ``update_one`` plan matched.
    """

    document: Mapping[str, Any] | None = None
    error_code: int | None = None
    lost: bool = False
    matched: int | None = None


@dataclass(frozen=True, slots=True)
class Written:
    """The write landed at ``version``; ``state`` is what to cache (``None``: forget the memory).

    ``server_time`` is the server's clock when it applied the write, if the reply told it.
    """

    version: int
    state: MemoryState | None
    server_time: datetime.datetime | None = None


@dataclass(frozen=True, slots=True)
class Conflict:
    """The memory was not at the expected version (or is gone); nothing was written."""


@dataclass(frozen=True, slots=True)
class Resend:
    """Whether the write landed is unknown or it raced an upsert: send the same plan again."""


@dataclass(frozen=True, slots=True)
class Verify:
    """The filter matched nothing after an earlier send lost its reply: check the write ids.

    Read the write ids (see :attr:`WritePlan.verify_filter`) and hand the document to :func:`verified_outcome`.
    """


WriteOutcome = Written | Conflict | Resend | Verify


def _written_version(document: Mapping[str, Any], write_id: int) -> int | None:
    writes = document.get("writes")
    if not isinstance(writes, list):
        return None
    for entry in reversed(writes):
        if isinstance(entry, Mapping) and entry.get("w") == write_id:
            version = entry.get("v")
            if isinstance(version, int) and not isinstance(version, bool):
                return version
    return None


def _server_time(document: Mapping[str, Any]) -> datetime.datetime | None:
    written = document.get("written_at")
    return written if isinstance(written, datetime.datetime) else None


def _by_write_id(plan: WritePlan, document: Mapping[str, Any]) -> Written | None:
    version = _written_version(document, plan.write_id)
    if version is None:
        return None
    # Cache the state only if nobody wrote after this write (a resend may find later writes on top).
    if document.get("version") != version:
        return Written(version, None)
    return Written(version, plan.state_at(version), _server_time(document))


def outcome_of(plan: WritePlan, reply: WriteReply, *, resent: bool = False) -> WriteOutcome:
    """What ``reply`` means for ``plan``; ``resent``: an earlier send of the same plan got no answer."""
    outcome = _outcome_of(plan, reply, resent)
    if isinstance(outcome, Written):
        telemetry.note(version=outcome.version)
    return outcome


def _outcome_of(plan: WritePlan, reply: WriteReply, resent: bool) -> WriteOutcome:
    if reply.lost or reply.error_code in RESEND_CODES:
        return Resend()
    document = reply.document
    if not plan.returns_document:
        if reply.matched and plan.next_version is not None:
            return Written(plan.next_version, plan.state_at(plan.next_version))
        return Verify() if resent else Conflict()
    if plan.guarded_by_filter:
        if document is None:
            return Verify() if resent else Conflict()
        version = document.get("version")
        if not isinstance(version, int) or isinstance(version, bool):
            return Conflict()  # pragma: no cover - the write always sets an int
        return Written(version, plan.state_at(version), _server_time(document))
    if document is None:
        return Resend()  # an upsert always returns a document
    written = _by_write_id(plan, document)
    if written is not None:
        return written
    # An unconditional write always applies unless it already did: its id is missing only if the
    # document was replaced between the two, so it goes again.
    return Conflict() if plan.conditional else Resend()


def verified_outcome(plan: WritePlan, document: Mapping[str, Any] | None) -> Written | Conflict:
    """What the write ids read for a :class:`Verify` say: an earlier send landed, or another writer won."""
    written = None if document is None else _by_write_id(plan, document)
    if written is None:
        return Conflict()
    telemetry.note(version=written.version)
    return written


def memory_times_of(document: Mapping[str, Any] | None, field: str = "expires_at") -> MemoryTimes | None:
    """The write and expiry times a document holds (``None``: no live memory; a time it lacks is ``None``).

    ``written_at`` is set from the server's clock by every write of this store; a document written by an
    earlier version of the store has none. ``field`` holds the window's expiry.
    """
    if document is None:
        return None
    written, expires = document.get("written_at"), document.get(field)
    return MemoryTimes(
        written if isinstance(written, datetime.datetime) else None,
        expires if isinstance(expires, datetime.datetime) else None,
    )


def server_time_of(hello: Document) -> datetime.datetime | None:
    """The server's clock from a ``hello`` reply (``localTime``), as an aware UTC datetime."""
    value = hello.get("localTime")
    if not isinstance(value, datetime.datetime):
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=datetime.timezone.utc)


def equivalent_expiry_index(indexes: Iterable[Mapping[str, Any]]) -> bool:
    """Whether an operator created the same TTL index under another name (MongoDB then refuses ours)."""
    return any(
        list(dict(index["key"]).items()) == [("expires_at", 1)] and index.get("expireAfterSeconds") == 0
        for index in indexes
    )


@dataclass(frozen=True, slots=True)
class BatchCreate:
    """A version (or ``None``) per memory of a created batch, and the indexes of those left to ``save``."""

    versions: list[int | None]
    one_by_one: tuple[int, ...] = ()


def batch_versions(documents: list[Document], refused: list[int]) -> list[int | None]:
    """The version of each document of a created batch, ``None`` for those ``refused``."""
    versions: list[int | None] = [document["version"] for document in documents]
    for index in refused:
        versions[index] = None
    return versions


def batch_asked(documents: list[Document], versions: list[int | None], refused: list[int]) -> list[str]:
    """The ids a created batch reads again: those refused, but for the ones it created itself."""
    created = {documents[index]["_id"] for index, version in enumerate(versions) if version is not None}
    return sorted({documents[index]["_id"] for index in refused} - created)


def batch_left(
    documents: list[Document], versions: list[int | None], refused: list[int], live: set[str]
) -> tuple[int, ...]:
    """The refused documents left to ``save``: each id once, neither live nor created by the batch.

    A refused id is there (live: not touched) or expired (``save`` at version 0 creates it again); a later
    copy of an id created by the batch is refused too, and is live now.
    """
    created = {documents[index]["_id"] for index, version in enumerate(versions) if version is not None}
    seen: set[str] = set()
    again: list[int] = []
    for index in refused:
        memory_id = documents[index]["_id"]
        if memory_id in created or memory_id in live or memory_id in seen:
            continue
        seen.add(memory_id)
        again.append(index)
    return tuple(again)


def stored_memory(memory_id: str, document: Mapping[str, Any], field: str = "expires_at") -> StoredMemory:
    """What a stored document holds of its memory (its damage, when it is not a memory this store reads)."""
    times = memory_times_of(document, field)
    try:
        records = raw_records(memory_id, document)
    except CorruptedMemoryError as exc:
        return StoredMemory(memory_id, [], 0, times, damage=exc.reason)
    return StoredMemory(memory_id, records, document["version"], times)


def refused_indexes(details: Mapping[str, Any]) -> list[int] | None:
    """The documents a bulk write's error ``details`` refused, if duplicate keys were all it refused."""
    errors = details.get("writeErrors") or []
    if details.get("writeConcernErrors") or not all(error.get("code") == DUPLICATE_KEY for error in errors):
        return None
    return sorted(int(error["index"]) for error in errors)


# ------------------------------------------------------------------------------------------ failures


class CommandFailed(StoreError):
    """A command's driver call failed: the executor's ``StoreError`` (the driver's exception is the cause).

    Attributes:
        detail: the driver's message (without a server selection's topology dump).
        code: the server's error code, if it gave one.
        lost: the connection failed after the command went out: it may or may not have been applied.
        duplicates: for a bulk insert, the documents it refused if duplicate keys were all it refused.
    """

    def __init__(
        self,
        operation: str,
        memory_id: str | None,
        detail: str,
        *,
        code: int | None = None,
        lost: bool = False,
        duplicates: list[int] | None = None,
        advice: str = "",
    ) -> None:
        super().__init__(operation, memory_id, f"{detail}. {advice}" if advice else detail)
        self.detail = detail
        self.code = code
        self.lost = lost
        self.duplicates = duplicates

    def reply(self) -> WriteReply | None:
        """The reply this failure stands for when a write plan meets it (``None``: report it)."""
        if self.lost:
            return WriteReply(lost=True)
        if self.code in RESEND_CODES:
            return WriteReply(error_code=self.code)
        return None

    def again(self, operation: str, memory_id: str | None, detail: str) -> StoreError:
        """The error to report instead, with another ``detail``, the driver's exception still its cause."""
        error = StoreError(operation, memory_id, detail)
        error.__cause__ = self.__cause__
        return error


def resend_error(memory_id: str, attempts: int, error: CommandFailed | None) -> StoreError:
    """The error of a write resent until its retry budget ran out (``error``: the last failure)."""
    detail = f"sent {attempts} times without a definite answer"
    if error is not None:
        detail += f" (last: {error.detail})"
    exc = StoreError(Operation.WRITE, memory_id, f"{detail}; it was applied at most once, reload to see whether it was")
    exc.__cause__ = None if error is None else error.__cause__
    return exc
