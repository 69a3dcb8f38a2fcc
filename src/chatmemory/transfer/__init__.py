"""Moving memories between stores.

The export file format, the sources memories are read from, and the rules for writing one memory (create,
leave equal ones alone, repair an expiry a stopped run left unset, replace only when asked).

Pure enough to use and test without the command line: ``chatmemory export``, ``import`` and ``copy`` are
thin loops over these.
"""

from __future__ import annotations

from chatmemory.transfer.export_format import (
    UNKNOWN_EXPIRY,
    BadExportLineError,
    ExportedMemory,
    decode_line,
    encode_line,
)
from chatmemory.transfer.sources import (
    HistoryNotKeptError,
    LangChain4jRedisSource,
    MemorySource,
    StoreSource,
    UnlistableStoreError,
)
from chatmemory.transfer.writes import (
    EXPIRY_TOLERANCE,
    NOT_READ,
    WRITE_ATTEMPTS,
    Destination,
    MemoryExistsError,
    Prefetched,
    WriteOutcome,
    check_restores_history,
    judge_stored,
    new_memory,
    settled,
    write_memory,
    write_memory_with_history,
)

__all__ = [
    "EXPIRY_TOLERANCE",
    "NOT_READ",
    "UNKNOWN_EXPIRY",
    "WRITE_ATTEMPTS",
    "BadExportLineError",
    "Destination",
    "ExportedMemory",
    "HistoryNotKeptError",
    "LangChain4jRedisSource",
    "MemoryExistsError",
    "MemorySource",
    "Prefetched",
    "StoreSource",
    "UnlistableStoreError",
    "WriteOutcome",
    "check_restores_history",
    "decode_line",
    "encode_line",
    "judge_stored",
    "new_memory",
    "settled",
    "write_memory",
    "write_memory_with_history",
]
