"""The blocking MongoDB executor: sends one command with ``MongoClient``, and says what a pymongo failure is.

:class:`Executor` sends each :class:`~chatmemory.stores.mongodb.commands.Command` an operation yields and
runs a ``Sleep`` with ``time.sleep``. A driver exception never reaches an operation: :func:`failure` makes
it a :class:`~chatmemory.stores.mongodb.outcomes.CommandFailed` (the command's operation and memory id,
what the operation may branch on, the driver's exception as its cause) before it is thrown back in. The
asyncio executor (:mod:`~chatmemory.stores.mongodb.aio`) translates with the same function. Both facades
build their clients and collections here (:class:`MongoClients`).
"""

from __future__ import annotations

import datetime
import re
import time
from collections.abc import Callable
from typing import Any, Final, TypeVar
from urllib.parse import parse_qsl, urlsplit

from chatmemory.core.driving import Sleep, Steps, drive
from chatmemory.core.errors import Operation, StoreError
from chatmemory.core.optional import require

require("pymongo", feature="MongoChatMemoryStore", extra="mongodb")

from bson.codec_options import CodecOptions  # noqa: E402 - imported once the driver is known to be installed
from bson.errors import BSONError  # noqa: E402
from pymongo.errors import (  # noqa: E402
    BulkWriteError,
    ConnectionFailure,
    DocumentTooLarge,
    InvalidName,
    PyMongoError,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
)
from pymongo.write_concern import WriteConcern  # noqa: E402

from chatmemory.stores.mongodb.commands import Command, Result, Step, Target, result_of  # noqa: E402
from chatmemory.stores.mongodb.layout import (  # noqa: E402
    TOO_LARGE_ADVICE,
    Document,
    history_collection_name,
    lock_collection_name,
)
from chatmemory.stores.mongodb.outcomes import CommandFailed, refused_indexes  # noqa: E402

__all__ = [
    "CODEC_OPTIONS",
    "DEFAULT_DATABASE",
    "DEFAULT_TIMEOUTS_MS",
    "DRIVER_ERRORS",
    "Collections",
    "Executor",
    "MongoClients",
    "describe",
    "failure",
]

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


CODEC_OPTIONS: Final[CodecOptions[Document]] = CodecOptions(
    document_class=dict, tz_aware=True, tzinfo=datetime.timezone.utc
)
"""Documents as dicts and aware UTC dates, whatever the caller's client uses."""

DEFAULT_TIMEOUTS_MS: Final = {
    "serverSelectionTimeoutMS": 5_000,
    "connectTimeoutMS": 5_000,
    "socketTimeoutMS": 30_000,
}
"""Timeouts a store built from a URL uses unless the URL or ``client_options`` set them: a server that is
down fails the first call within 5 s (pymongo's defaults wait 30 s for a server and forever for a reply)."""


def client_options(url: str, overrides: dict[str, Any] | None) -> dict[str, Any]:
    """The keyword arguments a store passes to the client it builds from ``url``.

    The default timeouts apply unless ``url`` names them (case-insensitively, as MongoDB URL options
    are) or ``overrides`` does; ``overrides`` win over everything.
    """
    named = {key.lower() for key, _ in parse_qsl(urlsplit(url).query)}
    options: dict[str, Any] = {key: value for key, value in DEFAULT_TIMEOUTS_MS.items() if key.lower() not in named}
    options.update(overrides or {})
    return options


DEFAULT_DATABASE: Final = "chatmemory"
"""The database a store uses when neither its ``database`` argument nor its URL names one."""


def database_name(given: str | None, client: Any) -> str:
    """The database a store uses: ``given``, else the one its URL names, else :data:`DEFAULT_DATABASE`.

    The URL's database is its path (``mongodb://host/NAME?...``). ``client`` is the store's ``MongoClient``
    or ``AsyncMongoClient``, built from the store's URL or passed in (then the URL it was built with);
    reading the name it was given does no I/O.
    """
    if given is not None:
        return given
    name: str = client.get_default_database(DEFAULT_DATABASE).name
    return name


def write_concern_of(value: str | int | WriteConcern | None) -> WriteConcern | None:
    """The write concern a store's ``write_concern`` option asks for (``None``: the client's own).

    ``"majority"`` (or another ``w`` tag name), a number of members, or a pymongo ``WriteConcern`` (for
    ``j`` or ``wtimeout`` too). It must be acknowledged: every write of the store reads its reply (the
    version it matched, the document it left).

    Raises:
        TypeError: not one of those.
        ValueError: an empty tag, fewer than one member, or an unacknowledged ``WriteConcern`` (``w=0``).
    """
    if value is None:
        return None
    if isinstance(value, WriteConcern):
        concern = value
    elif isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TypeError(
            f"write_concern must be 'majority', a number of members or a pymongo WriteConcern, not {value!r}"
        )
    elif isinstance(value, str) and not value:
        raise ValueError("write_concern must name a w tag such as 'majority', not ''")
    elif isinstance(value, int) and value < 1:
        raise ValueError(f"write_concern must be at least 1 member (the store reads every write's reply), not {value}")
    else:
        concern = WriteConcern(w=value)
    if not concern.acknowledged:
        raise ValueError(
            "write_concern must be acknowledged (w >= 1 or 'majority'): the store reads the reply of every write"
        )
    return concern


def collection_of(client: Any, database: str, collection: str, write_concern: WriteConcern | None = None) -> Any:
    """The memories collection of ``client`` (a ``MongoClient`` or an ``AsyncMongoClient``), names checked.

    ``write_concern``: the one its writes carry (``None``: the client's, from its URL or options).

    Raises:
        ValueError: MongoDB cannot hold ``database`` or ``collection`` as a name (the fix in the message).
    """
    try:
        db = client.get_database(database)
    except (InvalidName, TypeError) as exc:
        raise invalid_name("database", database, exc) from exc
    try:
        return db.get_collection(collection, codec_options=CODEC_OPTIONS, write_concern=write_concern)
    except (InvalidName, TypeError) as exc:
        raise invalid_name("collection", collection, exc) from exc


def invalid_name(kind: str, name: object, exc: Exception) -> ValueError:
    """The error for a database or collection name MongoDB cannot hold (``kind``: ``"database"`` ...)."""
    return ValueError(
        f"MongoChatMemoryStore {kind} name {name!r} is not valid in MongoDB ({exc}); use a non-empty name "
        "without '$', NUL, spaces, '.', '/' or '\\' (for a database) or a name that neither starts with "
        "'system.' nor holds '$' or NUL (for a collection), e.g. 'chatmemory' / 'memories'"
    )


class Collections:
    """The collections of a store on one client: memories, histories (``None`` without history) and locks."""

    __slots__ = ("client", "history", "locks", "window")

    def __init__(
        self, client: Any, database: str, collection: str, *, history: bool, write_concern: WriteConcern | None = None
    ) -> None:
        self.client = client
        self.window: Any = collection_of(client, database, collection, write_concern)
        self.history: Any = (
            collection_of(client, database, history_collection_name(collection), write_concern) if history else None
        )
        self.locks: Any = collection_of(client, database, lock_collection_name(collection), write_concern)

    def method(self, command: Command) -> Any:
        """The driver method ``command`` calls (on the memories, history or lock collection, or ``admin``)."""
        target = command.target
        if target is Target.WINDOW:
            receiver = self.window
        elif target is Target.HISTORY:
            receiver = self.history
        elif target is Target.LOCKS:
            receiver = self.locks
        else:
            receiver = self.client.admin
        return getattr(receiver, command.method)


def client_maker(
    url: str,
    client_type: type[Any],
    options: dict[str, Any] | None,
    first: Collections,
    *,
    history: bool,
    write_concern: WriteConcern | None = None,
) -> Callable[[], Collections]:
    """What builds another client from ``url`` as the constructor did, with the collections ``first`` has."""
    database, collection = first.window.database.name, first.window.name
    arguments = client_options(url, options)

    def make() -> Collections:
        client = client_type(url, **arguments)
        return Collections(client, database, collection, history=history, write_concern=write_concern)

    return make


def adopt(url_or_client: Any, client_type: type[Any], options: dict[str, Any] | None) -> tuple[Any, bool]:
    """The client to use and whether the store owns it (built it from a URL)."""
    if isinstance(url_or_client, str):
        try:
            return client_type(url_or_client, **client_options(url_or_client, options)), True
        except (*DRIVER_ERRORS, ValueError, TypeError) as exc:  # the URI parser raises ConfigurationError/ValueError
            raise StoreError(Operation.CONNECT, detail=describe(exc)) from exc
    if isinstance(url_or_client, client_type):
        return url_or_client, False
    raise TypeError(f"expected a MongoDB URL or a pymongo.{client_type.__name__}, got {type(url_or_client).__name__}")


class MongoClients:
    """The clients half of both facades: builds (or adopts) the client and its collections, checked.

    Mixed into the blocking and the asyncio facade, whose ``_client_type`` says which client;
    :class:`~chatmemory.stores.mongodb.base.MongoStoreBase` calls these as it checks its options.
    """

    _client: Any
    _client_type: type[Any]
    _history: Any
    _on: Collections
    _write_concern: WriteConcern | None

    _write_concern_of = staticmethod(write_concern_of)

    def _adopt(self, url_or_client: Any, options: dict[str, Any] | None) -> tuple[Any, bool]:
        return adopt(url_or_client, self._client_type, options)

    def _collections(self, database: str | None, collection: str) -> Collections:
        name = database_name(database, self._client)
        history = self._history is not None
        return Collections(self._client, name, collection, history=history, write_concern=self._write_concern)

    def _client_maker(self, url_or_client: Any, options: dict[str, Any] | None) -> Callable[[], Collections] | None:
        if not isinstance(url_or_client, str):
            return None
        history = self._history is not None
        return client_maker(
            url_or_client, self._client_type, options, self._on, history=history, write_concern=self._write_concern
        )
