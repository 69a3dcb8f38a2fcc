"""The asyncio twin of :class:`chatmemory.stores.langchain4j_redis.LangChain4jRedisChatMemoryStore`.

Same layout, arguments, decisions (:mod:`chatmemory.stores.langchain4j_redis.plan`) and operations
(:mod:`chatmemory.stores.langchain4j_redis.operations`), sent by the asyncio executor
(:mod:`chatmemory.stores.langchain4j_redis.aio`) on redis-py's asyncio clients:
``await store.load(...)``, ``async for memory_id in store.memory_ids()``, ``await store.aclose()``.
A Java service and sync or async Python services share one memory.
"""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator, Iterable

from chatmemory.core.errors import Operation
from chatmemory.core.history import DEFAULT_HISTORY_PAGE, HistoryPage
from chatmemory.core.messages import ChatMessage
from chatmemory.core.optional import require
from chatmemory.core.store import Change, Snapshot, validate_memory_id
from chatmemory.stores.base.facade import AsyncStoreLifecycle, StoreTelemetry
from chatmemory.stores.base.turns import modify_in_turn_async

require("redis", feature="LangChain4jRedisChatMemoryStore", extra="redis")

from redis.asyncio import Redis  # noqa: E402 - only once the extra is known to be installed
from redis.asyncio.cluster import RedisCluster  # noqa: E402

from chatmemory.stores.langchain4j_redis.aio import AsyncLangChain4jExecutor  # noqa: E402 - imports redis
from chatmemory.stores.langchain4j_redis.base import LangChain4jStoreBase  # noqa: E402

__all__ = ["LangChain4jRedisChatMemoryStore"]

_traced = StoreTelemetry("langchain4j-redis", __name__)


class LangChain4jRedisChatMemoryStore(
    AsyncLangChain4jExecutor, AsyncStoreLifecycle, LangChain4jStoreBase[Redis | RedisCluster]
):
    """A memory per Redis string at ``key_prefix + memory_id``, holding LangChain4j's JSON, shared with Java.

    The value is exactly what LangChain4j's ``ChatMessageSerializer.messagesToJson(messages)`` writes, under
    the key a LangChain4j ``RedisChatMemoryStore`` uses (``SET key json [EX ttl]``, ``GET``, ``DEL``), so a
    Java service with a ``MessageWindowChatMemory`` and a Python service with chatmemory read and extend one
    live memory. Point ``key_prefix`` at the prefix the Java store uses (``""`` if it uses none).

    **Concurrent writers.** Every write from chatmemory (``save``, hence every window memory's ``add``) is a
    compare-and-set of the whole value: a Lua script writes only if the key still holds the value the
    writer read (compared by SHA-1), so a Python writer never overwrites a Java write it has not seen; it
    gets :class:`~chatmemory.ConcurrentUpdateError` and the memory retries from a fresh read. Two writers
    that read one value and write one result do not both succeed: a write sent again after a lost reply is
    known by its own write id, which the script keeps (the latest 16, for an hour) in a list beside the
    value, in its hash slot, never read by Java and never listed
    (:mod:`~chatmemory.stores.langchain4j_redis.keys`). The other way round cannot be helped: LangChain4j
    writes with a plain ``SET`` and no versioning, so **a Java writer can overwrite a Python write it has
    not seen**. Let one side write a given memory at a time if that matters. ``update_messages`` and
    ``delete_messages`` are plain ``SET`` and ``DEL``, as in LangChain4j (with ``history=True``,
    ``update_messages`` is a compare-and-set too, retried until it lands).

    **Writers taking turns.** chatmemory writers of one memory that conflict take turns in :meth:`modify`
    (window memories take it after a first conflict): threads (or, for the asyncio store, tasks)
    sharing the store queue in the process, writers elsewhere on a lease lock beside the value, in its hash
    slot (:func:`~chatmemory.stores.langchain4j_redis.keys.lock_key`), never listed. The write is still a
    compare-and-set, so a holder whose lease ran out never overwrites the next holder's write. Java
    writers do not queue there.

    **Versions** are this store object's own (see :mod:`chatmemory.stores.langchain4j_redis.plan`): the
    value holds none, so a version names a value this object read or wrote. Within one store object they
    grow as the contract says; a version from another process or store object is a conflict.

    **Exactness.** Every message reads back equal to what was written. LangChain4j's types fill in an
    image's detail level and a PDF's MIME type; where a message had none (or a detail level spelled
    otherwise), the values it had are kept in the user message's ``chatmemory.contentAsGiven`` attribute,
    which LangChain4j carries along (:func:`chatmemory.stores.langchain4j_redis.plan.encode`).

    Supports versioning, TTL (every chatmemory write sets the expiry, as LangChain4j's ``ttl`` does) and
    listing (the string keys under ``key_prefix``: with an empty prefix, every string key of the database
    is taken for a memory, so give the memories a prefix of their own), and history (``history=True``).

    :class:`chatmemory.stores.langchain4j_redis.LangChain4jRedisChatMemoryStore` and its asyncio twin
    :class:`chatmemory.aio.stores.langchain4j_redis.LangChain4jRedisChatMemoryStore` take the same arguments
    and read and write the same values, locks and histories. The asyncio store works from any event loop:
    built from a URL, it keeps a client per loop (see :class:`~chatmemory.stores.redis.aio.GatedClient`);
    a client passed in serves its first loop only.

    Args:
        url_or_client: a ``redis://``, ``rediss://``, ``unix://`` or ``redis[s]+cluster://`` URL (the store
            owns the client and closes it in :meth:`aclose`), or a client made with ``decode_responses=False``
            (you close it): a ``redis.Redis`` / ``redis.cluster.RedisCluster`` for the sync store, a
            ``redis.asyncio.Redis`` / ``redis.asyncio.cluster.RedisCluster`` for the asyncio one.
        key_prefix: what the LangChain4j service puts before memory ids (``""``: nothing).
        ttl: seconds (or a ``timedelta``) a memory lives after each chatmemory write; ``None``: no expiry.
        version_book_size: how many memories' versions to remember (at least 1).
        history: keep every message ever added to a memory (see :mod:`chatmemory.core.history`) in a list
            beside its key, in the same hash slot, that LangChain4j never reads and that is no memory id's
            key (:mod:`chatmemory.stores.langchain4j_redis.operations`). Every write is then a compare-and-set
            (``update_messages`` too), appending to the history in the same script run; a memory written
            by Java meanwhile records what the next chatmemory write appends to Java's value.
        history_ttl: seconds (or a ``timedelta``) a history lives after the memory's last chatmemory write,
            at least ``ttl``; ``None``: as the value.
        lock_lease: seconds (or a ``timedelta``) after which the lock of :meth:`modify` is free again when
            its holder died or hung (default 5): the longest a dead writer keeps the others waiting.
        lock_wait: seconds (or a ``timedelta``) :meth:`modify` waits for that lock before it raises
            :class:`~chatmemory.ConcurrentUpdateError` (default 30).
        replicas_to_ack: how many replicas must hold each write that changes a memory (a compare-and-set,
            ``update_messages``, a delete, a history trim) before it returns: the write is sent with
            ``WAIT replicas_to_ack replicas_timeout`` behind it on its own connection, on a cluster to the
            master owning the memory's slot (``0``, the default: no waiting). Fewer acknowledgements raise
            :class:`~chatmemory.stores.redis.ReplicationError` once the write is done; it stays.
            LangChain4j's own writes do not wait.
        replicas_timeout: seconds (or a ``timedelta``) a write waits for them (default 1).
        encryption: refused: the layout has none, since a JVM service reads these keys as they are (encrypt
            at rest with a chatmemory store: ``redis://``, SQL, MongoDB; see ``docs/encryption.md``).

    On a Redis Cluster a command refused while its slot migrates (``TRYAGAIN`` past redis-py's own
    retries) is sent again for a few seconds (:func:`chatmemory.stores.redis.executor.send_resending`); a write is
    recognised by its write id if it had landed.

    Raises:
        TypeError: ``url_or_client`` is neither a URL nor a redis-py client of the store's kind (blocking or
            asyncio); ``key_prefix`` is not a str; ``lock_lease`` or ``lock_wait`` is neither a number nor
            a ``timedelta``; ``replicas_to_ack`` is not an int.
        ValueError: a bad ``ttl``, ``key_prefix``, ``lock_lease``, ``lock_wait``, ``replicas_to_ack`` or
            ``replicas_timeout``, a client with ``decode_responses=True``, an ``encryption``.
        StoreError: the sync store built from a cluster URL whose server cannot be reached (an asyncio
            cluster client built from a URL finds the cluster on its first command).
    """

    _repr_name = "chatmemory.aio.LangChain4jRedisChatMemoryStore"
    _client_types = (Redis, RedisCluster)

    _wrong_client = (
        "chatmemory.aio LangChain4jRedisChatMemoryStore takes a Redis URL or a redis.asyncio.Redis / "
        "redis.asyncio.cluster.RedisCluster client, not {name}"
    )

    # ---------------------------------------------------------------------------------- operations

    @_traced.coroutine("load")
    async def load(self, memory_id: str) -> Snapshot:
        """The messages of ``memory_id`` and their version (``Snapshot([], 0)`` for no key)."""
        return await self._drive(Operation.READ, memory_id, self._operations.load(memory_id))

    @_traced.coroutine("get")
    async def get_messages(self, memory_id: str) -> list[ChatMessage]:
        """The stored messages of ``memory_id``, oldest first."""
        return (
            await self._drive(Operation.READ, memory_id, self._operations.load(memory_id, versioned=False))
        ).messages

    @_traced.coroutine("save")
    async def save(self, memory_id: str, messages: Iterable[ChatMessage], expected_version: int) -> int:
        """Write ``messages`` if the key still holds the value read at ``expected_version`` (compare-and-set)."""
        return await self._drive(
            Operation.WRITE, memory_id, self._operations.save(memory_id, messages, expected_version)
        )

    @_traced.coroutine("save")
    async def save_recorded(
        self,
        memory_id: str,
        messages: Iterable[ChatMessage],
        expected_version: int,
        also_recorded: Iterable[ChatMessage],
    ) -> int:
        """``save`` recording ``also_recorded`` before what it appends (see ``SupportsRecordedWrites``)."""
        step = self._operations.save(memory_id, messages, expected_version, also_recorded)
        return await self._drive(Operation.WRITE, memory_id, step)

    def contended(self, memory_id: str) -> bool:
        """Whether writers of this process queued for ``memory_id`` lately (see ``SupportsContentionHint``)."""
        return self._turns.contended(memory_id)

    @_traced.coroutine("modify")
    async def modify(self, memory_id: str, change: Change) -> int:
        """Apply ``change`` to ``memory_id`` in its writers' turn; return the version it is at afterwards.

        See :class:`chatmemory.aio.SupportsLockedUpdate`. Uncontended, it costs four round trips (take the
        lock, read, compare-and-set, give the lock back); window memories take it after a conflict, or at
        once for a memory this process's writers queued for lately. A writer that finishes while others of
        this process wait hands them the lock as it is (within half its lease). In the asyncio store, a task
        cancelled in its turn gives the lock back all the same (the unlock runs on, shielded).

        Raises:
            ConcurrentUpdateError: the lock stayed taken for ``lock_wait`` seconds; nothing was written.
            CorruptedMemoryError: the stored value does not decode (``change`` is not called).
        """
        memory_id = validate_memory_id(memory_id)  # one turn for UUID(x) and str(UUID(x))
        return await modify_in_turn_async(
            self._turns,
            memory_id,
            self._lock_options.lease,
            lock=lambda token: self._drive(Operation.WRITE, memory_id, self._operations.lock(memory_id, token)),
            unlock=lambda token: self._drive(Operation.WRITE, memory_id, self._operations.unlock(memory_id, token)),
            change=lambda: self._drive(Operation.WRITE, memory_id, self._operations.locked_change(memory_id, change)),
        )

    @_traced.coroutine("update")
    async def update_messages(self, memory_id: str, messages: Iterable[ChatMessage]) -> None:
        """Replace the value of ``memory_id`` (a plain ``SET``, as LangChain4j writes)."""
        await self._drive(Operation.WRITE, memory_id, self._operations.update(memory_id, messages))

    @_traced.coroutine("delete")
    async def delete_messages(self, memory_id: str) -> None:
        """Delete the key of ``memory_id``, its history and its write ids; idempotent."""
        await self._drive(Operation.DELETE, memory_id, self._operations.delete(memory_id))

    @_traced.async_iterator("list")
    async def memory_ids(self) -> AsyncIterator[str]:
        """The ids of the string keys under ``key_prefix`` (keys whose rest is no valid id are skipped)."""
        self._check_open(Operation.LIST)
        async for memory_id in self._memory_ids():
            yield memory_id

    @_traced.coroutine("history")
    async def history(
        self, memory_id: str, *, after: int | None = None, limit: int = DEFAULT_HISTORY_PAGE, reverse: bool = False
    ) -> HistoryPage:
        """One page of the history of ``memory_id`` (see :meth:`chatmemory.SupportsHistory.history`).

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        return await self._drive(
            Operation.READ, memory_id, self._operations.history(memory_id, self._history_query(after, limit, reverse))
        )

    @_traced.coroutine("trim_history")
    async def trim_history(
        self, *, older_than: datetime.datetime | datetime.timedelta, memory_id: str | None = None
    ) -> int:
        """Remove history entries written before ``older_than`` (of ``memory_id``, or of every memory).

        A ``timedelta`` is counted back from the server's clock. The values are not touched.

        Raises:
            HistoryNotEnabledError: the store was built without ``history=True``.
        """
        return await self._drive(Operation.TRIM, memory_id, self._trim(older_than, memory_id))
