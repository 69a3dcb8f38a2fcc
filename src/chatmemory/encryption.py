"""Encryption at rest: a :class:`Keyring` seals every stored message record with AES-256-GCM.

Pass ``encryption=Keyring(...)`` to a store (or to :func:`chatmemory.open_store`). Each record is sealed
alone, under a fresh 96-bit nonce, with associated data binding it to its memory id and naming its key,
so a record copied into another memory, or given another key id, fails to open; a layout with stable
positions (SQL rows) binds the row's sequence too. The sealed record is
``MAGIC | key id length | key id | nonce | ciphertext and tag``: only key ids are stored, never keys.
What stays in clear (ids, versions, times, sizes, counts) and how to rotate keys: ``docs/encryption.md``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from chatmemory.core.errors import CorruptedMemoryError, EncryptionKeyError, PlaintextRecordError
from chatmemory.core.messages import ChatMessage
from chatmemory.core.optional import require
from chatmemory.serialization.native import dumps_message, loads_message
from chatmemory.serialization.records import SEALED_MAGIC, RecordCodec

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

__all__ = ["MAGIC", "Keyring", "is_sealed", "record_key_id"]

MAGIC = SEALED_MAGIC
"""The first bytes of every sealed record (a plain record is JSON and starts with ``{``)."""

_NONCE = 12
_TAG = 16
_KEY_BYTES = 32
_AD_LABEL = b"chatmemory/record/1\x00"


def is_sealed(record: bytes | bytearray | memoryview | str) -> bool:
    """Whether ``record`` is a sealed record (by its first bytes; nothing is opened)."""
    return not isinstance(record, str) and bytes(record[:4]) == MAGIC


def record_key_id(record: bytes | bytearray | memoryview | str) -> str | None:
    """The id of the key ``record`` is sealed under, or ``None`` for a plain or malformed record."""
    if isinstance(record, str) or not is_sealed(record):
        return None
    data = bytes(record)
    if len(data) < 5 or len(data) < 5 + data[4]:
        return None
    try:
        return data[5 : 5 + data[4]].decode("utf-8")
    except UnicodeDecodeError:
        return None


def _aesgcm() -> type[AESGCM]:
    aead = require("cryptography.hazmat.primitives.ciphers.aead", feature="encryption at rest", extra="encryption")
    cls: type[AESGCM] = aead.AESGCM
    return cls


class _Fixed:
    """The primary of a keyring with one primary key id for every memory."""

    __slots__ = ("key_id",)

    def __init__(self, key_id: str) -> None:
        self.key_id = key_id

    def __call__(self, memory_id: str) -> str:
        return self.key_id


class Keyring(RecordCodec):
    """Named 32-byte keys: one seals new records, all of them open records.

    Args:
        keys: key id -> 32-byte key. Any mapping: one that fetches keys from a secret manager on lookup
            works too (a missing id must raise ``KeyError``). Key ids are stored beside each record, so
            they must not be secret (1-255 UTF-8 bytes).
        primary: the key id new records are sealed under; or a callable from memory id to key id, to
            give each tenant its own key (erase a tenant by destroying its key: crypto-shredding).
        read_plaintext: open unsealed records too (while migrating a plain store; ``chatmemory rekey``
            then seals them). Off by default: an encrypted store refuses plain data.

    Raises:
        ValueError: a key is not 32 bytes, a key id is empty or too long, or ``primary`` is not a key id
            of ``keys`` (a callable primary is checked on each write).
        MissingDependencyError: the ``encryption`` extra (``cryptography``) is not installed.
    """

    sealed = True

    def __init__(
        self,
        keys: Mapping[str, bytes],
        primary: str | Callable[[str], str],
        *,
        read_plaintext: bool = False,
    ) -> None:
        aesgcm = _aesgcm()
        if not isinstance(keys, Mapping):
            raise TypeError(f"keys must be a mapping of key id to 32-byte key, not {type(keys).__name__}")
        self._keys = keys
        self._ciphers: dict[str, AESGCM] = {}
        self._aesgcm = aesgcm
        if isinstance(keys, dict):
            for key_id in keys:
                self._cipher(key_id, None)
        if callable(primary):
            self._primary: Callable[[str], str] = primary
        elif isinstance(primary, str):
            self._header(primary)
            if primary not in keys:
                raise ValueError(f"primary key id {primary!r} is not one of the keyring's keys")
            self._primary = _Fixed(primary)
        else:
            raise TypeError(f"primary must be a key id or a callable from memory id to key id, not {primary!r}")
        self.read_plaintext = bool(read_plaintext)
        self._headers: dict[str, bytes] = {}

    def __repr__(self) -> str:
        ids = ", ".join(repr(key_id) for key_id in self._keys) if isinstance(self._keys, dict) else "..."
        return f"Keyring(key ids [{ids}], read_plaintext={self.read_plaintext})"

    @staticmethod
    def _header(key_id: str) -> bytes:
        if not isinstance(key_id, str):
            raise TypeError(f"a key id is a str, not {type(key_id).__name__}")
        raw = key_id.encode("utf-8")
        if not 1 <= len(raw) <= 255:
            raise ValueError(f"key id {key_id!r} must be 1 to 255 UTF-8 bytes")
        return MAGIC + bytes((len(raw),)) + raw

    def _cipher(self, key_id: str, memory_id: str | None) -> AESGCM:
        cipher = self._ciphers.get(key_id)
        if cipher is not None:
            return cipher
        try:
            key = self._keys[key_id]
        except KeyError:
            raise EncryptionKeyError(memory_id, key_id) from None
        if not isinstance(key, (bytes, bytearray)) or len(key) != _KEY_BYTES:
            raise ValueError(f"key {key_id!r} must be {_KEY_BYTES} bytes (AES-256)")
        cipher = self._ciphers[key_id] = self._aesgcm(bytes(key))
        return cipher

    def primary_key_id(self, memory_id: str) -> str:
        """The id of the key new records of ``memory_id`` are sealed under."""
        return self._primary(memory_id)

    def dumps(self, message: ChatMessage, memory_id: str, position: int | None = None) -> bytes:
        """The sealed record of ``message`` in ``memory_id``, under the primary key (bound to ``position``)."""
        key_id = self._primary(memory_id)
        header = self._headers.get(key_id)
        if header is None:
            header = self._headers[key_id] = self._header(key_id)
        cipher = self._cipher(key_id, memory_id)
        nonce = os.urandom(_NONCE)
        aad = _AD_LABEL + header + memory_id.encode("utf-8", "surrogatepass")
        if position is not None:
            aad += b"\x00%d" % position
        return header + nonce + cipher.encrypt(nonce, dumps_message(message), aad)

    def loads(
        self, record: bytes | bytearray | memoryview | str, memory_id: str, position: int | None = None
    ) -> ChatMessage:
        """Open and decode ``record`` of ``memory_id`` (sealed at ``position``, where the layout has one).

        Raises:
            EncryptionKeyError: the record is sealed under a key this keyring lacks.
            PlaintextRecordError: the record is not sealed and ``read_plaintext`` is off.
            CorruptedMemoryError: the record was altered, or sealed for another memory.
        """
        if isinstance(record, str) or not is_sealed(record):
            if self.read_plaintext:
                return loads_message(record, memory_id=memory_id)
            raise PlaintextRecordError(memory_id)
        data = bytes(record)
        end = 5 + data[4] if len(data) > 4 else len(data) + 1
        if len(data) < end + _NONCE + _TAG:
            raise CorruptedMemoryError(memory_id, "a sealed record is truncated")
        try:
            key_id = data[5:end].decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptedMemoryError(memory_id, "a sealed record's key id is not UTF-8") from None
        cipher = self._cipher(key_id, memory_id)
        aad = _AD_LABEL + data[:end] + memory_id.encode("utf-8", "surrogatepass")
        if position is not None:
            aad += b"\x00%d" % position
        try:
            plain = cipher.decrypt(data[end : end + _NONCE], data[end + _NONCE :], aad)
        except Exception as exc:  # cryptography's InvalidTag: altered, or sealed for another memory
            if type(exc).__name__ != "InvalidTag":
                raise
            raise CorruptedMemoryError(
                memory_id,
                f"a record sealed under key {key_id!r} does not open: altered, or copied from another memory or place",
            ) from None
        return loads_message(plain, memory_id=memory_id)

    def is_current(self, record: bytes | bytearray | memoryview | str, memory_id: str) -> bool:
        """Whether ``record`` is sealed under ``memory_id``'s primary key (what ``rekey`` leaves alone)."""
        return record_key_id(record) == self._primary(memory_id)
