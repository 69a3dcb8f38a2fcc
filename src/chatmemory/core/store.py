"""The store contract and its optional capabilities.

A store persists the current window of each memory: a list of messages per memory id. Memories never
keep a list of their own; they read the store on every operation, so every process sharing a store sees
one memory. Optional behaviour is a separate protocol checked with ``isinstance``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol, runtime_checkable

from chatmemory.core.messages import ChatMessage

__all__ = [
    "Change",
    "ChatMemoryStore",
    "MAX_MEMORY_ID_LENGTH",
    "MemoryId",
    "Resealed",
    "Snapshot",
    "SupportsContentionHint",
    "SupportsExpiryPurge",
    "SupportsListing",
    "SupportsLockedUpdate",
    "SupportsRawRecords",
    "SupportsReseal",
    "SupportsSchema",
    "SupportsTTL",
    "SupportsVersioning",
    "validate_memory_id",
]


@runtime_checkable
class ChatMemoryStore(Protocol):
    """Where window memories keep their messages.

    Semantics every implementation holds (the contract suite in :mod:`chatmemory.testing` checks them):

    * ``get_messages`` returns exactly what the last ``update_messages`` wrote for that id: same order,
      equal messages, tool-call argument strings byte for byte. An unknown id reads as ``[]``.
    * ``update_messages`` replaces the whole list atomically: a reader sees the old list or the new one,
      never a mix; a failure half-way leaves the old list, and an asyncio task cancelled during a write
      leaves the old list or the new one. ``[]`` is a valid list.
    * ``delete_messages`` removes the memory; deleting an unknown id is not an error.
    * Ids are opaque literals (no glob, separator, SQL or operator meaning) and fully isolated.
    * Stored data that does not decode raises :class:`~chatmemory.CorruptedMemoryError` naming the id,
      data from a newer format raises :class:`~chatmemory.UnsupportedFormatVersionError`; neither is
      ever read as ``[]``. ``delete_messages`` and ``update_messages`` still work on such a memory.
    * Driver failures raise :class:`~chatmemory.StoreError` with the driver's exception as ``__cause__``.

    Memory ids arrive validated (see :func:`chatmemory.validate_memory_id`). :class:`chatmemory.ChatMemoryStore`
    and its asyncio twin :class:`chatmemory.aio.ChatMemoryStore` hold the same semantics; the asyncio one's
    methods are coroutines.
    """

    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first; ``[]`` for an unknown id."""
        ...

    def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id`` with ``messages``, atomically."""
        ...

    def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id`` and its messages; idempotent."""
        ...


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The messages of one memory and the version they were read at (``0``: the memory does not exist)."""

    messages: list[ChatMessage]
    version: int


@runtime_checkable
class SupportsVersioning(Protocol):
    """Optimistic concurrency: read a version, write only if nobody wrote since.

    * ``load`` returns the messages and their version; an unknown id is ``Snapshot([], 0)``.
    * ``save`` writes ``messages`` only if the memory is still at ``expected_version`` (``0``: it must not
      exist) and returns the new version, which is greater than any version the memory had. Otherwise it
      raises :class:`~chatmemory.ConcurrentUpdateError` and changes nothing.
    * ``update_messages`` and ``delete_messages`` also move the version on, so a ``save`` based on a read
      from before them fails.
    """

    def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version (``Snapshot([], 0)`` for an unknown id)."""
        ...

    def save(self, memory_id: str, messages: Sequence[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``; return the new version.

        Raises:
            ConcurrentUpdateError: the memory is at another version; nothing was written.
        """
        ...


Change = Callable[[list[ChatMessage]], Iterable[ChatMessage] | None]
"""What :meth:`SupportsLockedUpdate.modify` applies: the stored messages in, the new list or ``None`` out."""


@runtime_checkable
class SupportsLockedUpdate(Protocol):
    """A read-modify-write of one memory under a lock the store holds: writers queue instead of conflicting.

    * ``modify(id, change)`` reads the memory under a lock that every other writer of the same id waits
      for, calls ``change`` with a fresh list of the stored messages (``[]`` for an unknown or
      expired id), and writes what it returns, atomically, before the lock is released. ``change``
      returning ``None`` means "no write": the memory, its version and its expiry stay as they are.
    * It returns the version the memory is at afterwards: the new one after a write (greater than any
      version the memory had), the one read after a ``None`` (``0`` when the memory does not exist).
    * ``change`` must be a pure, short CPU function: it runs while the lock is held, and it may be called
      more than once (the store may start over, e.g. when two writers create the memory at once); only
      the list returned by the last call is written. An async store calls it synchronously too.
    * A memory that does not decode raises :class:`~chatmemory.CorruptedMemoryError` without calling
      ``change``; driver failures raise :class:`~chatmemory.StoreError`. It raises
      :class:`~chatmemory.ConcurrentUpdateError` only where the lock is the store's own lease lock (Redis,
      MongoDB) and could not be had within the store's ``lock_wait``; nothing is written then.

    Window memories take this path for an ``add`` after its optimistic write has conflicted once.
    """

    def modify(self, memory_id: str, change: Change) -> int:
        """Apply ``change`` to ``memory_id`` under its lock; return the version the memory is at afterwards."""
        ...


@runtime_checkable
class SupportsContentionHint(Protocol):
    """A store with a locked update that knows which memories its writers queued for lately (sync and asyncio).

    ``contended(id)`` is true for a short while after a writer of this process queued for ``id`` in
    ``modify``. A window memory then takes the locked update at once for its add, instead of first trying
    an optimistic write that the writers ahead of it would make conflict; a memory nobody queued for keeps
    its one read and one write. It is a hint: answering wrongly costs time, never a lost or doubled add.
    """

    def contended(self, memory_id: str) -> bool:
        """Whether writers of this process queued for ``memory_id`` lately (a plain method on asyncio stores too)."""
        ...


@runtime_checkable
class SupportsTTL(Protocol):
    """Memories expire ``ttl`` seconds after their last write; every write slides the expiry.

    An expired memory reads as empty. ``ttl`` is ``None`` when memories never expire.
    """

    @property
    def ttl(self) -> float | None:
        """Seconds a memory lives after its last write, or ``None``."""
        ...


@runtime_checkable
class SupportsListing(Protocol):
    """Enumerate the ids of stored memories (in no particular order unless the store says so).

    An asyncio store's ``memory_ids()`` is an async iterator: ``async for memory_id in store.memory_ids()``.
    """

    def memory_ids(self) -> Iterator[str]:
        """Every memory id that currently holds a memory."""
        ...


@runtime_checkable
class SupportsSchema(Protocol):
    """A store whose tables or collections are created and upgraded by explicit commands.

    * ``create_schema`` creates the schema at the revision this version of the library needs where there
      is none (idempotent); it is for development databases and tests. It upgrades nothing: on a schema
      at another revision it raises :class:`~chatmemory.SchemaVersionError`; ``chatmemory migrate URL``
      (what production deploys run) upgrades one that is behind.
    * ``schema_revision`` is the revision the database is at, ``None`` before any schema exists.
    * ``required_schema_revision`` is the revision this store needs; a store whose database is behind raises
      :class:`~chatmemory.SchemaVersionError` on its first read or write, naming the command to run.
    """

    def create_schema(self) -> None:
        """Create the schema at :attr:`required_schema_revision` where there is none (development and tests).

        Raises:
            SchemaVersionError: the schema is at another revision (``chatmemory migrate URL`` upgrades one behind).
        """
        ...

    def schema_revision(self) -> str | None:
        """The schema revision the database is at, or ``None`` when it has none."""
        ...

    @property
    def required_schema_revision(self) -> str:
        """The schema revision this store reads and writes."""
        ...


class Resealed(NamedTuple):
    """What re-sealing one memory did (``reseal`` of a store built with a keyring).

    Attributes:
        resealed: records now sealed under the primary key.
        current: records that already were.
        moved: records a concurrent writer changed or removed first (a re-run finds what is left).
    """

    resealed: int
    current: int
    moved: int = 0


@runtime_checkable
class SupportsReseal(Protocol):
    """A store built with ``encryption=`` that re-seals what it holds under its keyring's primary key.

    ``chatmemory rekey`` calls it for every memory after a key rotation (or to seal a plain store being
    migrated). Records are replaced in place, each only where it still holds what was read, so it is
    safe beside live writers, idempotent and resumable; see docs/encryption.md.
    """

    def reseal(self, memory_id: str) -> Resealed:
        """Re-seal every record of ``memory_id`` (window and history) under the keyring's primary key.

        A record is replaced only where it still holds what was read; one a writer moved meanwhile is
        counted in ``moved`` and left for a re-run.

        Raises:
            ValueError: the store was built without ``encryption=``.
            EncryptionKeyError: a record is sealed under a key the ring lacks (nothing is changed).
            CorruptedMemoryError: a record does not open (nothing is changed).
        """
        ...


@runtime_checkable
class SupportsRawRecords(Protocol):
    """Access to the stored message records as bytes, without decoding them.

    Operators use it to inspect a memory that raises :class:`~chatmemory.CorruptedMemoryError`, and to copy
    memories between stores without decoding them twice; the contract suite uses it to plant damaged data.
    A record is what :func:`chatmemory.serialization.native.dumps_message` makes of one message.
    """

    def read_raw(self, memory_id: str) -> list[bytes]:
        """The stored records of ``memory_id`` in window order, as stored; ``[]`` for an unknown id."""
        ...

    def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Replace the memory with ``records`` as they are; they are decoded only when read."""
        ...


@runtime_checkable
class SupportsExpiryPurge(Protocol):
    """A store that deletes expired memories when asked (where the database does not do it by itself)."""

    def purge_expired(self, *, batch_size: int = 1000) -> int:
        """Delete expired memories in batches of ``batch_size``; return how many were deleted."""
        ...


MemoryId = str | int | uuid.UUID
"""What a memory id may be given as: a ``str``, or an ``int`` or ``uuid.UUID`` used as its ``str()``."""
MAX_MEMORY_ID_LENGTH = 255


def validate_memory_id(memory_id: object) -> str:
    """Return the memory id as a ``str``.

    A non-empty ``str`` of at most 255 characters is used as it is; an ``int`` is converted with ``str()``,
    a ``uuid.UUID`` (common as a session id) to its canonical form (``str(uuid)``: 36 lower-case
    characters with hyphens), so ``UUID(x)`` and ``str(UUID(x))`` name the same memory.

    Raises:
        TypeError: for anything else (None, bytes, bool, float, containers).
        ValueError: for an empty or over-long string, or one holding a lone surrogate.
    """
    if isinstance(memory_id, uuid.UUID):
        return str(memory_id)
    if isinstance(memory_id, bool) or not isinstance(memory_id, (str, int)):
        raise TypeError(f"a memory id must be a str, an int or a uuid.UUID, not {type(memory_id).__name__}")
    text = memory_id if isinstance(memory_id, str) else str(memory_id)
    if not text:
        raise ValueError("a memory id must not be empty")
    if len(text) > MAX_MEMORY_ID_LENGTH:
        raise ValueError(f"a memory id must be at most {MAX_MEMORY_ID_LENGTH} characters, got {len(text)}")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate is a Python-only string: no database, key or document can hold it.
            raise ValueError(f"a memory id must be valid Unicode; {text!r} holds a lone surrogate") from None
    return text
