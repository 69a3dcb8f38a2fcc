"""What the Redis store decides, without I/O: script calls from state, outcomes from script replies.

Given what a store remembers of a memory (a :class:`~.outcomes.CachedMemory`, or nothing), the new list
and the expected version, :class:`Planner` returns a typed plan (which script to run, on which keys, with
which arguments); given the script's reply, a typed outcome (:mod:`.outcomes`). Both executors send the
same plans; the sequence of plans an operation needs is in :mod:`.operations`. A write is a *diff* when
it starts from the cached list (only the new messages go over the wire), applied only if the memory is
still at the cached version and incarnation; every other write sends the whole list. With history, every
write is conditional on the window it was diffed against (:meth:`Planner.recorded`). Also here: the
arguments of the history, restore, trim, times, expire and batch-read scripts. What a plan carries:
*Redis* in ``docs/stores.md``.
"""

from __future__ import annotations

import bisect
import datetime
import itertools
import secrets
from collections.abc import Sequence
from enum import Enum
from typing import NamedTuple

from chatmemory import telemetry
from chatmemory.core.errors import Operation
from chatmemory.core.history import HistoryEntry, HistoryQuery, UnrestorableHistoryError, trim_cutoff
from chatmemory.core.messages import ChatMessage, require_message
from chatmemory.core.window import diff_messages, window_shift
from chatmemory.serialization.records import PLAIN, RecordCodec
from chatmemory.stores.redis.commands import ScriptCall
from chatmemory.stores.redis.keys import KeySpace
from chatmemory.stores.redis.outcomes import (
    CachedMemory,
    HistoryRecord,
    ReadOutcome,
    WriteOutcome,
    Written,
    history_records,
    read_outcome,
    restored_count,
    unexpected,
    write_outcome,
)
from chatmemory.stores.redis.scripts import EXPIRE, HISTORY, READ, RESTORE, STORED, TIMES, TRIM, WRITE

__all__ = [
    "Planner",
    "ReadPlan",
    "WriteKind",
    "WritePlan",
    "encode",
    "expire_at_call",
    "history_read_args",
    "restore_args",
    "stored_call",
    "times_call",
    "trim_args",
]

_MICROSECOND = datetime.timedelta(microseconds=1)
_MILLISECOND = datetime.timedelta(milliseconds=1)
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MAX_SEQUENCE = 2**53
"""History sequences stay below this (exact in the scripts' doubles); a larger ``after`` reads as this."""


def encode(message: ChatMessage, memory_id: str = "", codec: RecordCodec = PLAIN) -> bytes:
    """The stored record of ``message`` in ``memory_id``, made by ``codec``.

    Raises:
        TypeError: ``message`` is not a chat message.
    """
    require_message(message)
    return codec.dumps(message, memory_id)


class ReadPlan(NamedTuple):
    """A read, and the cached state it may confirm."""

    call: ScriptCall
    cached: CachedMemory | None


class WriteKind(Enum):
    """How a write sends the list."""

    DIFF = "d"
    """Only what changed since the cached list."""
    FULL = "f"
    """The whole list."""


class WritePlan(NamedTuple):
    """A write.

    Attributes:
        call: the script run.
        kind: diff or full.
        expected_version: the version the memory must be at (``0``: must not exist), ``None`` for an
            unconditional write.
        messages: what the written list decodes to (kept as the cached state once written); ``None`` for
            raw records, which are not cached.
        incarnation: the incarnation a diff applies to (``None`` for a full write).
    """

    call: ScriptCall
    kind: WriteKind
    expected_version: int | None
    messages: tuple[ChatMessage, ...] | None
    incarnation: bytes | None = None


class Planner:
    """Plans the reads and writes of one store.

    Args:
        key_space: where memories live.
        ttl: seconds a memory lives after its last write (``None``: forever), already validated.
        refresh_ttl_on_read: reads slide the expiry too.
        history: keep a history of every message written (the history key is sent with each write).
        history_ttl: seconds a history lives after the memory's last write, already validated
            (``None``: it expires with the window).
        codec: how message records are made and read (:data:`~chatmemory.serialization.records.PLAIN`,
            or a ``Keyring`` that seals them).
    """

    def __init__(
        self,
        key_space: KeySpace,
        ttl: float | None,
        refresh_ttl_on_read: bool,
        history: bool = False,
        history_ttl: float | None = None,
        codec: RecordCodec = PLAIN,
    ) -> None:
        self.key_space = key_space
        self.codec = codec
        ttl_ms = 0 if ttl is None else max(1, round(ttl * 1000))
        self._ttl_arg = b"%d" % ttl_ms
        self._read_ttl_arg = self._ttl_arg if refresh_ttl_on_read else b"0"
        self.keeps_history = history
        self._history_ttl_arg = b"" if history_ttl is None else b"%d" % max(1, round(history_ttl * 1000))
        # Reads and expire_at move the history with the window when it has no ttl of its own.
        self.history_follows_window = history and history_ttl is None
        self._read_history = self.history_follows_window and refresh_ttl_on_read
        # Write ids only need to be unique: a random per-store nonce and a counter, no syscall per write.
        self._nonce = secrets.token_hex(8).encode("ascii")
        self._counter = itertools.count()

    def write_id(self) -> bytes:
        """A new id, unique to one write (hex: no separator of the ``writes`` field can occur in it)."""
        return b"%b%x" % (self._nonce, next(self._counter))

    # ------------------------------------------------------------------------------------ reads

    def read(self, memory_id: str, cached: CachedMemory | None) -> ReadPlan:
        """Read ``memory_id``; with ``cached``, the server answers "unchanged" if it still holds it."""
        return ReadPlan(self.read_call(memory_id, cached), cached)

    def read_call(self, memory_id: str, cached: CachedMemory | None) -> ScriptCall:
        """The script call of :meth:`read` (what an operation that keeps ``cached`` at hand sends)."""
        if cached is None:
            keys, args = self.key_space.keys_of(memory_id), (self._read_ttl_arg, b"", b"")
        else:
            keys, args = cached.keys, (self._read_ttl_arg, cached.version_arg, cached.incarnation)
        return ScriptCall(
            READ, keys, args, Operation.READ, memory_id, keys.with_history if self._read_history else keys.window
        )

    @staticmethod
    def read_outcome(plan: ReadPlan, reply: object) -> ReadOutcome:
        """What the read script's ``reply`` means (see :func:`~.outcomes.read_outcome`).

        Raises:
            StoreError: the reply is not one the read script gives.
        """
        return read_outcome(plan.call, plan.cached, reply)

    # ----------------------------------------------------------------------------------- writes

    @staticmethod
    def known_stale(cached: CachedMemory | None, expected_version: int) -> bool:
        """Whether a save at ``expected_version`` must conflict because this store saw a later version.

        Versions only grow (or the memory is gone), so such a save is refused without being sent.
        """
        return cached is not None and 0 < expected_version < cached.version

    def save(
        self, memory_id: str, messages: tuple[ChatMessage, ...], expected_version: int, cached: CachedMemory | None
    ) -> WritePlan:
        """Write ``messages`` if the memory is at ``expected_version``.

        A diff from ``cached`` if it is at that version and the new list keeps some of it, else the whole list.
        """
        if cached is not None and expected_version != 0 and cached.version == expected_version:
            diff = self.diff(memory_id, cached, messages)
            if diff is not None:
                return diff
        return self.full(memory_id, messages, expected_version)

    def update(self, memory_id: str, messages: tuple[ChatMessage, ...], cached: CachedMemory | None) -> WritePlan:
        """Replace the list: a diff conditional on ``cached`` where one applies, else an unconditional write."""
        if cached is not None:
            diff = self.diff(memory_id, cached, messages)
            if diff is not None:
                return diff
        return self.full(memory_id, messages, None)

    def diff(
        self,
        memory_id: str,
        cached: CachedMemory,
        messages: tuple[ChatMessage, ...],
        also_recorded: tuple[ChatMessage, ...] = (),
    ) -> WritePlan | None:
        """``messages`` as a diff against ``cached`` (at its version), or ``None`` if nothing of it stays.

        ``also_recorded`` (a store with history): messages the history records before the appended ones,
        sent after the window's records.
        """
        shift = window_shift(cached.messages, messages)
        if shift is not None:
            span, kept = shift
            kept_in_span: tuple[int, ...] = ()
            appended = messages[kept:]
        else:
            change = diff_messages(cached.messages, messages)
            if change.is_rewrite:
                return None
            span = change.deleted_span
            # Positions after the span all stay where they are; only those inside it are put back.
            kept_in_span = change.kept[: bisect.bisect_left(change.kept, span)]
            appended = change.appended
        records = [encode(message, memory_id, self.codec) for message in appended]
        telemetry.note_write(appended=len(records), evicted=span - len(kept_in_span), bytes=sum(map(len, records)))
        if self.keeps_history:
            # The appended messages are the last records of the window: the history gets all of them.
            args = (
                cached.version_arg,
                self.write_id(),
                self._ttl_arg,
                b"d",
                self._history_ttl_arg,
                _recorded_arg(len(appended), also_recorded),
                cached.incarnation,
                b"%d" % span,
                b"%d" % len(kept_in_span),
                *[b"%d" % position for position in kept_in_span],
                *records,
                *[encode(message, memory_id, self.codec) for message in also_recorded],
            )
            call = ScriptCall(WRITE, cached.keys, args, Operation.WRITE, memory_id, cached.keys.with_history)
            return WritePlan(call, WriteKind.DIFF, cached.version, messages, cached.incarnation)
        args = (
            cached.version_arg,
            self.write_id(),
            self._ttl_arg,
            b"d",
            cached.incarnation,
            b"%d" % span,
            b"%d" % len(kept_in_span),
            *[b"%d" % position for position in kept_in_span],
            *records,
        )
        call = ScriptCall(WRITE, cached.keys, args, Operation.WRITE, memory_id, cached.keys.window)
        return WritePlan(call, WriteKind.DIFF, cached.version, messages, cached.incarnation)

    def recorded(
        self,
        memory_id: str,
        messages: tuple[ChatMessage, ...],
        expected_version: int,
        known: CachedMemory | None,
        also_recorded: tuple[ChatMessage, ...] = (),
    ) -> WritePlan:
        """A write of a store with history: conditional on the window the history appends are found from.

        Args:
            memory_id: the memory.
            messages: the new window.
            expected_version: the version the memory must be at (``0``: it must not exist).
            known: the window stored at ``expected_version``, or ``None`` when it is not known (no memory,
                or records that do not decode): then every message of the new window is recorded.
            also_recorded: messages recorded before those the write appends (evicted within their add).
        """
        if known is not None:
            diff = self.diff(memory_id, known, messages, also_recorded)
            if diff is not None:
                return diff
        return self.full(memory_id, messages, expected_version, also_recorded)

    def full(
        self,
        memory_id: str,
        messages: tuple[ChatMessage, ...],
        expected_version: int | None,
        also_recorded: tuple[ChatMessage, ...] = (),
    ) -> WritePlan:
        """Write ``messages`` whole, if the memory is at ``expected_version`` (``None``: whatever it holds).

        With history, every message of the list is recorded (what it replaces is not known here, or is
        rewritten whole), after ``also_recorded``.
        """
        records = [encode(message, memory_id, self.codec) for message in messages]
        extra = [encode(message, memory_id, self.codec) for message in also_recorded] if self.keeps_history else []
        return self._full(memory_id, records, expected_version, messages, len(records), extra)

    def raw(self, memory_id: str, records: Sequence[bytes]) -> WritePlan:
        """Replace the memory with ``records`` as they are (not cached: they are decoded only when read).

        Raw records are never recorded in a history (they may not decode); its expiry still slides.
        """
        return self._full(memory_id, [bytes(record) for record in records], None, None, 0)

    def _full(
        self,
        memory_id: str,
        records: list[bytes],
        expected_version: int | None,
        messages: tuple[ChatMessage, ...] | None,
        recorded: int,
        extra: Sequence[bytes] = (),
    ) -> WritePlan:
        telemetry.note_write(appended=len(records), evicted=None, bytes=sum(map(len, records)))
        expected = b"" if expected_version is None else b"%d" % expected_version
        keys = self.key_space.keys_of(memory_id)
        if self.keeps_history:
            counts = b"%d:%d" % (recorded, len(extra)) if extra else b"%d" % recorded
            args = (expected, self.write_id(), self._ttl_arg, b"f", self._history_ttl_arg, counts, *records, *extra)
            call = ScriptCall(WRITE, keys, args, Operation.WRITE, memory_id, keys.with_history)
        else:
            args = (expected, self.write_id(), self._ttl_arg, b"f", *records)
            call = ScriptCall(WRITE, keys, args, Operation.WRITE, memory_id, keys.window)
        return WritePlan(call, WriteKind.FULL, expected_version, messages)

    @staticmethod
    def write_outcome(plan: WritePlan, reply: object) -> WriteOutcome:
        """What the write script's ``reply`` means (see :func:`.outcomes.write_outcome`).

        Raises:
            StoreError: the reply is not one the write script gives.
        """
        return write_outcome(plan.call, plan.incarnation, reply)

    @staticmethod
    def cached_after(plan: WritePlan, outcome: Written) -> CachedMemory | None:
        """The state to cache after ``plan`` was written, if it is known."""
        if plan.messages is None or outcome.replayed or outcome.incarnation is None:
            return None
        return CachedMemory(
            outcome.version, outcome.incarnation, plan.messages, plan.call.keys, b"%d" % outcome.version
        )

    # ---------------------------------------------------------------------------------- history

    def history_read(self, memory_id: str, query: HistoryQuery) -> ScriptCall:
        """Read one page of the history of ``memory_id``: ``query.limit + 1`` entries, in the query's order."""
        keys = self.key_space.keys_of(memory_id)
        return ScriptCall(HISTORY, keys, history_read_args(query), Operation.READ, memory_id, (keys.history,))

    @staticmethod
    def history_records(call: ScriptCall, reply: object) -> list[HistoryRecord]:
        """The entries of the history script's ``reply``, in the order it gave them.

        Raises:
            StoreError: the reply is not a list of entries this store writes.
        """
        return history_records(call.operation, call.memory_id, reply)

    @staticmethod
    def trim_args(older_than: datetime.datetime | datetime.timedelta) -> tuple[bytes, ...]:
        """The trim script's arguments for ``older_than``: see :func:`trim_args`."""
        return trim_args(older_than)

    def trim(self, memory_id: str, args: tuple[bytes, ...]) -> ScriptCall:
        """Trim the history of ``memory_id`` with ``args`` from :meth:`trim_args`."""
        keys = self.key_space.keys_of(memory_id)
        return ScriptCall(TRIM, keys, args, Operation.WRITE, memory_id, (keys.history,))

    def restore(
        self, memory_id: str, entries: Sequence[HistoryEntry], window: Sequence[ChatMessage] | None
    ) -> ScriptCall:
        """Put ``entries`` back in the history of ``memory_id`` (and ``window``, where it has none).

        Raises:
            UnrestorableHistoryError: the sequences are not consecutive.
        """
        keys = self.key_space.keys_of(memory_id)
        records = None if window is None else [encode(message, memory_id, self.codec) for message in window]
        head = (self._ttl_arg, self._history_ttl_arg, self.write_id())
        return ScriptCall(
            RESTORE,
            keys,
            restore_args(memory_id, entries, records, head, self.codec),
            Operation.WRITE,
            memory_id,
            keys.with_history,
        )

    @staticmethod
    def restored(call: ScriptCall, reply: object) -> int:
        """How many entries the restore script's ``reply`` says it added.

        Raises:
            UnrestorableHistoryError: the entries would leave a gap beside those the history holds.
            StoreError: the reply is not a count.
        """
        return restored_count(call.operation, call.memory_id, reply)

    @staticmethod
    def trimmed(call: ScriptCall, reply: object) -> int:
        """How many entries the trim script's ``reply`` says it removed.

        Raises:
            StoreError: the reply is not a count.
        """
        if isinstance(reply, int) and not isinstance(reply, bool) and reply >= 0:
            return reply
        raise unexpected(call, reply)


def _recorded_arg(recorded: int, also_recorded: Sequence[ChatMessage]) -> bytes:
    """The write script's count of recorded records: ``n``, or ``n:e`` with ``e`` history-only ones after them."""
    return b"%d:%d" % (recorded, len(also_recorded)) if also_recorded else b"%d" % recorded


# ------------------------------------------------------------------------ the other scripts' arguments


def history_read_args(query: HistoryQuery) -> tuple[bytes, ...]:
    """The history script's arguments for ``query``: ``limit + 1`` entries, in the query's order."""
    after = b"" if query.after is None else b"%d" % min(query.after, _MAX_SEQUENCE)
    return (after, b"%d" % (query.limit + 1), b"1" if query.reverse else b"0")


def restore_args(
    memory_id: str,
    entries: Sequence[HistoryEntry],
    window: Sequence[bytes] | None,
    head: tuple[bytes, bytes, bytes],
    codec: RecordCodec = PLAIN,
) -> tuple[bytes, ...]:
    """The restore script's arguments (``head``: ttl, history ttl and write id; ``window``: its records).

    ``entries`` are checked already (:func:`chatmemory.core.history.checked_restore`).

    Raises:
        UnrestorableHistoryError: the sequences are not consecutive, or reach 2**53 (a Redis history numbers
            its entries one after another: a page is read by position).
        SerializationError: a message does not encode.
    """
    for before, entry in itertools.pairwise(entries):
        if entry.sequence != before.sequence + 1:
            raise UnrestorableHistoryError(
                memory_id,
                f"Redis keeps consecutive sequence numbers, and entry {entry.sequence} follows {before.sequence} "
                "(a history from a store that numbers with gaps can be restored into one that allows them, "
                "e.g. the in-memory store)",
            )
    if entries and entries[-1].sequence >= _MAX_SEQUENCE:
        raise UnrestorableHistoryError(memory_id, f"sequence {entries[-1].sequence} is beyond 2**53")
    args = [*head, b"%d" % len(entries), b"" if window is None else b"%d" % len(window)]
    for entry in entries:
        args += [
            b"%d" % entry.sequence,
            b"%d" % ((entry.written_at - _EPOCH) // _MILLISECOND),
            codec.dumps(entry.message, memory_id),
        ]
    return (*args, *(window or ()))


def trim_args(older_than: datetime.datetime | datetime.timedelta) -> tuple[bytes, ...]:
    """The trim script's arguments for ``older_than`` (a ``timedelta`` is counted on the server's clock).

    Raises:
        TypeError: ``older_than`` is neither an aware datetime nor a timedelta.
        ValueError: a naive datetime or a negative timedelta.
    """
    if isinstance(older_than, datetime.timedelta):
        if older_than < datetime.timedelta(0):
            trim_cutoff(older_than, _EPOCH)  # raises the shared error
        return (b"r", b"%d" % (older_than // _MICROSECOND))
    cutoff = trim_cutoff(older_than, _EPOCH)
    return (b"a", b"%d" % max(0, (cutoff - _EPOCH) // _MICROSECOND))


def times_call(key_space: KeySpace, memory_id: str) -> ScriptCall:
    """The script run that reads ``memory_id``'s last write time and expiry (``memory_id`` validated here)."""
    keys = key_space.keys_of(memory_id)
    return ScriptCall(TIMES, keys, (), Operation.READ, memory_id, keys.window)


def expire_at_call(
    key_space: KeySpace, memory_id: str, when: datetime.datetime | None, with_history: bool = False
) -> ScriptCall:
    """The script run that makes ``memory_id`` expire at ``when`` (``None``: never).

    A time before 1970 is taken as 1970: either way the memory expires at once. With ``with_history``
    (a store whose history expires with the window) the history gets the same expiry.

    Raises:
        ValueError: ``when`` is not an aware datetime.
    """
    if when is None:
        at = b""
    elif isinstance(when, datetime.datetime) and when.utcoffset() is not None:
        at = b"%d" % max(0, (when - _EPOCH) // _MILLISECOND)
    else:
        raise ValueError(f"expire_at takes an aware datetime (e.g. in UTC) or None, not {when!r}")
    keys = key_space.keys_of(memory_id)
    return ScriptCall(
        EXPIRE, keys, (at,), Operation.WRITE, memory_id, keys.with_history if with_history else keys.window
    )


def stored_call(key_space: KeySpace, memory_id: str) -> ScriptCall:
    """The run of ``stored.lua`` that reads ``memory_id`` for a batch (``memory_id`` validated here).

    It reads what the read script (without sliding the expiry) and the times script would, in one run.
    """
    keys = key_space.keys_of(memory_id)
    return ScriptCall(STORED, keys, (), Operation.READ, memory_id, keys.window)
