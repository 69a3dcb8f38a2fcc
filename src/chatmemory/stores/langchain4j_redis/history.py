"""History for the LangChain4j Redis layout, without a driver and without I/O.

LangChain4j reads one string per memory and nothing else, so the history lives in a second key Java never
reads: a list (the same entries, read and trimmed by the same scripts as the native Redis store's,
:mod:`chatmemory.stores.redis.history`) at :func:`~chatmemory.stores.langchain4j_redis.keys.history_key`,
in the memory key's hash slot so that one script can change both on Redis Cluster, and never the key of
any memory. A history an earlier store kept at the memory key followed by ``:chatmemory-history`` is
adopted on the memory's next write, history read or trim (:mod:`.keys`).

Every write of a store with history is a compare-and-set on the value it diffed against, so the history
records exactly what the write appends to the value it replaces, and a write that loses records nothing.
The operations are generators of :mod:`.commands` (:class:`HistorySteps`); the executors only send them.
"""

from __future__ import annotations

from collections.abc import Sequence

from chatmemory.core.errors import ConcurrentUpdateError, CorruptedMemoryError, StoreError
from chatmemory.core.history import HistoryPage, HistoryQuery, history_appends
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage
from chatmemory.serialization.native import dumps_message
from chatmemory.stores.base.operations import Operation
from chatmemory.stores.langchain4j_redis.commands import Get, Script, Sends
from chatmemory.stores.langchain4j_redis.keys import (
    history_key,
    history_pattern,
    legacy_history_key,
    memory_id_of_history_key,
    write_ids_key,
)
from chatmemory.stores.langchain4j_redis.known_values import KnownValues
from chatmemory.stores.langchain4j_redis.plan import (
    WRITTEN,
    WRITTEN_BEFORE,
    VersionBook,
    WriteIds,
    digest,
    key,
    script,
    written_version,
)
from chatmemory.stores.langchain4j_redis.plan import WritePlan as ValueWrite
from chatmemory.stores.langchain4j_redis.value import decode, encode
from chatmemory.stores.redis.outcomes import history_page, history_records
from chatmemory.stores.redis.plan import history_read_args
from chatmemory.stores.redis.scripts import HISTORY, TRIM

__all__ = [
    "ADOPT_HISTORY_SCRIPT",
    "ADOPT_HISTORY_SCRIPT_SHA",
    "WRITE_HISTORY_SCRIPT",
    "WRITE_HISTORY_SCRIPT_SHA",
    "Get",
    "HistorySteps",
    "Script",
    "history_key",
    "history_pattern",
    "memory_id_of_history_key",
]

WRITE_HISTORY_SCRIPT, WRITE_HISTORY_SCRIPT_SHA = script("write_history")
"""The compare-and-set of a memory's value that also appends to its history."""
ADOPT_HISTORY_SCRIPT, ADOPT_HISTORY_SCRIPT_SHA = script("adopt_history")
"""The rename of a history kept where earlier stores kept it, to where this store keeps it."""


class HistorySteps:
    """The operations of a LangChain4j store with history, as generators of :mod:`.commands`.

    Args:
        book: the store's version book.
        known: the store's known values.
        write_ids: the store's write ids.
        prefix: the key prefix, encoded.
        ttl_ms: the value's expiry in ms (``0``: none).
        history_ttl_ms: the history's expiry in ms, ``None`` for the value's.
    """

    def __init__(
        self,
        book: VersionBook,
        known: KnownValues,
        write_ids: WriteIds,
        prefix: bytes,
        ttl_ms: int,
        history_ttl_ms: int | None,
    ) -> None:
        self.book = book
        self.known = known
        self.write_ids = write_ids
        self.prefix = prefix
        self.ttl_ms = ttl_ms
        self._history_ttl_arg = b"" if history_ttl_ms is None else b"%d" % history_ttl_ms

    def _write(
        self,
        memory_id: str,
        expected: bytes,
        old: Sequence[ChatMessage],
        new: list[ChatMessage],
        also_recorded: Sequence[ChatMessage] = (),
    ) -> tuple[ValueWrite, Script]:
        value = encode(new)
        memory_key = key(self.prefix, memory_id)
        plan = ValueWrite(memory_key, expected, value, digest(value), self.ttl_ms, self.write_ids.next())
        records = [dumps_message(message) for message in (*also_recorded, *history_appends(old, new))]
        args = (*plan.script_args(), self._history_ttl_arg, *records)
        keys = (memory_key, history_key(memory_key), write_ids_key(memory_key), legacy_history_key(memory_key))
        return plan, Script(WRITE_HISTORY_SCRIPT, WRITE_HISTORY_SCRIPT_SHA, keys, args)

    def save(
        self,
        memory_id: str,
        new: list[ChatMessage],
        expected_version: int,
        also_recorded: Sequence[ChatMessage] = (),
    ) -> Sends[int]:
        """Write ``new`` if the key still holds the value read at ``expected_version``; record what it appends.

        ``also_recorded`` goes to the history first (messages evicted within the add that wrote them).

        Raises:
            ConcurrentUpdateError: the version is not current, or the key holds another value.
            CorruptedMemoryError: the value it replaces does not decode.
        """
        memory_id = validate_memory_id(memory_id)
        expected = self.book.expected_digest(memory_id, expected_version)
        if expected is None:
            raise ConcurrentUpdateError(memory_id, expected_version)
        old = () if not expected else self.known.get(memory_id, expected)
        if old is None:
            value = yield Get(key(self.prefix, memory_id))
            if not isinstance(value, bytes) or digest(value) != expected:
                raise ConcurrentUpdateError(memory_id, expected_version)
            old = tuple(decode(value, memory_id))
        plan, script = self._write(memory_id, expected, old, new, also_recorded)
        version = written_version(self.book, memory_id, plan, (yield script), expected_version)
        self.known.put(memory_id, plan.new_digest, new)
        return version

    def update(self, memory_id: str, new: list[ChatMessage]) -> Sends[None]:
        """Replace the value whatever it holds, recording what ``new`` appends to it (retried on a race)."""
        memory_id = validate_memory_id(memory_id)
        self.book.forget(memory_id)
        while True:
            value = yield Get(key(self.prefix, memory_id))
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
            plan, script = self._write(memory_id, value_digest, old, new)
            if (yield script) in (WRITTEN, WRITTEN_BEFORE):
                self.known.put(memory_id, plan.new_digest, new)
                return

    def history(self, memory_id: str, query: HistoryQuery) -> Sends[HistoryPage]:
        """One page of the history of ``memory_id`` (``query`` validated)."""
        memory_id = validate_memory_id(memory_id)
        memory_key = key(self.prefix, memory_id)
        read = Script(HISTORY.source, HISTORY.sha, (history_key(memory_key),), history_read_args(query))
        records = history_records(Operation.READ, memory_id, (yield read))
        # Only a history not found where this store keeps it may still be where an earlier one kept it.
        if not records and (yield _adoption(memory_key)) == 1:
            records = history_records(Operation.READ, memory_id, (yield read))
        return history_page(memory_id, records, query)

    def trim(self, memory_id: str, args: tuple[bytes, ...]) -> Sends[int]:
        """Trim the history of ``memory_id`` (``args`` from :func:`chatmemory.stores.redis.history.trim_args`)."""
        memory_id = validate_memory_id(memory_id)
        memory_key = key(self.prefix, memory_id)
        yield _adoption(memory_key)
        reply = yield Script(TRIM.source, TRIM.sha, (history_key(memory_key),), args)
        if isinstance(reply, int) and not isinstance(reply, bool) and reply >= 0:
            return reply
        raise StoreError(Operation.WRITE, memory_id, f"the trim script replied {reply!r}")


def _adoption(memory_key: bytes) -> Script:
    """The rename of the history of the memory at ``memory_key`` from where earlier stores kept it, if there."""
    keys = (history_key(memory_key), legacy_history_key(memory_key))
    return Script(ADOPT_HISTORY_SCRIPT, ADOPT_HISTORY_SCRIPT_SHA, keys, ())
