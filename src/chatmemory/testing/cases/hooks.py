"""The hooks a store's test module gives the contract suite, and small helpers the cases share."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

from chatmemory import aio
from chatmemory.core.messages import ChatMessage, UserMessage
from chatmemory.core.store import ChatMemoryStore

__all__ = [
    "AsyncEncryptedStoreFactory",
    "AsyncHistoryStoreFactory",
    "AsyncRawWriter",
    "AsyncTtlStoreFactory",
    "EncryptedStoreFactory",
    "HistoryStoreFactory",
    "RawWriter",
    "TtlStoreFactory",
    "texts",
]

RawWriter = Callable[[str, Sequence[bytes]], None]
"""``write_raw(memory_id, records)``: store message records (``dumps_message`` bytes) as they are."""
TtlStoreFactory = Callable[[float], ChatMemoryStore]
"""``make_ttl_store(seconds)``: a store on the same backend whose memories expire after ``seconds``."""
AsyncRawWriter = Callable[[str, Sequence[bytes]], Awaitable[None]]
"""``await write_raw(memory_id, records)``: the async suite's raw-record hook."""
AsyncTtlStoreFactory = Callable[[float], "aio.ChatMemoryStore | Awaitable[aio.ChatMemoryStore]"]
"""``make_ttl_store(seconds)``: an asyncio store whose memories expire (the result may be awaitable)."""
HistoryStoreFactory = Callable[..., ChatMemoryStore]
"""``make_history_store(ttl=None, history_ttl=None)``: a store on the same backend built with ``history=True``."""
AsyncHistoryStoreFactory = Callable[..., "aio.ChatMemoryStore | Awaitable[aio.ChatMemoryStore]"]
"""``make_history_store(ttl=None, history_ttl=None)``: an asyncio store with history (the result may be awaitable)."""
EncryptedStoreFactory = Callable[..., ChatMemoryStore]
"""``make_encrypted_store(encryption, history=False)``: a store built with ``encryption=`` (``None``: plain)
and ``history=``; every store one test makes shares one namespace, so each reads what the others wrote."""
AsyncEncryptedStoreFactory = Callable[..., "aio.ChatMemoryStore | Awaitable[aio.ChatMemoryStore]"]
"""``make_encrypted_store(encryption, history=False)``: the asyncio suite's (the result may be awaitable)."""


def texts(count: int, prefix: str = "m") -> list[ChatMessage]:
    """``count`` user messages ``prefix0``, ``prefix1``, ..."""
    return [UserMessage(f"{prefix}{index}") for index in range(count)]
