# ruff: noqa: E402 - pytest must register the assertion rewrite before the case modules are imported.
"""Test tools shipped with the package: the store contract suite, importable by third-party stores.

Requires pytest (and pytest-asyncio for the async suite). See :class:`ChatMemoryStoreContract` and
:class:`AsyncChatMemoryStoreContract`.
"""

from __future__ import annotations

import pytest

# The cases assert in these modules: have pytest rewrite them (before they are imported) so that a failing
# case shows the values it compared.
pytest.register_assert_rewrite("chatmemory.testing.cases", "chatmemory.testing.driver")

from chatmemory.testing.contract import (
    AsyncChatMemoryStoreContract,
    AsyncEncryptedStoreFactory,
    AsyncHistoryStoreFactory,
    AsyncRawWriter,
    AsyncTtlStoreFactory,
    ChatMemoryStoreContract,
    EncryptedStoreFactory,
    HistoryStoreFactory,
    RawWriter,
    TtlStoreFactory,
)
from chatmemory.testing.conversation import ADVERSARIAL_IDS, ODD_ARGUMENTS, every_message_kind, scripted_turns
from chatmemory.testing.driver import AsyncDriver, ContractDriver, SyncDriver

__all__ = [
    "ADVERSARIAL_IDS",
    "ODD_ARGUMENTS",
    "AsyncChatMemoryStoreContract",
    "AsyncDriver",
    "AsyncEncryptedStoreFactory",
    "AsyncHistoryStoreFactory",
    "AsyncRawWriter",
    "AsyncTtlStoreFactory",
    "ChatMemoryStoreContract",
    "ContractDriver",
    "EncryptedStoreFactory",
    "HistoryStoreFactory",
    "SyncDriver",
    "RawWriter",
    "TtlStoreFactory",
    "every_message_kind",
    "scripted_turns",
]
