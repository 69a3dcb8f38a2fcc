"""The SQL store on PostgreSQL with its message table hash-partitioned by memory_id (``partitions=4``).

Not in the BACKENDS lists: tests/stores/sql/test_sql_partitioned_contract.py runs the contract suite on
it (sync and asyncio), which is what partitioning can change; the rest of the suite runs unpartitioned.
"""

from __future__ import annotations

from typing import Any

from chatmemory import aio
from chatmemory.stores.sql import SQLChatMemoryStore
from support.backends import postgres
from support.backends.sqlite import AsyncSQLBackend, SQLBackend

PARTITIONS = 4


class PartitionedSQLBackend(SQLBackend):
    """Stores whose fresh tables are created with ``partitions=PARTITIONS``."""

    def make_store(self, **options: Any) -> SQLChatMemoryStore:
        options.setdefault("partitions", PARTITIONS)
        return super().make_store(**options)


class AsyncPartitionedSQLBackend(AsyncSQLBackend):
    """The asyncio store on partitioned tables."""

    async def make_store(self, **options: Any) -> aio.ChatMemoryStore:
        options.setdefault("partitions", PARTITIONS)
        return await super().make_store(**options)


def open_backend() -> PartitionedSQLBackend:
    return PartitionedSQLBackend("postgres_partitioned", postgres.open_backend().url)


def open_async_backend() -> AsyncPartitionedSQLBackend:
    return AsyncPartitionedSQLBackend("postgres_partitioned", postgres.open_async_backend().url)
