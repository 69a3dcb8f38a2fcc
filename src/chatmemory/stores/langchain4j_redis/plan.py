"""What the LangChain4j Redis stores decide, without a driver and without I/O.

Every write is a compare-and-set of the whole value, on its SHA-1 (a Lua script, :data:`WRITE_SCRIPT`):
the key holds exactly what a Java ``ChatMemoryStore`` writes (LangChain4j's ``messagesToJson`` JSON, see
:func:`encode`), so there is no room for a version number, and a Python writer never overwrites a value
it has not read. A :class:`VersionBook` gives each value a store object reads or writes a version and
remembers which hash it stands for; :class:`KnownValues` the messages of each hash; every write carries an
id of its own (:class:`WriteIds`), so a resend after a lost reply is told apart from another writer's
equal write. A :class:`Planner` holds the store's configuration and turns a request into what to send;
:meth:`Planner.pinning` says which writes wait for replicas. What this means for callers:
*Versions and write ids* and *Exact messages* in ``docs/store-langchain4j.md``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import secrets
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from chatmemory import telemetry
from chatmemory.core.errors import ConcurrentUpdateError, Operation, SerializationError
from chatmemory.core.history import history_appends
from chatmemory.core.lru import LRU
from chatmemory.core.messages import ChatMessage, Content, ImageContent, PdfFileContent, UserMessage, checked_messages
from chatmemory.serialization import langchain4j
from chatmemory.serialization.native import dumps_message
from chatmemory.stores.base.turns import LockOptions
from chatmemory.stores.base.versions import next_version
from chatmemory.stores.langchain4j_redis.commands import LayoutWrite, Script, Set
from chatmemory.stores.langchain4j_redis.keys import (
    history_key,
    key,
    legacy_history_key,
    memory_id_of,
    memory_id_of_history_key,
    write_ids_key,
)
from chatmemory.stores.redis.scripts import TRIM

__all__ = [
    "ADOPT_HISTORY_SCRIPT",
    "ADOPT_HISTORY_SCRIPT_SHA",
    "DELETE_SCRIPT",
    "DELETE_SCRIPT_SHA",
    "EXACT_CONTENT_ATTRIBUTE",
    "URL_SCHEMES",
    "WRITE_HISTORY_SCRIPT",
    "WRITE_HISTORY_SCRIPT_SHA",
    "WRITE_SCRIPT",
    "WRITE_SCRIPT_SHA",
    "KnownValues",
    "Planner",
    "VersionBook",
    "WriteIds",
    "WritePlan",
    "check_client",
    "client_url",
    "decode",
    "digest",
    "encode",
    "message_list",
]


def script(name: str) -> tuple[str, str]:
    """The source of ``scripts/<name>.lua`` and the SHA-1 that ``EVALSHA`` names it by."""
    source = (resources.files("chatmemory.stores.langchain4j_redis") / "scripts" / f"{name}.lua").read_text("utf-8")
    return source, hashlib.sha1(source.encode("utf-8"), usedforsecurity=False).hexdigest()


WRITE_SCRIPT, WRITE_SCRIPT_SHA = script("write")
"""The compare-and-set of one memory's value (see the script for its arguments), and the SHA-1 that
``EVALSHA`` names it by; a server that does not know it yet gets ``EVAL`` once."""
DELETE_SCRIPT, DELETE_SCRIPT_SHA = script("delete")
"""The delete of a memory's value and of every key chatmemory keeps beside it."""
WRITE_HISTORY_SCRIPT, WRITE_HISTORY_SCRIPT_SHA = script("write_history")
"""The compare-and-set of a memory's value that also appends to its history."""
ADOPT_HISTORY_SCRIPT, ADOPT_HISTORY_SCRIPT_SHA = script("adopt_history")
"""The rename of a history kept where earlier stores kept it, to where this store keeps it."""

URL_SCHEMES = {"redis+langchain4j": "redis", "rediss+langchain4j": "rediss"}
"""``open_store`` schemes of this store and the Redis scheme each stands for."""


def digest(value: bytes | None) -> bytes:
    """What the write script compares: the value's SHA-1 in hex, ``b""`` for no key."""
    return b"" if value is None else hashlib.sha1(value, usedforsecurity=False).hexdigest().encode("ascii")


@dataclass(frozen=True, slots=True)
class _Seen:
    version: int
    digest: bytes


class VersionBook:
    """The versions one store object handed out, per memory: the latest one and the value hash it stands for.

    A memory whose version was forgotten (more memories in flight than ``size``) makes its next save a
    conflict, which a window memory retries from a fresh read.

    Args:
        size: how many memories to remember (least recently used first out), at least 1.

    Raises:
        TypeError: ``size`` is not an int.
        ValueError: ``size`` is below 1 (every save would be a conflict).
    """

    def __init__(self, size: int) -> None:
        if isinstance(size, bool) or not isinstance(size, int):
            raise TypeError(f"version_book_size must be an int, not {type(size).__name__}")
        if size < 1:
            raise ValueError(
                f"version_book_size must be >= 1, got {size!r}: a save needs the version of the value it replaces"
            )
        self._seen: LRU[str, _Seen] = LRU(size)
        self._lock = threading.Lock()

    def read(self, memory_id: str, value_digest: bytes) -> int:
        """The version of a value just read (``0`` for no key): the remembered one if the value is the same."""
        if not value_digest:
            return 0
        with self._lock:
            seen = self._seen.get(memory_id)
            if seen is not None and seen.digest == value_digest:
                return seen.version
            return self._issue(memory_id, seen, value_digest)

    def written(self, memory_id: str, value_digest: bytes) -> int:
        """A new version for a value just written: above any version handed out for the memory."""
        with self._lock:
            return self._issue(memory_id, self._seen.get(memory_id), value_digest)

    def _issue(self, memory_id: str, seen: _Seen | None, value_digest: bytes) -> int:
        version = next_version(seen.version if seen is not None else 0)
        self._seen.put(memory_id, _Seen(version, value_digest))
        return version

    def expected_digest(self, memory_id: str, expected_version: int) -> bytes | None:
        """The hash a save at ``expected_version`` must find (``b""``: no key), ``None`` if it is not current."""
        if expected_version == 0:
            return b""
        seen = self._seen.get(memory_id)
        return seen.digest if seen is not None and seen.version == expected_version else None

    def forget(self, memory_id: str) -> None:
        """Forget a memory written or deleted without a compare-and-set: no earlier version is current."""
        self._seen.pop(memory_id)

    def clear(self) -> None:
        """Forget every memory."""
        self._seen.clear()


class WriteIds:
    """Ids unique to one write each: a random nonce of the store object and a counter (no syscall per write)."""

    def __init__(self) -> None:
        self._nonce = secrets.token_hex(8).encode("ascii")
        self._counter = itertools.count()

    def next(self) -> bytes:
        """A new id (hex, 17 bytes or more)."""
        return b"%b%x" % (self._nonce, next(self._counter))


@dataclass(frozen=True, slots=True)
class WritePlan:
    """One compare-and-set to send: ``EVALSHA WRITE_SCRIPT 2 key write_ids_key expected value write_id ttl_ms``.

    ``write_id`` is this write's own: sent again unchanged, the script knows it landed already.
    """

    key: bytes
    expected_digest: bytes
    value: bytes
    new_digest: bytes
    ttl_ms: int
    write_id: bytes

    def script_args(self) -> tuple[bytes, ...]:
        """The script's ARGV."""
        return (self.expected_digest, self.value, self.write_id, b"%d" % self.ttl_ms)


def check_client(client: object, owns: bool, store: str) -> None:
    """Refuse a client that decodes replies (the values are compared as bytes).

    Raises:
        ValueError: the client was made with ``decode_responses=True``.
    """
    if client.get_encoder().decode_responses:  # type: ignore[attr-defined]
        raise ValueError(
            f"{store} needs a client with decode_responses=False (the stored JSON is compared byte for byte); "
            "create a separate client for the store"
        )


def message_list(messages: Iterable[ChatMessage]) -> list[ChatMessage]:
    """``messages`` read once into a list.

    Raises:
        TypeError: an entry is not a chat message.
    """
    return list(checked_messages(messages))


def client_url(url: str) -> tuple[str, dict[str, str]]:
    """A Redis URL for the driver, and this store's options taken from the query (``key_prefix``, ``ttl``).

    ``redis+langchain4j://host:6379/0?key_prefix=chat:`` gives ``redis://host:6379/0`` and
    ``{"key_prefix": "chat:"}``; other query parameters stay for the driver.
    """
    parts = urlsplit(url)
    scheme = URL_SCHEMES.get(parts.scheme.lower(), parts.scheme)
    query = parse_qsl(parts.query, keep_blank_values=True)
    options = {name: value for name, value in query if name in ("key_prefix", "ttl")}
    rest = [(name, value) for name, value in query if name not in options]
    return urlunsplit((scheme, parts.netloc, parts.path, urlencode(rest), parts.fragment)), options


# ------------------------------------------------------------------------------------ the stored value
#
# LangChain4j's format holds every chatmemory message but two content details, which its Java types fill
# in: an image always has a detail level, named in upper case, and a PDF always has a MIME type. When a
# user message has an image without a detail level (or with one in another spelling) or a PDF without a
# MIME type, the values it really had are kept in one attribute of that message, EXACT_CONTENT_ATTRIBUTE,
# which LangChain4j keeps as it is; chatmemory reads it back into the parts and drops it. A part that no
# longer has the value the attribute was written for (a Java service replaced the message) is read as it is.

EXACT_CONTENT_ATTRIBUTE = "chatmemory.contentAsGiven"
"""The user-message attribute holding content values LangChain4j's types would fill in or respell."""

_PDF = "application/pdf"


def _as_written(part: Content) -> dict[str, Any]:
    """The fields of ``part`` that LangChain4j's form changes, with the values they had (empty: none)."""
    if isinstance(part, ImageContent) and langchain4j.detail_level_name(part.detail_level) != part.detail_level:
        return {"detail_level": part.detail_level}
    if isinstance(part, PdfFileContent) and part.mime_type is None:
        return {"mime_type": None}
    return {}


def _exact(message: ChatMessage) -> ChatMessage:
    if not isinstance(message, UserMessage):
        return message
    if EXACT_CONTENT_ATTRIBUTE in message.attributes:
        raise SerializationError(
            f"the attribute {EXACT_CONTENT_ATTRIBUTE!r} is reserved by the LangChain4j Redis store; "
            "rename it in your user message"
        )
    given = {str(index): kept for index, part in enumerate(message.contents) if (kept := _as_written(part))}
    if not given:
        return message
    return UserMessage(message.contents, message.name, {**message.attributes, EXACT_CONTENT_ATTRIBUTE: given})


def encode(messages: Iterable[ChatMessage]) -> bytes:
    """The stored value of ``messages``: ``ChatMessageSerializer.messagesToJson`` JSON, as UTF-8.

    Raises:
        SerializationError: a message LangChain4j's format cannot hold (an image detail level it has no
            name for, text JSON cannot carry), or a user message using the reserved attribute.
    """
    listed = [_exact(message) for message in messages]
    value = langchain4j.dumps(listed).encode("utf-8")
    telemetry.note_write(appended=len(listed), evicted=None, bytes=len(value))
    return value


def _restore(part: Content, kept: Any) -> Content:
    if not isinstance(kept, Mapping):
        return part
    if isinstance(part, ImageContent) and "detail_level" in kept:
        original = kept["detail_level"]
        if original is None or isinstance(original, str):
            try:
                written = langchain4j.detail_level_name(original)
            except SerializationError:
                return part
            if written == part.detail_level:
                return dataclasses.replace(part, detail_level=original)
    if isinstance(part, PdfFileContent) and kept.get("mime_type", _PDF) is None and part.mime_type == _PDF:
        return dataclasses.replace(part, mime_type=None)
    return part


def _read_back(message: ChatMessage) -> ChatMessage:
    if not isinstance(message, UserMessage) or EXACT_CONTENT_ATTRIBUTE not in message.attributes:
        return message
    given = message.attributes[EXACT_CONTENT_ATTRIBUTE]
    attributes = {key: value for key, value in message.attributes.items() if key != EXACT_CONTENT_ATTRIBUTE}
    contents = list(message.contents)
    if isinstance(given, Mapping):
        contents = [_restore(part, given.get(str(index))) for index, part in enumerate(contents)]
    return UserMessage(contents, message.name, attributes)


def decode(value: bytes | str, memory_id: str) -> list[ChatMessage]:
    """The messages a stored value holds.

    Raises:
        CorruptedMemoryError: the value is not LangChain4j chat messages JSON chatmemory can hold.
    """
    telemetry.note(bytes=len(value))
    return [_read_back(message) for message in langchain4j.loads(value, memory_id=memory_id)]


class KnownValues:
    """The messages of the value each memory was last seen with, by the value's SHA-1 (least recent out first).

    Args:
        size: how many memories to remember (at least 1: the size of the store's version book).
    """

    def __init__(self, size: int) -> None:
        self._values: LRU[str, tuple[bytes, tuple[ChatMessage, ...]]] = LRU(size)  # thread-safe itself

    def put(self, memory_id: str, value_digest: bytes, messages: Sequence[ChatMessage]) -> None:
        """Remember that the value with ``value_digest`` holds ``messages``."""
        self._values.put(memory_id, (value_digest, tuple(messages)))

    def get(self, memory_id: str, value_digest: bytes) -> tuple[ChatMessage, ...] | None:
        """The messages of the value with ``value_digest``, if it is the one remembered."""
        known = self._values.get(memory_id)
        return known[1] if known is not None and known[0] == value_digest else None

    def forget(self, memory_id: str) -> None:
        """Forget ``memory_id``."""
        self._values.pop(memory_id)

    def clear(self) -> None:
        """Forget every memory."""
        self._values.clear()


# ------------------------------------------------------------------------ writes acknowledged by replicas

_WAITED = frozenset({WRITE_SCRIPT_SHA, WRITE_HISTORY_SCRIPT_SHA, DELETE_SCRIPT_SHA, TRIM.sha})
"""The scripts that change what a memory holds (by sha: the scripts are plain source here). Not waited
for: the lease lock (``SET NX``, unlock) and the adoption of a history kept where earlier stores kept it
(adopted again if lost)."""


# ------------------------------------------------------------------------------------------ the planner


class Planner:
    """What a LangChain4j-layout store sends, from its configuration and a request (plus the version book).

    Args:
        prefix: the key prefix, encoded.
        ttl_ms: the value's expiry in ms (``0``: none).
        lock: the lease lock's options.
        history: keep a history beside each value.
        history_ttl_ms: the history's expiry in ms, ``None`` for the value's.
    """

    def __init__(
        self,
        prefix: bytes,
        ttl_ms: int = 0,
        lock: LockOptions | None = None,
        history: bool = False,
        history_ttl_ms: int | None = None,
    ) -> None:
        self.prefix = prefix
        self.ttl_ms = ttl_ms
        self.lock = lock if lock is not None else LockOptions()
        self.keeps_history = history
        self._history_ttl_arg = b"" if history_ttl_ms is None else b"%d" % history_ttl_ms
        self._write_ids = WriteIds()

    def key_of(self, memory_id: str) -> bytes:
        """The Redis key of ``memory_id`` (already validated)."""
        return key(self.prefix, memory_id)

    def write(self, memory_id: str, messages: list[ChatMessage], expected_version: int, book: VersionBook) -> WritePlan:
        """The compare-and-set that saves ``messages`` at ``expected_version`` (known to ``book``).

        Raises:
            ConcurrentUpdateError: ``expected_version`` is not the version this store knows the memory at.
            SerializationError: a message LangChain4j's format cannot hold.
        """
        expected = book.expected_digest(memory_id, expected_version)
        if expected is None:
            raise ConcurrentUpdateError(memory_id, expected_version)
        value = encode(messages)
        return WritePlan(self.key_of(memory_id), expected, value, digest(value), self.ttl_ms, self._write_ids.next())

    def history_write(
        self,
        memory_id: str,
        expected: bytes,
        old: Sequence[ChatMessage],
        new: list[ChatMessage],
        also_recorded: Sequence[ChatMessage] = (),
    ) -> tuple[WritePlan, Script]:
        """The compare-and-set of ``new`` over the value hashed ``expected`` that records what it appends."""
        value = encode(new)
        memory_key = self.key_of(memory_id)
        plan = WritePlan(memory_key, expected, value, digest(value), self.ttl_ms, self._write_ids.next())
        records = [dumps_message(message) for message in (*also_recorded, *history_appends(old, new))]
        args = (*plan.script_args(), self._history_ttl_arg, *records)
        keys = (memory_key, history_key(memory_key), write_ids_key(memory_key), legacy_history_key(memory_key))
        script = Script(WRITE_HISTORY_SCRIPT, WRITE_HISTORY_SCRIPT_SHA, keys, args, Operation.WRITE, memory_id)
        return plan, script

    def pinning(self, operation: str) -> Callable[[object], LayoutWrite | None]:
        """What to wait for among the commands of an operation (``operation``, for the errors).

        The compare-and-set scripts (with and without history), the delete script, a history trim and the
        plain ``SET`` of ``update_messages``, as :class:`~.commands.LayoutWrite` (see
        :func:`chatmemory.stores.redis.operations.acknowledged`).
        """
        prefix = self.prefix

        def pin(command: object) -> LayoutWrite | None:
            if isinstance(command, Set):
                return LayoutWrite(command, operation, memory_id_of(command.key, prefix) or "")
            if not isinstance(command, Script) or command.sha not in _WAITED:
                return None
            found = command.keys[0]  # a trim's is the history's key, the others' the memory's
            is_trim = command.sha == TRIM.sha
            owner = memory_id_of_history_key(found, prefix) if is_trim else memory_id_of(found, prefix)
            return LayoutWrite(command, operation, owner or "")

        return pin
