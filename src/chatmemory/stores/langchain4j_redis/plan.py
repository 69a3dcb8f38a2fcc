"""What the LangChain4j Redis stores decide, without a driver and without I/O.

Every write is a compare-and-set of the whole value, on its SHA-1 (a Lua script, :data:`WRITE_SCRIPT`):
the key holds exactly what a Java ``ChatMemoryStore`` writes, so there is no room for a version number,
and a Python writer never overwrites a value it has not read. The versions a store hands out are its own:
a :class:`VersionBook` gives each value a store object reads or writes a version on the usual clock rule
and remembers which hash it stands for, and ``save(expected_version)`` sends that hash. Every write also
carries an id of its own (:class:`WriteIds`), which the script keeps in a list beside the value, so a
resend after a lost reply is told apart from another writer's equal write. What this means for callers:
*Versions and write ids* in ``docs/store-langchain4j.md``.
"""

from __future__ import annotations

import hashlib
import itertools
import secrets
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import resources
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from chatmemory.core.errors import ConcurrentUpdateError
from chatmemory.core.lru import LRU
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage, checked_messages
from chatmemory.stores.base.versions import next_version
from chatmemory.stores.langchain4j_redis.value import encode

__all__ = [
    "DELETE_SCRIPT",
    "DELETE_SCRIPT_SHA",
    "URL_SCHEMES",
    "WRITE_SCRIPT",
    "WRITTEN",
    "WRITTEN_BEFORE",
    "WRITE_SCRIPT_SHA",
    "VersionBook",
    "WriteIds",
    "WritePlan",
    "check_client",
    "client_url",
    "digest",
    "glob_literal",
    "key",
    "memory_id_of",
    "message_list",
    "plan_write",
    "written_version",
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

URL_SCHEMES = {"redis+langchain4j": "redis", "rediss+langchain4j": "rediss"}
"""``open_store`` schemes of this store and the Redis scheme each stands for."""

WRITTEN, WRITTEN_BEFORE = 1, 2
"""The write scripts' replies for a write made by this run, and by an earlier run of the same write (a resend)."""


def key(prefix: bytes, memory_id: str) -> bytes:
    """The key of a memory: the prefix, then the id, as LangChain4j's stores build it."""
    return prefix + memory_id.encode("utf-8")


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


def plan_write(
    book: VersionBook,
    prefix: bytes,
    memory_id: str,
    messages: list[ChatMessage],
    expected_version: int,
    ttl_ms: int,
    write_id: bytes,
) -> WritePlan:
    """The compare-and-set that saves ``messages`` at ``expected_version``.

    Raises:
        ConcurrentUpdateError: ``expected_version`` is not the version this store knows the memory at.
        SerializationError: a message LangChain4j's format cannot hold.
    """
    expected = book.expected_digest(memory_id, expected_version)
    if expected is None:
        raise ConcurrentUpdateError(memory_id, expected_version)
    value = encode(messages)
    return WritePlan(key(prefix, memory_id), expected, value, digest(value), ttl_ms, write_id)


def written_version(book: VersionBook, memory_id: str, plan: WritePlan, reply: object, expected_version: int) -> int:
    """The outcome of a sent plan: the new version, or a conflict.

    Raises:
        ConcurrentUpdateError: the key held another value; nothing was written.
    """
    if reply != WRITTEN and reply != WRITTEN_BEFORE:
        # The versions handed out stay: the next read sees the other value and issues a new one.
        raise ConcurrentUpdateError(memory_id, expected_version)
    return book.written(memory_id, plan.new_digest)


def glob_literal(text: bytes) -> bytes:
    """``text`` with Redis glob characters escaped, so a key prefix matches only itself in ``SCAN MATCH``."""
    return bytes(b for char in text for b in ((92, char) if char in b"*?[]\\" else (char,)))


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


def memory_id_of(found: bytes, prefix: bytes) -> str | None:
    """The memory id of a key found under ``prefix``, or ``None`` if the rest is no valid id."""
    try:
        return validate_memory_id(found[len(prefix) :].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, TypeError):
        return None


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
