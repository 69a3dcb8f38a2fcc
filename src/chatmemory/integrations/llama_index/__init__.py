"""LlamaIndex on chatmemory: the message converters and a chat store over any chatmemory store.

Needs the ``llama-index`` extra: ``pip install 'llm-window-memory[llama-index]'`` (importing this package
without it raises :class:`~chatmemory.MissingDependencyError` naming the command).

* :func:`to_llama_index` / :func:`from_llama_index` (:mod:`.messages`): chat messages to and from
  llama-index-core ``ChatMessage``, round trips exact.
* :class:`ChatMemoryChatStore` (:mod:`.chat_store`): a ``BaseChatStore`` (for ``ChatMemoryBuffer`` and any
  code written against LlamaIndex's chat stores) whose positional edits are atomic against other writers.
"""

from __future__ import annotations

from chatmemory.core.optional import require

require("llama_index.core", feature="chatmemory.integrations.llama_index", extra="llama-index")

# Imported once llama-index-core is known to be installed.
from chatmemory.integrations.llama_index.chat_store import ChatMemoryChatStore  # noqa: E402
from chatmemory.integrations.llama_index.messages import (  # noqa: E402
    RECORD_ATTRIBUTE,
    from_llama_index,
    to_llama_index,
)

__all__ = ["RECORD_ATTRIBUTE", "ChatMemoryChatStore", "from_llama_index", "to_llama_index"]
