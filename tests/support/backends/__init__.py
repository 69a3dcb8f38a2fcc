"""One module per store backend. Each exposes ``open_backend() -> Backend`` (session-wide).

Adding a backend is one module here and one line in ``BACKENDS`` (tests/conftest.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from chatmemory import ChatMemoryStore


class Backend(Protocol):
    """What the test suite needs from a backend."""

    name: str

    def make_store(self, **options: Any) -> ChatMemoryStore:
        """A store in a fresh namespace (key prefix, table prefix, collection) on the backend's server.

        ``options`` are passed to the store's constructor (e.g. ``ttl=2``).
        """
        ...

    def write_raw(self, store: ChatMemoryStore, memory_id: str, records: Sequence[bytes]) -> None:
        """Make ``records`` the stored message records of ``memory_id``, bypassing all encoding.

        Each record is what the store persists for one message (``dumps_message`` form), possibly broken.
        """
        ...

    def close_store(self, store: ChatMemoryStore) -> None:
        """Drop the store's namespace and release its connections."""
        ...

    def close(self) -> None:
        """Release session-wide resources."""
        ...
