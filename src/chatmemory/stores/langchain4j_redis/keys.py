"""Where a LangChain4j-layout memory lives: the key Java reads, and chatmemory's own keys beside it.

The memory key is ``key_prefix + memory id``, LangChain4j's own (:func:`key`). Beside it, in its Redis Cluster slot,
chatmemory keeps keys Java never reads: the history (:func:`history_key`), the ids of the latest writes
(:func:`write_ids_key`) and, while a writer holds it, the lease lock of ``modify`` (:func:`lock_key`).
Each is the memory key, a ``0xFF`` byte and a name, plus, on a key without a hash tag, two bytes that
bring it back to the memory key's slot. No UTF-8 memory id holds ``0xFF``, so none of these keys is a
memory's. :func:`legacy_history_key` is where earlier stores kept the history; a store adopts it when it
next writes, reads or trims that history. Why each key cannot collide, and how listing skips them:
*Layout* in ``docs/store-langchain4j.md``. Pure: no driver, no I/O.
"""

from __future__ import annotations

import binascii
import functools

from chatmemory.core.store import validate_memory_id

__all__ = [
    "HISTORY_MARK",
    "LEGACY_HISTORY_SUFFIX",
    "LOCK_MARK",
    "WRITE_IDS_MARK",
    "any_history_pattern",
    "glob_literal",
    "history_key",
    "history_pattern",
    "key",
    "legacy_history_key",
    "lock_key",
    "memory_id_of",
    "memory_id_of_history_key",
    "memory_id_of_legacy_history_key",
    "write_ids_key",
]

HISTORY_MARK = b"\xffchatmemory-history"
"""What follows the memory key in its history key (then, for keys without a hash tag, slot bytes)."""
WRITE_IDS_MARK = b"\xffchatmemory-writes"
"""What follows the memory key in the key of its latest write ids (then, maybe, slot bytes)."""
LOCK_MARK = b"\xffchatmemory-lock"
"""What follows the memory key in the key of its ``modify`` lease lock (then, maybe, slot bytes)."""
LEGACY_HISTORY_SUFFIX = b":chatmemory-history"
"""What followed the memory key in the history key of stores before :data:`HISTORY_MARK`."""

_SLOTS = 16384
_CLOSE = ord("}")
_MARK = 0xFF


def key(prefix: bytes, memory_id: str) -> bytes:
    """The key of a memory: the prefix, then the id, as LangChain4j's stores build it."""
    return prefix + memory_id.encode("utf-8")


def memory_id_of(found: bytes, prefix: bytes) -> str | None:
    """The memory id of a key found under ``prefix``, or ``None`` if the rest is no valid id."""
    try:
        return validate_memory_id(found[len(prefix) :].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, TypeError):
        return None


def glob_literal(text: bytes) -> bytes:
    """``text`` with Redis glob characters escaped, so a key prefix matches only itself in ``SCAN MATCH``."""
    return bytes(b for char in text for b in ((92, char) if char in b"*?[]\\" else (char,)))


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


def _in_slot_of(memory_key: bytes, name: bytes) -> bytes:
    """``memory_key + name``, then bytes bringing it back to ``memory_key``'s slot if it left it.

    A memory key with a hash tag keeps it (``name`` holds no brace). Without one, the slot is the CRC of the
    whole key, so two bytes are appended that give the CRC of a key in the same slot (CRC16 is linear: two
    appended bytes reach any value); bytes holding ``}`` are avoided, so no hash tag is formed.
    """
    base = memory_key + name
    target = _slot(memory_key)
    if _slot(base) == target:
        return base
    filler = b""
    while True:
        state = binascii.crc_hqx(base + filler, 0)
        for crc in range(target, 65536, _SLOTS):
            tail = (state ^ _two_bytes_giving(crc)).to_bytes(2, "big")
            if _CLOSE not in tail:
                return base + filler + tail
        filler += b":"


@functools.lru_cache(maxsize=4096)
def history_key(memory_key: bytes) -> bytes:
    """The key of the history of the memory at ``memory_key``: in its hash slot, never any memory's key."""
    return _in_slot_of(memory_key, HISTORY_MARK)


@functools.lru_cache(maxsize=4096)
def write_ids_key(memory_key: bytes) -> bytes:
    """The key of the latest write ids of the memory at ``memory_key``: in its hash slot, never a memory's key."""
    return _in_slot_of(memory_key, WRITE_IDS_MARK)


@functools.lru_cache(maxsize=4096)
def lock_key(memory_key: bytes) -> bytes:
    """The key of the lease lock of the memory at ``memory_key``: in its hash slot, never a memory's key."""
    return _in_slot_of(memory_key, LOCK_MARK)


@functools.lru_cache(maxsize=4096)
def legacy_history_key(memory_key: bytes) -> bytes:
    """Where stores before :data:`HISTORY_MARK` kept the history of the memory at ``memory_key``."""
    return _in_slot_of(memory_key, LEGACY_HISTORY_SUFFIX)


def history_pattern(prefix: bytes) -> bytes:
    """A SCAN MATCH pattern for the history keys of the memories under ``prefix``."""
    return glob_literal(prefix) + b"*" + glob_literal(HISTORY_MARK) + b"*"


def any_history_pattern(prefix: bytes) -> bytes:
    """A SCAN MATCH pattern for the history keys under ``prefix``, this store's and earlier stores' alike."""
    return glob_literal(prefix) + b"*chatmemory-history*"


def _memory_id(raw: bytes) -> str | None:
    try:
        return validate_memory_id(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None


def memory_id_of_history_key(found: bytes, prefix: bytes) -> str | None:
    """The memory id whose history key is ``found``, or ``None`` for a key that is no such history key."""
    if not found.startswith(prefix):
        return None
    end = found.find(_MARK, len(prefix))  # the first 0xFF ends the memory key: no UTF-8 holds one
    if end <= len(prefix) or not found.startswith(HISTORY_MARK, end):
        return None
    memory_id = _memory_id(found[len(prefix) : end])
    return memory_id if memory_id is not None and history_key(key(prefix, memory_id)) == found else None


def memory_id_of_legacy_history_key(found: bytes, prefix: bytes) -> str | None:
    """The memory id whose legacy history key is ``found``, or ``None`` for a key that is no such key."""
    if not found.startswith(prefix):
        return None
    end = found.rfind(LEGACY_HISTORY_SUFFIX)
    if end <= len(prefix):
        return None
    memory_id = _memory_id(found[len(prefix) : end])
    return memory_id if memory_id is not None and legacy_history_key(key(prefix, memory_id)) == found else None
