"""``ChatMemoryChatStore``: a LlamaIndex ``BaseChatStore`` over any chatmemory store.

A LlamaIndex chat store keeps a list of messages per key; here a key is a memory id and the list is the
memory's messages, converted by :mod:`.messages` (exactly: what is set comes back equal). Appends and the
positional edits LlamaIndex asks for — insert at an index, delete at an index, delete the last — are the
atomic edits of :mod:`chatmemory.core.edits`: decided on the stored list and written at the version read,
so writers of the same key in other processes never lose a message to them. Sync stores serve the sync
methods and the async ones; asyncio stores serve the async ones.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Sequence
from typing import Any

from llama_index.core.base.llms.types import ChatMessage as LlamaMessage
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.storage.chat_store.base import BaseChatStore

from chatmemory.core import edits
from chatmemory.core.edits import Edit, Edited, insert_at, remove_at
from chatmemory.core.errors import SerializationError
from chatmemory.core.messages import ChatMessage
from chatmemory.core.retry import RetryPolicy
from chatmemory.core.store import validate_memory_id
from chatmemory.core.window_memory import check_store
from chatmemory.integrations.llama_index.messages import from_llama_index, to_llama_index

__all__ = ["ChatMemoryChatStore"]


def _is_async_store(store: object) -> bool:
    return inspect.iscoroutinefunction(getattr(store, "get_messages", None))


class ChatMemoryChatStore(BaseChatStore):
    """A LlamaIndex chat store kept in a chatmemory store: each key is a memory id.

    * ``get_messages(key)`` reads the memory (``[]`` for an unknown key); ``set_messages`` replaces it;
      ``delete_messages`` deletes it and returns what it held (``None`` for an unknown key).
    * ``add_message(key, message, idx=None)`` appends, or inserts before ``idx`` as ``list.insert`` does;
      ``delete_message(key, idx)`` removes the message at ``idx`` (negative counts from the end) and returns
      it, ``None`` when there is none; ``delete_last_message(key)`` removes the last one (``None`` when the
      memory is empty). Each is one atomic edit (:mod:`chatmemory.core.edits`) of the list as stored:
      concurrent writers of the key lose nothing.
    * ``get_keys()`` lists the store's memory ids, sorted (every memory of the store, not only those written
      through this class).
    * The async forms (``aget_messages``, ``async_add_message``, ...) do the same; on a sync store they run
      the sync method in a worker thread, as LlamaIndex's own stores do.

    A sync store (``chatmemory.open_store(url)``) serves every method. An asyncio store
    (``chatmemory.aio.open_store(url)``) serves the async ones; its sync methods raise ``TypeError``, as an
    asyncio store cannot be driven from sync code. The chat store does not own the store: close it yourself.

    Args:
        store: a sync or an asyncio chatmemory store with versioning and listing (every built-in one).
        retry: how long to retry an edit that conflicts with other writers, on a store without a locked update.
        max_attempts: also give up after this many attempts (``None``: the time budget alone).

    Raises:
        TypeError: a URL, no store, a store without versioning (``load``/``save``) or listing (``memory_ids``),
            an argument of the wrong kind.
        ValueError: ``max_attempts`` below 1.
    """

    _store: Any = PrivateAttr()
    _asyncio: bool = PrivateAttr()
    _retry: RetryPolicy | None = PrivateAttr()
    _max_attempts: int | None = PrivateAttr()

    def __init__(self, store: Any, *, retry: RetryPolicy | None = None, max_attempts: int | None = None) -> None:
        super().__init__()
        is_async = _is_async_store(store)
        check_store(store, asyncio=is_async, memory_class=type(self).__name__)
        edits.prepare_edits(store, asyncio=is_async, retry=retry, max_attempts=max_attempts)
        if not callable(getattr(store, "memory_ids", None)):
            raise TypeError(
                f"{type(self).__name__} needs a store that lists its memory ids (SupportsListing: memory_ids) for "
                f"get_keys; {type(store).__name__} has none (every built-in store has it)"
            )
        self._store = store
        self._asyncio = is_async
        self._retry = retry
        self._max_attempts = max_attempts

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serializes the class under."""
        return "ChatMemoryChatStore"

    @property
    def store(self) -> Any:
        """The chatmemory store the chat store reads and writes."""
        return self._store

    # ------------------------------------------------------------------------------------- conversion

    @staticmethod
    def _to_llama(key: str, messages: list[ChatMessage]) -> list[LlamaMessage]:
        try:
            return to_llama_index(messages)
        except SerializationError as exc:
            raise SerializationError(f"chat store key {key!r}: {exc}") from None

    @staticmethod
    def _from_llama(key: str, messages: Sequence[LlamaMessage], what: str) -> list[ChatMessage]:
        if isinstance(messages, LlamaMessage) or not isinstance(messages, Sequence):
            raise TypeError(
                f"chat store key {key!r}: {what} takes a list of ChatMessage, not {type(messages).__name__}"
            )
        try:
            return from_llama_index(messages)
        except SerializationError as exc:
            raise SerializationError(f"chat store key {key!r}: {exc}; nothing was written") from None

    def _one(self, key: str, message: LlamaMessage) -> ChatMessage:
        if not isinstance(message, LlamaMessage):
            raise TypeError(f"chat store key {key!r}: add_message takes a ChatMessage, not {type(message).__name__}")
        [converted] = self._from_llama(key, [message], "add_message")
        return converted

    @staticmethod
    def _index(idx: object, method: str) -> int:
        if isinstance(idx, bool) or not isinstance(idx, int):
            raise TypeError(f"{method} takes an int position, not {type(idx).__name__}")
        return idx

    def _sync_only(self, method: str) -> None:
        if self._asyncio:
            instead = "async_add_message" if method == "add_message" else f"a{method}"
            raise TypeError(
                f"{type(self).__name__} is kept in an asyncio store ({type(self._store).__name__}), which sync code "
                f"cannot drive: await {instead}(...) instead of {method}(...), or build the chat store over a sync "
                "store (chatmemory.open_store(url))"
            )

    # ------------------------------------------------------------------------------------- the edits

    def _removal(self, key: str, idx: int) -> Edit[LlamaMessage | SerializationError | None]:
        """Remove the message at ``idx``, returned converted; a message with no LlamaIndex form stays."""

        def edit(stored: list[ChatMessage]) -> Edited[LlamaMessage | SerializationError | None]:
            removed = remove_at(stored, idx)
            if removed is None:
                return Edited(None, None)
            try:
                [converted] = self._to_llama(key, [removed[1]])
            except SerializationError as exc:
                return Edited(None, SerializationError(f"{exc}; nothing was deleted"))
            return Edited(removed[0], converted)

        return edit

    @staticmethod
    def _insertion(message: ChatMessage, idx: int | None) -> Edit[None]:
        def edit(stored: list[ChatMessage]) -> Edited[None]:
            return Edited(insert_at(stored, idx, [message]), None)

        return edit

    @staticmethod
    def _removed(result: LlamaMessage | SerializationError | None) -> LlamaMessage | None:
        if isinstance(result, SerializationError):
            raise result
        return result

    def _options(self) -> dict[str, Any]:
        return {"retry": self._retry, "max_attempts": self._max_attempts}

    # ------------------------------------------------------------------------------------------- sync

    def set_messages(self, key: str, messages: list[LlamaMessage]) -> None:
        """Replace the messages of ``key`` (one write)."""
        self._sync_only("set_messages")
        key = validate_memory_id(key)
        self._store.update_messages(key, self._from_llama(key, messages, "set_messages"))

    def get_messages(self, key: str) -> list[LlamaMessage]:
        """The messages of ``key``, oldest first; ``[]`` for an unknown key."""
        self._sync_only("get_messages")
        key = validate_memory_id(key)
        return self._to_llama(key, self._store.get_messages(key))

    def add_message(self, key: str, message: LlamaMessage, idx: int | None = None) -> None:
        """Append ``message``, or insert it before ``idx`` (``list.insert`` positions), atomically."""
        self._sync_only("add_message")
        key = validate_memory_id(key)
        if idx is not None:
            self._index(idx, "add_message")
        edits.apply_edit(self._store, key, self._insertion(self._one(key, message), idx), **self._options())

    def delete_messages(self, key: str) -> list[LlamaMessage] | None:
        """Delete ``key``; return the messages it held (``None`` when it held none).

        The messages returned are those read just before the deletion; the deletion removes the memory
        whole, with whatever another writer added in between.
        """
        self._sync_only("delete_messages")
        key = validate_memory_id(key)
        snapshot = self._store.load(key)
        held = self._to_llama(key, snapshot.messages) if snapshot.version else None
        self._store.delete_messages(key)
        return held

    def delete_message(self, key: str, idx: int) -> LlamaMessage | None:
        """Remove the message at ``idx`` and return it, atomically; ``None`` when there is none."""
        self._sync_only("delete_message")
        key = validate_memory_id(key)
        removal = self._removal(key, self._index(idx, "delete_message"))
        return self._removed(edits.apply_edit(self._store, key, removal, **self._options()))

    def delete_last_message(self, key: str) -> LlamaMessage | None:
        """Remove the last message and return it, atomically; ``None`` when there is none."""
        self._sync_only("delete_last_message")
        key = validate_memory_id(key)
        return self._removed(edits.apply_edit(self._store, key, self._removal(key, -1), **self._options()))

    def get_keys(self) -> list[str]:
        """The store's memory ids, sorted."""
        self._sync_only("get_keys")
        return sorted(self._store.memory_ids())

    # ------------------------------------------------------------------------------------------ async

    async def aset_messages(self, key: str, messages: list[LlamaMessage]) -> None:
        """Replace the messages of ``key`` (one write)."""
        if not self._asyncio:
            await super().aset_messages(key, messages)
            return
        key = validate_memory_id(key)
        await self._store.update_messages(key, self._from_llama(key, messages, "aset_messages"))

    async def aget_messages(self, key: str) -> list[LlamaMessage]:
        """The messages of ``key``, oldest first; ``[]`` for an unknown key."""
        if not self._asyncio:
            return await super().aget_messages(key)
        key = validate_memory_id(key)
        return self._to_llama(key, await self._store.get_messages(key))

    async def async_add_message(self, key: str, message: LlamaMessage, idx: int | None = None) -> None:
        """Append ``message``, or insert it before ``idx``, atomically."""
        if not self._asyncio:
            await asyncio.to_thread(self.add_message, key, message, idx)
            return
        from chatmemory.aio import edits as async_edits

        key = validate_memory_id(key)
        if idx is not None:
            self._index(idx, "async_add_message")
        await async_edits.apply_edit(self._store, key, self._insertion(self._one(key, message), idx), **self._options())

    async def adelete_messages(self, key: str) -> list[LlamaMessage] | None:
        """Delete ``key``; return the messages it held (``None`` when it held none)."""
        if not self._asyncio:
            return await super().adelete_messages(key)
        key = validate_memory_id(key)
        snapshot = await self._store.load(key)
        held = self._to_llama(key, snapshot.messages) if snapshot.version else None
        await self._store.delete_messages(key)
        return held

    async def adelete_message(self, key: str, idx: int) -> LlamaMessage | None:
        """Remove the message at ``idx`` and return it, atomically; ``None`` when there is none."""
        if not self._asyncio:
            return await super().adelete_message(key, idx)
        from chatmemory.aio import edits as async_edits

        key = validate_memory_id(key)
        removal = self._removal(key, self._index(idx, "adelete_message"))
        return self._removed(await async_edits.apply_edit(self._store, key, removal, **self._options()))

    async def adelete_last_message(self, key: str) -> LlamaMessage | None:
        """Remove the last message and return it, atomically; ``None`` when there is none."""
        if not self._asyncio:
            return await super().adelete_last_message(key)
        from chatmemory.aio import edits as async_edits

        key = validate_memory_id(key)
        return self._removed(await async_edits.apply_edit(self._store, key, self._removal(key, -1), **self._options()))

    async def aget_keys(self) -> list[str]:
        """The store's memory ids, sorted."""
        if not self._asyncio:
            return await super().aget_keys()
        return sorted([memory_id async for memory_id in self._store.memory_ids()])

    def __repr__(self) -> str:
        return f"ChatMemoryChatStore(store={self._store!r})"
