"""What the sync and async MongoDB stores share about pymongo: client options, names, and its errors.

Both executors build their clients with the same options, validate names the same way and turn a
driver exception into a :class:`~chatmemory.stores.mongodb.plan.WriteReply` or a ``StoreError`` message
the same way. No I/O here; this module imports pymongo (the plan module does not).
"""

from __future__ import annotations

import datetime
import re
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

from chatmemory.core.errors import StoreError
from chatmemory.stores._optional import require
from chatmemory.stores.base.operations import Operation

require("pymongo", feature="MongoChatMemoryStore", extra="mongodb")

from bson.codec_options import CodecOptions  # noqa: E402 - imported once the driver is known to be installed
from bson.errors import BSONError  # noqa: E402
from pymongo.errors import (  # noqa: E402
    BulkWriteError,
    ConnectionFailure,
    DocumentTooLarge,
    InvalidName,
    OperationFailure,
    PyMongoError,
    ServerSelectionTimeoutError,
    WaitQueueTimeoutError,
)
from pymongo.write_concern import WriteConcern  # noqa: E402

from chatmemory.stores.mongodb.batch_creates import refused_indexes  # noqa: E402
from chatmemory.stores.mongodb.expressions import TOO_LARGE_ADVICE  # noqa: E402
from chatmemory.stores.mongodb.plan import DUPLICATE_KEY, RESEND_CODES, Document, WriteReply  # noqa: E402

__all__ = [
    "CODEC_OPTIONS",
    "DEFAULT_DATABASE",
    "DEFAULT_TIMEOUTS_MS",
    "DRIVER_ERRORS",
    "EXPIRY_INDEX",
    "INDEX_CONFLICT_CODES",
    "WriteConcern",
    "client_options",
    "copy_landed",
    "collection_of",
    "database_name",
    "describe",
    "equivalent_expiry_index",
    "expiry_index_conflict",
    "invalid_name",
    "reply_to_error",
    "resend_error",
    "server_time",
    "write_concern_of",
    "write_error",
]

DRIVER_ERRORS: Final = (PyMongoError, BSONError)
"""What pymongo raises: its own errors, and BSON errors such as DocumentTooLarge (not a PyMongoError)."""

CODEC_OPTIONS: Final[CodecOptions[Document]] = CodecOptions(
    document_class=dict, tz_aware=True, tzinfo=datetime.timezone.utc
)
"""Documents as dicts and aware UTC dates, whatever the caller's client uses."""

EXPIRY_INDEX: Final = "chatmemory_expires_at"
INDEX_CONFLICT_CODES: Final = frozenset({85, 86})
"""IndexOptionsConflict / IndexKeySpecsConflict: an index of that name or key exists with other options."""
DOCUMENT_TOO_LARGE_CODES: Final = frozenset({10334, 17419})
"""BSONObjectTooLarge / the updated document would pass the server's 16 MiB limit."""

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


_TOPOLOGY = re.compile(r",?\s*(Timeout: [0-9.]+s, )?Topology Description: .*", re.DOTALL)


def describe(exc: BaseException) -> str:
    """The driver's message without the topology dump a server selection failure carries."""
    text = _TOPOLOGY.sub("", str(exc)).strip()
    if isinstance(exc, ServerSelectionTimeoutError):
        text = f"no MongoDB server answered in time ({text}); check the URL and that the server is running"
    return text


def reply_to_error(exc: BaseException) -> WriteReply | None:
    """The reply a driver error stands for, or ``None`` if the write failed and must be reported.

    A connection that failed after the command went out leaves it unknown whether the write applied
    (``lost``); a server that was never reached (no server selected, no pooled connection) did not.
    """
    if isinstance(exc, (ServerSelectionTimeoutError, WaitQueueTimeoutError)):
        return None
    if isinstance(exc, ConnectionFailure):
        return WriteReply(lost=True)
    if isinstance(exc, OperationFailure) and exc.code in RESEND_CODES:
        return WriteReply(error_code=exc.code)
    return None


def copy_landed(exc: BaseException) -> bool:
    """Whether a history copy that raised ``exc`` still left every entry in place.

    A group copied twice (by two stores, or again after a lost reply) fails with duplicate keys: the
    entry is there already (the same entry: its key is its history and sequence).
    """
    if not isinstance(exc, BulkWriteError):
        return False
    details = exc.details or {}
    errors = details.get("writeErrors") or []
    return not details.get("writeConcernErrors") and all(error.get("code") == DUPLICATE_KEY for error in errors)


def duplicate_indexes(exc: BaseException) -> list[int] | None:
    """The documents an ``insert_many`` that raised ``exc`` refused, if duplicate ``_id`` s were all it refused."""
    if not isinstance(exc, BulkWriteError):
        return None
    return refused_indexes(exc.details or {}, DUPLICATE_KEY)


def server_time(hello: Document) -> datetime.datetime | None:
    """The server's clock from a ``hello`` reply (``localTime``), as an aware UTC datetime."""
    value = hello.get("localTime")
    if not isinstance(value, datetime.datetime):
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=datetime.timezone.utc)


def write_error(memory_id: str, exc: BaseException) -> StoreError:
    """The ``StoreError`` of a failed write, saying what to do about a document past 16 MiB."""
    detail = describe(exc)
    if isinstance(exc, DocumentTooLarge) or getattr(exc, "code", None) in DOCUMENT_TOO_LARGE_CODES:
        detail = f"{detail}. {TOO_LARGE_ADVICE}"
    return StoreError(Operation.WRITE, memory_id, detail)


def resend_error(memory_id: str, attempts: int, error: BaseException | None) -> StoreError:
    """The error of a write resent until its retry budget ran out (``error``: the last driver error)."""
    detail = f"sent {attempts} times without a definite answer"
    if error is not None:
        detail += f" (last: {describe(error)})"
    exc = StoreError(Operation.WRITE, memory_id, f"{detail}; it was applied at most once, reload to see whether it was")
    exc.__cause__ = error
    return exc


def expiry_index_conflict(collection_name: str) -> str:
    """What to do when an index on ``expires_at`` exists with other options."""
    return (
        f"an index on 'expires_at' or named {EXPIRY_INDEX!r} exists with other options; "
        f"drop it (db.{collection_name}.dropIndex(...)) so the store can create its TTL index with "
        "expireAfterSeconds: 0"
    )


def equivalent_expiry_index(indexes: list[Document]) -> bool:
    """Whether an operator created the same TTL index under another name (MongoDB then refuses ours)."""
    return any(
        list(dict(index["key"]).items()) == [("expires_at", 1)] and index.get("expireAfterSeconds") == 0
        for index in indexes
    )
