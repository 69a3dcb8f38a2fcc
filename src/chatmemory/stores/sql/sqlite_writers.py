"""SQLite writers of one database file in one process, queued on a lock instead of polling for SQLite's.

SQLite lets one connection write at a time, and ``sqlite3``'s busy handler polls for the lock, so among
many writers one can lose again and again. The store's writers on one file in one process therefore take
the file's turn (a :class:`FileTurn` per resolved path, shared by every store on it; each store waits in
it through a :class:`WriterQueue`) before ``BEGIN IMMEDIATE``, and hand it on once their ``COMMIT`` or
``ROLLBACK`` has run, when the ``BEGIN`` fails, or when the operation ends without either. Only
transactions queue, and only in stores that make their engine from a file URL. A writer takes its
connection before its turn; its wait for the turn is bounded by the store's busy timeout and fails as
SQLite's own would (``database is locked``); an asyncio write cancelled while it waits has begun nothing
(:class:`TurnAbandoned`). Why, what is left to SQLite, and what it costs: *SQL* in ``docs/stores.md``.
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
