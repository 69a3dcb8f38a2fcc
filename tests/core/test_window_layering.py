"""Layers: the core and the asyncio memories import no store but the in-memory one, and no driver."""

from __future__ import annotations

import json
import subprocess
import sys

CODE = """
import importlib, json, pkgutil, sys
import chatmemory.core as core
for module in pkgutil.walk_packages(core.__path__, "chatmemory.core."):
    importlib.import_module(module.name)
import chatmemory.aio
print(json.dumps(sorted(sys.modules)))
"""

# What the core may reach in chatmemory.stores: the shared base (retry policy), the default in-memory store
# and open_store, which imports a backend only when a URL names it.
ALLOWED_STORE_MODULES = {"chatmemory.stores", "chatmemory.stores.memory", "chatmemory.stores.url"}
DRIVERS = ("redis", "sqlalchemy", "alembic", "pymongo", "psycopg", "pymysql", "aiosqlite", "asyncmy", "tiktoken")


def test_core_and_aio_import_no_backend_and_no_driver() -> None:
    completed = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, check=True)
    modules = set(json.loads(completed.stdout))
    stores = {
        name
        for name in modules
        if name.startswith("chatmemory.stores") and not name.startswith("chatmemory.stores.base")
    }
    assert stores <= ALLOWED_STORE_MODULES
    assert not any(name.startswith("chatmemory.migrations") for name in modules)
    assert not any(
        name.startswith("chatmemory.aio.stores.") and name != "chatmemory.aio.stores.memory" for name in modules
    )
    assert sorted(name for name in modules if name.split(".")[0] in DRIVERS) == []
