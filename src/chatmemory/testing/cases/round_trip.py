"""Exact round trips, updates, deletes and id isolation."""

from __future__ import annotations

import uuid

import pytest

from chatmemory.core.errors import (
    SerializationError,
    StoreError,
)
from chatmemory.core.messages import AiMessage, ChatMessage, UserMessage
from chatmemory.core.store import ChatMemoryStore, SupportsListing
from chatmemory.testing.cases.hooks import texts
from chatmemory.testing.conversation import ADVERSARIAL_IDS, ODD_ARGUMENTS, every_message_kind


class RoundTripCases:
    """Exact round trips, updates, deletes and id isolation."""

    def test_unknown_id_reads_empty(self, store: ChatMemoryStore, memory_id: str) -> None:
        assert store.get_messages(memory_id) == []

    def test_round_trip_of_every_message_kind(self, store: ChatMemoryStore, memory_id: str) -> None:
        messages = every_message_kind()
        store.update_messages(memory_id, messages)
        got = store.get_messages(memory_id)
        assert got == messages
        assert [type(m) for m in got] == [type(m) for m in messages]

    def test_tool_call_arguments_are_byte_identical(self, store: ChatMemoryStore, memory_id: str) -> None:
        store.update_messages(memory_id, every_message_kind())
        requests = [
            r for m in store.get_messages(memory_id) if isinstance(m, AiMessage) for r in m.tool_execution_requests
        ]
        arguments = [r.arguments for r in requests if r.name == "weather"]
        assert [a.encode("utf-8") for a in arguments] == [a.encode("utf-8") for a in ODD_ARGUMENTS]

    def test_one_mebibyte_message(self, store: ChatMemoryStore, memory_id: str) -> None:
        big = "🦜 北京 \x00 " + "x" * (1 << 20)
        messages: list[ChatMessage] = [UserMessage("before"), AiMessage(big), UserMessage("after")]
        store.update_messages(memory_id, messages)
        assert store.get_messages(memory_id) == messages

    def test_returned_list_is_a_copy(self, store: ChatMemoryStore, memory_id: str) -> None:
        messages = texts(3)
        store.update_messages(memory_id, messages)
        messages.append(UserMessage("caller changed its list"))
        got = store.get_messages(memory_id)
        got.clear()
        assert store.get_messages(memory_id) == texts(3)

    def test_update_replaces_the_whole_list(self, store: ChatMemoryStore, memory_id: str) -> None:
        store.update_messages(memory_id, texts(5, "a"))
        store.update_messages(memory_id, texts(2, "b"))
        assert store.get_messages(memory_id) == texts(2, "b")

    def test_empty_list_is_a_valid_update(self, store: ChatMemoryStore, memory_id: str) -> None:
        store.update_messages(memory_id, [])
        assert store.get_messages(memory_id) == []
        store.update_messages(memory_id, texts(3))
        store.update_messages(memory_id, [])
        assert store.get_messages(memory_id) == []

    def test_delete_is_idempotent(self, store: ChatMemoryStore, memory_id: str) -> None:
        store.delete_messages(memory_id)
        store.update_messages(memory_id, texts(2))
        store.delete_messages(memory_id)
        store.delete_messages(memory_id)
        assert store.get_messages(memory_id) == []
        store.update_messages(memory_id, texts(1))
        assert store.get_messages(memory_id) == texts(1)

    def test_non_message_is_rejected_and_nothing_changes(self, store: ChatMemoryStore, memory_id: str) -> None:
        store.update_messages(memory_id, texts(2))
        with pytest.raises((TypeError, SerializationError)):
            store.update_messages(memory_id, [UserMessage("ok"), {"role": "user"}])  # type: ignore[list-item]
        assert store.get_messages(memory_id) == texts(2)

    def test_failure_half_way_leaves_the_old_list(self, store: ChatMemoryStore, memory_id: str) -> None:
        old = texts(4)
        store.update_messages(memory_id, old)
        # A lone surrogate cannot be encoded as UTF-8: the write fails on the third message.
        new = [*old[1:], UserMessage("fine"), UserMessage("broken \ud800"), UserMessage("never")]
        with pytest.raises((SerializationError, StoreError)):
            store.update_messages(memory_id, new)
        assert store.get_messages(memory_id) == old

    def test_adversarial_ids_are_isolated(self, store: ChatMemoryStore) -> None:
        for index, memory_id in enumerate(ADVERSARIAL_IDS):
            store.update_messages(memory_id, [UserMessage(f"for {index}")])
        try:
            for index, memory_id in enumerate(ADVERSARIAL_IDS):
                assert store.get_messages(memory_id) == [UserMessage(f"for {index}")], memory_id
            store.delete_messages("a")
            store.delete_messages("*")
            store.update_messages("{tag}", [])
            for index, memory_id in enumerate(ADVERSARIAL_IDS):
                expected = [] if memory_id in ("a", "*", "{tag}") else [UserMessage(f"for {index}")]
                assert store.get_messages(memory_id) == expected, memory_id
        finally:
            for memory_id in ADVERSARIAL_IDS:
                store.delete_messages(memory_id)

    def test_ids_differing_in_case_or_trailing_space_are_distinct(self, store: ChatMemoryStore) -> None:
        ids = [f"case-{uuid.uuid4().hex}"]
        ids += [ids[0].upper(), ids[0] + " ", ids[0] + "\t"]
        try:
            for index, memory_id in enumerate(ids):
                store.update_messages(memory_id, [UserMessage(str(index))])
            assert [store.get_messages(memory_id) for memory_id in ids] == [
                [UserMessage(str(index))] for index in range(len(ids))
            ]
        finally:
            for memory_id in ids:
                store.delete_messages(memory_id)

    def test_listing_sees_exactly_the_live_ids(self, store: ChatMemoryStore) -> None:
        if not isinstance(store, SupportsListing):
            pytest.skip("the store does not list memory ids")
        ids = [f"list-{uuid.uuid4().hex}", *ADVERSARIAL_IDS[:12]]
        try:
            for memory_id in ids:
                store.update_messages(memory_id, [UserMessage("x")])
            store.delete_messages(ids[1])
            listed = set(store.memory_ids())
            assert set(ids) - {ids[1]} <= listed
            assert ids[1] not in listed
        finally:
            for memory_id in ids:
                store.delete_messages(memory_id)
