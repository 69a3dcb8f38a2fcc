"""ChatMemorySession against the SDK's Session semantics (SQLiteSession as the reference), on every async backend."""

from __future__ import annotations

import asyncio
import datetime
import enum
import subprocess
import sys
from typing import Any

import pytest
from agents import SQLiteSession
from agents.memory import Session, SessionSettings
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chatmemory import (
    AiMessage,
    CorruptedMemoryError,
    InMemoryChatMemoryStore,
    SerializationError,
    ToolExecutionResultMessage,
    UnencodableValueError,
    aio,
)
from chatmemory.integrations.openai_agents import ChatMemorySession
from integrations.openai_agents_transport import call, reasoning, say


def _output(call_id: str, text: str = "ok") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


TURN: list[dict[str, Any]] = [
    _user("weather in Munich and Rome?"),
    reasoning(1, "two calls"),
    call("c1", "Munich"),
    call("c2", "Rome"),
    _output("c1", "sunny"),
    _output("c2", "rain"),
    say(1, "Munich sunny, Rome rain."),
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "x"}},
    _user("thanks"),
]


async def test_it_is_a_session(async_store: aio.ChatMemoryStore) -> None:
    session = ChatMemorySession("s", store=async_store)
    assert isinstance(session, Session)
    assert isinstance(session.session_settings, SessionSettings)
    assert session.session_settings.limit is None


async def test_items_come_back_equal_and_in_order(async_store: aio.ChatMemoryStore) -> None:
    session = ChatMemorySession("equal", store=async_store)
    await session.add_items(TURN)
    assert await session.get_items() == TURN


async def test_limits_count_items_as_sqlite_session_does(async_store: aio.ChatMemoryStore) -> None:
    session = ChatMemorySession("limits", store=async_store)
    reference = SQLiteSession("reference")
    try:
        for target in (session, reference):
            await target.add_items(TURN)
        for limit in (None, 0, 1, 2, 3, 4, 5, 6, len(TURN), len(TURN) + 5):
            assert await session.get_items(limit) == await reference.get_items(limit), limit
    finally:
        reference.close()
    # One AiMessage holds the reasoning and both calls; the limit still counts three items.
    assert (await session.get_items(8))[:3] == [reasoning(1, "two calls"), call("c1", "Munich"), call("c2", "Rome")]


async def test_a_negative_limit_gives_no_items(async_store: aio.ChatMemoryStore) -> None:
    # As the SDK's Redis, MongoDB and Dapr sessions (and SQLiteSession since it guards LIMIT -1).
    session = ChatMemorySession("negative", store=async_store)
    await session.add_items(TURN)
    assert await session.get_items(-1) == []


async def test_a_turn_split_across_batches_is_stored_as_one(async_store: aio.ChatMemoryStore) -> None:
    whole = ChatMemorySession("whole", store=async_store)
    split = ChatMemorySession("split", store=async_store)
    await whole.add_items(TURN)
    for item in TURN:
        await split.add_items([item])
    assert await split.get_items() == await whole.get_items() == TURN
    assert await async_store.get_messages("split") == await async_store.get_messages("whole")
    turn = (await async_store.get_messages("split"))[1]
    assert isinstance(turn, AiMessage) and len(turn.tool_execution_requests) == 2 and turn.thinking == "two calls"


async def test_pop_gives_items_back_one_by_one_and_re_adding_restores(async_store: aio.ChatMemoryStore) -> None:
    session = ChatMemorySession("pop", store=async_store)
    reference = SQLiteSession("reference")
    try:
        for target in (session, reference):
            await target.add_items(TURN[:4])  # ends with an AiMessage holding reasoning and two calls
        popped = [await session.pop_item() for _ in range(5)]
        assert popped == [await reference.pop_item() for _ in range(5)]
    finally:
        reference.close()
    assert popped == [
        call("c2", "Rome"),
        call("c1", "Munich"),
        reasoning(1, "two calls"),
        _user(TURN[0]["content"]),
        None,
    ]
    assert await session.get_items() == []
    await session.add_items(list(reversed(popped[:4])))
    assert await session.get_items() == TURN[:4]
    assert await session.pop_item() == call("c2", "Rome")
    await session.add_items([call("c2", "Rome")])
    assert await async_store.get_messages("pop") == (await _stored(TURN[:4]))


async def _stored(items: list[dict[str, Any]]) -> list[Any]:
    store = aio.InMemoryChatMemoryStore()
    await ChatMemorySession("x", store=store).add_items(items)
    return await store.get_messages("x")


async def test_clear_session(async_store: aio.ChatMemoryStore) -> None:
    session = ChatMemorySession("clear", store=async_store)
    other = ChatMemorySession("other", store=async_store)
    await session.add_items(TURN)
    await other.add_items(TURN[:1])
    await session.clear_session()
    assert await session.get_items() == []
    assert await session.pop_item() is None
    assert await other.get_items() == TURN[:1]


async def test_session_settings_give_the_default_limit(async_store: aio.ChatMemoryStore) -> None:
    session = ChatMemorySession("settings", store=async_store, session_settings={"limit": 2})
    await session.add_items([_user(str(number)) for number in range(5)])
    assert await session.get_items() == [_user("3"), _user("4")]
    assert await session.get_items(limit=1) == [_user("4")]
    assert session.session_settings == SessionSettings(limit=2)


async def test_with_no_limit_everything_is_kept(async_store: aio.ChatMemoryStore) -> None:
    session = ChatMemorySession("everything", store=async_store)
    items = [
        {"role": "system", "content": "first"},
        _user("u"),
        _output("orphan-without-call"),  # kept: no window, no eviction
        {"role": "system", "content": "second system message, kept too"},
        {"role": "developer", "content": "a developer message"},
    ]
    items += [_user(str(number)) for number in range(300)]
    await session.add_items(items)
    assert await session.get_items() == items


async def test_a_message_window_evicts_calls_with_their_outputs(async_store: aio.ChatMemoryStore) -> None:
    system = {"role": "developer", "content": "Be brief."}
    windowed = ChatMemorySession("window", store=async_store, max_messages=4, system_role="developer")
    await windowed.add_items([system, *TURN[:6]])
    items = await windowed.get_items()
    # [developer, AiMessage(reasoning, c1, c2), result c1, result c2]: the user message left first.
    assert items == [system, *TURN[1:6]]
    await windowed.add_items([say(2, "more")])
    items = await windowed.get_items()
    # The turn left with both outputs; no function_call_output stays without its call.
    assert items == [system, say(2, "more")]


async def test_a_token_window_keeps_the_system_message(async_store: aio.ChatMemoryStore) -> None:
    session = ChatMemorySession("tokens", store=async_store, max_tokens=60)
    system = {"role": "system", "content": "You are a travel assistant."}
    await session.add_items([system])
    for number in range(30):
        await session.add_items([_user(f"question number {number} about the weather"), say(number, "sunny")])
    items = await session.get_items()
    assert items[0] == system
    assert 1 < len(items) < 10
    assert items[-1] == say(29, "sunny")
    messages = await async_store.get_messages("tokens")
    assert not isinstance(messages[1], ToolExecutionResultMessage)


async def test_concurrent_adds_lose_nothing(async_store: aio.ChatMemoryStore) -> None:
    session = ChatMemorySession("concurrent", store=async_store)

    async def writer(number: int) -> None:
        for index in range(10):
            await session.add_items([_user(f"{number}:{index}")])

    await asyncio.gather(*(writer(number) for number in range(5)))
    contents = [item["content"] for item in await session.get_items()]
    assert sorted(contents) == sorted(f"{n}:{i}" for n in range(5) for i in range(10))


_items = st.one_of(
    st.builds(_user, st.text(max_size=5)),
    st.builds(lambda n, s: reasoning(n, s), st.integers(0, 3), st.text(max_size=5)),
    st.builds(lambda n: call(f"c{n}", "x"), st.integers(0, 3)),
    st.builds(lambda n: _output(f"c{n}"), st.integers(0, 3)),
    st.builds(lambda n, s: say(n, s), st.integers(0, 3), st.text(max_size=5)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(_items, max_size=4), max_size=6), pops=st.integers(0, 4))
def test_any_batches_come_back_as_added_and_pop_as_sqlite(batches: list[list[dict[str, Any]]], pops: int) -> None:
    async def check() -> None:
        session = ChatMemorySession("prop", store=aio.InMemoryChatMemoryStore())
        reference = SQLiteSession("reference")
        try:
            for batch in batches:
                await session.add_items(batch)
                await reference.add_items(batch)
            assert await session.get_items() == await reference.get_items()
            for _ in range(pops):
                assert await session.pop_item() == await reference.pop_item()
            assert await session.get_items() == await reference.get_items()
            assert await session.get_items(3) == await reference.get_items(3)
        finally:
            reference.close()

    asyncio.run(check())


def test_bad_arguments_fail_at_construction() -> None:
    store = aio.InMemoryChatMemoryStore()
    with pytest.raises(TypeError, match=r"open_store\('memory://'\)"):
        ChatMemorySession("s", store="memory://")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="sync store"):
        ChatMemorySession("s", store=InMemoryChatMemoryStore())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not both"):
        ChatMemorySession("s", store=store, max_messages=3, max_tokens=100)
    with pytest.raises(ValueError, match="max_messages must be > 0"):
        ChatMemorySession("s", store=store, max_messages=0)
    with pytest.raises(ValueError, match="system_role"):
        ChatMemorySession("s", store=store, system_role="assistant")
    with pytest.raises(ValueError, match="max_attempts"):
        ChatMemorySession("s", store=store, max_attempts=0)


async def test_bad_items_name_the_session() -> None:
    session = ChatMemorySession("named", store=aio.InMemoryChatMemoryStore())
    with pytest.raises(TypeError, match=r"'named'.*item 1"):
        await session.add_items([_user("ok"), "not a dict"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="'named'"):
        await session.add_items(_user("a dict, not a list"))  # type: ignore[arg-type]
    assert await session.get_items() == []


class _Color(enum.Enum):
    RED = "red"


class _Size(str, enum.Enum):
    LARGE = "large"


# (the item's field, a value JSON cannot hold, where the error says it is, what it says it is)
_UNENCODABLE = [
    ("content", object(), "['content']", "value of type object"),
    ("content", [{"type": "input_text", "text": b"bytes"}], r"['content'][0]['text']", "value of type bytes"),
    ("provider_data", {"seen": {1, 2}}, "['provider_data']['seen']", "value of type set"),
    ("created", datetime.datetime(2024, 5, 1), "['created']", "value of type datetime"),
    ("score", float("nan"), "['score']", "non-finite float"),
    ("score", float("inf"), "['score']", "non-finite float"),
    ("counts", {1: "one"}, "['counts']", "non-str key 1"),
    ("big", 2**70, "['big']", "64-bit range"),
    ("color", _Color.RED, "['color']", "value of type _Color"),
    ("pair", ("a", "b"), "['pair']", "pass a list"),
]


@pytest.mark.parametrize(("field", "value", "where", "what"), _UNENCODABLE, ids=[row[3] for row in _UNENCODABLE])
async def test_a_value_json_cannot_hold_raises_a_type_error_as_the_sdk_sessions_do(
    field: str, value: object, where: str, what: str
) -> None:
    session = ChatMemorySession("unencodable", store=aio.InMemoryChatMemoryStore())
    await session.add_items([_user("kept")])
    bad = {**_user("x"), field: value}
    with pytest.raises(TypeError) as raised:
        await session.add_items([_user("not kept"), bad])
    # One error, both kinds: code written against the SDK's sessions catches TypeError, ours SerializationError.
    assert isinstance(raised.value, UnencodableValueError) and isinstance(raised.value, SerializationError)
    message = str(raised.value)
    assert "'unencodable'" in message and "item 1" in message and where in message and what in message
    assert raised.value.memory_id == "unencodable"
    assert await session.get_items() == [_user("kept")], "nothing of the refused call may be written"


async def test_the_sdk_session_raises_type_error_for_the_same_value() -> None:
    # The reference: what code written against the SDK's own sessions expects to catch.
    reference = SQLiteSession("reference")
    try:
        with pytest.raises(TypeError):
            await reference.add_items([{**_user("x"), "content": object()}])  # type: ignore[list-item]
    finally:
        reference.close()
    with pytest.raises(TypeError):
        await ChatMemorySession("s", store=aio.InMemoryChatMemoryStore()).add_items(
            [{**_user("x"), "content": object()}]
        )


async def test_json_values_of_subclasses_are_kept_as_their_values() -> None:
    session = ChatMemorySession("values", store=aio.InMemoryChatMemoryStore())
    item = {**_user("x"), "provider_data": {"size": _Size.LARGE, "n": 2**64 - 1, "nested": [[{"ok": None}]]}}
    await session.add_items([item])
    assert await session.get_items() == [
        {**_user("x"), "provider_data": {"size": "large", "n": 2**64 - 1, "nested": [[{"ok": None}]]}}
    ]


def test_only_the_unencodable_value_error_is_a_type_error() -> None:
    assert issubclass(UnencodableValueError, SerializationError) and issubclass(UnencodableValueError, TypeError)
    # Damaged stored data is no argument of the wrong type: except TypeError must not swallow it.
    assert not issubclass(CorruptedMemoryError, TypeError) and not issubclass(SerializationError, TypeError)


def test_without_the_extra_the_error_names_it() -> None:
    code = (
        "import sys; sys.modules['agents'] = None\n"
        "try:\n    import chatmemory.integrations.openai_agents\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "ChatMemorySession requires the 'openai-agents' extra" in result.stdout
