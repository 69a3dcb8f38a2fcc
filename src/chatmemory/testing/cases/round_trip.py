"""Exact round trips, updates, deletes and id isolation."""

from __future__ import annotations

import uuid

import pytest

from chatmemory.core.errors import SerializationError, StoreError
from chatmemory.core.messages import AiMessage, ChatMessage, UserMessage
from chatmemory.testing.cases.hooks import texts
from chatmemory.testing.conversation import ADVERSARIAL_IDS, ODD_ARGUMENTS, every_message_kind
from chatmemory.testing.driver import ContractDriver


class RoundTripCases:
    """Exact round trips, updates, deletes and id isolation."""

    async def test_unknown_id_reads_empty(self, contract: ContractDriver, memory_id: str) -> None:
        assert await contract.store.get_messages(memory_id) == []

    async def test_round_trip_of_every_message_kind(self, contract: ContractDriver, memory_id: str) -> None:
        messages = every_message_kind()
        await contract.store.update_messages(memory_id, messages)
        got = await contract.store.get_messages(memory_id)
        assert got == messages
        assert [type(m) for m in got] == [type(m) for m in messages]

    async def test_any_iterable_of_messages_is_taken_once(self, contract: ContractDriver, memory_id: str) -> None:
        window = texts(3, "g")
        await contract.store.update_messages(memory_id, (message for message in window))  # type: ignore[arg-type]
        assert await contract.store.get_messages(memory_id) == window
        versioned = contract.versioned_store()
        if versioned is not None:
            loaded = await versioned.load(memory_id)
            longer = [*window, UserMessage("next")]
            await versioned.save(memory_id, iter(longer), loaded.version)  # type: ignore[arg-type]
            assert await contract.store.get_messages(memory_id) == longer

    async def test_tool_call_arguments_are_byte_identical(self, contract: ContractDriver, memory_id: str) -> None:
        await contract.store.update_messages(memory_id, every_message_kind())
        requests = [
            r
            for m in await contract.store.get_messages(memory_id)
            if isinstance(m, AiMessage)
            for r in m.tool_execution_requests
        ]
        arguments = [r.arguments for r in requests if r.name == "weather"]
        assert [a.encode("utf-8") for a in arguments] == [a.encode("utf-8") for a in ODD_ARGUMENTS]

    async def test_one_mebibyte_message(self, contract: ContractDriver, memory_id: str) -> None:
        big = "🦜 北京 \x00 " + "x" * (1 << 20)
        messages: list[ChatMessage] = [UserMessage("before"), AiMessage(big), UserMessage("after")]
        await contract.store.update_messages(memory_id, messages)
        assert await contract.store.get_messages(memory_id) == messages

    async def test_returned_list_is_a_copy(self, contract: ContractDriver, memory_id: str) -> None:
        messages = texts(3)
        await contract.store.update_messages(memory_id, messages)
        messages.append(UserMessage("caller changed its list"))
        got = await contract.store.get_messages(memory_id)
        got.clear()
        assert await contract.store.get_messages(memory_id) == texts(3)

    async def test_update_replaces_the_whole_list(self, contract: ContractDriver, memory_id: str) -> None:
        await contract.store.update_messages(memory_id, texts(5, "a"))
        await contract.store.update_messages(memory_id, texts(2, "b"))
        assert await contract.store.get_messages(memory_id) == texts(2, "b")

    async def test_empty_list_is_a_valid_update(self, contract: ContractDriver, memory_id: str) -> None:
        store = contract.store
        await store.update_messages(memory_id, [])
        assert await store.get_messages(memory_id) == []
        await store.update_messages(memory_id, texts(3))
        await store.update_messages(memory_id, [])
        assert await store.get_messages(memory_id) == []

    async def test_delete_is_idempotent(self, contract: ContractDriver, memory_id: str) -> None:
        store = contract.store
        await store.delete_messages(memory_id)
        await store.update_messages(memory_id, texts(2))
        await store.delete_messages(memory_id)
        await store.delete_messages(memory_id)
        assert await store.get_messages(memory_id) == []
        await store.update_messages(memory_id, texts(1))
        assert await store.get_messages(memory_id) == texts(1)

    async def test_non_message_is_rejected_and_nothing_changes(self, contract: ContractDriver, memory_id: str) -> None:
        await contract.store.update_messages(memory_id, texts(2))
        with pytest.raises((TypeError, SerializationError)):
            await contract.store.update_messages(memory_id, [UserMessage("ok"), {"role": "user"}])  # type: ignore[list-item]
        assert await contract.store.get_messages(memory_id) == texts(2)

    async def test_failure_half_way_leaves_the_old_list(self, contract: ContractDriver, memory_id: str) -> None:
        old = texts(4)
        await contract.store.update_messages(memory_id, old)
        # A lone surrogate cannot be encoded as UTF-8: the write fails on the third message.
        new = [*old[1:], UserMessage("fine"), UserMessage("broken \ud800"), UserMessage("never")]
        with pytest.raises((SerializationError, StoreError)):
            await contract.store.update_messages(memory_id, new)
        assert await contract.store.get_messages(memory_id) == old

    async def test_adversarial_ids_are_isolated(self, contract: ContractDriver) -> None:
        store = contract.store
        for index, memory_id in enumerate(ADVERSARIAL_IDS):
            await store.update_messages(memory_id, [UserMessage(f"for {index}")])
        try:
            for index, memory_id in enumerate(ADVERSARIAL_IDS):
                assert await store.get_messages(memory_id) == [UserMessage(f"for {index}")], memory_id
            await store.delete_messages("a")
            await store.delete_messages("*")
            await store.update_messages("{tag}", [])
            for index, memory_id in enumerate(ADVERSARIAL_IDS):
                expected = [] if memory_id in ("a", "*", "{tag}") else [UserMessage(f"for {index}")]
                assert await store.get_messages(memory_id) == expected, memory_id
        finally:
            for memory_id in ADVERSARIAL_IDS:
                await store.delete_messages(memory_id)

    async def test_ids_differing_in_case_or_trailing_space_are_distinct(self, contract: ContractDriver) -> None:
        store = contract.store
        ids = [f"case-{uuid.uuid4().hex}"]
        ids += [ids[0].upper(), ids[0] + " ", ids[0] + "\t"]
        try:
            for index, memory_id in enumerate(ids):
                await store.update_messages(memory_id, [UserMessage(str(index))])
            assert [await store.get_messages(memory_id) for memory_id in ids] == [
                [UserMessage(str(index))] for index in range(len(ids))
            ]
        finally:
            for memory_id in ids:
                await store.delete_messages(memory_id)

    async def test_listing_sees_exactly_the_live_ids(self, contract: ContractDriver) -> None:
        store = contract.store
        await contract.memory_ids()  # skips a store that cannot list
        ids = [f"list-{uuid.uuid4().hex}", *ADVERSARIAL_IDS[:12]]
        try:
            for memory_id in ids:
                await store.update_messages(memory_id, [UserMessage("x")])
            await store.delete_messages(ids[1])
            listed = set(await contract.memory_ids())
            assert set(ids) - {ids[1]} <= listed
            assert ids[1] not in listed
        finally:
            for memory_id in ids:
                await store.delete_messages(memory_id)
