"""The store contract suite, run against every backend in tests/conftest.py BACKENDS."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import pytest

from chatmemory import ChatMemoryStore
from chatmemory.testing import ChatMemoryStoreContract, RawWriter, TtlStoreFactory
from support.backends import Backend


class TestStoreContract(ChatMemoryStoreContract):
    @pytest.fixture
    def store(self, backend: Backend) -> Iterator[ChatMemoryStore]:
        made = backend.make_store()
        yield made
        backend.close_store(made)

    @pytest.fixture
    def write_raw(self, backend: Backend, store: ChatMemoryStore) -> RawWriter:
        def write(memory_id: str, records: Sequence[bytes]) -> None:
            backend.write_raw(store, memory_id, records)

        return write

    @pytest.fixture
    def make_ttl_store(self, backend: Backend) -> Iterator[TtlStoreFactory]:
        made: list[ChatMemoryStore] = []

        def make(seconds: float) -> ChatMemoryStore:
            made.append(backend.make_store(ttl=seconds))
            return made[-1]

        yield make
        for each in made:
            backend.close_store(each)
