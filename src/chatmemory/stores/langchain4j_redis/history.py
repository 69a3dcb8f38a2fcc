"""History for the LangChain4j Redis layout, without a driver and without I/O.

LangChain4j reads one string per memory and nothing else, so the history lives in a second key that Java
never reads: a list (the same entries, read and trimmed by the same scripts as the native Redis store's,
:mod:`chatmemory.stores.redis.history`) at the memory key followed by :data:`HISTORY_SUFFIX`, made to hash
to the memory key's slot so that one script can change both on Redis Cluster (:func:`history_key`).

Every write of a store with history is a compare-and-set on the value it diffed against, so the history
records exactly what the sequence diff appends to the value it replaces, and a write that loses records
nothing. The operations are generators of :mod:`.commands` (see :class:`HistorySteps`); the sync and
asyncio stores only send the commands and hand the replies back.
"""

from __future__ import annotations

import binascii
import functools
import hashlib
from collections.abc import Sequence
from importlib import resources

from chatmemory.core.errors import ConcurrentUpdateError, CorruptedMemoryError, StoreError
from chatmemory.core.history import HistoryPage, HistoryQuery, history_appends
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage
from chatmemory.serialization.native import dumps_message
from chatmemory.stores.base.operations import Operation
from chatmemory.stores.langchain4j_redis.commands import Get, Script, Sends
from chatmemory.stores.langchain4j_redis.known_values import KnownValues
from chatmemory.stores.langchain4j_redis.plan import VersionBook, digest, glob_literal, key, written_version
from chatmemory.stores.langchain4j_redis.plan import WritePlan as ValueWrite
from chatmemory.stores.langchain4j_redis.value import decode, encode
from chatmemory.stores.redis.history import history_page, history_read_args, history_records
from chatmemory.stores.redis.scripts import HISTORY, TRIM

__all__ = [
    "HISTORY_SUFFIX",
    "WRITE_HISTORY_SCRIPT",
    "WRITE_HISTORY_SCRIPT_SHA",
    "Get",
    "HistorySteps",
    "Script",
    "history_key",
    "history_pattern",
    "memory_id_of_history_key",
]

WRITE_HISTORY_SCRIPT = (
    resources.files("chatmemory.stores.langchain4j_redis") / "scripts" / "write_history.lua"
).read_text("utf-8")
"""The compare-and-set of a memory's value that also appends to its history."""
WRITE_HISTORY_SCRIPT_SHA = hashlib.sha1(WRITE_HISTORY_SCRIPT.encode("utf-8"), usedforsecurity=False).hexdigest()

HISTORY_SUFFIX = b":chatmemory-history"
"""What follows the memory key in its history key (then, for keys without a hash tag, two slot bytes)."""

_SLOTS = 16384
_CLOSE = ord("}")


def _slot(redis_key: bytes) -> int:
    """The Redis Cluster slot of ``redis_key`` (CRC16/XMODEM of the key, or of its hash tag)."""
    start = redis_key.find(b"{")
    if start >= 0:
        end = redis_key.find(b"}", start + 1)
        if end > start + 1:
            redis_key = redis_key[start + 1 : end]
    return binascii.crc_hqx(redis_key, 0) % _SLOTS


@functools.cache
def _two_byte_basis() -> dict[int, tuple[int, int]]:
    """Pivots to invert ``T(v) = crc16(v as two bytes)``, by the highest bit of ``T(v)``: ``{bit: (T(v), v)}``.

    CRC16/XMODEM has no initial value or final xor, so ``T`` is linear over GF(2), and appending two bytes
    ``x`` to a CRC state ``s`` gives ``T(s ^ x)``: a bijection, so any CRC is reachable from any state.
    """
    basis: dict[int, tuple[int, int]] = {}
    for bit in range(16):
        value, source = binascii.crc_hqx((1 << bit).to_bytes(2, "big"), 0), 1 << bit
        while value:
            high = value.bit_length() - 1
            if high not in basis:
                basis[high] = (value, source)
                break
            value, source = value ^ basis[high][0], source ^ basis[high][1]
    return basis


def _two_bytes_giving(crc: int) -> int:
    """The ``v`` with ``crc16(v as two bytes) == crc``."""
    basis = _two_byte_basis()
    source = 0
    while crc:
        value, contribution = basis[crc.bit_length() - 1]
        crc, source = crc ^ value, source ^ contribution
    return source


def history_key(memory_key: bytes) -> bytes:
    """The key of the history of the memory at ``memory_key``: in the same hash slot, never read by Java.

    A memory key with a hash tag keeps it: ``memory_key + HISTORY_SUFFIX``. Without one, the slot is the
    CRC of the whole key, so two bytes are appended that bring the CRC back to the same slot (CRC16 is
    linear: two appended bytes reach any value); bytes holding ``}`` are avoided, so no hash tag is formed.
    """
    base = memory_key + HISTORY_SUFFIX
    if _slot(memory_key) == _slot(base):
        return base
    target = _slot(memory_key)
    filler = b""
    while True:
        state = binascii.crc_hqx(base + filler, 0)
        for crc in range(target, 65536, _SLOTS):
            tail = (state ^ _two_bytes_giving(crc)).to_bytes(2, "big")
            if _CLOSE not in tail:
                return base + filler + tail
        filler += b":"


def history_pattern(prefix: bytes) -> bytes:
    """A SCAN MATCH pattern for the history keys of the memories under ``prefix``."""
    return glob_literal(prefix) + b"*" + glob_literal(HISTORY_SUFFIX) + b"*"


def memory_id_of_history_key(found: bytes, prefix: bytes) -> str | None:
    """The memory id whose history key is ``found``, or ``None`` for a key that is no such history key."""
    if not found.startswith(prefix):
        return None
    end = found.rfind(HISTORY_SUFFIX)
    if end < len(prefix):
        return None
    try:
        memory_id = validate_memory_id(found[len(prefix) : end].decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return memory_id if history_key(key(prefix, memory_id)) == found else None


class HistorySteps:
    """The operations of a LangChain4j store with history, as generators of :mod:`.commands`.

    Args:
        book: the store's version book.
        known: the store's known values.
        prefix: the key prefix, encoded.
        ttl_ms: the value's expiry in ms (``0``: none).
        history_ttl_ms: the history's expiry in ms, ``None`` for the value's.
    """

    def __init__(
        self, book: VersionBook, known: KnownValues, prefix: bytes, ttl_ms: int, history_ttl_ms: int | None
    ) -> None:
        self.book = book
        self.known = known
        self.prefix = prefix
        self.ttl_ms = ttl_ms
        self._history_ttl_arg = b"" if history_ttl_ms is None else b"%d" % history_ttl_ms

    def _write(
        self, memory_id: str, expected: bytes, old: Sequence[ChatMessage], new: list[ChatMessage]
    ) -> tuple[ValueWrite, Script]:
        value = encode(new)
        plan = ValueWrite(key(self.prefix, memory_id), expected, value, digest(value), self.ttl_ms)
        records = [dumps_message(message) for message in history_appends(old, new)]
        args = (*plan.script_args(), self._history_ttl_arg, *records)
        keys = (plan.key, history_key(plan.key))
        return plan, Script(WRITE_HISTORY_SCRIPT, WRITE_HISTORY_SCRIPT_SHA, keys, args)

    def save(self, memory_id: str, new: list[ChatMessage], expected_version: int) -> Sends[int]:
        """Write ``new`` if the key still holds the value read at ``expected_version``; record what it appends.

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
        plan, script = self._write(memory_id, expected, old, new)
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
            if (yield script) == 1:
                self.known.put(memory_id, plan.new_digest, new)
                return

    def history(self, memory_id: str, query: HistoryQuery) -> Sends[HistoryPage]:
        """One page of the history of ``memory_id`` (``query`` validated)."""
        memory_id = validate_memory_id(memory_id)
        script = Script(
            HISTORY.source, HISTORY.sha, (history_key(key(self.prefix, memory_id)),), history_read_args(query)
        )
        records = history_records(Operation.READ, memory_id, (yield script))
        return history_page(memory_id, records, query)

    def trim(self, memory_id: str, args: tuple[bytes, ...]) -> Sends[int]:
        """Trim the history of ``memory_id`` (``args`` from :func:`chatmemory.stores.redis.history.trim_args`)."""
        memory_id = validate_memory_id(memory_id)
        reply = yield Script(TRIM.source, TRIM.sha, (history_key(key(self.prefix, memory_id)),), args)
        if isinstance(reply, int) and not isinstance(reply, bool) and reply >= 0:
            return reply
        raise StoreError(Operation.WRITE, memory_id, f"the trim script replied {reply!r}")
