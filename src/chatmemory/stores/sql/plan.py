"""What the SQL store decides, without a database: reads, diffed writes and locked writes as typed plans.

No I/O and no driver here. An executor (the sync store, or the asyncio one) asks this module for a plan,
runs its statements with its own driver, hands the typed reply back and acts on the outcome (the outcomes
live in :mod:`~chatmemory.stores.sql.outcomes`, the read plan in :mod:`~chatmemory.stores.sql.reads`; this
module re-exports both):

* a read: :func:`read_parameters` → the read statement's rows → :func:`decode_read` →
  :class:`ReadResult` / :class:`StaleCache` (read again without the cache) / :class:`Corrupted` /
  :class:`Headless` (no head row: the stray read's rows → :func:`absent_read`);
* a write whose list differs from the cached snapshot by a diff: :func:`plan_diff` → :class:`DiffWrite`
  (one conditional statement on PostgreSQL, one compound statement on MariaDB, a short transaction
  elsewhere) → matched or not (MariaDB's block signals a miss) → :func:`diff_outcome` →
  :class:`Written` / :class:`Conflict`;
* any other write: lock the head row → :func:`locked_head` → :func:`plan_locked` → :class:`LockedWrite`
  (its statements) / :class:`Written` (this write had landed already) / :class:`Conflict` /
  :class:`Corrupted`.

With history (:class:`WriteRequest` ``history=True``) nothing a write evicts is deleted: the head row's
window ranges move past it, or it is marked evicted (see :mod:`~chatmemory.stores.sql.window`), and the
rows the write adds carry their write time. A locked write diffs against the window it reads under the
lock, so a write whose cached snapshot was stale records only what it adds.

Every write carries a write id (:class:`WriteRequest`); the head row keeps the ids of the last
:data:`RECENT_WRITES` writes with the version each made. A write resent after its reply was lost (the
connection died under COMMIT) finds its id and reports the version it made instead of applying the turn
again.

The decisions live in modules named for them; this module gathers them under one name:

* :mod:`~chatmemory.stores.sql.write_requests` — a write, its write id and its rows;
* :mod:`~chatmemory.stores.sql.diffed_writes` — a turn against the cached snapshot;
* :mod:`~chatmemory.stores.sql.locked_writes` — a write under the head row's lock;
* :mod:`~chatmemory.stores.sql.reads`, :mod:`~chatmemory.stores.sql.outcomes` — reads and outcomes.
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
