"""What the SQL store decides, without a database: reads, diffed writes and locked writes as typed plans.

An executor asks for a plan, runs its statements with its own driver, hands the typed reply back and acts
on the outcome. Every write carries a write id, and the head row keeps the last :data:`RECENT_WRITES`.
This module gathers the names of the modules that decide (:mod:`~chatmemory.stores.sql.write_requests`,
:mod:`~chatmemory.stores.sql.diffed_writes`, :mod:`~chatmemory.stores.sql.locked_writes`,
:mod:`~chatmemory.stores.sql.reads`, :mod:`~chatmemory.stores.sql.outcomes`) under one (*SQL* in ``docs/stores.md``):

* a read: :func:`read_parameters` → rows → :func:`decode_read` → :class:`ReadResult` / :class:`StaleCache`
  / :class:`Corrupted` / :class:`Headless` (no head row: the stray read's rows → :func:`absent_read`);
* a write against the cached snapshot: :func:`plan_diff` → :class:`DiffWrite` → :func:`diff_outcome`;
* any other write: lock the head row → :func:`locked_head` → :func:`plan_locked` → :class:`LockedWrite`.
"""

from __future__ import annotations

from chatmemory.stores.sql.diffed_writes import SCALAR_DIFF_LIMIT, DiffWrite, diff_outcome, plan_diff
from chatmemory.stores.sql.locked_writes import (
    HeadRow,
    LockedHead,
    LockedWrite,
    locked_head,
    locked_read,
    plan_locked,
    stray_rows,
    window_needed,
)
from chatmemory.stores.sql.outcomes import (
    CachedSnapshot,
    Conflict,
    Corrupted,
    Headless,
    ReadResult,
    StaleCache,
    Unchanged,
    Written,
    stray_detail,
)
from chatmemory.stores.sql.reads import (
    ReadHead,
    absent_read,
    decode_read,
    raw_records,
    read_parameters,
    stray_records,
)
from chatmemory.stores.sql.write_requests import (
    RECENT_WRITES,
    WriteRequest,
    conflict_error,
    find_write,
    message_rows,
    new_write_id,
    write_entry,
)

__all__ = [
    "RECENT_WRITES",
    "SCALAR_DIFF_LIMIT",
    "CachedSnapshot",
    "Conflict",
    "Corrupted",
    "DiffWrite",
    "HeadRow",
    "Headless",
    "LockedHead",
    "LockedWrite",
    "ReadHead",
    "ReadResult",
    "StaleCache",
    "Unchanged",
    "WriteRequest",
    "Written",
    "absent_read",
    "conflict_error",
    "decode_read",
    "diff_outcome",
    "find_write",
    "locked_head",
    "locked_read",
    "message_rows",
    "new_write_id",
    "plan_diff",
    "plan_locked",
    "raw_records",
    "read_parameters",
    "stray_detail",
    "stray_records",
    "stray_rows",
    "window_needed",
    "write_entry",
]
