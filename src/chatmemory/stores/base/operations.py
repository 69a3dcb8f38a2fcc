"""The names under which stores report driver failures (the ``operation`` of a ``StoreError``)."""

from __future__ import annotations

from typing import Final

__all__ = ["Operation"]


class Operation:
    """Operation names, one wording for every backend: ``StoreError(Operation.READ, memory_id, detail)``."""

    CONNECT: Final = "connecting to the store"
    READ: Final = "reading the memory"
    WRITE: Final = "writing the memory"
    DELETE: Final = "deleting the memory"
    LIST: Final = "listing memory ids"
    PURGE: Final = "purging expired memories"
    TRIM: Final = "trimming the history"
    SCHEMA: Final = "checking the schema"
    CLOSE: Final = "closing the store"
