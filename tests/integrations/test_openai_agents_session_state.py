"""What a ChatMemorySession keeps between calls (converted items, the state it last saw) never shows through.

A session object hands out items converted once per message and starts a write from the state it last
read or wrote; these cases change the memory behind its back (another session object on the same id, a
clear, a delete and a new start, a caller changing the items it got) and check every read still gives
the stored items and every write still lands on the current memory. On every async backend.
"""

from __future__ import annotations

from typing import Any

from chatmemory import AiMessage, ToolExecutionResultMessage, UserMessage, aio
from chatmemory.integrations.openai_agents import ChatMemorySession
from integrations.openai_agents_transport import call, reasoning, say


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def _output(call_id: str, text: str = "ok") -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": text}


def _turn(number: int) -> list[list[dict[str, Any]]]:
    """A tool-calling turn as Runner.run adds it: four batches."""
    return [
        [_user(f"question {number}")],
        [reasoning(number, "think"), call(f"c{number}", f"city {number}")],
        [_output(f"c{number}", f"sunny {number}")],
        [say(number, f"answer {number}")],
    ]


async def test_items_handed_out_are_the_callers_to_change(async_store: aio.ChatMemoryStore) -> None:
    session = ChatMemorySession("mutable", store=async_store)
    for batch in _turn(1):
        await session.add_items(batch)
    first = await session.get_items()
    expected = [item for batch in _turn(1) for item in batch]
    assert first == expected
    for item in first:
        item["changed"] = True
        for value in item.values():
            if isinstance(value, list):
                value.clear()
    assert await session.get_items() == expected
    assert await session.get_items(2) == expected[-2:]


async def test_a_read_sees_what_another_session_object_wrote(async_store: aio.ChatMemoryStore) -> None:
    mine = ChatMemorySession("reader", store=async_store)
    other = ChatMemorySession("reader", store=async_store)
    await mine.add_items([_user("one")])
    assert await mine.get_items() == [_user("one")]
    await other.add_items([_user("two")])
    assert await mine.get_items() == [_user("one"), _user("two")]
    await other.pop_item()
    assert await mine.get_items() == [_user("one")]


async def test_writes_interleaved_with_another_session_object_lose_nothing(async_store: aio.ChatMemoryStore) -> None:
    mine = ChatMemorySession("interleaved", store=async_store)
    other = ChatMemorySession("interleaved", store=async_store)
    expected: list[dict[str, Any]] = []
    for number in range(4):
        for index, batch in enumerate(_turn(number)):
            # Each object's next write starts from a state the other one has moved on from.
            await (mine if index % 2 == 0 else other).add_items(batch)
            expected.extend(batch)
    assert await mine.get_items() == expected
    assert await other.get_items() == expected


async def test_a_write_after_a_clear_elsewhere_starts_from_the_new_memory(async_store: aio.ChatMemoryStore) -> None:
    mine = ChatMemorySession("cleared", store=async_store)
    other = ChatMemorySession("cleared", store=async_store)
    await mine.add_items([_user("old")])
    await mine.get_items()
    await other.clear_session()
    await mine.add_items([_user("new")])
    assert await other.get_items() == [_user("new")]
    # Cleared and written again elsewhere: the memory at a new version holds other items.
    await other.clear_session()
    await other.add_items([_user("theirs")])
    await mine.add_items([_user("mine")])
    assert await mine.get_items() == [_user("theirs"), _user("mine")]


async def test_a_pop_after_writes_elsewhere_takes_the_stored_last_item(async_store: aio.ChatMemoryStore) -> None:
    mine = ChatMemorySession("popped", store=async_store)
    other = ChatMemorySession("popped", store=async_store)
    await mine.add_items([_user("one"), _user("two")])
    await other.add_items([_user("three")])
    assert await mine.pop_item() == _user("three")
    assert await other.get_items() == [_user("one"), _user("two")]


async def test_an_output_is_named_after_its_call_stored_turns_before(async_store: aio.ChatMemoryStore) -> None:
    session = ChatMemorySession("named", store=async_store)
    await session.add_items([_user("q"), reasoning(1, "r"), call("c1", "Munich"), call("c2", "Rome")])
    await session.add_items([_output("c1")])
    await session.add_items([_user("meanwhile"), say(1, "later")])
    await session.add_items([_output("c2")])
    stored = await async_store.get_messages("named")
    outputs = [message for message in stored if isinstance(message, ToolExecutionResultMessage)]
    assert [(output.id, output.tool_name) for output in outputs] == [("c1", "weather"), ("c2", "weather")]
    assert [type(message) for message in stored] == [
        UserMessage,
        AiMessage,
        ToolExecutionResultMessage,
        UserMessage,
        AiMessage,
        ToolExecutionResultMessage,
    ]
    assert await session.get_items() == [
        _user("q"),
        reasoning(1, "r"),
        call("c1", "Munich"),
        call("c2", "Rome"),
        _output("c1"),
        _user("meanwhile"),
        say(1, "later"),
        _output("c2"),
    ]


async def test_a_long_session_read_in_parts_and_whole_agrees(async_store: aio.ChatMemoryStore) -> None:
    session = ChatMemorySession("long", store=async_store)
    expected: list[dict[str, Any]] = []
    for number in range(30):
        assert await session.get_items() == expected
        for batch in _turn(number):
            await session.add_items(batch)
            expected.extend(batch)
        for limit in (1, 3, 7):
            assert await session.get_items(limit) == expected[-limit:]
    fresh = ChatMemorySession("long", store=async_store)
    assert await fresh.get_items() == expected


async def test_a_write_after_the_store_was_written_directly_starts_from_what_is_stored(
    async_store: aio.ChatMemoryStore,
) -> None:
    # Other code (another service, a migration) writes the memory behind every session object's back: the
    # state the session objects share is stale, and their next write must start from what is stored.
    session = ChatMemorySession("direct", store=async_store)
    await session.add_items([_user("one")])
    stored = await async_store.get_messages("direct")
    await async_store.update_messages("direct", [*stored, UserMessage("two")])
    await session.add_items([_user("three")])
    assert await session.get_items() == [_user("one"), _user("two"), _user("three")]
    await async_store.delete_messages("direct")
    await async_store.update_messages("direct", [UserMessage("four")])
    assert await session.pop_item() == _user("four")
    await session.add_items([_user("five")])
    assert await ChatMemorySession("direct", store=async_store).get_items() == [_user("five")]
