"""The layout rule of every store package: decisions import no driver, only the I/O side does.

Each backend package (``chatmemory.stores.<backend>``) keeps its plans, commands, outcomes and layouts in
modules that import no database driver, so they can be used and tested without one; only the modules
listed in ``DRIVER_MODULES`` below (the executors, and the glue that names a driver's errors, clients or
SQL types) may import one. A new module is pure unless it is added there, and the test fails until it is
one or the other.
"""

from __future__ import annotations

import json
import pkgutil
import subprocess
import sys

import chatmemory.aio.stores
import chatmemory.stores

DRIVERS = [
    "redis",
    "hiredis",
    "pymongo",
    "bson",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "pymysql",
    "aiosqlite",
    "asyncmy",
    "aiomysql",
    "greenlet",
]

# The modules that talk to a driver. Everything else under chatmemory.stores must import without one.
DRIVER_MODULES = {
    # The asyncio executors.
    "chatmemory.aio.stores.langchain4j_redis",
    "chatmemory.aio.stores.mongodb",
    "chatmemory.aio.stores.redis",
    "chatmemory.aio.stores.sql",
    # Redis: the blocking and the asyncio executor, and the blocking facade.
    "chatmemory.stores.redis.executor",
    "chatmemory.stores.redis.aio",
    "chatmemory.stores.redis.store",
    # The LangChain4j layout: its two executors (which build its clients) and the facade.
    "chatmemory.stores.langchain4j_redis.executor",
    "chatmemory.stores.langchain4j_redis.aio",
    "chatmemory.stores.langchain4j_redis.store",
    # MongoDB: the two executors (the blocking one builds the clients of both) and the facade.
    "chatmemory.stores.mongodb.store",
    "chatmemory.stores.mongodb.executor",
    "chatmemory.stores.mongodb.aio",
    # SQL: the two executors, the facade and the base that builds engines, and the modules that are
    # SQLAlchemy objects (dialects, tables, statements, engines).
    "chatmemory.stores.sql.store",
    "chatmemory.stores.sql.base",
    "chatmemory.stores.sql.executor",
    "chatmemory.stores.sql.aio",
    "chatmemory.stores.sql.dialect",
    "chatmemory.stores.sql.schema",
    "chatmemory.stores.sql.statements",
    "chatmemory.stores.sql.engine",
}


def _modules() -> list[str]:
    found = []
    for package in (chatmemory.stores, chatmemory.aio.stores):
        found.append(package.__name__)
        found += [info.name for info in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    return sorted(found)


def _importable_without_drivers(names: list[str]) -> dict[str, str]:
    """Each module's import with every driver hidden, in a fresh interpreter: ``ok`` or the error."""
    code = (
        "import importlib, json, sys\n"
        f"for name in {DRIVERS!r}:\n    sys.modules[name] = None\n"
        "results = {}\n"
        f"for name in {names!r}:\n"
        "    try:\n        importlib.import_module(name)\n        results[name] = 'ok'\n"
        "    except Exception as exc:\n        results[name] = f'{type(exc).__name__}: {exc}'\n"
        "print(json.dumps(results))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout))


def test_every_module_but_the_drivers_imports_without_any_driver() -> None:
    pure = [name for name in _modules() if name not in DRIVER_MODULES]
    failed = {name: result for name, result in _importable_without_drivers(pure).items() if result != "ok"}
    assert failed == {}


def test_each_listed_driver_module_does_need_a_driver() -> None:
    # The list stays honest: a module that no longer imports a driver must leave it (and the test above
    # then keeps it that way).
    listed = sorted(DRIVER_MODULES)
    assert set(listed) <= set(_modules()), sorted(set(listed) - set(_modules()))
    passed = [name for name, result in _importable_without_drivers(listed).items() if result == "ok"]
    assert passed == []
