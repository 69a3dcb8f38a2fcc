"""The operations of the Redis store, written once for both executors: generators that yield commands.

Each operation of :class:`Operations` (load, save, update, raw write, delete, history, batch reads and
creates ...) yields a :mod:`~.commands` command (most often a :class:`~.commands.ScriptCall`), receives the
driver's reply and returns its result or raises the store's error; a driver failure comes back in at the
``yield`` as the store's error (the executors translate it). It keeps the snapshot cache up to date on
the way. ``modify`` is three operations run in order: :meth:`Operations.lock` (``SET NX PX`` with the
holder's token, polled with :class:`~chatmemory.core.driving.Sleep` while busy),
:meth:`Operations.locked_change` (read, change, conditional write) and :meth:`Operations.unlock`. A store
with history writes only over a window it knows (cached, or read first), so a write that loses a conflict
records nothing. :func:`acknowledged` runs an operation with its writes waiting for replicas. No driver.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, TypeVar

from chatmemory import telemetry
from chatmemory.core.driving import Sleep, Steps
from chatmemory.core.errors import ConcurrentUpdateError, CorruptedMemoryError, Operation, StoreError
from chatmemory.core.history import HistoryEntry, HistoryPage, HistoryQuery
from chatmemory.core.messages import ChatMessage, checked_messages
from chatmemory.core.recorded_writes import recorded_parts
from chatmemory.core.store import Change, Snapshot, validate_memory_id
from chatmemory.memory_times import MemoryTimes
from chatmemory.serialization.records import Resealed, require_keyring, reseal_plan
from chatmemory.stored_memories import NewMemory, StoredMemory
from chatmemory.stores.base.turns import LockOptions
from chatmemory.stores.base.versions import SnapshotCache
from chatmemory.stores.redis.commands import (
    Acknowledged,
    Call,
    Command,
    PinnedWrite,
    Pipelined,
    Replication,
    Scan,
    ScriptCall,
)
from chatmemory.stores.redis.outcomes import (
    Absent,
    CachedMemory,
    Conflict,
    Corrupted,
    Loaded,
    ReplicationError,
    StaleIncarnation,
    WriteOutcome,
    Written,
    expire_at_done,
    history_page,
    read_outcome,
    stored_of,
    times_of,
    write_outcome,
)
from chatmemory.stores.redis.plan import Planner, WritePlan, expire_at_call, stored_call
from chatmemory.stores.redis.scripts import EXPIRE, RESEAL, RESTORE, TRIM, UNLOCK, WRITE

__all__ = ["Operations", "acknowledged", "change_until_saved", "take_lock"]

_T = TypeVar("_T")
_C = TypeVar("_C")
_C_co = TypeVar("_C_co", covariant=True)


class _Known:
    """What a read found of a memory, for a write with history: its version and its window if it decodes."""

    __slots__ = ("cached", "damaged", "version")

    def __init__(self, version: int, cached: CachedMemory | None, damaged: bool = False) -> None:
        self.version = version
        self.cached = cached
        self.damaged = damaged


def _refused(memory_id: str, outcome: object) -> StoreError:
    # The write script never refuses an unconditional write; a refusal means another script under its name.
    return StoreError(Operation.WRITE, memory_id, f"an unconditional write was refused ({outcome!r})")


class Operations:
    """The store's operations over one planner and one snapshot cache.

    Args:
        planner: plans the script calls.
        cache: the store's snapshot cache.
    """

    def __init__(self, planner: Planner, cache: SnapshotCache[CachedMemory]) -> None:
        self.planner = planner
        self.cache = cache

    def load(self, memory_id: str) -> Steps[Command, Snapshot]:
        """Read ``memory_id``: its messages and version.

        Raises:
            CorruptedMemoryError: the memory is damaged or a record does not decode.
        """
        memory_id = validate_memory_id(memory_id)
        cached = self.cache.get(memory_id)
        call = self.planner.read_call(memory_id, cached)
        outcome = read_outcome(call, cached, (yield call))
        if isinstance(outcome, CachedMemory):  # unchanged: the server still holds the cached state
            return Snapshot(list(outcome.messages), outcome.version)
        if isinstance(outcome, Loaded):
            telemetry.note(bytes=sum(map(len, outcome.records)))
            try:
                messages = [self.planner.codec.loads(record, memory_id) for record in outcome.records]
            except Exception:
                self.cache.forget(memory_id)
                raise
            self.cache.put(
                memory_id,
                CachedMemory(outcome.version, outcome.incarnation, tuple(messages), call.keys, b"%d" % outcome.version),
            )
            return Snapshot(messages, outcome.version)
        self.cache.forget(memory_id)
        if isinstance(outcome, Absent):
            return Snapshot([], 0)
        raise CorruptedMemoryError(memory_id, outcome.reason)

    def save(
        self,
        memory_id: str,
        messages: Iterable[ChatMessage],
        expected_version: int,
        also_recorded: Sequence[ChatMessage] = (),
    ) -> Steps[Command, int]:
        """Write ``messages`` if the memory is at ``expected_version``; return the new version.

        With history, ``also_recorded`` goes to the history before what the write appends (it is ignored
        without); such a write is sent even when the window does not change.

        Raises:
            ConcurrentUpdateError: the memory is not at ``expected_version``; nothing was written.
            CorruptedMemoryError: the memory is damaged; nothing was written.
        """
        memory_id = validate_memory_id(memory_id)
        new = tuple(messages)
        cached = self.cache.get(memory_id)
        if self.planner.known_stale(cached, expected_version):
            raise ConcurrentUpdateError(memory_id, expected_version)
        if self.planner.keeps_history:
            extra = checked_messages(also_recorded)
            return (yield from self._save_recorded(memory_id, new, expected_version, cached, extra))
        plan = self.planner.save(memory_id, new, expected_version, cached)
        while True:
            reply = yield plan.call
            version = self._saved(memory_id, plan, write_outcome(plan.call, plan.incarnation, reply), expected_version)
            if version is not None:
                return version
            # The cached list is not the stored one: send the whole list, still conditionally.
            plan = self.planner.full(memory_id, new, expected_version)
            telemetry.retried()

    def update(self, memory_id: str, messages: Iterable[ChatMessage]) -> Steps[Command, None]:
        """Replace the list of ``memory_id`` whatever it holds (a damaged memory included)."""
        memory_id = validate_memory_id(memory_id)
        new = tuple(messages)
        if self.planner.keeps_history:
            yield from self._update_recorded(memory_id, new)
            return
        plan = self.planner.update(memory_id, new, self.cache.get(memory_id))
        while not self._landed(memory_id, plan, (yield plan.call)):
            # The diff did not apply (moved, other incarnation, damaged): replace the list whole.
            self.cache.forget(memory_id)
            plan = self.planner.full(memory_id, new, None)
            telemetry.retried()

    def write_raw(self, memory_id: str, records: Sequence[bytes]) -> Steps[Command, None]:
        """Replace the memory with ``records`` as they are."""
        memory_id = validate_memory_id(memory_id)
        self.cache.forget(memory_id)
        plan = self.planner.raw(memory_id, records)
        outcome = write_outcome(plan.call, plan.incarnation, (yield plan.call))
        if not isinstance(outcome, Written):
            raise _refused(memory_id, outcome)

    def read_raw(self, memory_id: str) -> Steps[Command, list[bytes]]:
        """The stored records of ``memory_id`` as they are (``LRANGE``), even when the memory is damaged."""
        memory_id = validate_memory_id(memory_id)
        messages = self.planner.key_space.keys_of(memory_id).messages
        records: list[bytes] = yield Call("lrange", (messages, 0, -1), Operation.READ, memory_id)
        return records  # the client does not decode responses

    def reseal(self, memory_id: str) -> Steps[Command, Resealed]:
        """Re-seal every record of ``memory_id`` (window and history) not under the primary key, in place.

        An element is replaced only if it still holds what was read: versions and cached snapshots stay
        valid beside live writers, and a record a writer moved meanwhile is left for a re-run.
        """
        memory_id = validate_memory_id(memory_id)
        codec = require_keyring(self.planner.codec, "this Redis store")
        keys = self.planner.key_space.keys_of(memory_id)
        window: list[bytes] = yield Call("lrange", (keys.messages, 0, -1), Operation.READ, memory_id)
        changes, current = reseal_plan(codec, memory_id, enumerate(window))
        lists: list[tuple[bytes, list[tuple[int, bytes | str, bytes]]]] = [(keys.messages, changes)]
        if self.planner.keeps_history:
            entries: list[bytes] = yield Call("lrange", (keys.history, 0, -1), Operation.READ, memory_id)
            heads = [entry[: _record_start(memory_id, entry)] for entry in entries]
            found, current_entries = reseal_plan(
                codec, memory_id, ((index, entry[len(heads[index]) :]) for index, entry in enumerate(entries))
            )
            current += current_entries
            lists.append((keys.history, [(index, entries[index], heads[index] + new) for index, _, new in found]))
        done = planned = 0
        for name, items in lists:
            if items:
                planned += len(items)
                args = tuple(part for index, old, new in items for part in (b"%d" % index, _bytes(old), new))
                replaced: int = yield ScriptCall(RESEAL, keys, args, Operation.WRITE, memory_id, (name,))
                done += replaced
        return Resealed(done, current, planned - done)

    def delete(self, memory_id: str) -> Steps[Command, None]:
        """Remove ``memory_id``: its window and its history (``DEL``)."""
        memory_id = validate_memory_id(memory_id)
        self.cache.forget(memory_id)
        yield Call("delete", self.planner.key_space.keys_of(memory_id).with_history, Operation.DELETE, memory_id)

    # ------------------------------------------------------------------------------ taking turns

    def lock(self, memory_id: str, token: bytes, options: LockOptions) -> Steps[Command, None]:
        """Take the lease lock of ``memory_id`` for ``token``, waiting while another writer holds it.

        Raises:
            ConcurrentUpdateError: the lock stayed taken for ``options.wait`` seconds.
        """
        memory_id = validate_memory_id(memory_id)
        key = self.planner.key_space.keys_of(memory_id).lock
        take = Call("execute_command", ("SET", key, token, "NX", "PX", options.lease_ms), Operation.WRITE, memory_id)
        yield from take_lock(take, memory_id, options)

    def locked_change(self, memory_id: str, change: Change) -> Steps[Command, int]:
        """Apply ``change`` to what is stored and write it at the version read, over again until it lands.

        Run while holding the lock: the writes that still get in between come from writers that have not
        queued (an optimistic first attempt, a plain update), and each costs one more read. The write stays
        conditional, so a holder whose lease ran out cannot overwrite what the next holder wrote.
        """
        return (yield from change_until_saved(self, memory_id, change))

    def unlock(self, memory_id: str, token: bytes) -> Steps[Command, None]:
        """Give back the lease lock of ``memory_id`` if ``token`` still holds it."""
        keys = self.planner.key_space.keys_of(validate_memory_id(memory_id))
        yield ScriptCall(UNLOCK, keys, (token,), Operation.WRITE, memory_id, (keys.lock,))

    @staticmethod
    def times(call: ScriptCall) -> Steps[Command, MemoryTimes | None]:
        """Run the times script ``call`` (from :func:`~.plan.times_call`) and read its reply."""
        return times_of(call, (yield call))

    @staticmethod
    def expire(call: ScriptCall) -> Steps[Command, None]:
        """Run the expire script ``call`` (from :func:`~.plan.expire_at_call`) and check its reply."""
        expire_at_done(call, (yield call))

    # ------------------------------------------------------------------------------------ batches

    def read_batch(self, memory_ids: Sequence[str]) -> Steps[Pipelined, list[StoredMemory | None]]:
        """Read ``memory_ids`` in one pipeline (one run of ``stored.lua`` each): a :class:`StoredMemory` per id.

        ``None`` for an absent one (see ``SupportsBatchReads``); a memory whose head is damaged comes back
        with its records as ``read_raw`` reads them, so it is shown, never skipped.

        Raises:
            StoreError: a reply no script of this store gives.
        """
        calls = tuple(stored_call(self.planner.key_space, memory_id) for memory_id in memory_ids)
        replies: list[object] = yield Pipelined(calls, Operation.READ)
        return [stored_of(call, reply) for call, reply in zip(calls, replies, strict=True)]

    def create_batch(self, memories: Sequence[NewMemory]) -> Steps[Pipelined | Command, list[int | None]]:
        """Create the ``memories`` that do not exist (see ``SupportsBatchCreates``); their versions, ``None`` if not.

        A pipeline of the write script's calls, each the whole list conditional on the memory being absent
        (what ``save(id, messages, 0)`` sends), then one of the expire script's calls for the memories it
        created that ask for an expiry. A store with history creates one memory at a time, as ``save``
        does (its history records what a write appends to a window it has read).

        Raises:
            StoreError: a reply no script of this store gives.
        """
        planner = self.planner
        versions: list[int | None] = []
        if planner.keeps_history:
            for memory in memories:
                versions.append((yield from self._created(memory)))  # noqa: PERF401 - a comprehension cannot yield
        else:
            plans = [planner.full(memory.memory_id, tuple(memory.messages), 0) for memory in memories]
            replies = yield Pipelined(tuple(plan.call for plan in plans), Operation.WRITE)
            assert isinstance(replies, list)
            for plan, reply in zip(plans, replies, strict=True):
                outcome = write_outcome(plan.call, plan.incarnation, reply)
                # Not cached: the next operation on the memory reads it (an import touches each memory once).
                self.cache.forget(plan.call.memory_id)
                # Anything but a write (there already, or damaged) is left for the caller's own write to report.
                versions.append(outcome.version if isinstance(outcome, Written) else None)
        expiries = tuple(
            expire_at_call(planner.key_space, memory.memory_id, memory.expires_at, planner.history_follows_window)
            for memory, version in zip(memories, versions, strict=True)
            if version is not None and memory.sets_expiry
        )
        if expiries:
            done = yield Pipelined(expiries, Operation.WRITE)
            assert isinstance(done, list)
            for call, reply in zip(expiries, done, strict=True):
                expire_at_done(call, reply)
        return versions

    def _created(self, memory: NewMemory) -> Steps[Command, int | None]:
        """``save(id, messages, 0)``: the new version, or ``None`` when the memory exists."""
        try:
            return (yield from self.save(memory.memory_id, memory.messages, 0))
        except ConcurrentUpdateError:
            return None

    # ------------------------------------------------------------------------------- with history

    def _known(self, memory_id: str) -> Steps[Command, _Known]:
        """Read the memory a write with history starts from (its cached state, if any, is not trusted)."""
        self.cache.forget(memory_id)
        plan = self.planner.read(memory_id, None)
        outcome = read_outcome(plan.call, plan.cached, (yield plan.call))
        if isinstance(outcome, Loaded):
            try:
                messages = tuple(self.planner.codec.loads(record, memory_id) for record in outcome.records)
            except CorruptedMemoryError:
                # Records that do not decode: the window is not known, so all of the new one is recorded.
                return _Known(outcome.version, None)
            cached = CachedMemory(
                outcome.version, outcome.incarnation, messages, plan.call.keys, b"%d" % outcome.version
            )
            self.cache.put(memory_id, cached)
            return _Known(outcome.version, cached)
        if isinstance(outcome, Corrupted):
            return _Known(0, None, damaged=True)
        return _Known(0, None)

    def _save_recorded(
        self,
        memory_id: str,
        new: tuple[ChatMessage, ...],
        expected_version: int,
        cached: CachedMemory | None,
        also_recorded: tuple[ChatMessage, ...] = (),
    ) -> Steps[Command, int]:
        if expected_version == 0:
            known: CachedMemory | None = None  # the write is conditional on there being no memory
        elif cached is not None and cached.version == expected_version:
            known = cached
        else:
            found = yield from self._known(memory_id)
            if found.damaged:
                raise CorruptedMemoryError(memory_id, "its head is damaged (read it for the details)")
            if found.version != expected_version:
                raise ConcurrentUpdateError(memory_id, expected_version)
            known = found.cached
        while True:
            plan = self.planner.recorded(memory_id, new, expected_version, known, also_recorded)
            reply = yield plan.call
            version = self._saved(memory_id, plan, write_outcome(plan.call, plan.incarnation, reply), expected_version)
            if version is not None:
                return version
            # The cached list is not the stored one: read the stored one, still at the expected version?
            found = yield from self._known(memory_id)
            if found.version != expected_version or found.damaged:
                raise ConcurrentUpdateError(memory_id, expected_version)
            known = found.cached

    def _update_recorded(self, memory_id: str, new: tuple[ChatMessage, ...]) -> Steps[Command, None]:
        cached = self.cache.get(memory_id)
        found = _Known(cached.version, cached) if cached is not None else (yield from self._known(memory_id))
        while True:
            if found.damaged:
                # Replaced whole, whatever it holds (as without history); every new message is recorded.
                plan = self.planner.full(memory_id, new, None)
            else:
                plan = self.planner.recorded(memory_id, new, found.version, found.cached)
            if self._landed(memory_id, plan, (yield plan.call)):
                return
            # Another writer moved the memory on (or it is another incarnation, or damaged): start again
            # from what is stored now, so the history records what this write appends to it.
            found = yield from self._known(memory_id)

    def history(self, memory_id: str, query: HistoryQuery) -> Steps[Command, HistoryPage]:
        """Read one page of the history of ``memory_id`` (``query`` already validated).

        Raises:
            CorruptedMemoryError: an entry's message does not decode.
        """
        memory_id = validate_memory_id(memory_id)
        call = self.planner.history_read(memory_id, query)
        records = self.planner.history_records(call, (yield call))
        return history_page(memory_id, records, query, self.planner.codec)

    def restore(
        self, memory_id: str, entries: Sequence[HistoryEntry], window: Sequence[ChatMessage] | None
    ) -> Steps[Command, int]:
        """Put ``entries`` back in the history of ``memory_id`` (and ``window``, where it has none); how many went in.

        Raises:
            UnrestorableHistoryError: the sequences are not consecutive, or leave a gap beside the history's.
        """
        call = self.planner.restore(memory_id, entries, window)
        self.cache.forget(memory_id)  # a window the script creates is not the cached absence
        return self.planner.restored(call, (yield call))

    def trim(self, memory_id: str, args: tuple[bytes, ...]) -> Steps[Command, int]:
        """Trim the history of ``memory_id`` (``args`` from :func:`~.plan.trim_args`); how many entries went."""
        call = self.planner.trim(validate_memory_id(memory_id), args)
        return self.planner.trimmed(call, (yield call))

    def trim_all(self, args: tuple[bytes, ...]) -> Steps[Command, int]:
        """Trim the history of every memory (``args`` from :func:`~.plan.trim_args`); how many entries went."""
        keys: set[bytes] = yield Scan(self.planner.key_space.history_pattern, Operation.LIST)
        removed = 0
        for key in keys:
            owner = self.planner.key_space.id_of_history_key(key)
            if owner is not None:
                removed += yield from self.trim(owner, args)
        return removed

    def _landed(self, memory_id: str, plan: WritePlan, reply: object) -> bool:
        """Whether an update's write ``plan`` landed (``reply``); a conditional one that did not is retried.

        Raises:
            StoreError: an unconditional write was refused.
        """
        outcome = write_outcome(plan.call, plan.incarnation, reply)
        if isinstance(outcome, Written):
            self._written(memory_id, plan, outcome)
            return True
        if plan.expected_version is None:
            raise _refused(memory_id, outcome)
        return False

    def _saved(self, memory_id: str, plan: WritePlan, outcome: WriteOutcome, expected_version: int) -> int | None:
        """The version a save's ``outcome`` lands at; ``None`` for another incarnation (the save goes on).

        Raises:
            ConcurrentUpdateError: another writer moved the memory on from ``expected_version``.
            CorruptedMemoryError: the memory is damaged; nothing was written.
        """
        if isinstance(outcome, Written):
            return self._written(memory_id, plan, outcome)
        if isinstance(outcome, Conflict):
            # A state this store cached since (the winner may be a thread or task sharing it) is kept:
            # the retry's read is then an "unchanged" round trip.
            current = self.cache.get(memory_id)
            if current is not None and current.version <= expected_version:
                self.cache.forget(memory_id)
            raise ConcurrentUpdateError(memory_id, expected_version)
        self.cache.forget(memory_id)
        if isinstance(outcome, StaleIncarnation):
            return None
        raise CorruptedMemoryError(memory_id, outcome.reason)

    def _written(self, memory_id: str, plan: WritePlan, outcome: Written) -> int:
        telemetry.note(version=outcome.version)
        state = self.planner.cached_after(plan, outcome)
        if state is None:
            self.cache.forget(memory_id)
        else:
            self.cache.put(memory_id, state)
        return outcome.version


def _record_start(memory_id: str, entry: bytes) -> int:
    """Where the record of a history entry (``<sequence>:<ms>:<record>``) starts.

    Raises:
        CorruptedMemoryError: the entry is not one this store wrote.
    """
    parts = entry.split(b":", 2)
    if len(parts) != 3:
        raise CorruptedMemoryError(memory_id, "a history entry lacks its sequence or time")
    return len(parts[0]) + len(parts[1]) + 2


# ---------------------------------------------------------- taking turns, shared with the LangChain4j layout
def take_lock(take: _C, memory_id: str, options: LockOptions) -> Steps[_C | Sleep, None]:
    """Send ``take`` (a ``SET NX PX`` of the lock key) until it lands, sleeping between tries.

    Raises:
        ConcurrentUpdateError: the lock stayed taken for ``options.wait`` seconds.
    """
    waiting = options.polling().start()
    while not (yield take):
        delay = waiting.backoff()
        if delay is None:
            raise ConcurrentUpdateError(memory_id, attempts=waiting.count)
        yield Sleep(delay)


class _LoadsAndSaves(Protocol[_C_co]):
    def load(self, memory_id: str, /) -> Steps[_C_co, Snapshot]: ...

    def save(
        self, memory_id: str, new: Iterable[ChatMessage], version: int, recorded: Sequence[ChatMessage], /
    ) -> Steps[_C_co, int]: ...


def change_until_saved(operations: _LoadsAndSaves[_C], memory_id: str, change: Change) -> Steps[_C, int]:
    """Apply ``change`` to what ``operations`` loads and save it at the version read, until a save lands."""
    while True:
        snapshot = yield from operations.load(memory_id)
        new, also_recorded = recorded_parts(change(list(snapshot.messages)))
        if new is None:
            return snapshot.version
        try:
            return (yield from operations.save(memory_id, new, snapshot.version, also_recorded))
        except ConcurrentUpdateError:
            telemetry.retried()


def _bytes(record: bytes | str) -> bytes:
    return record if isinstance(record, bytes) else record.encode("utf-8")


# ------------------------------------------------------------------------ writes acknowledged by replicas

_ACKNOWLEDGED_SCRIPTS = (WRITE, EXPIRE, TRIM, RESTORE)
"""The scripts that change what a memory holds (not the lock's, not the reads)."""


def _changes_the_memory(command: object) -> ScriptCall | Call | None:
    """``command`` if it is a write of this layout that changes the memory (one to wait for), else ``None``."""
    if isinstance(command, ScriptCall):
        return command if command.script in _ACKNOWLEDGED_SCRIPTS else None
    return command if isinstance(command, Call) and command.method == "delete" else None


def _replayed(command: object, reply: object) -> bool:
    """Whether ``reply`` says the write script found this write applied already (its first reply was lost)."""
    return (
        isinstance(command, ScriptCall) and command.script is WRITE and isinstance(reply, list) and reply[:1] == [b"r"]
    )


def acknowledged(
    operation: Steps[Any, _T],
    replication: Replication,
    *,
    pin: Callable[[object], ScriptCall | Call | PinnedWrite | None] = _changes_the_memory,
    replayed: Callable[[Any, object], bool] = _replayed,
) -> Steps[Any, _T]:
    """``operation`` with each write that changes the memory sent as :class:`~.commands.Acknowledged`.

    ``WAIT`` counts the replicas that hold the writes of its own connection, so the executor sends the
    write and its ``WAIT`` in one pipeline on the node that owns the memory's slot. ``pin`` gives the write
    to wait for in a command the operation yields (``None``: send it as it is), ``replayed`` whether the
    write's reply says it had landed already (sent again after a lost reply): this layout's by default,
    another layout's (the LangChain4j store's) as :class:`~.commands.PinnedWrite`. The lease lock of
    ``modify`` is not waited for. The guide: *Durability you can choose* in ``docs/scaling.md``.

    Raises:
        ReplicationError: the operation's last write (the one that landed) had fewer acknowledgements than
            asked for; raised once the operation is done, its result (and the snapshot cache) in place.
    """
    reply: object = None
    failure: BaseException | None = None
    shortfall: tuple[ScriptCall | Call | PinnedWrite, int | None] | None = None
    while True:
        try:
            command = operation.send(reply) if failure is None else operation.throw(failure)
        except StopIteration as done:
            if shortfall is not None:
                write, acked = shortfall
                raise ReplicationError(
                    write.operation,
                    write.memory_id or "",
                    acked,
                    replication.replicas,
                    replication.timeout_ms,
                ) from None
            return done.value  # type: ignore[no-any-return]
        reply, failure = None, None
        try:
            pinned = pin(command)
            if pinned is not None:
                replied: Any = yield Acknowledged(pinned, replication.replicas, replication.timeout_ms)
                reply, acked = replied
                if replayed(pinned, reply):
                    shortfall = (pinned, None)
                else:
                    shortfall = None if acked >= replication.replicas else (pinned, acked)
            else:
                reply = yield command
        except Exception as exc:  # thrown in by the executor: the operation handles it
            failure = exc
