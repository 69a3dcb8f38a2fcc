"""LangChain on chatmemory: the message converters and a chat message history over any store.

Needs the ``langchain`` extra: ``pip install 'llm-window-memory[langchain]'`` (importing this package without
it raises :class:`~chatmemory.MissingDependencyError` naming the command).

* :func:`to_langchain` / :func:`from_langchain` (:mod:`.messages`): chat messages to and from langchain-core
  messages, round trips exact both ways.
* :class:`ChatMemoryHistory` (:mod:`.history`): a ``BaseChatMessageHistory`` for ``RunnableWithMessageHistory``
  and any code written against LangChain's chat history, kept in a chatmemory store.
"""

from __future__ import annotations

from chatmemory.core.optional import require

require("langchain_core", feature="chatmemory.integrations.langchain", extra="langchain")

# Imported once langchain-core is known to be installed.
from chatmemory.integrations.langchain.history import ChatMemoryHistory  # noqa: E402
from chatmemory.integrations.langchain.messages import RECORD_ATTRIBUTE, from_langchain, to_langchain  # noqa: E402

__all__ = ["RECORD_ATTRIBUTE", "ChatMemoryHistory", "from_langchain", "to_langchain"]
