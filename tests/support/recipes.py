"""Stores built from a URL in a fresh namespace, the way a process or an event loop of an application builds one.

A :class:`Recipe` is picklable: a writer process or a thread with its own event loop opens its own store from
it (``open`` / ``aopen``), as independent workers of a service do. ``recipe(name)`` covers every backend whose
memories outlive the store object (all but the in-memory store, whose recipe serves one process only).
"""

from __future__ import annotations

import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chatmemory import ChatMemoryStore, aio, open_store

RECIPE_BACKENDS = ("memory", "redis", "redis_cluster", "langchain4j_redis", "mongodb", "sqlite", "postgres", "mysql")
"""Backends with a recipe; all but ``memory`` can be shared by processes."""

SHARED_BETWEEN_PROCESSES = tuple(name for name in RECIPE_BACKENDS if name != "memory")


@dataclass(frozen=True)
class Recipe:
    """How to open one namespace's store: a URL and constructor options (``schema``: SQL tables to create)."""

    name: str
    url: str
    options: dict[str, Any] = field(default_factory=dict)
    schema: bool = False

    def open(self, **extra: Any) -> ChatMemoryStore:
        """A sync store of this namespace (tables created the first time)."""
        store = open_store(self.url, **self.options, **extra)
        if self.schema:
            store.create_schema()  # type: ignore[attr-defined]
        return store

    def aopen(self, **extra: Any) -> aio.ChatMemoryStore:
        """An asyncio store of this namespace (the tables must exist: open a sync one first)."""
        return aio.open_store(self.url, **self.options, **extra)

    def cleanup(self) -> None:
        """Drop what the namespace holds."""
        if self.name == "memory":
            return
        store: Any = open_store(self.url, **self.options)
        try:
            if self.schema:
                store.drop_schema()
            elif self.name == "mongodb":
                database = store.collection.database
                for name in database.list_collection_names():
                    if name.startswith(store.collection.name):
                        database.drop_collection(name)
            else:
                client = store.client
                pattern = self.options["key_prefix"].replace("\\", "\\\\") + "*"
                targets = {"target_nodes": "primaries"} if self.name == "redis_cluster" else {}
                for key in list(client.scan_iter(match=pattern, count=1000, **targets)):
                    client.delete(key)
        finally:
            store.close()


def recipe(name: str) -> Recipe:
    """A fresh namespace on the server of backend ``name`` (found as the contract suite finds it)."""
    tag = uuid.uuid4().hex[:12]
    if name == "memory":
        return Recipe(name, "memory://")
    if name in ("redis", "redis_cluster", "langchain4j_redis"):
        from support.backends.redis import cluster_url, redis_url

        if name == "redis":
            url = redis_url()
        elif name == "redis_cluster":
            url = "redis+cluster://" + cluster_url().split("://", 1)[1]
        else:
            url = "redis+langchain4j://" + redis_url().split("://", 1)[1]
        return Recipe(name, url, {"key_prefix": f"cmtest:{tag}:"})
    if name == "mongodb":
        from support.backends.mongodb import DATABASE, mongodb_url

        return Recipe(name, mongodb_url(), {"database": DATABASE, "collection": f"writers_{tag}"})
    if name == "sqlite":
        directory = Path(tempfile.mkdtemp(prefix="chatmemory-recipe-"))
        return Recipe(name, f"sqlite:///{directory / 'chatmemory.db'}", {"table_prefix": f"t{tag}_"}, schema=True)
    import importlib

    url = importlib.import_module(f"support.backends.{name}").open_backend().url
    return Recipe(name, url, {"table_prefix": f"t{tag}_"}, schema=True)
