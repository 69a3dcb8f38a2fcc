"""The blocking MongoDB executor: sends one command with ``MongoClient``, and says what a pymongo failure is.

:class:`Executor` sends each :class:`~chatmemory.stores.mongodb.commands.Command` an operation yields and
runs a ``Sleep`` with ``time.sleep``. A driver exception never reaches an operation: :func:`failure` makes
it a :class:`~chatmemory.stores.mongodb.outcomes.CommandFailed` (the command's operation and memory id,
what the operation may branch on, the driver's exception as its cause) before it is thrown back in. The
asyncio executor (:mod:`~chatmemory.stores.mongodb.aio`) translates with the same function.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any, Final, TypeVar

from chatmemory.core.driving import Sleep, Steps, drive
from chatmemory.core.errors import Operation
from chatmemory.core.optional import require

require("pymongo", feature="MongoChatMemoryStore", extra="mongodb")

from bson.errors import BSONError  # noqa: E402 - imported once the driver is known to be installed
from pymongo.errors import (  # noqa: E402
    BulkWriteError,
    ConnectionFailure,
    DocumentTooLarge,
    PyMongoError,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
)

from chatmemory.stores.mongodb.commands import Command, Result, Step, result_of  # noqa: E402
from chatmemory.stores.mongodb.layout import TOO_LARGE_ADVICE  # noqa: E402
from chatmemory.stores.mongodb.outcomes import CommandFailed, refused_indexes  # noqa: E402

if TYPE_CHECKING:
    from chatmemory.stores.mongodb.base import Collections

__all__ = ["DRIVER_ERRORS", "Executor", "describe", "failure"]

_T = TypeVar("_T")

DRIVER_ERRORS: Final = (PyMongoError, BSONError)
"""What pymongo raises: its own errors, and BSON errors such as DocumentTooLarge (not a PyMongoError)."""
DOCUMENT_TOO_LARGE_CODES: Final = frozenset({10334, 17419})
"""BSONObjectTooLarge / the updated document would pass the server's 16 MiB limit."""

_TOPOLOGY = re.compile(r",?\s*(Timeout: [0-9.]+s, )?Topology Description: .*", re.DOTALL)


def describe(exc: BaseException) -> str:
    """The driver's message without the topology dump a server selection failure carries."""
    text = _TOPOLOGY.sub("", str(exc)).strip()
    if isinstance(exc, ServerSelectionTimeoutError):
        text = f"no MongoDB server answered in time ({text}); check the URL and that the server is running"
    return text


def failure(command: Command, exc: BaseException) -> CommandFailed:
    """The store's error for ``command`` failing with the driver's ``exc`` (which becomes its cause).

    A connection that failed after the command went out leaves it unknown whether it applied (``lost``); a
    server that was never reached (no server selected, no pooled connection) did not. A write past 16 MiB
    says what to do about it.
    """
    code = getattr(exc, "code", None)
    code = code if isinstance(code, int) and not isinstance(code, bool) else None
    lost = isinstance(exc, ConnectionFailure) and not isinstance(
        exc, (ServerSelectionTimeoutError, WaitQueueTimeoutError)
    )
    duplicates = refused_indexes(exc.details or {}) if isinstance(exc, BulkWriteError) else None
    too_large = isinstance(exc, DocumentTooLarge) or code in DOCUMENT_TOO_LARGE_CODES
    advice = TOO_LARGE_ADVICE if too_large and command.operation == Operation.WRITE else ""
    failed = CommandFailed(
        command.operation, command.memory_id, describe(exc), code=code, lost=lost, duplicates=duplicates, advice=advice
    )
    failed.__cause__ = exc
    return failed


class Executor:
    """Sends the commands of an operation with a ``MongoClient``'s collections (see the module docstring)."""

    def __init__(self, collections: Collections) -> None:
        self._on = collections

    def send(self, command: Command) -> Any:
        """The driver's call for ``command``, its result read as the command says (driver errors pass)."""
        value = self._on.method(command)(*command.args, **command.kwargs)
        return value.to_list() if command.result is Result.LIST else result_of(command, value)

    def perform(self, command: Step) -> Any:
        """Send ``command`` (or sleep); a driver failure is raised as :func:`failure` makes it."""
        if isinstance(command, Sleep):
            time.sleep(command.seconds)
            return None
        try:
            return self.send(command)
        except DRIVER_ERRORS as exc:
            raise failure(command, exc) from exc

    def run(self, steps: Steps[Step, _T]) -> _T:
        """Drive ``steps``: each command sent, its reply (or failure) handed back in."""
        return drive(steps, self.perform)
