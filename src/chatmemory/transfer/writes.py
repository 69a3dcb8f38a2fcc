"""Writing one memory into a store the way ``import`` and ``copy`` do: atomically, never overwriting by accident.

* A memory that is not in the destination is created; on a versioned store with ``save(…, expected_version=0)``,
  so a memory that appears meanwhile (a live service writing it) is not overwritten.
* One that is there with the same messages is left alone, which makes ``import`` and ``copy`` re-runnable.
* One that is there with other messages is replaced only when asked (``replace=True``), again under the
  version that was read, so a concurrent writer's turn is never lost silently.
* An export whose expiry has passed is not written: the memory had expired at its source.
* The expiry travels with the memory where the destination can set it
  (:class:`~chatmemory.memory_times.SupportsExpiryAt`); elsewhere the destination's own ``ttl`` applies,
  from the time of the write.
"""

from __future__ import annotations

import datetime
import enum

from chatmemory.core.errors import ChatMemoryError, ConcurrentUpdateError
from chatmemory.core.store import ChatMemoryStore, SupportsTTL, SupportsVersioning
from chatmemory.memory_times import SupportsExpiryAt
from chatmemory.transfer.export_format import ExportedMemory

__all__ = ["WRITE_ATTEMPTS", "MemoryExistsError", "WriteOutcome", "write_memory"]

WRITE_ATTEMPTS = 5
"""How often a write is tried when the destination memory changes between its read and its write."""


class WriteOutcome(enum.Enum):
    """What :func:`write_memory` did with one memory."""

    CREATED = "created"
    REPLACED = "replaced"
    UNCHANGED = "unchanged"
    EXPIRED = "expired"


class MemoryExistsError(ChatMemoryError):
    """The destination already holds other messages under this id and ``replace`` was not asked for."""

    def __init__(self, memory_id: str) -> None:
        self.memory_id = memory_id
        super().__init__(
            f"memory {memory_id!r} already exists with other messages; nothing was written. "
            "Pass --replace to overwrite it"
        )


def write_memory(
    store: ChatMemoryStore, memory: ExportedMemory, *, replace: bool, now: datetime.datetime | None = None
) -> WriteOutcome:
    """Write ``memory`` into ``store`` (see the module docstring for the rules).

    Raises:
        MemoryExistsError: the memory exists with other messages and ``replace`` is false.
        ConcurrentUpdateError: it kept changing under us on each of :data:`WRITE_ATTEMPTS` attempts.
        StoreError: the store failed.
    """
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if isinstance(memory.expires_at, datetime.datetime) and memory.expires_at <= now:
        return WriteOutcome.EXPIRED
    outcome = _write_versioned(store, memory, replace) if isinstance(store, SupportsVersioning) else None
    if outcome is None:
        outcome = _write_unversioned(store, memory, replace)
    if outcome is not WriteOutcome.UNCHANGED and isinstance(store, SupportsExpiryAt):
        if isinstance(memory.expires_at, datetime.datetime):
            store.expire_at(memory.memory_id, memory.expires_at)
        elif memory.expires_at is None and not (isinstance(store, SupportsTTL) and store.ttl is not None):
            # A memory that never expired at its source: a destination opened with a ttl (``--ttl``) applies
            # it, as it did to the write; only a destination without one is told "never".
            store.expire_at(memory.memory_id, None)
    return outcome


def _write_versioned(store: ChatMemoryStore, memory: ExportedMemory, replace: bool) -> WriteOutcome:
    assert isinstance(store, SupportsVersioning)
    # Most memories of an import or a first copy are new: try to create first (one round trip), and read
    # the destination only when the memory turns out to exist.
    try:
        store.save(memory.memory_id, memory.messages, 0)
    except ConcurrentUpdateError:
        pass
    else:
        return WriteOutcome.CREATED
    for _ in range(WRITE_ATTEMPTS):
        current = store.load(memory.memory_id)
        if current.version != 0:
            if current.messages == memory.messages:
                return WriteOutcome.UNCHANGED
            if not replace:
                raise MemoryExistsError(memory.memory_id)
        try:
            store.save(memory.memory_id, memory.messages, current.version)
        except ConcurrentUpdateError:
            continue  # someone wrote between our read and our write: look again
        return WriteOutcome.CREATED if current.version == 0 else WriteOutcome.REPLACED
    raise ConcurrentUpdateError(memory.memory_id, attempts=WRITE_ATTEMPTS)


def _write_unversioned(store: ChatMemoryStore, memory: ExportedMemory, replace: bool) -> WriteOutcome:
    # Without versions an empty memory and a missing one look alike, and a concurrent writer can slip in
    # between the read and the write: stores used with the admin command should be versioned.
    current = store.get_messages(memory.memory_id)
    if current == memory.messages:
        return WriteOutcome.UNCHANGED
    if current and not replace:
        raise MemoryExistsError(memory.memory_id)
    store.update_messages(memory.memory_id, memory.messages)
    return WriteOutcome.REPLACED if current else WriteOutcome.CREATED
