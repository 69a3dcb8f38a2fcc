"""The MongoDB store: ``from chatmemory.stores.mongodb import MongoChatMemoryStore``.

One document per memory, changed by one single-document update per write whose pipeline takes the
version and the expiry from the server's clock: no transactions needed. ``MongoChatMemoryStore`` is the
sync store (:mod:`~chatmemory.stores.mongodb.store`, on ``MongoClient``); :mod:`chatmemory.aio.stores.mongodb`
sends the same commands with ``AsyncMongoClient``. Everything else (the layout, the plans and outcomes,
the history, every operation written once as a generator of commands) is pure.

The store is imported on first use of its name, so that the pure modules import without pymongo; a
missing driver is reported then, naming the extra to install.

Guide: ``docs/store-mongodb.md``; where each part lives: *MongoDB* in ``docs/stores.md``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chatmemory.stores.mongodb.store import EXPIRY_INDEX, MongoChatMemoryStore

__all__ = ["EXPIRY_INDEX", "MongoChatMemoryStore"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("chatmemory.stores.mongodb.store"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
