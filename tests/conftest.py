"""Fixtures shared by the whole suite: one parametrized ``backend`` fixture for every store."""

from __future__ import annotations

import importlib
from collections.abc import AsyncIterator, Iterator

import pytest

from chatmemory import ChatMemoryStore, aio
from support.backends import AsyncBackend, Backend
from support.backends.sqlite import SQLBackend, open_sql_backend, sql_backend_params
from support.servers import stop_containers

# (param id / marker, module in support.backends). Adding a backend: one module, one line here.
BACKENDS: list[tuple[str, str]] = [
    ("memory", "memory"),
    ("redis", "redis"),
    ("redis_cluster", "redis_cluster"),
    ("mongodb", "mongodb"),
    ("sqlite", "sqlite"),
    ("postgres", "postgres"),
    ("mysql", "mysql"),
]

# The backends with an asyncio store (the module exposes open_async_backend()).
ASYNC_BACKENDS: list[tuple[str, str]] = [
    ("memory", "memory"),
    ("redis", "redis"),
    ("redis_cluster", "redis_cluster"),
    ("mongodb", "mongodb"),
    ("sqlite", "sqlite"),
    # The asyncio store on an aiosqlite AsyncEngine passed in (from a URL it runs sqlite3 on threads).
    ("sqlite_aiosqlite", "sqlite_aiosqlite"),
    ("postgres", "postgres"),
    ("mysql", "mysql"),
]
# A backend's pytest marker, where it is not its id.
MARKERS = {"sqlite_aiosqlite": "sqlite"}

_opened: dict[str, Backend] = {}
_opened_async: dict[str, AsyncBackend] = {}


def _open(name: str, module: str) -> Backend:
    if name not in _opened:
        _opened[name] = importlib.import_module(f"support.backends.{module}").open_backend()
    return _opened[name]


@pytest.fixture(params=[pytest.param(b, id=b[0], marks=getattr(pytest.mark, b[0])) for b in BACKENDS])
def backend(request: pytest.FixtureRequest) -> Backend:
    """Each store backend in turn (session-wide; the server is found once)."""
    name, module = request.param
    return _open(name, module)


@pytest.fixture
def store(backend: Backend) -> Iterator[ChatMemoryStore]:
    """A store in a fresh namespace of the current backend."""
    made = backend.make_store()
    yield made
    backend.close_store(made)


@pytest.fixture(
    params=[pytest.param(b, id=b[0], marks=getattr(pytest.mark, MARKERS.get(b[0], b[0]))) for b in ASYNC_BACKENDS]
)
def async_backend(request: pytest.FixtureRequest) -> AsyncBackend:
    """Each backend with an asyncio store in turn (session-wide; stores and clients are per test)."""
    name, module = request.param
    if name not in _opened_async:
        _opened_async[name] = importlib.import_module(f"support.backends.{module}").open_async_backend()
    return _opened_async[name]


@pytest.fixture
async def async_store(async_backend: AsyncBackend) -> AsyncIterator[aio.ChatMemoryStore]:
    """An asyncio store in a fresh namespace of the current backend, closed after the test."""
    made = await async_backend.make_store()
    yield made
    await async_backend.close_store(made)


@pytest.fixture(scope="module", params=sql_backend_params())
def sql_backend(request: pytest.FixtureRequest) -> Iterator[SQLBackend]:
    """Each SQL dialect in turn, for the tests of what only the SQL store does (schema, statements)."""
    opened = open_sql_backend(request.param)
    yield opened
    opened.close()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for opened in [*_opened.values(), *_opened_async.values()]:
        opened.close()
    _opened.clear()
    _opened_async.clear()
    stop_containers()
