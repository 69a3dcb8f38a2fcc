"""Creating many memories of the MongoDB store in one ``insert_many``, for ``import`` and ``copy`` (pure: no I/O).

:func:`create_batch` is an operation like those of :mod:`.operations`: it sends one unordered
``insert_many`` of whole documents, each the document ``save(id, messages, 0)`` creates (version from the
server's clock, a new incarnation, the write id among its recent writes) with its expiry: the one the
memory asks for, else the store's ttl from the server's clock. An id that is there already fails on the
unique ``_id`` alone, and so does a second copy of an id in the batch: ``None``. Those ids are then read
once: a document that is not live (an expired memory, which ``save`` at version 0 creates again) is left
to the store's own ``save`` (:attr:`BatchCreate.one_by_one`).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import checked_messages
from chatmemory.serialization.records import PLAIN, RecordCodec
from chatmemory.stored_memories import NewMemory
from chatmemory.stores.base.versions import new_incarnation, next_version
from chatmemory.stores.mongodb.commands import Result, Steps, Target, call
from chatmemory.stores.mongodb.expressions import check_size, live_filter
from chatmemory.stores.mongodb.layout import encode_record, plan_layout
from chatmemory.stores.mongodb.outcomes import Document
from chatmemory.stores.mongodb.plan import new_write_id

__all__ = ["BatchCreate", "create_batch", "new_document"]

Duplicates = Callable[[BaseException], "list[int] | None"]
"""The indexes of the documents an ``insert_many`` failure refused as duplicate ``_id`` s alone (else ``None``)."""


@dataclass(frozen=True, slots=True)
class BatchCreate:
    """A version (or ``None``) per memory of the batch, and the indexes of those left to ``save``."""

    versions: list[int | None]
    one_by_one: tuple[int, ...] = ()


def new_document(
    memory: NewMemory, server_now: datetime.datetime, ttl: float | None, codec: RecordCodec = PLAIN
) -> Document:
    """The document ``save(id, messages, 0)`` creates for ``memory`` at ``server_now``, with its expiry.

    Raises:
        StoreError: the document would be past MongoDB's size limit.
    """
    memory_id = validate_memory_id(memory.memory_id)
    layout = plan_layout(checked_messages(memory.messages))
    array = [encode_record(message, memory_id, codec) for message in layout.array]
    held = () if layout.system is None else (encode_record(layout.system, memory_id, codec),)
    check_size(memory_id, (*array, *held))
    now_ms = int(server_now.timestamp() * 1000)
    version = next_version(0, clock=now_ms * 1000)  # what a pipeline write makes: $$NOW in µs
    written_at = datetime.datetime.fromtimestamp(now_ms / 1000, datetime.timezone.utc)
    document: Document = {
        "_id": memory_id,
        "version": version,
        "incarnation": new_incarnation(),
        "messages": array,
        "written_at": written_at,
        "writes": [{"w": new_write_id(), "v": version}],
    }
    if held:
        document["system"] = held[0]
        document["system_at"] = layout.system_at
    if memory.sets_expiry:
        if memory.expires_at is not None:
            document["expires_at"] = memory.expires_at
    elif ttl is not None:
        document["expires_at"] = written_at + datetime.timedelta(milliseconds=round(ttl * 1000))
    return document


def create_batch(
    memories: Sequence[NewMemory],
    ttl: float | None,
    server_now: datetime.datetime | None,
    *,
    server_time: Callable[[Document], datetime.datetime | None],
    duplicates: Duplicates,
    codec: RecordCodec = PLAIN,
) -> Steps[BatchCreate]:
    """Create the absent ``memories`` in one ``insert_many`` (unordered); see :mod:`this module <.batch_creates>`.

    ``server_now``: the server's clock as the store estimates it (``None``: a ``hello`` asks it);
    ``server_time`` reads a ``hello`` reply; ``duplicates`` classifies an ``insert_many`` failure.
    Any other failure passes through: the executor makes it the store's error.
    """
    for memory in memories:
        validate_memory_id(memory.memory_id)
    if not memories:
        return BatchCreate([])
    if server_now is None:
        server_now = server_time((yield call(Target.ADMIN, "command", "hello")))
        if server_now is None:
            server_now = datetime.datetime.now(datetime.timezone.utc)
    documents = [new_document(memory, server_now, ttl, codec) for memory in memories]
    refused: list[int] = []
    try:
        yield call(Target.WINDOW, "insert_many", documents, ordered=False, result=Result.NOTHING)
    except Exception as exc:
        found = duplicates(exc)
        if found is None:
            raise
        refused = found
    versions: list[int | None] = [document["version"] for document in documents]
    for index in refused:
        versions[index] = None
    if not refused:
        return BatchCreate(versions)
    # A refused id is there (live: not touched) or expired (save at version 0 creates it again); a later
    # copy of an id created by this batch is refused too, and is live now.
    created = {documents[index]["_id"] for index, version in enumerate(versions) if version is not None}
    asked = sorted({documents[index]["_id"] for index in refused} - created)
    live: set[str] = set()
    if asked:
        query = {**live_filter(), "_id": {"$in": asked}}
        live = {
            document["_id"] for document in (yield call(Target.WINDOW, "find", query, {"_id": 1}, result=Result.LIST))
        }
    seen: set[str] = set()
    again: list[int] = []
    for index in refused:
        memory_id = documents[index]["_id"]
        if memory_id in created or memory_id in live or memory_id in seen:
            continue
        seen.add(memory_id)
        again.append(index)
    return BatchCreate(versions, tuple(again))


def refused_indexes(details: Any, duplicate_key: int) -> list[int] | None:
    """The indexes a ``BulkWriteError``'s ``details`` refused, if every error is a duplicate ``_id``."""
    errors = details.get("writeErrors") or []
    if details.get("writeConcernErrors") or not all(error.get("code") == duplicate_key for error in errors):
        return None
    return sorted(int(error["index"]) for error in errors)
