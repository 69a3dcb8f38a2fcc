"""The store contract suite: one set of cases every store must pass, sync or asyncio.

Subclass :class:`ChatMemoryStoreContract` (a sync store) or :class:`AsyncChatMemoryStoreContract` (an
asyncio store, run by pytest-asyncio) in a test module and override the ``store`` fixture (and, optionally,
``write_raw``, ``make_ttl_store`` and ``make_history_store``) to check a store against a real database.
Both suites run the same cases, written once as coroutines against a
:class:`~chatmemory.testing.driver.ContractDriver`. Cases for optional capabilities (versioning, TTL,
listing) run only when the store has them; the corruption cases only with ``write_raw``, the history cases
only with ``make_history_store``.

Both suites' fixtures, with examples: docs/testing-your-store.md.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import uuid
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from chatmemory.core.errors import MissingDependencyError
from chatmemory.testing.cases.atomicity import AtomicityCases
from chatmemory.testing.cases.corruption import CorruptionCases
from chatmemory.testing.cases.edits import EditCases
from chatmemory.testing.cases.encryption import EncryptionCases
from chatmemory.testing.cases.expiry import ExpiryCases
from chatmemory.testing.cases.history import HistoryCases
from chatmemory.testing.cases.hooks import (
    AsyncEncryptedStoreFactory,
    AsyncHistoryStoreFactory,
    AsyncRawWriter,
    AsyncTtlStoreFactory,
    EncryptedStoreFactory,
    HistoryStoreFactory,
    RawWriter,
    TtlStoreFactory,
)
from chatmemory.testing.cases.round_trip import RoundTripCases
from chatmemory.testing.cases.start_on import StartOnCases
from chatmemory.testing.cases.versioning import VersioningCases
from chatmemory.testing.cases.windows import WindowCases
from chatmemory.testing.cases.writers import WriterCases
from chatmemory.testing.driver import AsyncDriver, ContractDriver, SyncDriver, drive

__all__ = [
    "AsyncChatMemoryStoreContract",
    "AsyncEncryptedStoreFactory",
    "AsyncHistoryStoreFactory",
    "AsyncRawWriter",
    "AsyncTtlStoreFactory",
    "ChatMemoryStoreContract",
    "EncryptedStoreFactory",
    "HistoryStoreFactory",
    "RawWriter",
    "TtlStoreFactory",
]


class _Cases(
    RoundTripCases,
    WindowCases,
    StartOnCases,
    AtomicityCases,
    VersioningCases,
    CorruptionCases,
    ExpiryCases,
    HistoryCases,
    WriterCases,
    EditCases,
    EncryptionCases,
):
    """Every case, as a coroutine method, and the fixtures both suites share."""

    @pytest.fixture
    def memory_id(self) -> str:
        """A fresh memory id, so tests can share a database."""
        return f"contract-{uuid.uuid4().hex}"


def _run_driven(case: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    # functools.wraps keeps the case's signature (pytest reads its fixtures from it) and its marks.
    @functools.wraps(case)
    def test(*args: Any, **kwargs: Any) -> None:
        drive(case(*args, **kwargs))

    return test


class ChatMemoryStoreContract(_Cases):
    """The contract every sync chat memory store passes (see ``docs/semantics.md``). Override the fixtures."""

    @pytest.fixture
    def store(self) -> Any:
        """The store under test. Override this fixture."""
        pytest.fail("override the `store` fixture of ChatMemoryStoreContract to return your store", pytrace=False)

    @pytest.fixture
    def write_raw(self) -> RawWriter | None:
        """A hook that plants raw message records for a memory id; ``None`` skips the corruption cases."""
        return None

    @pytest.fixture
    def make_ttl_store(self) -> TtlStoreFactory | None:
        """A factory of stores whose memories expire; ``None`` skips the TTL cases."""
        return None

    @pytest.fixture
    def make_history_store(self) -> HistoryStoreFactory | None:
        """A factory ``(ttl=None, history_ttl=None)`` of stores built with ``history=True``; ``None`` skips."""
        return None

    @pytest.fixture
    def make_encrypted_store(self) -> EncryptedStoreFactory | None:
        """A factory ``(encryption, history=False)`` of stores sharing one namespace; ``None`` skips."""
        return None

    @pytest.fixture
    def contract(
        self,
        store: Any,
        write_raw: RawWriter | None,
        make_ttl_store: TtlStoreFactory | None,
        make_history_store: HistoryStoreFactory | None,
        make_encrypted_store: EncryptedStoreFactory | None,
    ) -> ContractDriver:
        """The cases' access to the store: plain calls, threads for concurrency."""
        return SyncDriver(store, write_raw, make_ttl_store, make_history_store, make_encrypted_store)


# The sync suite runs each case to its end without an event loop: its driver never suspends.
for _name, _case in inspect.getmembers(_Cases, inspect.iscoroutinefunction):
    if _name.startswith("test_"):
        setattr(ChatMemoryStoreContract, _name, _run_driven(_case))


def _async_store_missing(self: Any) -> Any:
    """The asyncio store under test. Override this fixture (an async fixture may yield it)."""
    pytest.fail("override the `store` fixture of AsyncChatMemoryStoreContract to return your store", pytrace=False)


class AsyncChatMemoryStoreContract(_Cases):
    """The same contract for asyncio stores (:mod:`chatmemory.aio`), run with pytest-asyncio."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # The mark is applied to subclasses only: naming it on this class would trip --strict-markers in
        # projects that use the sync suite alone and have no pytest-asyncio to register the mark.
        if importlib.util.find_spec("pytest_asyncio") is None:
            raise MissingDependencyError("AsyncChatMemoryStoreContract", "test", "pytest_asyncio")
        pytest.mark.asyncio(cls)

    # Typed Any so that an override declared with @pytest_asyncio.fixture (a plain function to a type checker,
    # where @pytest.fixture gives a fixture definition) is a valid override under mypy --strict.
    store: Any = pytest.fixture(_async_store_missing, name="store")

    @pytest.fixture
    def write_raw(self) -> AsyncRawWriter | None:
        """An async hook that plants raw message records; ``None`` skips the corruption cases."""
        return None

    @pytest.fixture
    def make_ttl_store(self) -> AsyncTtlStoreFactory | None:
        """A factory of asyncio stores whose memories expire (it may return an awaitable); ``None`` skips."""
        return None

    @pytest.fixture
    def make_history_store(self) -> AsyncHistoryStoreFactory | None:
        """A factory ``(ttl=None, history_ttl=None)`` of asyncio stores with history (may return an awaitable)."""
        return None

    @pytest.fixture
    def make_encrypted_store(self) -> AsyncEncryptedStoreFactory | None:
        """A factory ``(encryption, history=False)`` of asyncio stores sharing one namespace; ``None`` skips."""
        return None

    @pytest.fixture
    def contract(
        self,
        store: Any,
        write_raw: AsyncRawWriter | None,
        make_ttl_store: AsyncTtlStoreFactory | None,
        make_history_store: AsyncHistoryStoreFactory | None,
        make_encrypted_store: AsyncEncryptedStoreFactory | None,
    ) -> ContractDriver:
        """The cases' access to the store: awaited calls, tasks for concurrency."""
        return AsyncDriver(store, write_raw, make_ttl_store, make_history_store, make_encrypted_store)
