"""The hooks a store's test module gives the contract suite, and small helpers the cases share."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from chatmemory.core.messages import ChatMessage, UserMessage
from chatmemory.core.store import ChatMemoryStore

__all__ = ["RawWriter", "TtlStoreFactory", "texts"]

RawWriter = Callable[[str, Sequence[bytes]], None]
"""``write_raw(memory_id, records)``: store message records (``dumps_message`` bytes) as they are."""
TtlStoreFactory = Callable[[float], ChatMemoryStore]
"""``make_ttl_store(seconds)``: a store on the same backend whose memories expire after ``seconds``."""


def texts(count: int, prefix: str = "m") -> list[ChatMessage]:
    """``count`` user messages ``prefix0``, ``prefix1``, ..."""
    return [UserMessage(f"{prefix}{index}") for index in range(count)]
