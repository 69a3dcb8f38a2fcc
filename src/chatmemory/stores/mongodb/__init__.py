"""The MongoDB store: ``from chatmemory.stores.mongodb import MongoChatMemoryStore``.

* :mod:`~chatmemory.stores.mongodb.layout` — the document layout and how a document is read (pure);
* :mod:`~chatmemory.stores.mongodb.plan` — what each write sends and what its reply means (pure);
* :mod:`~chatmemory.stores.mongodb.history` — the history collection and head, read and trim plans (pure);
* :mod:`~chatmemory.stores.mongodb.driver` — what the sync and async stores share about pymongo;
* :mod:`~chatmemory.stores.mongodb.store` — the sync store, executing the plans with ``MongoClient``.

The store is imported on first use of its name, so that the pure modules import without pymongo; a
missing driver is reported then, naming the extra to install.
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
