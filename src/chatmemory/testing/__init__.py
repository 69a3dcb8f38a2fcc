"""Test tools shipped with the package: the store contract suite, importable by third-party stores.

Requires pytest. See :class:`ChatMemoryStoreContract`.
"""

from __future__ import annotations

from chatmemory.testing.contract import ChatMemoryStoreContract, RawWriter, TtlStoreFactory
from chatmemory.testing.conversation import ADVERSARIAL_IDS, ODD_ARGUMENTS, every_message_kind, scripted_turns

__all__ = [
    "ADVERSARIAL_IDS",
    "ODD_ARGUMENTS",
    "ChatMemoryStoreContract",
    "RawWriter",
    "TtlStoreFactory",
    "every_message_kind",
    "scripted_turns",
]
