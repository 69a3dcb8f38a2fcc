"""A LangChain4j-layout store's operations, written once as generators of commands for both executors.

:class:`Operations` yields :mod:`.commands` and receives the replies; the executors (:mod:`.executor`,
:mod:`.aio`) only send them, and throw the store's error for a driver failure back in where the command
was yielded (:class:`~.outcomes.ReplyError` for an error reply). ``modify`` is three operations run in
order: :meth:`Operations.lock` (``SET NX PX`` of :func:`.keys.lock_key` with the holder's token, polled
with :class:`~chatmemory.core.driving.Sleep` while busy), :meth:`Operations.locked_change` (read, change,
compare-and-set) and :meth:`Operations.unlock` (deleted only by its token). With history, every write is
a compare-and-set on the value it diffed against, so the history (a list beside the value, read and
trimmed by the Redis store's scripts) records exactly what the write appends; a history an earlier store
kept at the memory key followed by ``:chatmemory-history`` is adopted on its next write, read or trim.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TypeVar

from chatmemory import telemetry
from chatmemory.core.driving import Steps
from chatmemory.core.errors import ConcurrentUpdateError, CorruptedMemoryError, Operation, StoreError
from chatmemory.core.history import HistoryPage, HistoryQuery
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Change, Snapshot, validate_memory_id
from chatmemory.stores.langchain4j_redis.commands import Command, Get, Scan, Script, Set, SetIfAbsent
from chatmemory.stores.langchain4j_redis.keys import (
    any_history_pattern,
    history_key,
    legacy_history_key,
    lock_key,
    memory_id_of_history_key,
    memory_id_of_legacy_history_key,
    write_ids_key,
)
from chatmemory.stores.langchain4j_redis.outcomes import WRITTEN, WRITTEN_BEFORE, ReplyError, written_version
from chatmemory.stores.langchain4j_redis.plan import (
    ADOPT_HISTORY_SCRIPT,
    ADOPT_HISTORY_SCRIPT_SHA,
    DELETE_SCRIPT,
    DELETE_SCRIPT_SHA,
    WRITE_SCRIPT,
    WRITE_SCRIPT_SHA,
    KnownValues,
    Planner,
    VersionBook,
    decode,
    digest,
    encode,
    message_list,
)
from chatmemory.stores.redis.operations import change_until_saved, take_lock
from chatmemory.stores.redis.outcomes import history_page, history_records
from chatmemory.stores.redis.plan import history_read_args
from chatmemory.stores.redis.scripts import HISTORY, TRIM, UNLOCK

__all__ = ["Operations"]

_T = TypeVar("_T")


class Operations:
    """Every operation of a LangChain4j-layout store, as a command generator (the executors run them).

    Args:
        planner: the store's planner (key prefix, expiries, lock options, history).
        book: the store's version book.
        known: the store's known values.
    """

    def __init__(self, planner: Planner, book: VersionBook, known: KnownValues) -> None:
        self.planner = planner
        self.book = book
        self.known = known

    @property
    def keeps_history(self) -> bool:
        """Whether the store keeps a history beside each value."""
        return self.planner.keeps_history

    def key_of(self, memory_id: str) -> bytes:
        """The Redis key of ``memory_id`` (validated here)."""
        return self.planner.key_of(validate_memory_id(memory_id))

    # ---------------------------------------------------------------------------------------------- read

    def load(self, memory_id: str, versioned: bool = True) -> Steps[Command, Snapshot]:
        """Read the value of ``memory_id``: its messages, and their version if ``versioned`` (else ``0``)."""
        memory_id = validate_memory_id(memory_id)  # versions are kept under the id's text (a UUID's too)
        try:
            value = yield Get(self.key_of(memory_id), Operation.READ, memory_id)
        except ReplyError as exc:  # WRONGTYPE: another kind of key where the memory should be
            raise CorruptedMemoryError(memory_id, f"its key is not a string ({exc.detail})") from None
        assert value is None or isinstance(value, bytes)  # the client decodes no replies (checked at construction)
        if value is None:
            return Snapshot([], 0)
        value_digest = digest(value)
        known = self.known.get(memory_id, value_digest)
        if known is None:
            messages = decode(value, memory_id)
            self.known.put(memory_id, value_digest, messages)
        else:  # the value this store last read or wrote: the same bytes, so the same messages
            telemetry.note(bytes=len(value))
            messages = list(known)
        return Snapshot(messages, self.book.read(memory_id, value_digest) if versioned else 0)

    # --------------------------------------------------------------------------------------------- write

    def save(
        self,
        memory_id: str,
        messages: Iterable[ChatMessage],
        expected_version: int,
        also_recorded: Iterable[ChatMessage] = (),
    ) -> Steps[Command, int]:
        """Write ``messages`` if the key still holds the value read at ``expected_version`` (compare-and-set).

        With history, ``also_recorded`` goes to the history first (messages evicted within their add).

        Raises:
            ConcurrentUpdateError: the version is not current, or the key holds another value.
            CorruptedMemoryError: with history, the value it replaces does not decode.
        """
        memory_id = validate_memory_id(memory_id)
        listed = message_list(messages)
        if self.keeps_history:
            step = self._save_recorded(memory_id, listed, expected_version, message_list(also_recorded))
            return (yield from _recorded(memory_id, step))
        plan = self.planner.write(memory_id, listed, expected_version, self.book)
        keys = (plan.key, write_ids_key(plan.key))
        reply = yield Script(WRITE_SCRIPT, WRITE_SCRIPT_SHA, keys, plan.script_args(), Operation.WRITE, memory_id)
        version = written_version(self.book, memory_id, plan, reply, expected_version)
        self.known.put(memory_id, plan.new_digest, listed)
        return version

    def update(self, memory_id: str, messages: Iterable[ChatMessage]) -> Steps[Command, None]:
        """Replace the value whatever it holds: a plain ``SET``, or with history a compare-and-set retried."""
        memory_id = validate_memory_id(memory_id)
        if self.keeps_history:
            yield from _recorded(memory_id, self._update_recorded(memory_id, message_list(messages)))
            return
        listed = message_list(messages)
        value = encode(listed)
        try:
            yield Set(self.key_of(memory_id), value, self.planner.ttl_ms or None, Operation.WRITE, memory_id)
        finally:
            self.book.forget(memory_id)
        self.known.put(memory_id, digest(value), listed)

    def delete(self, memory_id: str) -> Steps[Command, None]:
        """Delete the value of ``memory_id``, its history and its write ids."""
        memory_id = validate_memory_id(memory_id)
        try:
            memory_key = self.key_of(memory_id)
            keys = (memory_key, history_key(memory_key), write_ids_key(memory_key), legacy_history_key(memory_key))
            yield Script(DELETE_SCRIPT, DELETE_SCRIPT_SHA, keys, (), Operation.DELETE, memory_id)
        finally:
            self.book.forget(memory_id)
            self.known.forget(memory_id)

    # -------------------------------------------------------------------------------------- taking turns

    def lock(self, memory_id: str, token: bytes) -> Steps[Command, None]:
        """Take the lease lock of ``memory_id`` for ``token``, waiting while another writer holds it.

        Raises:
            ConcurrentUpdateError: the lock stayed taken for ``lock_wait`` seconds.
        """
        options = self.planner.lock
        take = SetIfAbsent(lock_key(self.key_of(memory_id)), token, options.lease_ms, Operation.WRITE, memory_id)
        yield from take_lock(take, memory_id, options)

    def locked_change(self, memory_id: str, change: Change) -> Steps[Command, int]:
        """Apply ``change`` to the stored value and save it at the version read, over again until it lands.

        Run while holding the lock: the writes that still get in between come from writers that have not
        queued (an optimistic first attempt, a plain ``update_messages``, a Java ``SET``), and each costs
        one more read. The save stays a compare-and-set, so a holder whose lease ran out cannot overwrite
        what the next holder wrote.
        """
        return (yield from change_until_saved(self, memory_id, change))

    def unlock(self, memory_id: str, token: bytes) -> Steps[Command, None]:
        """Give back the lease lock of ``memory_id`` if ``token`` still holds it."""
        lock = (lock_key(self.key_of(memory_id)),)
        yield Script(UNLOCK.source, UNLOCK.sha, lock, (token,), Operation.WRITE, memory_id)

    # ------------------------------------------------------------------------------------------- history

    def _save_recorded(
        self, memory_id: str, new: list[ChatMessage], expected_version: int, also_recorded: Sequence[ChatMessage]
    ) -> Steps[Command, int]:
        expected = self.book.expected_digest(memory_id, expected_version)
        if expected is None:
            raise ConcurrentUpdateError(memory_id, expected_version)
        old = () if not expected else self.known.get(memory_id, expected)
        if old is None:
            value = yield Get(self.planner.key_of(memory_id), Operation.WRITE, memory_id)
            if not isinstance(value, bytes) or digest(value) != expected:
                raise ConcurrentUpdateError(memory_id, expected_version)
            old = tuple(decode(value, memory_id))
        plan, script = self.planner.history_write(memory_id, expected, old, new, also_recorded)
        version = written_version(self.book, memory_id, plan, (yield script), expected_version)
        self.known.put(memory_id, plan.new_digest, new)
        return version

    def _update_recorded(self, memory_id: str, new: list[ChatMessage]) -> Steps[Command, None]:
        self.book.forget(memory_id)
        while True:
            value = yield Get(self.planner.key_of(memory_id), Operation.WRITE, memory_id)
            old: Sequence[ChatMessage] = ()
            value_digest = digest(value if isinstance(value, bytes) else None)
            if isinstance(value, bytes):
                known = self.known.get(memory_id, value_digest)
                if known is not None:
                    old = known
                else:
                    try:
                        old = decode(value, memory_id)
                    except CorruptedMemoryError:
                        old = ()  # replaced whole; every new message is recorded
            plan, script = self.planner.history_write(memory_id, value_digest, old, new)
            if (yield script) in (WRITTEN, WRITTEN_BEFORE):
                self.known.put(memory_id, plan.new_digest, new)
                return

    def history(self, memory_id: str, query: HistoryQuery) -> Steps[Command, HistoryPage]:
        """One page of the history of ``memory_id`` (``query`` validated)."""
        memory_id = validate_memory_id(memory_id)
        return (yield from _recorded(memory_id, self._history(memory_id, query)))

    def _history(self, memory_id: str, query: HistoryQuery) -> Steps[Command, HistoryPage]:
        memory_key = self.planner.key_of(memory_id)
        args = history_read_args(query)
        read = Script(HISTORY.source, HISTORY.sha, (history_key(memory_key),), args, Operation.READ, memory_id)
        records = history_records(Operation.READ, memory_id, (yield read))
        # Only a history not found where this store keeps it may still be where an earlier one kept it.
        if not records and (yield _adoption(memory_key, Operation.READ, memory_id)) == 1:
            records = history_records(Operation.READ, memory_id, (yield read))
        return history_page(memory_id, records, query)

    def trim(self, memory_id: str, args: tuple[bytes, ...]) -> Steps[Command, int]:
        """Trim the history of ``memory_id`` (``args`` from :func:`chatmemory.stores.redis.plan.trim_args`)."""
        memory_id = validate_memory_id(memory_id)
        return (yield from _recorded(memory_id, self._trim(memory_id, args)))

    def _trim(self, memory_id: str, args: tuple[bytes, ...]) -> Steps[Command, int]:
        memory_key = self.planner.key_of(memory_id)
        yield _adoption(memory_key, Operation.WRITE, memory_id)
        reply = yield Script(TRIM.source, TRIM.sha, (history_key(memory_key),), args, Operation.WRITE, memory_id)
        if isinstance(reply, int) and not isinstance(reply, bool) and reply >= 0:
            return reply
        raise StoreError(Operation.WRITE, memory_id, f"the trim script replied {reply!r}")

    def trim_all(self, args: tuple[bytes, ...]) -> Steps[Command, int]:
        """Trim the history of every memory under the prefix, this store's and earlier stores' alike."""
        prefix = self.planner.prefix
        keys: set[bytes] = yield Scan(any_history_pattern(prefix), "list", Operation.LIST)
        owners = {
            memory_id_of_history_key(each, prefix) or memory_id_of_legacy_history_key(each, prefix) for each in keys
        }
        removed = 0
        for owner in owners:
            if owner is not None:
                removed += yield from self.trim(owner, args)
        return removed


def _recorded(memory_id: str, step: Steps[Command, _T]) -> Steps[Command, _T]:
    """Run ``step`` of a store with history, a key of another type (``WRONGTYPE``) read as a damaged memory."""
    try:
        return (yield from step)
    except ReplyError as exc:
        if exc.wrong_type:
            raise CorruptedMemoryError(memory_id, f"a key of the memory is of another type ({exc.detail})") from None
        raise


def _adoption(memory_key: bytes, operation: str, memory_id: str) -> Script:
    """The rename of the history of the memory at ``memory_key`` from where earlier stores kept it, if there."""
    keys = (history_key(memory_key), legacy_history_key(memory_key))
    return Script(ADOPT_HISTORY_SCRIPT, ADOPT_HISTORY_SCRIPT_SHA, keys, (), operation, memory_id)
