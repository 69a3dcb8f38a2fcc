"""Fixtures shared by the whole suite: one parametrized ``backend`` fixture for every store."""

from __future__ import annotations

import importlib
from collections.abc import Iterator

import pytest

from chatmemory import ChatMemoryStore
from support.backends import Backend
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

_opened: dict[str, Backend] = {}


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


@pytest.fixture(scope="module", params=sql_backend_params())
def sql_backend(request: pytest.FixtureRequest) -> Iterator[SQLBackend]:
    """Each SQL dialect in turn, for the tests of what only the SQL store does (schema, statements)."""
    opened = open_sql_backend(request.param)
    yield opened
    opened.close()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    for opened in _opened.values():
        opened.close()
    _opened.clear()
    stop_containers()
