"""Windows that open with a user message (``start_on="user"``), through the store, for every window kind.

Anthropic's and Gemini's APIs want the conversation after the system prompt to open with a user turn; a
window memory built with ``start_on="user"`` evicts on until it does. These cases check that the window
read back from the store holds that rule after every write, and that it is exactly the window the pure
algorithm gives (an in-memory memory of the same options).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from chatmemory.core.memory import MessageWindowChatMemory, TokenWindowChatMemory
from chatmemory.core.messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.core.summarizing_memory import SummarizingChatMemory
from chatmemory.core.summary import is_summary
from chatmemory.core.token_estimators import SimpleTokenCountEstimator
from chatmemory.stores.memory import InMemoryChatMemoryStore
from chatmemory.testing.conversation import scripted_turns
from chatmemory.testing.driver import ContractDriver, MemoryView

__all__ = ["StartOnCases", "opens_with_user"]


def opens_with_user(window: Sequence[ChatMessage]) -> bool:
    """Whether the first message that is neither the system message nor a summary is a user message.

    A window of only those (or an empty one) opens with nothing, which is allowed.
    """
    for message in window:
        if isinstance(message, SystemMessage) or is_summary(message):
            continue
        return isinstance(message, UserMessage) and not is_summary(message)
    return True


def _summarize(previous: str | None, evicted: list[ChatMessage]) -> str:
    kinds = ",".join(type(message).__name__[0] for message in evicted)
    return f"{previous or ''}|{kinds}"


def _memories(
    contract: ContractDriver, memory_id: str, kind: str, limit: int, max_tokens: int | None = None
) -> tuple[MemoryView, MessageWindowChatMemory | TokenWindowChatMemory | SummarizingChatMemory]:
    """The memory under test and its in-memory reference, of one kind, both with ``start_on="user"``.

    A message window holds ``limit`` messages; a token window ``max_tokens`` (``limit * 12`` if not given).
    """
    reference_store = InMemoryChatMemoryStore()
    if kind == "message":
        options: dict[str, Any] = {"max_messages": limit, "start_on": "user"}
        return contract.memory(memory_id, **options), MessageWindowChatMemory(
            memory_id, store=reference_store, **options
        )
    if kind == "token":
        options = {"max_tokens": max_tokens or limit * 12, "start_on": "user"}
        return contract.token_memory(memory_id, **options), TokenWindowChatMemory(
            memory_id, store=reference_store, **options
        )
    options = {"max_messages": limit, "start_on": "user", "summarizer": _summarize}
    return contract.summarizing_memory(memory_id, **options), SummarizingChatMemory(
        memory_id, store=reference_store, **options
    )


_KINDS = pytest.mark.parametrize("kind", ["message", "token", "summarizing"])


class StartOnCases:
    """Windows built with ``start_on="user"`` open with a user message, on every backend."""

    @_KINDS
    async def test_start_on_user_window_opens_with_a_user_message_after_every_turn(
        self, contract: ContractDriver, memory_id: str, kind: str
    ) -> None:
        memory, reference = _memories(contract, memory_id, kind, limit=7)
        for turn, added in enumerate(scripted_turns(40)):
            await memory.add(*added)
            reference.add(*added)
            stored = await contract.store.get_messages(memory_id)
            assert opens_with_user(stored), f"after turn {turn}: {stored}"
            assert stored == reference.messages() == await memory.messages(), f"after turn {turn}"

    @_KINDS
    async def test_start_on_user_evicts_an_assistant_turn_up_to_the_next_user_message(
        self, contract: ContractDriver, memory_id: str, kind: str
    ) -> None:
        system = SystemMessage("Be brief.")
        # The token window holds what the message window of 5 does after the second add, without start_on.
        fits = SimpleTokenCountEstimator().estimate_messages(
            [system, AiMessage("a1"), UserMessage("q2"), AiMessage("a2")]
        )
        memory, _ = _memories(contract, memory_id, kind, limit=5, max_tokens=fits)
        call = AiMessage(tool_execution_requests=[ToolExecutionRequest(id="c1", name="weather", arguments="{}")])
        result = ToolExecutionResultMessage("c1", "weather", "sunny")
        await memory.add(system, UserMessage("q1"), call, result, AiMessage("a1"))
        await memory.add(UserMessage("q2"), AiMessage("a2"))
        # Without start_on the window would be [system, result..]: the call went, so its result did, then
        # [system, a1, q2, a2]. With it, a1 goes as well: the window opens with q2.
        window = await contract.store.get_messages(memory_id)
        conversation = [message for message in window if not is_summary(message)]
        assert conversation == [system, UserMessage("q2"), AiMessage("a2")]
        assert opens_with_user(window)

    @_KINDS
    async def test_start_on_user_set_drops_a_leading_assistant_turn(
        self, contract: ContractDriver, memory_id: str, kind: str
    ) -> None:
        memory, _ = _memories(contract, memory_id, kind, limit=10)
        await memory.set([SystemMessage("s"), AiMessage("Hello! How can I help?"), UserMessage("hi"), AiMessage("a")])
        window = await contract.store.get_messages(memory_id)
        assert [message for message in window if not is_summary(message)] == [
            SystemMessage("s"),
            UserMessage("hi"),
            AiMessage("a"),
        ]

    async def test_start_on_user_reads_a_window_another_writer_left_open_on_an_assistant_turn(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        stored: list[ChatMessage] = [SystemMessage("s"), AiMessage("a0"), UserMessage("q1"), AiMessage("a1")]
        await contract.store.update_messages(memory_id, stored)
        memory = contract.memory(memory_id, max_messages=10, start_on="user")
        assert await memory.messages() == [SystemMessage("s"), UserMessage("q1"), AiMessage("a1")]
        await memory.add(UserMessage("q2"))
        assert await contract.store.get_messages(memory_id) == [
            SystemMessage("s"),
            UserMessage("q1"),
            AiMessage("a1"),
            UserMessage("q2"),
        ]

    async def test_start_on_any_keeps_the_assistant_turn(self, contract: ContractDriver, memory_id: str) -> None:
        memory = contract.memory(memory_id, max_messages=4)
        await memory.add(SystemMessage("s"), UserMessage("q1"), AiMessage("a1"), UserMessage("q2"), AiMessage("a2"))
        assert await contract.store.get_messages(memory_id) == [
            SystemMessage("s"),
            AiMessage("a1"),
            UserMessage("q2"),
            AiMessage("a2"),
        ]
