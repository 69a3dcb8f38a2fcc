"""Window memories refuse bad arguments at construction, saying what to pass instead."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from chatmemory import (
    ChatMessage,
    ConcurrentUpdateError,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    TokenWindowChatMemory,
    UserMessage,
)
from chatmemory.core.window_memory import SupportsEstimateMessages
from chatmemory.stores.base import RetryPolicy

from .recording import AlwaysConflictingStore

MEMORIES = [MessageWindowChatMemory, TokenWindowChatMemory]


class _AsyncStore:
    async def get_messages(self, memory_id: str) -> list[ChatMessage]:
        return []

    async def update_messages(self, memory_id: str, messages: Sequence[ChatMessage]) -> None:
        pass

    async def delete_messages(self, memory_id: str) -> None:
        pass


def _make(cls: Any, **options: Any) -> Any:
    limit = {"max_messages": 5} if cls is MessageWindowChatMemory else {"max_tokens": 50}
    return cls("m", **limit, **options)


@pytest.mark.parametrize("cls", MEMORIES)
def test_a_url_as_store_says_to_open_it(cls: Any) -> None:
    with pytest.raises(TypeError, match=r"open_store\('redis://localhost:6379/0'\)"):
        _make(cls, store="redis://localhost:6379/0")


@pytest.mark.parametrize("cls", MEMORIES)
def test_an_object_that_is_no_store_names_what_it_lacks(cls: Any) -> None:
    with pytest.raises(TypeError, match="update_messages"):
        _make(cls, store={"m": []})


@pytest.mark.parametrize("cls", MEMORIES)
def test_an_asyncio_store_points_to_the_aio_memory(cls: Any) -> None:
    with pytest.raises(TypeError, match=rf"chatmemory\.aio\.{cls.__name__}"):
        _make(cls, store=_AsyncStore())


def test_a_model_name_as_estimator_says_to_use_tiktoken() -> None:
    with pytest.raises(TypeError, match=r"OpenAITokenCountEstimator\(model='gpt-4o'\)"):
        TokenWindowChatMemory(max_tokens=100, token_count_estimator="gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="estimate_message"):
        TokenWindowChatMemory(max_tokens=100, token_count_estimator=len)  # type: ignore[arg-type]


@pytest.mark.parametrize("cls", MEMORIES)
def test_retry_takes_a_policy(cls: Any) -> None:
    with pytest.raises(TypeError, match="RetryPolicy"):
        _make(cls, retry=10)
    with pytest.raises(TypeError, match="max_attempts"):
        _make(cls, max_attempts=2.5)
    assert _make(cls).retry == RetryPolicy()


def test_add_gives_up_when_the_retry_budget_is_spent() -> None:
    store = AlwaysConflictingStore()
    memory = MessageWindowChatMemory("m", max_messages=100, store=store, retry=RetryPolicy(budget=0.05))
    with pytest.raises(ConcurrentUpdateError, match="'m'") as raised:
        memory.add(UserMessage("mine"))
    assert raised.value.attempts is not None and raised.value.attempts > 1
    assert store.calls["save"] == raised.value.attempts
    assert UserMessage("mine") not in store.inner.get_messages("m")


class _Overhead:
    def estimate_message(self, message: ChatMessage) -> int:
        return 1

    def estimate_messages(self, messages: Sequence[ChatMessage]) -> int:
        return 100 + len(messages)


def test_window_estimators_are_recognised_by_their_protocol() -> None:
    assert isinstance(_Overhead(), SupportsEstimateMessages)
    memory = TokenWindowChatMemory(max_tokens=103, token_count_estimator=_Overhead(), store=InMemoryChatMemoryStore())
    memory.add(*(UserMessage(str(i)) for i in range(5)))
    assert memory.messages() == [UserMessage("2"), UserMessage("3"), UserMessage("4")]
