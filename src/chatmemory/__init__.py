"""chatmemory: bounded, persistent chat memory for LLM applications.

Importing this package imports no database driver: store adapters live in :mod:`chatmemory.stores`.
"""

from __future__ import annotations

from chatmemory.core.errors import (
    ChatMemoryError,
    ConcurrentUpdateError,
    CorruptedMemoryError,
    EncryptionError,
    EncryptionKeyError,
    HistoryNotEnabledError,
    MessageTooLargeError,
    MissingDependencyError,
    PlaintextRecordError,
    SchemaVersionError,
    SerializationError,
    StoreError,
    UnencodableValueError,
    UnsupportedFormatVersionError,
)
from chatmemory.core.history import HistoryEntry, HistoryPage, SupportsHistory
from chatmemory.core.memory import ChatMemory, MessageWindowChatMemory, TokenWindowChatMemory
from chatmemory.core.messages import (
    AiMessage,
    AudioContent,
    ChatMessage,
    Content,
    CustomMessage,
    ImageContent,
    PdfFileContent,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    VideoContent,
)
from chatmemory.core.provider import ChatMemoryProvider
from chatmemory.core.store import (
    MAX_MEMORY_ID_LENGTH,
    ChatMemoryStore,
    MemoryId,
    Snapshot,
    SupportsContentionHint,
    SupportsExpiryPurge,
    SupportsListing,
    SupportsLockedUpdate,
    SupportsRawRecords,
    SupportsReseal,
    SupportsSchema,
    SupportsTTL,
    SupportsVersioning,
    validate_memory_id,
)
from chatmemory.core.summarizing_memory import SummarizingChatMemory
from chatmemory.core.token_estimators import (
    OpenAITokenCountEstimator,
    SimpleTokenCountEstimator,
    TiktokenTokenCountEstimator,
    TokenCountEstimator,
)
from chatmemory.stores.memory import InMemoryChatMemoryStore
from chatmemory.stores.url import open_store

__version__ = "0.1.0"

__all__ = [
    "MAX_MEMORY_ID_LENGTH",
    "AiMessage",
    "AudioContent",
    "ChatMemory",
    "ChatMemoryError",
    "ChatMemoryProvider",
    "ChatMemoryStore",
    "ChatMessage",
    "ConcurrentUpdateError",
    "Content",
    "CorruptedMemoryError",
    "EncryptionError",
    "EncryptionKeyError",
    "CustomMessage",
    "HistoryEntry",
    "HistoryNotEnabledError",
    "HistoryPage",
    "ImageContent",
    "InMemoryChatMemoryStore",
    "MemoryId",
    "MessageTooLargeError",
    "MessageWindowChatMemory",
    "MissingDependencyError",
    "PlaintextRecordError",
    "OpenAITokenCountEstimator",
    "PdfFileContent",
    "SchemaVersionError",
    "SerializationError",
    "SimpleTokenCountEstimator",
    "Snapshot",
    "StoreError",
    "SupportsExpiryPurge",
    "SupportsHistory",
    "SupportsListing",
    "SupportsContentionHint",
    "SupportsLockedUpdate",
    "SupportsRawRecords",
    "SupportsReseal",
    "SupportsSchema",
    "SupportsTTL",
    "SummarizingChatMemory",
    "SupportsVersioning",
    "SystemMessage",
    "TextContent",
    "TiktokenTokenCountEstimator",
    "TokenCountEstimator",
    "TokenWindowChatMemory",
    "ToolExecutionRequest",
    "ToolExecutionResultMessage",
    "UnencodableValueError",
    "UnsupportedFormatVersionError",
    "UserMessage",
    "VideoContent",
    "__version__",
    "open_store",
    "validate_memory_id",
]
