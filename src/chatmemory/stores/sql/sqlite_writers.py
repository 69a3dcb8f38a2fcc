"""SQLite writers of one database file in one process, queued on a lock instead of polling for SQLite's.

SQLite lets one connection write at a time. A ``BEGIN IMMEDIATE`` that finds the write lock taken is
answered ``SQLITE_BUSY``, and ``sqlite3``'s busy handler sleeps and asks again until the busy timeout:
after 1, 2, 5, 10, 15, 20, 25 ms, then 25, 50 and 100 ms at a time. Between its sleeps any other writer
may take the lock, so among many writers one can lose again and again while the others go on: with 200
asyncio memories on one file (``benchmarks/memories.py``; 16 worker threads, 15 connections), single
turns took 1.3-1.9 s against a median of 0.18 s; the same with a sync store on 16 threads.

So the store's writers on one file in one process take the file's turn (a :class:`FileTurn` per
resolved path, shared by every store on it; each store waits in it through a :class:`WriterQueue`)
before they begin, and hand it on once their transaction ends: a writer then asks SQLite for its lock
when no other writer of the process holds it, and its ``BEGIN IMMEDIATE`` waits in the busy handler
only for another process. Only transactions queue: reads (autocommit statements, and a listing's read
snapshot, which ``BEGIN`` defers) never wait for the writer in WAL mode, and they do not wait here
either. A writer takes its connection before its turn: holding the turn while it waited for the pool, it
would wait for the writers queued behind it, which hold the pool's connections.

A session takes the turn before it sends ``BEGIN IMMEDIATE`` and gives it back once its ``COMMIT`` or
``ROLLBACK`` has run (whether it failed or not), when the ``BEGIN`` fails, or when the operation ends
without either (its connection goes back to the pool, which rolls the transaction back). Waiting for the
turn is bounded by the store's busy timeout, and a wait that runs out fails as SQLite's own would, with
``database is locked``: a writer that waits for itself (a ``modify`` whose change writes to the same
file through another store) fails after the timeout instead of hanging. A write of the asyncio store
whose task is cancelled while it waits for its turn has begun nothing: it stops waiting
(:class:`TurnAbandoned`), and never runs.

The turns go, in practice, in the order they were asked for (a lock promises no order). A writer that
waited its turn may still find SQLite's lock held by another process, and wait up to the busy timeout
once more in the busy handler. ``expire_at`` (one statement, outside a transaction) does not queue.

Taking turns in order has a price when threads write without pause: the turn passes to a thread that
must wake up first, where SQLite's lock went to whichever writer ran. On 4 or 16 threads that never
pause (2 cores), 17-25% fewer turns a second, their median turn the length of the queue (2-10 ms)
instead of under 1 ms for most and up to a second for a few. The asyncio store's turns per second
are unchanged.

Applies to stores that make their engine from a file URL (they know its busy timeout); an engine a
caller hands in, and ``:memory:`` databases, are left as they are. The child of a fork gets new locks:
one held by another thread of its parent would never be released in it.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from typing import Any

from sqlalchemy import Engine
from sqlalchemy.engine import URL
from sqlalchemy.exc import OperationalError

from chatmemory.stores.sql.engine import SQLITE_BUSY_TIMEOUT_SECONDS, dialect_family

__all__ = ["STOP_CHECK_SECONDS", "FileTurn", "TurnAbandoned", "WriterQueue", "writer_queue", "writer_queue_for"]

STOP_CHECK_SECONDS = 0.02
"""How often a writer that may be stopped (an asyncio task's, on a worker thread) looks whether it was."""


class TurnAbandoned(BaseException):
    """A writer stopped waiting for its turn: its caller gave up (an asyncio task was cancelled).

    Nothing was begun. Like a cancellation, not an ``Exception``: the operation does not handle it.
    """


class FileTurn:
    """The turn to write one SQLite database file, shared by every store of this process on the file."""

    __slots__ = ("__weakref__", "lock", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        """The file's resolved path."""
        self.lock = threading.Lock()
        """Held by the writer whose turn it is."""


class WriterQueue:
    """One store's place in the queue of a SQLite file's writers.

    Args:
        turn: the file's turn, shared with the other stores on it.
        timeout: the longest this store's writers wait for the turn, in seconds (its busy timeout).
    """

    __slots__ = ("timeout", "turn")

    def __init__(self, turn: FileTurn, timeout: float) -> None:
        self.turn = turn
        self.timeout = max(timeout, 0.0)

    def enter(self, statement: str, stop: threading.Event | None = None) -> threading.Lock:
        """Wait for the turn to write (up to :attr:`timeout`); the lock to release when the turn ends.

        The lock itself is handed back, so that a writer releases the one it took, even in the child of
        a fork (which renews the file's lock for its own writers).

        Args:
            statement: what the writer begins with (for the error).
            stop: set when the writer's caller gives up: it then stops waiting (within
                :data:`STOP_CHECK_SECONDS`), and a turn that came meanwhile goes on to the next writer.

        Raises:
            sqlalchemy.exc.OperationalError: the turn did not come within the timeout (``database is
                locked``, as SQLite says when its busy timeout runs out), for ``statement``.
            TurnAbandoned: ``stop`` was set.
        """
        lock = self.turn.lock
        if lock.acquire(False):  # no other writer: no wait, timed or not
            return lock
        endless = self.timeout >= threading.TIMEOUT_MAX  # beyond what a lock's wait takes: no bound
        if stop is None:
            if not lock.acquire(timeout=-1 if endless else self.timeout):
                raise _locked(statement)
            return lock
        deadline = None if endless else time.monotonic() + self.timeout
        while not stop.is_set():
            wait = STOP_CHECK_SECONDS if deadline is None else min(STOP_CHECK_SECONDS, deadline - time.monotonic())
            if wait <= 0:
                raise _locked(statement)
            if lock.acquire(timeout=wait):
                if not stop.is_set():
                    return lock
                lock.release()
                break
        raise TurnAbandoned

    @property
    def busy(self) -> bool:
        """Whether a writer (of any store on the file) holds the turn."""
        return self.turn.lock.locked()


def _locked(statement: str) -> OperationalError:
    return OperationalError(statement, None, sqlite3.OperationalError("database is locked"))


_TURNS: weakref.WeakValueDictionary[str, FileTurn] = weakref.WeakValueDictionary()
_MADE = threading.Lock()


def writer_queue(url: URL, timeout: float) -> WriterQueue | None:
    """A place in the queue of the SQLite file ``url`` names (its turn shared with every store on it).

    ``None`` for a database in memory, which has no file to share (and no other connection to wait for).
    The store's writers wait ``timeout`` seconds at most.
    """
    database = url.database
    if not database or database == ":memory:" or url.query.get("mode") == "memory":
        return None
    if database.startswith("file:"):  # a URI filename (?uri=true): its path, without the query
        database = database[len("file:") :].split("?", 1)[0]
        if not database:
            return None
    path = os.path.realpath(database)
    with _MADE:
        turn = _TURNS.get(path)
        if turn is None:
            turn = _TURNS[path] = FileTurn(path)
    return WriterQueue(turn, timeout)


def writer_queue_for(engine: Engine, engine_options: dict[str, Any] | None) -> WriterQueue | None:
    """The writer queue of a store's sync ``engine`` (``None``: not a SQLite file, or an engine handed in).

    Args:
        engine: the sync engine the store's operations run on.
        engine_options: the options the store made ``engine`` with from a URL (its busy timeout is their
            ``connect_args["timeout"]``, else the store's default), or ``None`` for an engine handed in.
    """
    if engine_options is None or dialect_family(engine.dialect.name) != "sqlite":
        return None
    timeout = dict(engine_options.get("connect_args") or {}).get("timeout", SQLITE_BUSY_TIMEOUT_SECONDS)
    return writer_queue(engine.url, float(timeout))


def _renew_after_fork() -> None:
    global _MADE
    _MADE = threading.Lock()
    for turn in list(_TURNS.values()):
        turn.lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # POSIX; elsewhere there is no fork to inherit a held lock through
    os.register_at_fork(after_in_child=_renew_after_fork)
