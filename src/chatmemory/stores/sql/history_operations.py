"""The history side of a SQL store's operations, written once for the sync and asyncio executors.

Each method is a generator of :mod:`~chatmemory.stores.sql.commands` (see
:mod:`~chatmemory.stores.sql.operations`): reading a page of a memory's history and trimming histories.
What a page holds and how it decodes is in :mod:`~chatmemory.stores.sql.reads`; the statements are in
:mod:`~chatmemory.stores.sql.statements`.
"""

from __future__ import annotations

import datetime
from typing import Any, TypeVar

from sqlalchemy.exc import SQLAlchemyError

from chatmemory.core.history import HistoryPage, history_query, trim_cutoff
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.stores.base import Operation
from chatmemory.stores.sql.base import SQLStoreBase
from chatmemory.stores.sql.commands import Batch, Command, Result, Statement, Steps
from chatmemory.stores.sql.reads import clock_time, decode_history, history_parameters
from chatmemory.stores.sql.times import stamp_parameter

__all__ = ["HistoryOperations"]

_Engine = TypeVar("_Engine")


class HistoryOperations(SQLStoreBase[_Engine]):
    """Reading and trimming histories as command generators (the executors run them)."""

    def _history_page(
        self, memory_id: str, after: int | None, limit: int, reverse: bool
    ) -> Steps[Command, HistoryPage]:
        """One page of the history of ``memory_id``: one query."""
        memory_id = validate_memory_id(memory_id)
        query = history_query(after, limit, reverse)
        self._require_history()
        yield from self._ready(Operation.READ, memory_id)
        statement = self._statements.history_page(reverse, after is not None)
        try:
            rows = yield Statement(statement, history_parameters(memory_id, query), Result.ROWS)
        except SQLAlchemyError as exc:
            raise self._schema.store_error(Operation.READ, memory_id, exc) from exc
        return decode_history(memory_id, rows, query, self._codec)

    def _trim(self, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None) -> Steps[Command, int]:
        """Remove history entries written before ``older_than``: the server's clock, then one transaction.

        Tried again as a write is (once on a new connection after a lost one, and after conflicts); after
        a lost reply to its ``COMMIT`` the count is the answering attempt's, which finds them gone.
        """
        trim_cutoff(older_than, datetime.datetime.now(datetime.timezone.utc))  # check the argument first
        if memory_id is not None:
            memory_id = validate_memory_id(memory_id)
        self._require_history()
        yield from self._ready(Operation.TRIM, memory_id)
        delete, unrecord = self._statements.trim(memory_id is not None)

        def attempt() -> Steps[Command, int]:
            now = clock_time((yield Statement(self._statements.server_clock, None, Result.SCALAR)))
            parameters: dict[str, Any] = {"p_cutoff": stamp_parameter(trim_cutoff(older_than, now), self._dialect)}
            if memory_id is not None:
                parameters["p_id"] = memory_id
            # One transaction: delete the entries outside their window, then unrecord those left in it.
            batch = (Statement(delete, parameters), Statement(unrecord, parameters))
            deleted, unrecorded = yield Batch(batch, self._begin_statement)
            return int(deleted) + int(unrecorded)

        return (yield from self._retried(Operation.TRIM, memory_id, attempt))
