"""``LangChain4jRedisChatMemoryStore``: one live memory shared with a LangChain4j service through Redis."""

from __future__ import annotations

import datetime
from collections.abc import Generator, Iterable, Iterator
from typing import Any, TypeVar

from chatmemory.core.errors import CorruptedMemoryError, HistoryNotEnabledError, StoreError
from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryPage, history_query
from chatmemory.core.memory_id import validate_memory_id
from chatmemory.core.messages import ChatMessage
from chatmemory.core.store import Snapshot
from chatmemory.stores._optional import require
from chatmemory.stores.base.lifecycle import StoreLifecycle
from chatmemory.stores.base.operations import Operation
from chatmemory.stores.base.options import TTL, history_ttl_seconds, ttl_seconds, validate_prefix
from chatmemory.stores.base.telemetry import StoreTelemetry
from chatmemory.stores.langchain4j_redis.history import (
    Command,
    Get,
    HistorySteps,
    KnownValues,
    history_key,
    history_pattern,
    memory_id_of_history_key,
)
from chatmemory.stores.langchain4j_redis.plan import (
    WRITE_SCRIPT,
    WRITE_SCRIPT_SHA,
    VersionBook,
    check_client,
    client_url,
    digest,
    glob_literal,
    key,
    memory_id_of,
    message_list,
    plan_write,
    written_version,
)
from chatmemory.stores.langchain4j_redis.value import decode, encode
from chatmemory.stores.redis.plan import trim_args

require("redis", feature="LangChain4jRedisChatMemoryStore", extra="redis")

from redis import Redis  # noqa: E402 - only once the extra is known to be installed
from redis.cluster import RedisCluster  # noqa: E402
from redis.exceptions import NoScriptError, RedisClusterException, RedisError, ResponseError  # noqa: E402

__all__ = ["LangChain4jRedisChatMemoryStore"]

T = TypeVar("T")

_traced = StoreTelemetry("langchain4j-redis", __name__)

_CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}


class LangChain4jRedisChatMemoryStore(StoreLifecycle):
    """A memory per Redis string at ``key_prefix + memory_id``, holding LangChain4j's JSON, shared with Java.

    The value is exactly what LangChain4j's ``ChatMessageSerializer.messagesToJson(messages)`` writes, under
    the key a LangChain4j ``RedisChatMemoryStore`` uses (``SET key json [EX ttl]``, ``GET``, ``DEL``), so a
    Java service with a ``MessageWindowChatMemory`` and a Python service with chatmemory read and extend one
    live memory. Point ``key_prefix`` at the prefix the Java store uses (``""`` if it uses none).

    **Concurrent writers.** Every write from chatmemory (``save``, hence every window memory's ``add``) is a
    compare-and-set of the whole value: a Lua script writes only if the key still holds the value the
    writer read (compared by SHA-1), so a Python writer never overwrites a Java write it has not seen; it
    gets :class:`~chatmemory.ConcurrentUpdateError` and the memory retries from a fresh read. The other way
    round cannot be helped: LangChain4j writes with a plain ``SET`` and no versioning, so **a Java writer
    can overwrite a Python write it has not seen**. Let one side write a given memory at a time if that
    matters. ``update_messages`` and ``delete_messages`` are plain ``SET`` and ``DEL``, as in LangChain4j
    (with ``history=True``, ``update_messages`` is a compare-and-set too, retried until it lands).

    **Versions** are this store object's own (see :mod:`chatmemory.stores.langchain4j_redis.plan`): the
    value holds none, so a version names a value this object read or wrote. Within one store object they
    grow as the contract says; a version from another process or store object is a conflict.

    **Exactness.** Every message reads back equal to what was written. LangChain4j's types fill in an
    image's detail level and a PDF's MIME type; where a message had none (or a detail level spelled
    otherwise), the values it had are kept in the user message's ``chatmemory.contentAsGiven`` attribute,
    which LangChain4j carries along (:mod:`chatmemory.stores.langchain4j_redis.value`).

    Supports versioning, TTL (every chatmemory write sets the expiry, as LangChain4j's ``ttl`` does) and
    listing (the string keys under ``key_prefix``: with an empty prefix, every string key of the database
    is taken for a memory, so give the memories a prefix of their own), and history (``history=True``).

    Args:
        url_or_client: a ``redis://``, ``rediss://``, ``unix://`` or ``redis[s]+cluster://`` URL (the store
            owns and closes the client), or a ``redis.Redis`` / ``redis.cluster.RedisCluster`` client made
            with ``decode_responses=False`` (you close it).
        key_prefix: what the LangChain4j service puts before memory ids (``""``: nothing).
        ttl: seconds (or a ``timedelta``) a memory lives after each chatmemory write; ``None``: no expiry.
        version_book_size: how many memories' versions to remember (at least 1).
        history: keep every message ever added to a memory (see :mod:`chatmemory.core.history`) in a list
            beside its key, in the same hash slot, that LangChain4j never reads
            (:mod:`chatmemory.stores.langchain4j_redis.history`). Every write is then a compare-and-set
            (``update_messages`` too), appending to the history in the same script run; a memory written
            by Java meanwhile records what the next chatmemory write appends to Java's value.
        history_ttl: seconds (or a ``timedelta``) a history lives after the memory's last chatmemory write,
            at least ``ttl``; ``None``: as the value.

    Raises:
        TypeError: ``url_or_client`` is neither a URL nor a redis-py client; ``key_prefix`` is not a str.
        ValueError: a bad ``ttl``, a client with ``decode_responses=True``.
        StoreError: the URL's server cannot be reached to build a cluster client.
    """

    def __init__(
        self,
        url_or_client: str | Redis | RedisCluster,
        *,
        key_prefix: str = "",
        ttl: float | datetime.timedelta | None = None,
        version_book_size: int = 1024,
        history: bool = False,
        history_ttl: TTL = None,
    ) -> None:
        self._key_prefix = validate_prefix("key_prefix", key_prefix)
        self._prefix = key_prefix.encode("utf-8")
        self._ttl = ttl_seconds(ttl)
        self._ttl_ms = 0 if self._ttl is None else max(1, round(self._ttl * 1000))
        self._book = VersionBook(version_book_size)
        history_seconds = history_ttl_seconds(history, history_ttl, self._ttl)
        self._history_ttl = history_seconds
        self._known = KnownValues(version_book_size)
        self._history: HistorySteps | None = None
        if history:
            history_ms = None if history_seconds is None else max(1, round(history_seconds * 1000))
            self._history = HistorySteps(self._book, self._known, self._prefix, self._ttl_ms, history_ms)
        client: Redis | RedisCluster
        if isinstance(url_or_client, str):
            client = self._client_from_url(url_or_client)
            self._owns_client = True
        elif isinstance(url_or_client, (Redis, RedisCluster)):
            client = url_or_client
            self._owns_client = False
        else:
            raise TypeError(
                "LangChain4jRedisChatMemoryStore takes a Redis URL or a redis.Redis / redis.cluster.RedisCluster "
                f"client, not {type(url_or_client).__name__}"
            )
        try:
            check_client(client, self._owns_client, type(self).__name__)
        except ValueError:
            if self._owns_client:
                client.close()
            raise
        self._client = client
        self._cluster = isinstance(client, RedisCluster)

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
            raise StoreError(Operation.CONNECT, detail=str(exc)) from exc

    @classmethod
    def from_url(cls, url: str, **options: Any) -> LangChain4jRedisChatMemoryStore:
        """Build from ``redis+langchain4j://host:6379/0?key_prefix=chat:&ttl=3600`` (or any URL of the class)."""
        driver_url, from_query = client_url(url)
        merged: dict[str, Any] = {**from_query, **options}
        if "ttl" in from_query and "ttl" not in options:
            merged["ttl"] = float(from_query["ttl"])
        return cls(driver_url, **merged)

    @property
    def ttl(self) -> float | None:
        """Seconds a memory lives after each chatmemory write, or ``None``."""
        return self._ttl

    @property
    def key_prefix(self) -> str:
        """What is put before memory ids."""
        return self._key_prefix

    @property
    def client(self) -> Redis | RedisCluster:
        """The redis-py client."""
        return self._client

    def key_of(self, memory_id: str) -> bytes:
        """The Redis key of ``memory_id``."""
        return key(self._prefix, validate_memory_id(memory_id))

    def _get(self, memory_id: str) -> bytes | None:
        self._check_open(Operation.READ, memory_id)
        try:
            value: Any = self._client.get(self.key_of(memory_id))
        except ResponseError as exc:  # WRONGTYPE: another kind of key where the memory should be
            raise CorruptedMemoryError(memory_id, f"its key is not a string ({exc})") from None
        except RedisError as exc:
            raise StoreError(Operation.READ, memory_id, str(exc)) from exc
        assert value is None or isinstance(value, bytes)  # the client decodes no replies (checked at construction)
        return value

    @_traced("load")
    def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version (``Snapshot([], 0)`` for no key)."""
        value = self._get(memory_id)
        messages = [] if value is None else decode(value, memory_id)
        if self._history is not None:
            self._history.loaded(memory_id, value, messages)
        return Snapshot(messages, self._book.read(memory_id, digest(value)))

    @_traced("get")
    def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        value = self._get(memory_id)
        return [] if value is None else decode(value, memory_id)

    @_traced("save")
    def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if the key still holds the value read at ``expected_version`` (compare-and-set)."""
        self._check_open(Operation.WRITE, memory_id)
        listed = message_list(messages)
        if self._history is not None:
            return self._drive(Operation.WRITE, memory_id, self._history.save(memory_id, listed, expected_version))
        plan = plan_write(
            self._book, self._prefix, validate_memory_id(memory_id), listed, expected_version, self._ttl_ms
        )
        try:
            try:
                reply = self._client.evalsha(WRITE_SCRIPT_SHA, 1, plan.key, *plan.script_args())
            except NoScriptError:
                # A server that has not run the script yet (restarted, a new cluster node): EVAL caches it there.
                reply = self._client.eval(WRITE_SCRIPT, 1, plan.key, *plan.script_args())
        except RedisError as exc:
            raise StoreError(Operation.WRITE, memory_id, str(exc)) from exc
        return written_version(self._book, memory_id, plan, reply, expected_version)

    @_traced("update")
    def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the value of ``memory_id`` (a plain ``SET``, as LangChain4j writes)."""
        self._check_open(Operation.WRITE, memory_id)
        if self._history is not None:
            listed = message_list(messages)
            self._drive(Operation.WRITE, memory_id, self._history.update(memory_id, listed))
            return
        value = encode(message_list(messages))
        try:
            self._client.set(self.key_of(memory_id), value, px=self._ttl_ms or None)
        except RedisError as exc:
            raise StoreError(Operation.WRITE, memory_id, str(exc)) from exc
        finally:
            self._book.forget(memory_id)

    @_traced("delete")
    def delete_messages(self, memory_id: str) -> None:
        """Delete the key of ``memory_id`` and its history; idempotent."""
        self._check_open(Operation.DELETE, memory_id)
        try:
            memory_key = self.key_of(memory_id)
            self._client.delete(memory_key, history_key(memory_key))
        except RedisError as exc:
            raise StoreError(Operation.DELETE, memory_id, str(exc)) from exc
        finally:
            self._book.forget(memory_id)

    @_traced.iterator("list")
    def memory_ids(self) -> Iterator[str]:
        """The ids of the string keys under ``key_prefix`` (keys whose rest is no valid id are skipped)."""
        self._check_open(Operation.LIST)
        pattern = glob_literal(self._prefix) + b"*"
        seen: set[str] = set()
        try:
            if isinstance(self._client, RedisCluster):
                keys = self._client.scan_iter(
                    match=pattern, count=1000, _type="string", target_nodes=RedisCluster.PRIMARIES
                )
            else:
                keys = self._client.scan_iter(match=pattern, count=1000, _type="string")
            for found in keys:
                memory_id = memory_id_of(found, self._prefix)
                if memory_id is not None and memory_id not in seen:  # SCAN may return a key twice
                    seen.add(memory_id)
                    yield memory_id
        except RedisError as exc:
            raise StoreError(Operation.LIST, detail=str(exc)) from exc

    @property
    def keeps_history(self) -> bool:
        """Whether this store was built with history on."""
        return self._history is not None

    def _execute(self, command: Command, operation: str, memory_id: str) -> object:
        try:
            if isinstance(command, Get):
                return self._client.get(command.key)
            try:
                return self._client.evalsha(command.sha, len(command.keys), *command.keys, *command.args)
            except NoScriptError:
                return self._client.eval(command.source, len(command.keys), *command.keys, *command.args)
        except ResponseError as exc:
            if str(exc).startswith("WRONGTYPE"):
                raise CorruptedMemoryError(memory_id, f"a key of the memory is of another type ({exc})") from None
            raise StoreError(operation, memory_id, str(exc)) from exc
        except RedisError as exc:
            raise StoreError(operation, memory_id, str(exc)) from exc

    def _drive(self, operation: str, memory_id: str, step: Generator[Command, object, T]) -> T:
        self._check_open(operation, memory_id)
        command = next(step)
        while True:
            reply = self._execute(command, operation, memory_id)
            try:
                command = step.send(reply)
            except StopIteration as done:
                result: T = done.value
                return result

    def _require_history(self) -> HistorySteps:
        if self._history is None:
            raise HistoryNotEnabledError(repr(self))
        return self._history

    @_traced("history")
    def history(
        self, memory_id: str, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        """One page of the history of ``memory_id`` (see :meth:`chatmemory.SupportsHistory.history`).

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        query = history_query(after, limit, reverse)
        steps = self._require_history()
        return self._drive(Operation.READ, memory_id, steps.history(memory_id, query))

    @_traced("trim_history")
    def trim_history(self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None) -> int:
        """Remove history entries written before ``older_than`` (of ``memory_id``, or of every memory).

        A ``timedelta`` is counted back from the server's clock. The values are not touched.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        args = trim_args(older_than)
        steps = self._require_history()
        if memory_id is not None:
            return self._drive(Operation.WRITE, memory_id, steps.trim(memory_id, args))
        self._check_open(Operation.WRITE)
        pattern = history_pattern(self._prefix)
        try:
            if isinstance(self._client, RedisCluster):
                found = self._client.scan_iter(
                    match=pattern, count=1000, _type="list", target_nodes=RedisCluster.PRIMARIES
                )
            else:
                found = self._client.scan_iter(match=pattern, count=1000, _type="list")
            keys = set(found)
        except RedisError as exc:
            raise StoreError(Operation.LIST, detail=str(exc)) from exc
        removed = 0
        for each in keys:
            owner = memory_id_of_history_key(each, self._prefix)
            if owner is not None:
                removed += self._drive(Operation.WRITE, owner, steps.trim(owner, args))
        return removed

    def invalidate(self, memory_id: str) -> None:
        """Forget the version handed out for ``memory_id`` (a save at it then conflicts)."""
        self._book.forget(memory_id)

    def invalidate_all(self) -> None:
        """Forget every version handed out."""
        self._book.clear()
        self._known.clear()

    def _release(self) -> None:
        self._client.close()

    def __repr__(self) -> str:
        history = "" if self._history is None else f", history=True, history_ttl={self._history_ttl!r}"
        return f"LangChain4jRedisChatMemoryStore(key_prefix={self._key_prefix!r}, ttl={self._ttl!r}{history})"
