"""The store contract suite: one set of cases every :class:`~chatmemory.ChatMemoryStore` must pass.

Subclass :class:`ChatMemoryStoreContract` in a test module and override the ``store`` fixture (and,
optionally, ``write_raw`` and ``make_ttl_store``) to check a store against a real database::

    from chatmemory.testing import ChatMemoryStoreContract

    class TestMyStore(ChatMemoryStoreContract):
        @pytest.fixture
        def store(self):
            store = MyStore(os.environ["MY_DB_URL"])
            yield store
            store.close()

Cases for optional capabilities (versioning, TTL, listing) run only when the store has them; the
corruption cases run only when ``write_raw`` is given.
"""

from __future__ import annotations

import uuid

import pytest

from chatmemory.core.store import ChatMemoryStore
from chatmemory.testing.cases.atomicity import AtomicityCases
from chatmemory.testing.cases.corruption import CorruptionCases
from chatmemory.testing.cases.expiry import ExpiryCases
from chatmemory.testing.cases.hooks import RawWriter, TtlStoreFactory
from chatmemory.testing.cases.round_trip import RoundTripCases
from chatmemory.testing.cases.versioning import VersioningCases
from chatmemory.testing.cases.windows import WindowCases

__all__ = ["ChatMemoryStoreContract", "RawWriter", "TtlStoreFactory"]


class ChatMemoryStoreContract(
    RoundTripCases, WindowCases, AtomicityCases, VersioningCases, CorruptionCases, ExpiryCases
):
    """The contract every chat memory store passes (SEMANTICS.md §4). Override the fixtures below."""

    # ------------------------------------------------------------------------------------------ fixtures

    @pytest.fixture
    def store(self) -> ChatMemoryStore:
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
    def memory_id(self) -> str:
        """A fresh memory id, so tests can share a database."""
        return f"contract-{uuid.uuid4().hex}"
