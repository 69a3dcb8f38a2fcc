"""The store contract suite: one set of cases every :class:`~chatmemory.ChatMemoryStore` must pass.

Subclass :class:`ChatMemoryStoreContract` in a test module and override the ``store`` fixture (and,
optionally, ``write_raw`` and ``make_ttl_store``) to check a store against a real database::

    from chatmemory.testing import ChatMemoryStoreContract

    class TestMyStore(ChatMemoryStoreContract):
        @pytest.fixture
        def store(self):
            store = MyStore(os.environ["MY_DB_URL"])
            yield store
            store.close()

Cases for optional capabilities (versioning, TTL, listing) run only when the store has them; the
corruption cases run only when ``write_raw`` is given.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence

import pytest

from chatmemory.core.errors import (
    ConcurrentUpdateError,
    CorruptedMemoryError,
    SerializationError,
    StoreError,
    UnsupportedFormatVersionError,
)
from chatmemory.core.memory import MessageWindowChatMemory, TokenWindowChatMemory
from chatmemory.core.messages import AiMessage, ChatMessage, SystemMessage, ToolExecutionRequest, UserMessage
from chatmemory.core.store import ChatMemoryStore, SupportsListing, SupportsVersioning
from chatmemory.serialization.native import dumps_message
from chatmemory.stores.memory import InMemoryChatMemoryStore
from chatmemory.testing.conversation import ADVERSARIAL_IDS, ODD_ARGUMENTS, every_message_kind, scripted_turns

__all__ = ["ChatMemoryStoreContract", "RawWriter", "TtlStoreFactory"]

RawWriter = Callable[[str, Sequence[bytes]], None]
"""``write_raw(memory_id, records)``: store message records (``dumps_message`` bytes) as they are."""
TtlStoreFactory = Callable[[float], ChatMemoryStore]
"""``make_ttl_store(seconds)``: a store on the same backend whose memories expire after ``seconds``."""

GARBAGE_RECORDS: tuple[bytes, ...] = (
    b"\xff\xfe not json",
    b'{"v": 1, "type": "alien", "text": "?"}',
    b'{"v": 1, "type": "user"}',
    b'[1, 2, 3]',
    b"",
)


def _texts(n: int, prefix: str = "m") -> list[ChatMessage]:
    return [UserMessage(f"{prefix}{i}") for i in range(n)]


class ChatMemoryStoreContract:
    """The contract every chat memory store passes (SEMANTICS.md §4). Override the fixtures below."""

    # ------------------------------------------------------------------------------------------ fixtures

    @pytest.fixture
    def store(self) -> ChatMemoryStore:
        """The store under test. Override this fixture."""
        pytest.fail("override the `store` fixture of ChatMemoryStoreContract to return your store", pytrace=False)

    @pytest.fixture
    def write_raw(self) -> RawWriter | None:
        """A hook that plants raw message records for a memory id; ``None`` skips the corruption cases."""
        return None

    @pytest.fixture
    def make_ttl_store(self) -> TtlStoreFactory | None:
        """A factory of stores whose memories expire; ``None`` skips the TTL cases."""
        return None

    @pytest.fixture
    def memory_id(self) -> str:
        """A fresh memory id, so tests can share a database."""
        return f"contract-{uuid.uuid4().hex}"

    # ------------------------------------------------------------------------------------------- basics

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
        requests = [r for m in store.get_messages(memory_id) if isinstance(m, AiMessage)
                    for r in m.tool_execution_requests]
        arguments = [r.arguments for r in requests if r.name == "weather"]
        assert [a.encode("utf-8") for a in arguments] == [a.encode("utf-8") for a in ODD_ARGUMENTS]

    def test_one_mebibyte_message(self, store: ChatMemoryStore, memory_id: str) -> None:
        big = "🦜 北京 \x00 " + "x" * (1 << 20)
        messages: list[ChatMessage] = [UserMessage("before"), AiMessage(big), UserMessage("after")]
        store.update_messages(memory_id, messages)
        assert store.get_messages(memory_id) == messages

    def test_returned_list_is_a_copy(self, store: ChatMemoryStore, memory_id: str) -> None:
        messages = _texts(3)
        store.update_messages(memory_id, messages)
        messages.append(UserMessage("caller changed its list"))
        got = store.get_messages(memory_id)
        got.clear()
        assert store.get_messages(memory_id) == _texts(3)

    def test_update_replaces_the_whole_list(self, store: ChatMemoryStore, memory_id: str) -> None:
        store.update_messages(memory_id, _texts(5, "a"))
        store.update_messages(memory_id, _texts(2, "b"))
        assert store.get_messages(memory_id) == _texts(2, "b")

    def test_empty_list_is_a_valid_update(self, store: ChatMemoryStore, memory_id: str) -> None:
        store.update_messages(memory_id, [])
        assert store.get_messages(memory_id) == []
        store.update_messages(memory_id, _texts(3))
        store.update_messages(memory_id, [])
        assert store.get_messages(memory_id) == []

    def test_delete_is_idempotent(self, store: ChatMemoryStore, memory_id: str) -> None:
        store.delete_messages(memory_id)
        store.update_messages(memory_id, _texts(2))
        store.delete_messages(memory_id)
        store.delete_messages(memory_id)
        assert store.get_messages(memory_id) == []
        store.update_messages(memory_id, _texts(1))
        assert store.get_messages(memory_id) == _texts(1)

    def test_non_message_is_rejected_and_nothing_changes(self, store: ChatMemoryStore, memory_id: str) -> None:
        store.update_messages(memory_id, _texts(2))
        with pytest.raises((TypeError, SerializationError)):
            store.update_messages(memory_id, [UserMessage("ok"), {"role": "user"}])  # type: ignore[list-item]
        assert store.get_messages(memory_id) == _texts(2)

    def test_failure_half_way_leaves_the_old_list(self, store: ChatMemoryStore, memory_id: str) -> None:
        old = _texts(4)
        store.update_messages(memory_id, old)
        # A lone surrogate cannot be encoded as UTF-8: the write fails on the third message.
        new = [*old[1:], UserMessage("fine"), UserMessage("broken \ud800"), UserMessage("never")]
        with pytest.raises((SerializationError, StoreError)):
            store.update_messages(memory_id, new)
        assert store.get_messages(memory_id) == old

    # ------------------------------------------------------------------------------------------ ids

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

    # --------------------------------------------------------------------------------------- windows

    def test_sliding_window_of_1000_updates_leaves_the_last_window(
        self, store: ChatMemoryStore, memory_id: str
    ) -> None:
        messages = _texts(1000)
        window = 20
        for end in range(1, 1001):
            store.update_messages(memory_id, messages[max(0, end - window):end])
            if end % 250 == 0:
                assert store.get_messages(memory_id) == messages[end - window:end]
        assert store.get_messages(memory_id) == messages[-window:]

    def test_sliding_window_behind_a_system_message(self, store: ChatMemoryStore, memory_id: str) -> None:
        system = SystemMessage("stay")
        messages = _texts(200)
        for end in range(1, 201):
            store.update_messages(memory_id, [system, *messages[max(0, end - 9):end]])
        assert store.get_messages(memory_id) == [system, *messages[-9:]]

    @pytest.mark.parametrize("always_keep_system_message_first", [False, True], ids=["system-in-place", "system-first"])
    def test_window_memory_over_300_turns_matches_the_reference(
        self, store: ChatMemoryStore, memory_id: str, always_keep_system_message_first: bool
    ) -> None:
        options = {"max_messages": 12, "always_keep_system_message_first": always_keep_system_message_first}
        memory = MessageWindowChatMemory(memory_id, store=store, **options)  # type: ignore[arg-type]
        reference = MessageWindowChatMemory(memory_id, store=InMemoryChatMemoryStore(), **options)  # type: ignore[arg-type]
        for turn, added in enumerate(scripted_turns(300)):
            memory.add(*added)
            reference.add(*added)
            assert memory.messages() == reference.messages(), f"after turn {turn}"

    def test_token_window_memory_matches_the_reference(self, store: ChatMemoryStore, memory_id: str) -> None:
        memory = TokenWindowChatMemory(memory_id, store=store, max_tokens=180)
        reference = TokenWindowChatMemory(memory_id, store=InMemoryChatMemoryStore(), max_tokens=180)
        for turn, added in enumerate(scripted_turns(60)):
            memory.add(*added)
            reference.add(*added)
            assert memory.messages() == reference.messages(), f"after turn {turn}"

    # ------------------------------------------------------------------------------------- atomicity

    def test_readers_never_see_a_mix_of_two_lists(self, store: ChatMemoryStore, memory_id: str) -> None:
        lists = [_texts(8, "a"), _texts(8, "b"), [SystemMessage("s"), *_texts(5, "c")]]
        store.update_messages(memory_id, lists[0])
        seen_bad: list[list[ChatMessage]] = []
        stop = threading.Event()

        def read() -> None:
            while not stop.is_set():
                got = store.get_messages(memory_id)
                if got not in lists:
                    seen_bad.append(got)

        readers = [threading.Thread(target=read) for _ in range(2)]
        for reader in readers:
            reader.start()
        try:
            for round_ in range(150):
                store.update_messages(memory_id, lists[round_ % len(lists)])
        finally:
            stop.set()
            for reader in readers:
                reader.join()
        assert not seen_bad, f"a reader saw a mixed list: {seen_bad[0]}"

    def test_readers_see_whole_windows_while_it_slides(self, store: ChatMemoryStore, memory_id: str) -> None:
        system = SystemMessage("anchor")
        window = 6
        numbers = [UserMessage(str(i)) for i in range(300)]
        store.update_messages(memory_id, [system, *numbers[:window]])
        bad: list[list[ChatMessage]] = []
        stop = threading.Event()

        def read() -> None:
            while not stop.is_set():
                got = store.get_messages(memory_id)
                values = [int(m.text) for m in got[1:] if isinstance(m, UserMessage)]
                contiguous = values == list(range(values[0], values[0] + window)) if values else False
                if not got or got[0] != system or not contiguous:
                    bad.append(got)

        reader = threading.Thread(target=read)
        reader.start()
        try:
            for end in range(window + 1, len(numbers) + 1):
                store.update_messages(memory_id, [system, *numbers[end - window:end]])
        finally:
            stop.set()
            reader.join()
        assert not bad, f"a reader saw a partial window: {bad[0]}"

    # ------------------------------------------------------------------------------------- versioning

    @staticmethod
    def _versioned(store: ChatMemoryStore) -> SupportsVersioning:
        if not isinstance(store, SupportsVersioning):
            pytest.skip("the store does not support versioning")
        return store

    def test_versions_start_at_zero_and_move_on(self, store: ChatMemoryStore, memory_id: str) -> None:
        versioned = self._versioned(store)
        first = versioned.load(memory_id)
        assert (first.messages, first.version) == ([], 0)
        v1 = versioned.save(memory_id, _texts(1), 0)
        v2 = versioned.save(memory_id, _texts(2), v1)
        assert 0 < v1 < v2
        snapshot = versioned.load(memory_id)
        assert (snapshot.messages, snapshot.version) == (_texts(2), v2)

    def test_stale_save_raises_and_changes_nothing(self, store: ChatMemoryStore, memory_id: str) -> None:
        versioned = self._versioned(store)
        v1 = versioned.save(memory_id, _texts(2, "old"), 0)
        v2 = versioned.save(memory_id, _texts(3, "new"), v1)
        with pytest.raises(ConcurrentUpdateError) as raised:
            versioned.save(memory_id, _texts(1, "stale"), v1)
        assert memory_id in str(raised.value)
        with pytest.raises(ConcurrentUpdateError):
            versioned.save(memory_id, _texts(1, "stale"), 0)
        assert versioned.load(memory_id).version == v2
        assert store.get_messages(memory_id) == _texts(3, "new")

    def test_save_on_a_missing_memory_needs_version_zero(self, store: ChatMemoryStore, memory_id: str) -> None:
        versioned = self._versioned(store)
        with pytest.raises(ConcurrentUpdateError):
            versioned.save(memory_id, _texts(1), 7)
        assert store.get_messages(memory_id) == []

    def test_update_and_delete_move_the_version_on(self, store: ChatMemoryStore, memory_id: str) -> None:
        versioned = self._versioned(store)
        seen = {versioned.save(memory_id, _texts(1), 0)}
        before_update = versioned.load(memory_id)
        store.update_messages(memory_id, _texts(2))
        with pytest.raises(ConcurrentUpdateError):
            versioned.save(memory_id, _texts(3), before_update.version)
        before_delete = versioned.load(memory_id)
        seen.add(before_delete.version)
        store.delete_messages(memory_id)
        with pytest.raises(ConcurrentUpdateError):
            versioned.save(memory_id, _texts(3), before_delete.version)
        # Recreated after a delete, the memory never repeats a version it had.
        for count in range(1, 4):
            snapshot = versioned.load(memory_id)
            version = versioned.save(memory_id, _texts(count, "again"), snapshot.version)
            assert version not in seen
            seen.add(version)
        assert store.get_messages(memory_id) == _texts(3, "again")

    def test_diffing_survives_a_stale_snapshot(self, store: ChatMemoryStore, memory_id: str) -> None:
        # Another writer replaces the memory between this writer's load and save: the save must fail,
        # never apply a diff computed against rows that are gone.
        versioned = self._versioned(store)
        versioned.save(memory_id, _texts(5, "a"), 0)
        stale = versioned.load(memory_id)
        store.delete_messages(memory_id)
        store.update_messages(memory_id, _texts(5, "a"))
        with pytest.raises(ConcurrentUpdateError):
            versioned.save(memory_id, [*stale.messages[1:], UserMessage("next")], stale.version)
        assert store.get_messages(memory_id) == _texts(5, "a")

    def test_concurrent_adds_lose_nothing(self, store: ChatMemoryStore, memory_id: str) -> None:
        self._versioned(store)
        threads, adds = 8, 100
        errors: list[BaseException] = []

        def writer(worker: int) -> None:
            memory = MessageWindowChatMemory(memory_id, store=store, max_messages=threads * adds + 10,
                                             max_attempts=200)
            try:
                for index in range(adds):
                    memory.add(UserMessage(f"{worker}:{index}"))
            except BaseException as exc:
                errors.append(exc)

        workers = [threading.Thread(target=writer, args=(w,)) for w in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        assert not errors, errors[0]
        texts = [m.text for m in store.get_messages(memory_id) if isinstance(m, UserMessage)]
        assert len(texts) == threads * adds
        assert sorted(texts) == sorted(f"{w}:{i}" for w in range(threads) for i in range(adds))
        for number in range(threads):
            mine = [t for t in texts if t.startswith(f"{number}:")]
            assert mine == [f"{number}:{i}" for i in range(adds)], "one writer's messages are out of order"

    # ------------------------------------------------------------------------------------ corruption

    @staticmethod
    def _raw(write_raw: RawWriter | None) -> RawWriter:
        if write_raw is None:
            pytest.skip("no write_raw hook: corruption cases need one")
        return write_raw

    @pytest.mark.parametrize("garbage", GARBAGE_RECORDS, ids=["bytes", "unknown-type", "missing-field",
                                                               "not-object", "empty"])
    def test_corrupted_data_raises_naming_the_id(
        self, store: ChatMemoryStore, memory_id: str, write_raw: RawWriter | None, garbage: bytes
    ) -> None:
        plant = self._raw(write_raw)
        plant(memory_id, [dumps_message(UserMessage("fine")), garbage])
        with pytest.raises(CorruptedMemoryError) as raised:
            store.get_messages(memory_id)
        assert raised.value.memory_id == memory_id
        assert memory_id in str(raised.value)
        if isinstance(store, SupportsVersioning):
            with pytest.raises(CorruptedMemoryError):
                store.load(memory_id)

    def test_corrupted_memory_is_not_overwritten_by_add(
        self, store: ChatMemoryStore, memory_id: str, write_raw: RawWriter | None
    ) -> None:
        plant = self._raw(write_raw)
        plant(memory_id, [b"\x00garbage"])
        memory = MessageWindowChatMemory(memory_id, store=store, max_messages=5)
        with pytest.raises(CorruptedMemoryError):
            memory.add(UserMessage("would overwrite"))
        with pytest.raises(CorruptedMemoryError):
            store.get_messages(memory_id)

    def test_newer_format_version_raises(
        self, store: ChatMemoryStore, memory_id: str, write_raw: RawWriter | None
    ) -> None:
        plant = self._raw(write_raw)
        plant(memory_id, [b'{"v": 999, "type": "user", "contents": [], "hologram": true}'])
        with pytest.raises(UnsupportedFormatVersionError) as raised:
            store.get_messages(memory_id)
        assert raised.value.memory_id == memory_id
        assert memory_id in str(raised.value)

    def test_operator_recovers_a_corrupted_memory(
        self, store: ChatMemoryStore, memory_id: str, write_raw: RawWriter | None
    ) -> None:
        plant = self._raw(write_raw)
        plant(memory_id, [b"\xff"])
        store.update_messages(memory_id, _texts(2))
        assert store.get_messages(memory_id) == _texts(2)
        plant(memory_id, [b"\xff"])
        store.delete_messages(memory_id)
        assert store.get_messages(memory_id) == []
        memory = MessageWindowChatMemory(memory_id, store=store, max_messages=5)
        memory.add(UserMessage("fresh"))
        assert memory.messages() == [UserMessage("fresh")]

    # ------------------------------------------------------------------------------------------- TTL

    @pytest.fixture
    def ttl_store(self, make_ttl_store: TtlStoreFactory | None) -> Iterator[ChatMemoryStore]:
        if make_ttl_store is None:
            pytest.skip("no make_ttl_store fixture: TTL cases need one")
        yield make_ttl_store(2.0)

    def test_data_expires(self, ttl_store: ChatMemoryStore, memory_id: str) -> None:
        ttl_store.update_messages(memory_id, _texts(3))
        assert ttl_store.get_messages(memory_id) == _texts(3)
        time.sleep(3.0)
        assert ttl_store.get_messages(memory_id) == []
        if isinstance(ttl_store, SupportsVersioning):
            assert ttl_store.load(memory_id).version == 0 or ttl_store.load(memory_id).messages == []

    def test_every_write_slides_the_expiry(self, ttl_store: ChatMemoryStore, memory_id: str) -> None:
        memory = MessageWindowChatMemory(memory_id, store=ttl_store, max_messages=4,
                                         always_keep_system_message_first=True)
        memory.add(SystemMessage("s"), UserMessage("0"))
        for turn in range(1, 4):
            time.sleep(1.2)
            memory.add(UserMessage(str(turn)))
        # 3.6 s after the first write, 1.2 s after the last: alive, with every message (none half-expired).
        assert memory.messages() == [SystemMessage("s"), UserMessage("1"), UserMessage("2"), UserMessage("3")]
        time.sleep(3.0)
        assert memory.messages() == []

    def test_tool_calls_round_trip_through_expiring_store(self, ttl_store: ChatMemoryStore, memory_id: str) -> None:
        messages = [AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "f", ODD_ARGUMENTS[2])])]
        ttl_store.update_messages(memory_id, messages)
        assert ttl_store.get_messages(memory_id) == messages
