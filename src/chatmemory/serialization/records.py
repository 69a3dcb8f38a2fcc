"""The record codec: how a store turns one message into the bytes it keeps, and back.

Every store encodes and decodes message records through one :class:`RecordCodec`: :data:`PLAIN` writes
:func:`~chatmemory.serialization.native.dumps_message` JSON as it is; a
:class:`chatmemory.encryption.Keyring` seals it. The memory id is passed both ways, so a codec can bind
a record to the memory it belongs to.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypeVar

from chatmemory.core.errors import CorruptedMemoryError, EncryptionKeyError
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Resealed
from chatmemory.serialization.native import dumps_message, loads_message

__all__ = [
    "PLAIN",
    "SEALED_MAGIC",
    "RecordCodec",
    "Resealed",
    "codec_of",
    "codec_of_store",
    "require_keyring",
    "reseal_plan",
]

SEALED_MAGIC = b"\xa7cm1"
"""The first bytes of a sealed record (a plain record is JSON and starts with ``{``)."""


class RecordCodec:
    """Plain records: the native JSON of each message, unsealed."""

    sealed = False

    def dumps(self, message: ChatMessage, memory_id: str, position: int | None = None) -> bytes:
        """The stored record of ``message`` in ``memory_id`` (at ``position``, where the layout has one)."""
        return dumps_message(message)

    def loads(
        self, record: bytes | bytearray | memoryview | str, memory_id: str, position: int | None = None
    ) -> ChatMessage:
        """The message of ``record``, read from ``memory_id`` (at ``position``, as it was written).

        Raises:
            CorruptedMemoryError: the record is not a valid payload.
            UnsupportedFormatVersionError: the record was written by a newer format version.
        """
        try:
            return loads_message(record, memory_id=memory_id)
        except CorruptedMemoryError:
            if isinstance(record, str) or bytes(record[:4]) != SEALED_MAGIC:
                raise
            key_id = bytes(record[5 : 5 + record[4]]).decode("utf-8", "replace") if len(record) > 4 else "?"
            raise EncryptionKeyError(memory_id, key_id) from None

    def is_current(self, record: bytes | bytearray | memoryview | str, memory_id: str) -> bool:
        """Whether ``record`` is as this codec writes it now (a plain codec has nothing to re-seal)."""
        return True

    def __repr__(self) -> str:
        return "RecordCodec(plain)"


PLAIN = RecordCodec()
"""The codec of every store built without ``encryption=``."""


def codec_of(encryption: RecordCodec | None) -> RecordCodec:
    """The codec a store built with ``encryption`` uses.

    Raises:
        TypeError: ``encryption`` is neither ``None`` nor a record codec (a ``Keyring``).
    """
    if encryption is None:
        return PLAIN
    if not isinstance(encryption, RecordCodec):
        raise TypeError(
            f"encryption must be a chatmemory.encryption.Keyring (or None), not {type(encryption).__name__}"
        )
    return encryption


_K = TypeVar("_K")


def reseal_plan(
    codec: RecordCodec, memory_id: str, records: Iterable[tuple[_K, bytes | str]], *, positioned: bool = False
) -> tuple[list[tuple[_K, bytes | str, bytes]], int]:
    """The ``(key, old, new)`` of each of ``records`` to re-seal, and how many are current already.

    ``positioned``: each key is the position the record is bound to (a SQL row's sequence number).

    Every record not under the primary key is opened first, so nothing is written for a memory with a
    record no key of the ring opens.

    Raises:
        EncryptionKeyError: a record is sealed under a key the ring lacks.
        CorruptedMemoryError: a record was altered, or sealed for another memory.
        PlaintextRecordError: a plain record, and the ring does not read plain data.
    """
    changes: list[tuple[_K, bytes | str, bytes]] = []
    current = 0
    for key, record in records:
        if codec.is_current(record, memory_id):
            current += 1
        else:
            position = key if positioned and isinstance(key, int) else None
            message = codec.loads(record, memory_id, position)
            changes.append((key, record, codec.dumps(message, memory_id, position)))
    return changes, current


def require_keyring(codec: RecordCodec, store: str) -> RecordCodec:
    """``codec``, if it seals records.

    Raises:
        ValueError: the store was built without ``encryption=`` (there is nothing to re-seal with).
    """
    if not codec.sealed:
        raise ValueError(f"{store} was built without encryption=: give it a Keyring to re-seal records under")
    return codec


def codec_of_store(store: object) -> RecordCodec:
    """The codec ``store`` reads its records with: its ``encryption`` keyring, or :data:`PLAIN`."""
    encryption = getattr(store, "encryption", None)
    return encryption if isinstance(encryption, RecordCodec) else PLAIN
