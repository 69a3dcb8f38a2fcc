"""The MongoDB store: ``from chatmemory.stores.mongodb import MongoChatMemoryStore``.

* :mod:`~chatmemory.stores.mongodb.layout` — the document layout and how a document is read (pure);
* :mod:`~chatmemory.stores.mongodb.expressions` — the server-side expressions and filters (pure);
* :mod:`~chatmemory.stores.mongodb.plan` — what each write sends (pure), with
  :mod:`~chatmemory.stores.mongodb.operators` (a turn as update operators) and
  :mod:`~chatmemory.stores.mongodb.times` (write and expiry times);
* :mod:`~chatmemory.stores.mongodb.outcomes` — a write plan and what the driver's reply to it means (pure);
* :mod:`~chatmemory.stores.mongodb.history` and :mod:`~chatmemory.stores.mongodb.history_fields` — the
  history collection and head, read and trim plans, and what a write adds for them (pure);
* :mod:`~chatmemory.stores.mongodb.clock` — the estimate of the server's clock (pure);
* :mod:`~chatmemory.stores.mongodb.commands` — the driver calls an operation asks for (pure);
* :mod:`~chatmemory.stores.mongodb.operations` and :mod:`~chatmemory.stores.mongodb.history_operations` —
  every operation written once, as a generator of commands;
* :mod:`~chatmemory.stores.mongodb.lease` and :mod:`~chatmemory.stores.mongodb.locked_operations` — the
  writers' lock of ``modify`` (a lease document in ``<collection>_locks``) and the steps taking it;
* :mod:`~chatmemory.stores.mongodb.driver` — what the sync and async stores share about pymongo;
* :mod:`~chatmemory.stores.mongodb.base` — options, client, names and repr, checked at construction;
* :mod:`~chatmemory.stores.mongodb.store` — the sync store, sending the commands with ``MongoClient``
  (:mod:`chatmemory.aio.stores.mongodb` sends the same ones with ``AsyncMongoClient``).

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
