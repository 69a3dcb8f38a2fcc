"""A missing extra's message says what works today: the distribution is not on PyPI yet."""

from __future__ import annotations

import pytest

from chatmemory import MissingDependencyError
from chatmemory.core import errors
from chatmemory.core.errors import install_hint


def test_the_hint_names_the_clone_the_wheel_and_the_packages() -> None:
    hint = install_hint("redis")
    assert hint.startswith("pip install 'llm-window-memory[redis]' (not on PyPI yet: pip install '.[redis]' in a clone")
    assert "'path/to/llm_window_memory-<version>-py3-none-any.whl[redis]'" in hint
    assert hint.endswith("or its packages: pip install 'hiredis>=2.0' 'redis>=5.0')")


def test_an_extra_of_extras_lists_the_packages_of_each() -> None:
    hint = install_hint("postgres")
    for package in ("'psycopg[binary]>=3.1'", "'alembic>=1.13'", "'sqlalchemy[asyncio]>=2.0.30'"):
        assert package in hint


def test_without_the_distribution_installed_the_hint_names_no_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> list[str]:
        raise errors.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(errors.metadata, "requires", missing)
    assert install_hint("redis") == (
        "pip install 'llm-window-memory[redis]' (not on PyPI yet: pip install '.[redis]' in a clone of the "
        "repository, or 'path/to/llm_window_memory-<version>-py3-none-any.whl[redis]' for a built wheel)"
    )


def test_the_missing_dependency_error_carries_the_hint() -> None:
    error = MissingDependencyError("RedisChatMemoryStore", "redis", "redis")
    assert (
        str(error)
        == f"RedisChatMemoryStore requires the 'redis' extra: {install_hint('redis')}; module 'redis' is not installed"
    )
    assert isinstance(error, ImportError) and error.name == "redis"
