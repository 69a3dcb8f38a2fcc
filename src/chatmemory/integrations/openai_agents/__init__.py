"""The OpenAI Agents SDK on chatmemory: :class:`ChatMemorySession`, a ``Session`` kept in any asyncio store.

Needs the ``openai-agents`` extra: ``pip install 'llm-window-memory[openai-agents]'``::

    from agents import Agent, Runner
    from chatmemory.aio import open_store
    from chatmemory.integrations.openai_agents import ChatMemorySession

    store = open_store("redis://localhost:6379/0")
    session = ChatMemorySession("user-42", store=store, max_messages=50)
    result = await Runner.run(agent, "How warm is it in Munich?", session=session)
"""

from __future__ import annotations

from chatmemory.integrations.openai_agents.session import ChatMemorySession

__all__ = ["ChatMemorySession"]
