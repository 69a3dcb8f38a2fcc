"""What a MongoDB write is and what the driver's reply to it means (pure, no driver).

A :class:`WritePlan` (made by :mod:`~chatmemory.stores.mongodb.plan`) is one ``find_one_and_update`` or
``update_one``; the executor hands back a :class:`WriteReply`, and :func:`outcome_of` reads it as
:class:`Written`, :class:`Conflict`, :class:`Resend` or :class:`Verify` (see the plan module for when each
happens). The server error codes the plans handle are here too.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from chatmemory import telemetry
from chatmemory.stores.mongodb.history import WRITE_PROJECTION
from chatmemory.stores.mongodb.layout import MemoryState, MongoLayout, Record

__all__ = [
    "DUPLICATE_KEY",
    "REPLY_PROJECTION",
    "RESEND_CODES",
    "Conflict",
    "Document",
    "Resend",
    "Verify",
    "WriteOutcome",
    "WritePlan",
    "WriteReply",
    "Written",
    "outcome_of",
    "verified_outcome",
]

Document = dict[str, Any]

DUPLICATE_KEY: Final = 11000
"""Another upsert created the document first; resending the plan now finds it."""
WRITE_CONFLICT: Final = 112
"""Two operations touched the document at once (inside a caller's transaction); nothing was applied."""
NO_SUCH_TRANSACTION: Final = 251
"""A transaction the server aborted under us (only inside a caller's session); nothing was applied."""
RESEND_CODES: Final = frozenset({DUPLICATE_KEY, WRITE_CONFLICT, NO_SUCH_TRANSACTION})


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
