"""What the SQL store's plans say happened: the typed outcomes and the cached state they carry."""

from __future__ import annotations

from dataclasses import dataclass

from chatmemory.core.errors import CorruptedMemoryError
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Snapshot

__all__ = [
    "CachedSnapshot",
    "Conflict",
    "Corrupted",
    "Headless",
    "ReadResult",
    "StaleCache",
    "Unchanged",
    "Written",
    "stray_detail",
]


# ------------------------------------------------------------------------------------------ state


@dataclass(frozen=True, slots=True)
class CachedSnapshot:
    """The stored state of one memory at one version: message ``i`` is the row with sequence ``seqs[i]``.

    ``window_start`` is the head row's (see :mod:`~chatmemory.stores.sql.window`): the window's rows below
    it form its pinned run.
    """

    version: int
    incarnation: int
    next_seq: int
    seqs: tuple[int, ...]
    messages: tuple[ChatMessage, ...]
    window_start: int = 0


# --------------------------------------------------------------------------------------- outcomes


@dataclass(frozen=True, slots=True)
class Written:
    """The write is stored at ``version``; ``state`` is the memory's state then (``None``: unknown)."""

    version: int
    state: CachedSnapshot | None


@dataclass(frozen=True, slots=True)
class Unchanged:
    """Nothing was written (a change left the memory as it was); it is at ``version``."""

    version: int


@dataclass(frozen=True, slots=True)
class Conflict:
    """Another writer got there first: the memory is not at the version the write was conditioned on."""


@dataclass(frozen=True, slots=True)
class Corrupted:
    """The stored memory is damaged; ``detail`` says how (for :class:`~chatmemory.CorruptedMemoryError`)."""

    detail: str

    def error(self, memory_id: str) -> CorruptedMemoryError:
        """The exception to raise for ``memory_id``."""
        return CorruptedMemoryError(memory_id, self.detail)


@dataclass(frozen=True, slots=True)
class ReadResult:
    """What a read found: the snapshot, and the state to cache (``None``: nothing is stored)."""

    snapshot: Snapshot
    state: CachedSnapshot | None


@dataclass(frozen=True, slots=True)
class Headless:
    """The read found no head row: the memory is absent, unless message rows exist without it (damage).

    The window read leaves headless rows out (they cost every read a probe); the executor then sends the
    stray read (:attr:`~chatmemory.stores.sql.statements.Statements.fast_strays`) and
    :func:`~chatmemory.stores.sql.reads.absent_read` says which it is.
    """


@dataclass(frozen=True, slots=True)
class StaleCache:
    """The rows name a message the cached snapshot does not hold (rows edited by hand): read again uncached."""


def stray_detail(count: int) -> str:
    """How message rows without a head row are reported."""
    return f"{count} message rows exist without the memory's head row; delete_messages or update_messages replaces them"
