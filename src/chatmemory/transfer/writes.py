"""Writing one memory into a store the way ``import`` and ``copy`` do: atomically, never overwriting by accident.

An absent memory is created conditionally (``save(…, expected_version=0)`` on a versioned store); one with
the export's messages and expiry is left alone (``unchanged``), so runs repeat safely and an interrupted
one is finished by the next (``expiry set``); one with other messages is replaced only with
``replace=True``, under the version read. An export whose expiry has passed is not written. The expiry
travels where the destination can set it (:class:`~chatmemory.memory_times.SupportsExpiryAt`), else the
destination's ``ttl`` applies; expiries within :data:`EXPIRY_TOLERANCE` are equal. A batch read
(``stored``) spares reads and never makes a write unconditional; :func:`write_memory_with_history` also
restores the history, adding only the entries it lacks.

Every rule: docs/cli.md#how-import-and-copy-write-a-memory.
"""

from __future__ import annotations

import datetime
import enum
from dataclasses import dataclass

from chatmemory.core.errors import ChatMemoryError, ConcurrentUpdateError, SerializationError
from chatmemory.core.history import SupportsHistoryRestore
from chatmemory.core.store import ChatMemoryStore, SupportsTTL, SupportsVersioning
from chatmemory.memory_times import SupportsExpiryAt, SupportsMemoryTimes
from chatmemory.serialization.records import PLAIN, RecordCodec, codec_of_store
from chatmemory.stored_memories import NewMemory, StoredMemory
from chatmemory.transfer.export_format import ExportedMemory
from chatmemory.transfer.sources import HistoryNotKeptError

__all__ = [
    "EXPIRY_TOLERANCE",
    "Destination",
    "NOT_READ",
    "WRITE_ATTEMPTS",
    "MemoryExistsError",
    "Prefetched",
    "WriteOutcome",
    "judge_stored",
    "new_memory",
    "check_restores_history",
    "settled",
    "write_memory",
    "write_memory_with_history",
]

WRITE_ATTEMPTS = 5
"""How often a write is tried when the destination memory changes between its read and its write."""

EXPIRY_TOLERANCE = datetime.timedelta(seconds=1)
"""Two expiries closer than this are the same expiry (the destination's is not set again)."""


class WriteOutcome(enum.Enum):
    """What :func:`write_memory` did with one memory."""

    CREATED = "created"
    REPLACED = "replaced"
    UNCHANGED = "unchanged"
    EXPIRY_SET = "expiry set"
    """The messages were there already; their expiry was not the export's and was set."""
    EXPIRED = "expired"
    HISTORY_RESTORED = "history restored"
    """The messages were there already; history entries they lacked were added."""


class _NotRead:
    """The type of :data:`NOT_READ`."""

    def __repr__(self) -> str:
        return "NOT_READ"


NOT_READ = _NotRead()
"""``write_memory(stored=...)`` when the caller did not read the destination's memory beforehand."""

Prefetched = StoredMemory | _NotRead | None
"""What a caller hands ``write_memory`` as ``stored``: the memory a batch read found, ``None``, or :data:`NOT_READ`."""


class MemoryExistsError(ChatMemoryError):
    """The destination already holds other messages under this id and ``replace`` was not asked for."""

    def __init__(self, memory_id: str) -> None:
        self.memory_id = memory_id
        super().__init__(
            f"memory {memory_id!r} already exists with other messages; nothing was written. "
            "Pass --replace to overwrite it"
        )


def write_memory(
    store: ChatMemoryStore,
    memory: ExportedMemory,
    *,
    replace: bool,
    now: datetime.datetime | None = None,
    stored: Prefetched = NOT_READ,
) -> WriteOutcome:
    """Write ``memory`` into ``store`` (see the module docstring for the rules).

    Args:
        store: the destination.
        memory: the memory to write.
        replace: overwrite a memory that holds other messages.
        now: the time expiries are judged at (default: now).
        stored: the destination's memory as a batch read found it a moment ago (``None``: absent), or
            :data:`NOT_READ`.

    Raises:
        MemoryExistsError: the memory exists with other messages and ``replace`` is false.
        ConcurrentUpdateError: it kept changing under us on each of :data:`WRITE_ATTEMPTS` attempts.
        StoreError: the store failed.
    """
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if isinstance(memory.expires_at, datetime.datetime) and memory.expires_at <= now:
        _expire_left_copy(store, memory, memory.expires_at)
        return WriteOutcome.EXPIRED
    if not isinstance(stored, _NotRead):
        sets_expiry, expiry = _expiry_to_set(store, memory)
        times_known = isinstance(store, SupportsMemoryTimes)
        judged = judge_stored(memory, stored, sets_expiry, expiry, times_known=times_known, codec=codec_of_store(store))
        if judged is WriteOutcome.UNCHANGED:
            return judged
        if judged is WriteOutcome.EXPIRY_SET:
            assert isinstance(store, SupportsExpiryAt)
            store.expire_at(memory.memory_id, expiry)
            return judged
    outcome = _write_versioned(store, memory, replace) if isinstance(store, SupportsVersioning) else None
    if outcome is None:
        outcome = _write_unversioned(store, memory, replace)
    sets_expiry, expiry = _expiry_to_set(store, memory)
    if not sets_expiry or not isinstance(store, SupportsExpiryAt):
        return outcome
    if outcome is WriteOutcome.UNCHANGED:
        if not isinstance(store, SupportsMemoryTimes):
            store.expire_at(memory.memory_id, expiry)  # cannot tell whether it differs: set it again, harmless
            return outcome
        times = store.memory_times(memory.memory_id)
        if _same_expiry(times.expires_at if times is not None else None, expiry):
            return outcome
        outcome = WriteOutcome.EXPIRY_SET
    store.expire_at(memory.memory_id, expiry)
    return outcome


def write_memory_with_history(
    store: ChatMemoryStore,
    memory: ExportedMemory,
    *,
    replace: bool,
    now: datetime.datetime | None = None,
    stored: Prefetched = NOT_READ,
) -> WriteOutcome:
    """Write ``memory`` and restore its history (``memory.history``) into ``store``; see the module docstring.

    Raises:
        HistoryNotKeptError: ``store`` keeps no history it can restore (build it with ``history=True``).
        MemoryExistsError: the memory exists with other messages and ``replace`` is false (nothing restored).
        ConcurrentUpdateError, StoreError: as :func:`write_memory`.
    """
    history = memory.history or ()
    check_restores_history(store, f"destination of memory {memory.memory_id!r}")
    assert isinstance(store, SupportsHistoryRestore)
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if isinstance(memory.expires_at, datetime.datetime) and memory.expires_at <= now:
        return write_memory(store, memory, replace=replace, now=now, stored=stored)
    absent = stored is None
    if isinstance(stored, _NotRead):
        absent = store.load(memory.memory_id).version == 0 if isinstance(store, SupportsVersioning) else False
    if absent:
        # Window and history in one step: the window's messages are among the entries, recorded once.
        added = store.restore_history(memory.memory_id, history, window=memory.messages)
        outcome = write_memory(store, memory, replace=replace, now=now)
        if outcome in (WriteOutcome.UNCHANGED, WriteOutcome.EXPIRY_SET) and (added or not history):
            return WriteOutcome.CREATED
        return outcome
    outcome = write_memory(store, memory, replace=replace, now=now, stored=stored)
    added = store.restore_history(memory.memory_id, history)
    if added and outcome is WriteOutcome.UNCHANGED:
        return WriteOutcome.HISTORY_RESTORED
    return outcome


def check_restores_history(store: ChatMemoryStore, side: str = "destination") -> None:
    """Refuse a destination that cannot take a history (``side`` names it in the message).

    Raises:
        HistoryNotKeptError: it keeps none (build it with ``history=True``), or keeps one it cannot restore.
    """
    keeps = bool(getattr(store, "keeps_history", False))
    if keeps and isinstance(store, SupportsHistoryRestore):
        return
    if keeps:
        raise HistoryNotKeptError(
            side,
            store,
            "this kind of store does not restore history yet (chatmemory.core.history.SupportsHistoryRestore): "
            "import into another kind, or export without --history",
            keeps_one=True,
        )
    raise HistoryNotKeptError(
        side,
        store,
        "build it with history=True (chatmemory import and copy open a store URL with it when the memories "
        "carry history), or export without --history",
    )


def judge_stored(
    memory: ExportedMemory,
    stored: StoredMemory | None,
    sets_expiry: bool,
    expiry: datetime.datetime | None,
    *,
    times_known: bool,
    codec: RecordCodec = PLAIN,
) -> WriteOutcome | None:
    """What a batch read's ``stored`` memory already settles for ``memory``; ``None``: the full write decides.

    ``UNCHANGED``: it holds the export's messages, and its expiry is the one to set (or none is set);
    ``EXPIRY_SET``: the same messages, but the expiry must be set to ``expiry``. Anything else (absent,
    other messages, damaged, records that do not decode, times the store does not tell) is ``None``.
    """
    if stored is None or stored.damage is not None or len(stored.records) != len(memory.messages):
        return None
    try:
        messages = [codec.loads(record, memory.memory_id) for record in stored.records]
    except SerializationError:
        return None  # the full write reads it again and reports it
    if messages != memory.messages:
        return None
    if not sets_expiry:
        return WriteOutcome.UNCHANGED
    if not times_known or stored.times is None:
        return None
    return WriteOutcome.UNCHANGED if _same_expiry(stored.times.expires_at, expiry) else WriteOutcome.EXPIRY_SET


@dataclass(frozen=True, slots=True)
class Destination:
    """What the rules need to know of a destination store, found once for a whole command.

    A ``runtime_checkable`` protocol's ``isinstance`` costs tens of microseconds, more than the rest of
    judging a memory a batch read found; a command over thousands of memories asks once.

    Attributes:
        sets_expiries: it can set one memory's expiry (``SupportsExpiryAt``).
        has_ttl: it was opened with a ``ttl``.
        tells_times: it tells one memory's expiry (``SupportsMemoryTimes``).
    """

    sets_expiries: bool
    has_ttl: bool
    tells_times: bool
    codec: RecordCodec = PLAIN

    @classmethod
    def of(cls, store: ChatMemoryStore) -> Destination:
        """What ``store`` can do."""
        return cls(
            isinstance(store, SupportsExpiryAt),
            isinstance(store, SupportsTTL) and store.ttl is not None,
            isinstance(store, SupportsMemoryTimes),
            codec_of_store(store),
        )

    def expiry_to_set(self, memory: ExportedMemory) -> tuple[bool, datetime.datetime | None]:
        """Whether the import sets the expiry of ``memory`` here, and to what (``None``: never)."""
        if not self.sets_expiries:
            return False, None
        if isinstance(memory.expires_at, datetime.datetime):
            return True, memory.expires_at
        if memory.expires_at is None and not self.has_ttl:
            # A memory that never expired at its source: a destination opened with a ttl (``--ttl``) applies
            # it, as it did to the write; only a destination without one is told "never".
            return True, None
        return False, None  # unknown at the source, or never there but the destination's ttl applies


def settled(
    destination: Destination, memory: ExportedMemory, stored: Prefetched, now: datetime.datetime
) -> WriteOutcome | None:
    """``UNCHANGED`` when a batch read's ``stored`` memory is already the export (nothing to send), else ``None``."""
    if isinstance(stored, _NotRead) or stored is None:
        return None
    if isinstance(memory.expires_at, datetime.datetime) and memory.expires_at <= now:
        return None  # write_memory expires the copy an earlier run left
    sets_expiry, expiry = destination.expiry_to_set(memory)
    judged = judge_stored(
        memory, stored, sets_expiry, expiry, times_known=destination.tells_times, codec=destination.codec
    )
    return judged if judged is WriteOutcome.UNCHANGED else None


def new_memory(
    destination: Destination, memory: ExportedMemory, stored: Prefetched, now: datetime.datetime
) -> NewMemory | None:
    """The create a batch makes for ``memory``, or ``None`` when it is not simply created.

    Only a memory a batch read found absent (``stored`` is ``None``) whose export has not expired is; it
    carries the expiry :func:`write_memory` would set after its write.
    """
    if stored is not None or isinstance(stored, _NotRead):
        return None
    if isinstance(memory.expires_at, datetime.datetime) and memory.expires_at <= now:
        return None
    sets_expiry, expiry = destination.expiry_to_set(memory)
    return NewMemory(memory.memory_id, memory.messages, sets_expiry, expiry)


def _expiry_to_set(store: ChatMemoryStore, memory: ExportedMemory) -> tuple[bool, datetime.datetime | None]:
    """Whether the import sets the expiry of ``memory`` in ``store``, and to what (``None``: never)."""
    return Destination.of(store).expiry_to_set(memory)


def _same_expiry(current: datetime.datetime | None, wanted: datetime.datetime | None) -> bool:
    if current is None or wanted is None:
        return current is wanted
    return abs(current - wanted) < EXPIRY_TOLERANCE


def _expire_left_copy(store: ChatMemoryStore, memory: ExportedMemory, when: datetime.datetime) -> None:
    """Expire the destination's copy of an expired export, left there by an earlier run (same messages)."""
    if not isinstance(store, SupportsExpiryAt):
        return
    if isinstance(store, SupportsVersioning):
        current = store.load(memory.memory_id)
        left = current.version != 0 and current.messages == memory.messages
    else:
        left = bool(memory.messages) and store.get_messages(memory.memory_id) == memory.messages
    if left:
        store.expire_at(memory.memory_id, when)


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
