"""ChatMemoryHistory as LangChain's chat history contract asks, on every backend, sync and asyncio stores.

What langchain-core's own tests check of a ``BaseChatMessageHistory`` (single and bulk adds, the convenience
adds, ``str``, the async interface, clearing) and of ``RunnableWithMessageHistory`` over it (messages or dict
input, history under its own key, string / message / list / dict output, a chat model that sees the whole
history, streaming, session factories with their own config keys or none), written here for the real
classes over real stores; plus what only a store adds: exact round trips, windows, isolation, concurrent
writers, errors.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.runnables.utils import ConfigurableFieldSpec

from chatmemory import (
    AiMessage,
    ChatMemoryStore,
    CustomMessage,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    SerializationError,
    ToolExecutionRequest,
    UserMessage,
    aio,
)
from chatmemory.integrations.langchain import ChatMemoryHistory

# RunnableWithMessageHistory and BaseChatMessageHistory are deprecated in langchain-core 1.x, still shipped.
pytestmark = pytest.mark.filterwarnings("ignore::langchain_core._api.deprecation.LangChainDeprecationWarning")

TOOL_TURN: list[BaseMessage] = [
    SystemMessage(content="Be brief."),
    HumanMessage(content="Weather in Rome?", id="h1", name="klaus"),
    AIMessage(
        content=[{"type": "reasoning", "reasoning": "look it up", "extras": {"signature": "c2ln"}}],
        id="run-1",
        tool_calls=[{"type": "tool_call", "id": "c1", "name": "weather", "args": {"city": "Rome"}}],
        usage_metadata={"input_tokens": 12, "output_tokens": 4, "total_tokens": 16},
        response_metadata={"model_name": "m", "finish_reason": "tool_calls"},
        additional_kwargs={
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Rome"}'}}
            ]
        },
    ),
    ToolMessage(content="sunny", tool_call_id="c1", name="weather", artifact={"celsius": 24}),
    AIMessage(content="Sunny.", id="run-2"),
]


def _said(messages: list[BaseMessage]) -> str:
    return "you said: " + "\n".join(str(m.content) for m in messages if isinstance(m, HumanMessage))


def _factory(store: Any, **options: Any) -> Callable[..., ChatMemoryHistory]:
    def history(session_id: str) -> ChatMemoryHistory:
        return ChatMemoryHistory(session_id, store=store, **options)

    return history


# ------------------------------------------------------------------------------------- the history itself


def test_it_is_a_chat_message_history(store: ChatMemoryStore) -> None:
    history = ChatMemoryHistory("h", store=store)
    assert isinstance(history, BaseChatMessageHistory)
    assert history.messages == []
    assert (history.memory_id, history.store, history.memory) == ("h", store, None)


def test_single_and_bulk_adds_append_in_order(store: ChatMemoryStore) -> None:
    history = ChatMemoryHistory("h", store=store)
    history.add_message(HumanMessage(content="Hello"))
    history.add_message(HumanMessage(content="World"))
    assert history.messages == [HumanMessage(content="Hello"), HumanMessage(content="World")]
    history.add_messages([HumanMessage(content="again"), AIMessage(content="!")])
    assert history.messages == [
        HumanMessage(content="Hello"),
        HumanMessage(content="World"),
        HumanMessage(content="again"),
        AIMessage(content="!"),
    ]
    history.add_messages([])
    assert len(history.messages) == 4


def test_convenience_adds_and_the_buffer_string(store: ChatMemoryStore) -> None:
    history = ChatMemoryHistory("h", store=store)
    history.add_message(SystemMessage(content="system"))
    history.add_user_message("human 1")
    history.add_ai_message("ai")
    history.add_user_message(HumanMessage(content="human 2"))
    history.add_ai_message(AIMessage(content="ai 2"))
    assert str(history) == "System: system\nHuman: human 1\nAI: ai\nHuman: human 2\nAI: ai 2"


def test_what_is_added_comes_back_equal(store: ChatMemoryStore) -> None:
    history = ChatMemoryHistory("exact", store=store)
    history.add_messages(TOOL_TURN)
    again = ChatMemoryHistory("exact", store=store).messages
    assert again == TOOL_TURN
    assert [m.model_dump() for m in again] == [m.model_dump() for m in TOOL_TURN]
    # Kept as chat messages: other chatmemory code reads the conversation.
    stored = store.get_messages("exact")
    assert isinstance(stored[2], AiMessage)
    assert stored[2].tool_execution_requests == (ToolExecutionRequest("c1", "weather", '{"city": "Rome"}'),)


def test_the_whole_history_keeps_every_system_message(store: ChatMemoryStore) -> None:
    history = ChatMemoryHistory("systems", store=store)
    messages: list[BaseMessage] = [SystemMessage(content="a"), HumanMessage(content="x"), SystemMessage(content="b")]
    history.add_messages(messages)
    assert history.messages == messages


def test_clear_deletes_the_memory_and_nothing_else(store: ChatMemoryStore) -> None:
    mine = ChatMemoryHistory("mine", store=store)
    other = ChatMemoryHistory("other", store=store)
    mine.add_user_message("a")
    other.add_user_message("b")
    mine.clear()
    assert mine.messages == []
    assert store.get_messages("mine") == []
    assert other.messages == [HumanMessage(content="b")]
    mine.clear()  # clearing an empty history is no error
    mine.add_user_message("c")
    assert mine.messages == [HumanMessage(content="c")]


async def test_the_async_interface_on_a_sync_store(store: ChatMemoryStore) -> None:
    history = ChatMemoryHistory("async-over-sync", store=store)
    await history.aadd_messages([HumanMessage(content="Hello"), HumanMessage(content="World")])
    assert await history.aget_messages() == [HumanMessage(content="Hello"), HumanMessage(content="World")]
    await history.aadd_messages([HumanMessage(content="!")])
    assert [m.content for m in await history.aget_messages()] == ["Hello", "World", "!"]
    await history.aclear()
    assert await history.aget_messages() == []


async def test_the_async_interface_on_an_asyncio_store(async_store: aio.ChatMemoryStore) -> None:
    history = ChatMemoryHistory("async", store=async_store)
    assert await history.aget_messages() == []
    await history.aadd_messages([HumanMessage(content="Hello"), HumanMessage(content="World")])
    assert await history.aget_messages() == [HumanMessage(content="Hello"), HumanMessage(content="World")]
    await history.aadd_messages([HumanMessage(content="!")])
    assert [m.content for m in await history.aget_messages()] == ["Hello", "World", "!"]
    await history.aadd_messages(TOOL_TURN)
    assert (await ChatMemoryHistory("async", store=async_store).aget_messages())[3:] == TOOL_TURN
    await history.aclear()
    assert await history.aget_messages() == []
    assert await async_store.get_messages("async") == []


async def test_sync_methods_on_an_asyncio_store_say_what_to_call(async_store: aio.ChatMemoryStore) -> None:
    history = ChatMemoryHistory("sync-on-async", store=async_store)
    with pytest.raises(TypeError, match=r"history 'sync-on-async' is kept in an asyncio store .*aget_messages"):
        _ = history.messages
    with pytest.raises(TypeError, match="aadd_messages"):
        history.add_messages([HumanMessage(content="x")])
    with pytest.raises(TypeError, match="aclear"):
        history.clear()
    assert await async_store.get_messages("sync-on-async") == []


# ---------------------------------------------------------------------------------------------- windows


def test_a_message_window(store: ChatMemoryStore) -> None:
    history = ChatMemoryHistory("window", store=store, max_messages=3)
    history.add_messages(TOOL_TURN)
    # The system message stays; the call left with its result; the newest fit.
    assert history.messages == [TOOL_TURN[0], TOOL_TURN[4]]
    history.add_messages([HumanMessage(content="more"), AIMessage(content="ok")])
    assert history.messages == [TOOL_TURN[0], HumanMessage(content="more"), AIMessage(content="ok")]
    assert isinstance(history.memory, MessageWindowChatMemory)


def test_a_token_window(store: ChatMemoryStore) -> None:
    history = ChatMemoryHistory("tokens", store=store, max_tokens=30)
    history.add_messages([HumanMessage(content=f"message number {n} " * 3) for n in range(6)])
    kept = history.messages
    assert 0 < len(kept) < 6
    assert kept[-1] == HumanMessage(content="message number 5 " * 3)


async def test_an_asyncio_window(async_store: aio.ChatMemoryStore) -> None:
    history = ChatMemoryHistory("aio-window", store=async_store, max_messages=2)
    await history.aadd_messages([HumanMessage(content=str(n)) for n in range(5)])
    assert await history.aget_messages() == [HumanMessage(content="3"), HumanMessage(content="4")]
    assert isinstance(history.memory, aio.MessageWindowChatMemory)


def test_any_memory_through_from_memory(store: ChatMemoryStore) -> None:
    evicted: list[Any] = []
    memory = MessageWindowChatMemory(
        "from-memory", max_messages=2, store=store, on_evict=lambda _id, gone: evicted.extend(gone)
    )
    history = ChatMemoryHistory.from_memory(memory)
    history.add_messages([HumanMessage(content="a"), HumanMessage(content="b"), HumanMessage(content="c")])
    assert history.messages == [HumanMessage(content="b"), HumanMessage(content="c")]
    assert evicted == [UserMessage("a")]
    history.clear()
    assert memory.messages() == []


async def test_any_asyncio_memory_through_from_memory(async_store: aio.ChatMemoryStore) -> None:
    async_history = ChatMemoryHistory.from_memory(aio.MessageWindowChatMemory("m", max_messages=1, store=async_store))
    await async_history.aadd_messages([HumanMessage(content="a"), HumanMessage(content="b")])
    assert await async_history.aget_messages() == [HumanMessage(content="b")]


# ----------------------------------------------------------------------------------------- bad input


def test_custom_messages_raise_naming_the_history_unless_skipped(store: ChatMemoryStore) -> None:
    store.update_messages("custom", [UserMessage("hi"), CustomMessage({"note": 1})])
    with pytest.raises(SerializationError, match=r"history 'custom': message 1 \(CustomMessage\).*skip_custom=True"):
        _ = ChatMemoryHistory("custom", store=store).messages
    assert ChatMemoryHistory("custom", store=store, skip_custom=True).messages == [HumanMessage(content="hi")]


def test_a_message_that_cannot_be_held_adds_nothing(store: ChatMemoryStore) -> None:
    history = ChatMemoryHistory("refused", store=store)
    history.add_user_message("kept")
    with pytest.raises(SerializationError, match=r"history 'refused': LangChain message 1 .*nothing was added"):
        history.add_messages([HumanMessage(content="a"), ToolMessage(content="x", tool_call_id="c", artifact=object())])
    assert history.messages == [HumanMessage(content="kept")]
    with pytest.raises(TypeError, match="takes a list of LangChain messages"):
        history.add_messages(HumanMessage(content="not a list"))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ({"store": "redis://localhost:6379"}, TypeError, "takes a store object, not a URL"),
        ({"store": object()}, TypeError, "needs a ChatMemoryStore"),
        ({"max_messages": 2, "max_tokens": 10}, ValueError, "not both"),
        ({"token_count_estimator": object()}, ValueError, "only used with max_tokens"),
        ({"max_messages": 0}, ValueError, "max_messages must be > 0"),
        ({"max_attempts": 0}, ValueError, "max_attempts must be >= 1"),
        ({"retry": 3}, TypeError, "RetryPolicy"),
        ({"skip_custom": "yes"}, TypeError, "skip_custom must be a bool"),
    ],
)
def test_bad_arguments_fail_when_the_history_is_built(arguments: dict[str, Any], error: type, match: str) -> None:
    options = {"store": InMemoryChatMemoryStore(), **arguments}
    with pytest.raises(error, match=match):
        ChatMemoryHistory("bad", **options)


def test_from_memory_refuses_what_is_no_memory() -> None:
    with pytest.raises(TypeError, match="takes a chatmemory memory"):
        ChatMemoryHistory.from_memory(InMemoryChatMemoryStore())


def test_concurrent_writers_lose_nothing(store: ChatMemoryStore) -> None:
    def write(writer: int) -> None:
        history = ChatMemoryHistory("shared", store=store)
        for turn in range(5):
            history.add_messages([HumanMessage(content=f"{writer}-{turn}")])

    threads = [threading.Thread(target=write, args=(writer,)) for writer in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    said = [m.content for m in ChatMemoryHistory("shared", store=store).messages]
    assert sorted(said) == sorted(f"{w}-{t}" for w in range(4) for t in range(5))
    for writer in range(4):  # each writer's turns in its order
        assert [s for s in said if str(s).startswith(f"{writer}-")] == [f"{writer}-{t}" for t in range(5)]


# ------------------------------------------------------------------------------ RunnableWithMessageHistory


def _config(session_id: str) -> Any:
    return {"configurable": {"session_id": session_id}}


def test_runnable_with_messages_in_and_a_string_out(store: ChatMemoryStore) -> None:
    with_history = RunnableWithMessageHistory(RunnableLambda(_said), _factory(store))
    assert with_history.invoke([HumanMessage(content="hello")], _config("1")) == "you said: hello"
    assert with_history.invoke([HumanMessage(content="good bye")], _config("1")) == "you said: hello\ngood bye"
    assert list(with_history.stream([HumanMessage(content="hi again")], _config("1"))) == [
        "you said: hello\ngood bye\nhi again"
    ]
    assert ChatMemoryHistory("1", store=store).messages == [
        HumanMessage(content="hello"),
        AIMessage(content="you said: hello"),
        HumanMessage(content="good bye"),
        AIMessage(content="you said: hello\ngood bye"),
        HumanMessage(content="hi again"),
        AIMessage(content="you said: hello\ngood bye\nhi again"),
    ]


async def test_runnable_with_messages_in_and_a_string_out_async(async_store: aio.ChatMemoryStore) -> None:
    with_history = RunnableWithMessageHistory(RunnableLambda(_said), _factory(async_store))
    assert await with_history.ainvoke([HumanMessage(content="hello")], _config("1")) == "you said: hello"
    assert await with_history.ainvoke([HumanMessage(content="good bye")], _config("1")) == "you said: hello\ngood bye"
    streamed = [chunk async for chunk in with_history.astream([HumanMessage(content="hi again")], _config("1"))]
    assert streamed == ["you said: hello\ngood bye\nhi again"]
    assert [m.content for m in await ChatMemoryHistory("1", store=async_store).aget_messages()] == [
        "hello",
        "you said: hello",
        "good bye",
        "you said: hello\ngood bye",
        "hi again",
        "you said: hello\ngood bye\nhi again",
    ]


def _dict_runnable(output: str) -> RunnableLambda[Any, Any]:
    def answer(given: dict[str, Any]) -> Any:
        text = "you said: " + "\n".join(
            [str(m.content) for m in given["history"] if isinstance(m, HumanMessage)] + [given["input"]]
        )
        if output == "message":
            return AIMessage(content=text)
        if output == "list":
            return [AIMessage(content=text)]
        if output == "dict":
            return {"output": [AIMessage(content=text)]}
        return text

    return RunnableLambda(answer)


def _wrap(output: str) -> Callable[[AIMessage], Any]:
    return {
        "string": lambda m: m.content,
        "message": lambda m: m,
        "list": lambda m: [m],
        "dict": lambda m: {"output": [m]},
    }[output]


OUTPUTS = ["string", "message", "list", "dict"]


@pytest.mark.parametrize("output", OUTPUTS)
def test_runnable_with_dict_input_and_each_output(store: ChatMemoryStore, output: str) -> None:
    with_history = RunnableWithMessageHistory(
        _dict_runnable(output),  # type: ignore[arg-type]
        _factory(store),
        input_messages_key="input",
        history_messages_key="history",
        output_messages_key="output" if output == "dict" else None,
    )
    wrap = _wrap(output)
    assert with_history.invoke({"input": "hello"}, _config("s")) == wrap(AIMessage(content="you said: hello"))
    assert with_history.invoke({"input": "good bye"}, _config("s")) == wrap(
        AIMessage(content="you said: hello\ngood bye")
    )
    assert ChatMemoryHistory("s", store=store).messages == [
        HumanMessage(content="hello"),
        AIMessage(content="you said: hello"),
        HumanMessage(content="good bye"),
        AIMessage(content="you said: hello\ngood bye"),
    ]


@pytest.mark.parametrize("output", OUTPUTS)
async def test_runnable_with_dict_input_and_each_output_async(async_store: aio.ChatMemoryStore, output: str) -> None:
    with_history = RunnableWithMessageHistory(
        _dict_runnable(output),  # type: ignore[arg-type]
        _factory(async_store),
        input_messages_key="input",
        history_messages_key="history",
        output_messages_key="output" if output == "dict" else None,
    )
    wrap = _wrap(output)
    assert await with_history.ainvoke({"input": "hello"}, _config("s")) == wrap(AIMessage(content="you said: hello"))
    assert await with_history.ainvoke({"input": "good bye"}, _config("s")) == wrap(
        AIMessage(content="you said: hello\ngood bye")
    )
    assert len(await ChatMemoryHistory("s", store=async_store).aget_messages()) == 4


def test_runnable_with_the_messages_under_a_key(store: ChatMemoryStore) -> None:
    runnable = RunnableLambda(lambda given: _said(given["messages"]))
    with_history = RunnableWithMessageHistory(runnable, _factory(store), input_messages_key="messages")
    assert with_history.invoke({"messages": [HumanMessage(content="hello")]}, _config("k")) == "you said: hello"
    assert (
        with_history.invoke({"messages": [HumanMessage(content="good bye")]}, _config("k"))
        == "you said: hello\ngood bye"
    )


async def test_runnable_with_the_messages_under_a_key_async(async_store: aio.ChatMemoryStore) -> None:
    runnable = RunnableLambda(lambda given: _said(given["messages"]))
    with_history = RunnableWithMessageHistory(runnable, _factory(async_store), input_messages_key="messages")
    assert await with_history.ainvoke({"messages": [HumanMessage(content="hello")]}, _config("k")) == "you said: hello"
    second = await with_history.ainvoke({"messages": [HumanMessage(content="good bye")]}, _config("k"))
    assert second == "you said: hello\ngood bye"


def _counting_model() -> RunnableLambda[Any, AIMessage]:
    """A chat model's shape: messages in, one AIMessage out saying how many it was sent."""
    return RunnableLambda(lambda messages: AIMessage(content=str(len(messages))))


def test_a_model_is_sent_the_whole_history(store: ChatMemoryStore) -> None:
    with_history = RunnableWithMessageHistory(_counting_model(), _factory(store))
    assert with_history.invoke([HumanMessage(content="hi")], _config("n")).content == "1"
    assert with_history.invoke([HumanMessage(content="hi")], _config("n")).content == "3"
    assert with_history.invoke("a string is a human message", _config("n")).content == "5"


async def test_a_model_is_sent_the_whole_history_async(async_store: aio.ChatMemoryStore) -> None:
    with_history = RunnableWithMessageHistory(_counting_model(), _factory(async_store))
    assert (await with_history.ainvoke([HumanMessage(content="hi")], _config("n"))).content == "1"
    assert (await with_history.ainvoke([HumanMessage(content="hi")], _config("n"))).content == "3"


def test_a_model_is_sent_the_window(store: ChatMemoryStore) -> None:
    with_history = RunnableWithMessageHistory(_counting_model(), _factory(store, max_messages=4))
    counts = [with_history.invoke([HumanMessage(content="hi")], _config("w")).content for _ in range(4)]
    assert counts == ["1", "3", "5", "5"]  # the window's 4 messages, then the new input
    assert [m.content for m in ChatMemoryHistory("w", store=store).messages] == ["hi", "5", "hi", "5"]


def _config_specs() -> list[ConfigurableFieldSpec]:
    return [
        ConfigurableFieldSpec(id="user_id", annotation=str, name="User", default="", is_shared=True),
        ConfigurableFieldSpec(id="conversation_id", annotation=str, name="Conversation", default=None, is_shared=True),
    ]


async def _factories_with_their_own_keys(used: Any, mode: str) -> None:
    def history(user_id: str, conversation_id: str) -> ChatMemoryHistory:
        return ChatMemoryHistory(f"{user_id}/{conversation_id}", store=used)

    runnable = RunnableLambda(lambda given: [AIMessage(content=_said(given["messages"]))])
    with_history = RunnableWithMessageHistory(
        runnable,  # type: ignore[arg-type]
        get_session_history=history,
        input_messages_key="messages",
        history_messages_key="history",
        history_factory_config=_config_specs(),
    )

    async def call(text: str, user: str) -> Any:
        given = {"messages": [HumanMessage(content=text)]}
        config: Any = {"configurable": {"user_id": user, "conversation_id": "1"}}
        return with_history.invoke(given, config) if mode == "sync" else await with_history.ainvoke(given, config)

    async def read(memory_id: str) -> list[BaseMessage]:
        reader = ChatMemoryHistory(memory_id, store=used)
        return reader.messages if mode == "sync" else await reader.aget_messages()

    assert await call("hello", "user1") == [AIMessage(content="you said: hello")]
    assert await call("goodbye", "user1") == [AIMessage(content="you said: goodbye")]
    assert await call("meow", "user2") == [AIMessage(content="you said: meow")]
    assert await read("user1/1") == [
        HumanMessage(content="hello"),
        AIMessage(content="you said: hello"),
        HumanMessage(content="goodbye"),
        AIMessage(content="you said: goodbye"),
    ]
    assert await read("user2/1") == [HumanMessage(content="meow"), AIMessage(content="you said: meow")]


async def test_session_factories_with_their_own_keys(store: ChatMemoryStore) -> None:
    await _factories_with_their_own_keys(store, "sync")


async def test_session_factories_with_their_own_keys_async(async_store: aio.ChatMemoryStore) -> None:
    await _factories_with_their_own_keys(async_store, "async")


def test_a_factory_without_a_session_id(store: ChatMemoryStore) -> None:
    history = ChatMemoryHistory("only", store=store)
    with_history = RunnableWithMessageHistory(
        RunnableLambda(lambda messages: [AIMessage(content=_said(messages))]),  # type: ignore[arg-type]
        lambda: history,
    )
    with_history.invoke("hello")
    with_history.invoke("hello again")
    assert len(history.messages) == 4


def test_an_output_that_is_no_message_stores_nothing(store: ChatMemoryStore, caplog: pytest.LogCaptureFixture) -> None:
    # LangChain's listener raises ValueError, which its callback manager logs (upstream's test makes it raise).
    with_history = RunnableWithMessageHistory(RunnableLambda(lambda _messages: 123), _factory(store))
    assert with_history.invoke([HumanMessage(content="hello")], _config("bad-output")) == 123
    assert "Expected str, BaseMessage" in caplog.text
    assert store.get_messages("bad-output") == []
