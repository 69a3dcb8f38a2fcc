"""The Redis store: one memory is a list of message records and a metadata hash in one hash slot.

Every read and every write is one Lua script run (``EVALSHA``, falling back to ``EVAL`` once per server
on ``NOSCRIPT``), so each is atomic and one round trip, on a single server and on Redis Cluster alike.
The layout and the scripts are described in :mod:`chatmemory.stores.redis_scripts`.

Writes are diffs: the store keeps the last snapshot it read or wrote of each memory (a bounded LRU), and
when a write starts from that snapshot it sends only the new messages and which leading elements to drop.
The script applies the diff only if the memory is still at that version and incarnation, so a cached
snapshot can never be applied to a list it did not come from. Reads send the cached version too, and the
server answers "unchanged" without sending the list when it still holds it.
"""

from __future__ import annotations

import bisect
import datetime
import itertools
import re
import secrets
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from chatmemory.core.errors import ConcurrentUpdateError, CorruptedMemoryError, StoreError
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage, require_message
from chatmemory.core.sequence_diff import diff_messages
from chatmemory.core.store import Snapshot
from chatmemory.serialization.native import dumps_message, loads_message
from chatmemory.stores._optional import require
from chatmemory.stores.base.options import ttl_seconds
from chatmemory.stores.redis_scripts import READ_SCRIPT, WRITE_SCRIPT

require("redis", feature="RedisChatMemoryStore", extra="redis")

from redis import Redis  # noqa: E402 - only once the extra is known to be installed
from redis.cluster import RedisCluster  # noqa: E402
from redis.commands.core import Script  # noqa: E402
from redis.exceptions import NoScriptError, RedisClusterException, RedisError, ResponseError  # noqa: E402

__all__ = ["RedisChatMemoryStore"]

_CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
_CONFLICT, _STALE = 0, -1  # the write script's refusals; a written diff replies its (positive) version
_UNCHANGED = 1  # the read script's reply when the caller's cached snapshot is current
_ESCAPED_ID = re.compile(rb"(?:[^%{}]|%25|%7B|%7D)+")
_GLOB_SPECIAL = re.compile(rb"([*?\[\]\\])")
_UNESCAPES = {b"%25": b"%", b"%7B": b"{", b"%7D": b"}"}


def _escape_id(memory_id: str) -> bytes:
    """The id as key bytes: ``{`` and ``}`` cannot end or open the hash tag, and ``%`` keeps it reversible."""
    raw = memory_id.encode("utf-8", "surrogatepass")
    return raw.replace(b"%", b"%25").replace(b"{", b"%7B").replace(b"}", b"%7D")


def _unescape_id(escaped: bytes) -> str | None:
    """The id back from its key bytes, or ``None`` for a key this store did not write."""
    if _ESCAPED_ID.fullmatch(escaped) is None:
        return None
    raw = re.sub(rb"%(?:25|7B|7D)", lambda match: _UNESCAPES[match.group(0)], escaped)
    try:
        return validate_memory_id(raw.decode("utf-8", "surrogatepass"))
    except (UnicodeDecodeError, ValueError):
        return None


def _glob_literal(text: bytes) -> bytes:
    """``text`` as a SCAN MATCH pattern that matches only itself."""
    return _GLOB_SPECIAL.sub(rb"\\\1", text)


@dataclass(frozen=True, slots=True)
class _Cached:
    """What this store last read or wrote for one memory."""

    version: int
    incarnation: bytes
    messages: tuple[ChatMessage, ...]
    keys: tuple[bytes, bytes]
    version_arg: bytes  # the version as the scripts compare it, encoded once


class RedisChatMemoryStore:
    """A store on Redis or Redis Cluster; supports versioning, listing and TTL.

    Args:
        url_or_client: a ``redis://``, ``rediss://``, ``unix://``, ``redis+cluster://`` or
            ``rediss+cluster://`` URL (the store builds the client, owns it and closes it in
            :meth:`close`), or a ``redis.Redis`` / ``redis.cluster.RedisCluster`` client created with
            ``decode_responses=False`` (the caller owns and closes it).
        key_prefix: put before every key; stores with different prefixes share nothing.
        ttl: seconds (or a ``timedelta``) a memory lives after its last write; ``None``: forever.
        refresh_ttl_on_read: reads slide the expiry too.
        snapshot_cache_size: how many memories' last snapshots to keep for diffing writes and skipping unchanged
            reads (``0``: none; every write then sends the whole list).
    """

    def __init__(
        self,
        url_or_client: str | Redis | RedisCluster,
        *,
        key_prefix: str = "chatmemory:",
        ttl: float | datetime.timedelta | None = None,
        refresh_ttl_on_read: bool = False,
        snapshot_cache_size: int = 1024,
    ) -> None:
        if snapshot_cache_size < 0:
            raise ValueError(f"snapshot_cache_size must be >= 0, got {snapshot_cache_size!r}")
        self._ttl = ttl_seconds(ttl)
        ttl_ms = 0 if self._ttl is None else max(1, round(self._ttl * 1000))
        # Script arguments are passed as bytes: the driver sends bytes as they are.
        self._ttl_arg = b"%d" % ttl_ms
        self._read_ttl_arg = self._ttl_arg if refresh_ttl_on_read else b"0"
        self._refresh_ttl_on_read = refresh_ttl_on_read
        self._prefix = key_prefix.encode("utf-8")
        self._key_prefix = key_prefix
        client: Redis | RedisCluster
        if isinstance(url_or_client, str):
            client = self._client_from_url(url_or_client)
            self._owns_client = True
        elif isinstance(url_or_client, (Redis, RedisCluster)):
            client = url_or_client
            self._owns_client = False
        else:
            raise TypeError(
                "RedisChatMemoryStore takes a Redis URL or a redis.Redis / redis.cluster.RedisCluster client, "
                f"not {type(url_or_client).__name__}"
            )
        if client.get_encoder().decode_responses:
            if self._owns_client:
                client.close()
            raise ValueError(
                "RedisChatMemoryStore needs a client with decode_responses=False: message records are bytes. "
                "Create a separate client for the store, without decode_responses=True"
            )
        self._client = client
        self._cluster = isinstance(client, RedisCluster)
        self._read: Script = client.register_script(READ_SCRIPT)
        self._write: Script = client.register_script(WRITE_SCRIPT)
        self._cache_size = snapshot_cache_size
        self._cache: OrderedDict[str, _Cached] = OrderedDict()
        self._cache_lock = threading.Lock()
        # Write tokens only need to be unique: a random per-store nonce and a counter, no syscall per write.
        self._nonce = secrets.token_hex(8).encode("ascii")
        self._counter = itertools.count()

    @staticmethod
    def _client_from_url(url: str) -> Redis | RedisCluster:
        scheme, separator, rest = url.partition("://")
        if not separator:
            raise ValueError(f"{url!r} is not a Redis URL (e.g. redis://localhost:6379/0)")
        base = _CLUSTER_SCHEMES.get(scheme.lower())
        try:
            if base is not None:
                return RedisCluster.from_url(f"{base}://{rest}")
            return Redis.from_url(url)
        except (RedisError, RedisClusterException) as exc:
            # RedisClusterException (e.g. a cluster URL naming a node without cluster mode) is not a RedisError.
            raise StoreError("connecting to Redis", detail=str(exc)) from exc

    @classmethod
    def from_url(cls, url: str, **options: Any) -> RedisChatMemoryStore:
        """Build from a ``redis://``, ``rediss://``, ``unix://`` or ``redis[s]+cluster://`` URL."""
        return cls(url, **options)

    @property
    def ttl(self) -> float | None:
        """Seconds a memory lives after its last write, or ``None``."""
        return self._ttl

    @property
    def client(self) -> Redis | RedisCluster:
        """The Redis client the store uses."""
        return self._client

    # ------------------------------------------------------------------------------------------ keys

    def keys_of(self, memory_id: str) -> tuple[bytes, bytes]:
        """The metadata and message-list keys of ``memory_id`` (in one hash slot)."""
        tagged = self._prefix + b"{" + _escape_id(validate_memory_id(memory_id)) + b"}"
        return tagged + b":meta", tagged + b":messages"

    @staticmethod
    def key_pattern(key_prefix: str) -> bytes:
        """A SCAN MATCH pattern for every key a store with ``key_prefix`` writes (the prefix taken literally)."""
        return _glob_literal(key_prefix.encode("utf-8")) + b"*"

    # ----------------------------------------------------------------------------------------- cache

    def _cached(self, memory_id: str) -> _Cached | None:
        with self._cache_lock:
            return self._cache.get(memory_id)

    def _remember(self, memory_id: str, entry: _Cached) -> None:
        if not self._cache_size:
            return
        with self._cache_lock:
            self._cache[memory_id] = entry
            self._cache.move_to_end(memory_id)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)

    def _forget(self, memory_id: str) -> None:
        with self._cache_lock:
            self._cache.pop(memory_id, None)

    # ----------------------------------------------------------------------------------------- reads

    def _run(self, script: Script, operation: str, memory_id: str, keys: tuple[bytes, bytes], *args: bytes) -> Any:
        try:
            try:
                # EVALSHA straight from the client: the Script's own call path costs more than the script.
                return self._client.evalsha(script.sha, 2, *keys, *args)
            except NoScriptError:
                # The server has not seen the script (restarted, flushed, a new cluster node): the Script
                # loads it and runs it again.
                return script(keys=keys, args=args)
        except ResponseError as exc:
            # Redis error replies start with their code; WRONGTYPE means a key of this memory holds
            # something this store never wrote there.
            if str(exc).startswith("WRONGTYPE"):
                raise CorruptedMemoryError(
                    memory_id, f"a key of the memory holds another type of value than this store writes ({exc})"
                ) from exc
            raise StoreError(operation, memory_id, str(exc)) from exc
        except RedisError as exc:
            raise StoreError(operation, memory_id, str(exc)) from exc

    def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version."""
        memory_id = validate_memory_id(memory_id)
        cached = self._cached(memory_id)
        if cached is not None:
            reply = self._run(
                self._read,
                "reading the memory",
                memory_id,
                cached.keys,
                self._read_ttl_arg,
                cached.version_arg,
                cached.incarnation,
            )
            if reply == _UNCHANGED:
                return Snapshot(list(cached.messages), cached.version)
            keys = cached.keys
        else:
            keys = self.keys_of(memory_id)
            reply = self._run(self._read, "reading the memory", memory_id, keys, self._read_ttl_arg, b"", b"")
        if not isinstance(reply, list):
            # "Unchanged" although nothing was cached: the hash holds an empty version and incarnation.
            raise CorruptedMemoryError(memory_id, "its metadata has an empty version")
        raw_version, incarnation, records = reply
        if raw_version == b"":
            raise CorruptedMemoryError(memory_id, "its message list has no metadata (no version) next to it")
        version = self._version(memory_id, raw_version)
        if version == 0:
            self._forget(memory_id)
            return Snapshot([], 0)
        messages = [loads_message(record, memory_id=memory_id) for record in records]
        self._remember(memory_id, _Cached(version, incarnation, tuple(messages), keys, raw_version))
        return Snapshot(messages, version)

    @staticmethod
    def _version(memory_id: str, raw: bytes) -> int:
        try:
            return int(raw)
        except ValueError:
            raise CorruptedMemoryError(memory_id, f"its version is {raw!r}, not an integer") from None

    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return self.load(memory_id).messages

    # ---------------------------------------------------------------------------------------- writes

    def _token(self) -> bytes:
        return b"%b%x" % (self._nonce, next(self._counter))

    def _full(
        self, memory_id: str, expected: bytes, records: Sequence[bytes], messages: tuple[ChatMessage, ...] | None
    ) -> int | None:
        """Write ``records`` as the whole list: the new version, or ``None`` on a version conflict.

        ``messages`` (what the records encode) are kept as the snapshot to diff the next write against.
        """
        keys = self.keys_of(memory_id)
        reply = self._run(
            self._write, "writing the memory", memory_id, keys, expected, self._token(), self._ttl_arg, b"f", *records
        )
        if reply == _CONFLICT:
            return None
        raw_version, incarnation = reply
        version = int(raw_version)
        if messages is not None:
            self._remember(memory_id, _Cached(version, incarnation, messages, keys, raw_version))
        return version

    def _diff(self, memory_id: str, cached: _Cached, messages: tuple[ChatMessage, ...]) -> int | None:
        """Write ``messages`` as a diff against ``cached``; ``None`` when the diff is not of that shape.

        Returns:
            The script's reply: the new version when written, else ``_CONFLICT`` or ``_STALE``.
        """
        plan = diff_messages(cached.messages, messages)
        if plan.is_rewrite:
            return None
        span = plan.deleted_span
        kept_in_span = plan.kept[: bisect.bisect_left(plan.kept, span)]
        # Kept messages matched cached ones, so they are messages; only the appended need checking.
        reply: int = self._run(
            self._write,
            "writing the memory",
            memory_id,
            cached.keys,
            cached.version_arg,
            self._token(),
            self._ttl_arg,
            b"d",
            cached.incarnation,
            b"%d" % span,
            b"%d" % len(kept_in_span),
            *[b"%d" % position for position in kept_in_span],
            *[self._encode(message) for message in plan.appended],
        )
        if reply > 0:
            self._remember(memory_id, _Cached(reply, cached.incarnation, messages, cached.keys, b"%d" % reply))
        return reply

    def save(self, memory_id: str, messages: Sequence[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if ``memory_id`` is still at ``expected_version``."""
        memory_id = validate_memory_id(memory_id)
        new = tuple(messages)
        cached = self._cached(memory_id)
        if cached is not None and 0 < expected_version < cached.version:
            # This store saw a later version itself, and versions only grow (or the memory is gone): the
            # write cannot succeed, so it is refused without encoding and sending the list.
            raise ConcurrentUpdateError(memory_id, expected_version)
        if cached is not None and expected_version != 0 and cached.version == expected_version:
            outcome = self._diff(memory_id, cached, new)
            if outcome is not None:
                if outcome > 0:
                    return outcome
                self._forget(memory_id)
                if outcome != _STALE:
                    raise ConcurrentUpdateError(memory_id, expected_version)
                # Same version, other incarnation: the cache is not what the server holds; send it all.
        version = self._full(memory_id, b"%d" % expected_version, [self._encode(m) for m in new], new)
        if version is None:
            self._forget(memory_id)
            raise ConcurrentUpdateError(memory_id, expected_version)
        return version

    def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        """Replace the stored messages of ``memory_id``."""
        memory_id = validate_memory_id(memory_id)
        new = tuple(messages)
        cached = self._cached(memory_id)
        if cached is not None:
            outcome = self._diff(memory_id, cached, new)
            if outcome is not None and outcome > 0:
                return
            self._forget(memory_id)
        self._full(memory_id, b"", [self._encode(message) for message in new], new)

    @staticmethod
    def _encode(message: ChatMessage) -> bytes:
        require_message(message)
        return dumps_message(message)

    def delete_messages(self, memory_id: str) -> None:
        """Remove ``memory_id``; idempotent."""
        memory_id = validate_memory_id(memory_id)
        self._forget(memory_id)
        try:
            self._client.delete(*self.keys_of(memory_id))
        except RedisError as exc:
            raise StoreError("deleting the memory", memory_id, str(exc)) from exc

    def write_raw(self, memory_id: str, records: Sequence[bytes]) -> None:
        """Store message records (``dumps_message`` payloads) as they are, decoded only when read.

        This imports data from another store without decoding it twice, and is how the contract suite
        plants corrupted data.
        """
        memory_id = validate_memory_id(memory_id)
        self._forget(memory_id)
        self._full(memory_id, b"", [bytes(record) for record in records], None)

    # --------------------------------------------------------------------------------------- listing

    def memory_ids(self) -> Iterator[str]:
        """The ids of the stored memories, in no particular order (SCAN over every primary)."""
        pattern = _glob_literal(self._prefix) + b"{*}:meta"
        start, end = len(self._prefix) + 1, -len(b"}:meta")
        seen: set[str] = set()
        try:
            if isinstance(self._client, RedisCluster):
                keys = self._client.scan_iter(match=pattern, count=1000, target_nodes=RedisCluster.PRIMARIES)
            else:
                keys = self._client.scan_iter(match=pattern, count=1000)
            for key in keys:
                memory_id = _unescape_id(key[start:end])
                # SCAN may return a key twice; a key that does not parse belongs to someone else.
                if memory_id is not None and memory_id not in seen:
                    seen.add(memory_id)
                    yield memory_id
        except RedisError as exc:
            raise StoreError("listing memory ids", detail=str(exc)) from exc

    # ------------------------------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Close the client if the store built it from a URL; a client passed in is left open."""
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> RedisChatMemoryStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        kind = "cluster" if self._cluster else "server"
        return (
            f"RedisChatMemoryStore({kind}, key_prefix={self._key_prefix!r}, ttl={self._ttl!r}, "
            f"refresh_ttl_on_read={self._refresh_ttl_on_read!r})"
        )
