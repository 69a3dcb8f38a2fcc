"""Reading many memories of the MongoDB store in one ``find``, for operators' tools (pure: no I/O).

:func:`read_batch` is an operation like those of :mod:`.operations`: it yields one ``find`` of the
batch's live documents (``_id`` in the batch, not expired by the server's clock) and turns each into a
:class:`~chatmemory.stored_memories.StoredMemory`: its records as ``read_raw`` gives them, its version and
times. A document this store cannot read as a memory is reported with its damage, never skipped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from chatmemory.core.errors import CorruptedMemoryError
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.stored_memories import StoredMemory
from chatmemory.stores.mongodb.commands import Result, Steps, Target, call
from chatmemory.stores.mongodb.expressions import live_filter
from chatmemory.stores.mongodb.layout import raw_records
from chatmemory.stores.mongodb.times import memory_times_of

__all__ = ["read_batch", "stored_memory"]


def read_batch(memory_ids: Sequence[str], field: str = "expires_at") -> Steps[list[StoredMemory | None]]:
    """Read ``memory_ids`` in one ``find``: a :class:`StoredMemory` per id, ``None`` for an absent one.

    ``field`` holds the window's expiry (see :func:`~chatmemory.stores.mongodb.expressions.read_filter`).

    A driver failure is thrown back in at the ``find`` and passes through: the executor makes it the
    store's error.
    """
    ids = [validate_memory_id(memory_id) for memory_id in memory_ids]
    query = {**live_filter(field), "_id": {"$in": ids}}
    documents = yield call(Target.WINDOW, "find", query, result=Result.LIST)
    found = {document.get("_id"): document for document in documents}
    return [
        None if (document := found.get(memory_id)) is None else stored_memory(memory_id, document, field)
        for memory_id in ids
    ]


def stored_memory(memory_id: str, document: Mapping[str, Any], field: str = "expires_at") -> StoredMemory:
    """What a stored document holds of its memory (its damage, when it is not a memory this store reads)."""
    times = memory_times_of(document, field)
    try:
        records = raw_records(memory_id, document)
    except CorruptedMemoryError as exc:
        return StoredMemory(memory_id, [], 0, times, damage=exc.reason)
    return StoredMemory(memory_id, records, document["version"], times)
