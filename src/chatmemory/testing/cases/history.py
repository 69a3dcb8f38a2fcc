"""History beside the window: what is recorded, paging, lifetime, trimming (stores built by make_history_store)."""

from __future__ import annotations

import datetime
import time
from typing import Any

import pytest

from chatmemory import aio
from chatmemory.aio.store import SupportsRecordedWrites as RecordedWrites
from chatmemory.core.errors import ConcurrentUpdateError, HistoryNotEnabledError
from chatmemory.core.history import MAX_HISTORY_PAGE, HistoryEntry, SupportsHistory
from chatmemory.core.memory import MessageWindowChatMemory
from chatmemory.core.messages import AiMessage, ChatMessage, SystemMessage, ToolExecutionRequest, UserMessage
from chatmemory.stores.memory import InMemoryChatMemoryStore
from chatmemory.testing.cases.hooks import texts
from chatmemory.testing.cases.margins import TooLate, late, with_slower_clock_when_late
from chatmemory.testing.conversation import ODD_ARGUMENTS, scripted_turns
from chatmemory.testing.driver import ContractDriver, HistoryView


async def _all_entries(
    store: HistoryView, memory_id: str, *, limit: int = 100, reverse: bool = False
) -> list[HistoryEntry]:
    """Every entry of ``memory_id``, read page by page."""
    entries: list[HistoryEntry] = []
    after: int | None = None
    for _ in range(100_000):
        page = await store.history(memory_id, after=after, limit=limit, reverse=reverse)
        assert len(page.entries) <= limit
        entries.extend(page.entries)
        if page.next_after is None:
            return entries
        assert page.entries, "a page with a next_after must hold entries"
        assert page.next_after == page.entries[-1].sequence
        after = page.next_after
    raise AssertionError("history paging did not end")


async def _messages(store: HistoryView, memory_id: str) -> list[ChatMessage]:
    return [entry.message for entry in await _all_entries(store, memory_id)]


def _assert_increasing(entries: list[HistoryEntry]) -> None:
    sequences = [entry.sequence for entry in entries]
    assert all(isinstance(sequence, int) and sequence >= 1 for sequence in sequences), sequences
    assert sequences == sorted(set(sequences)), f"sequences must strictly increase: {sequences}"


def _assert_consecutive(entries: list[HistoryEntry]) -> None:
    sequences = [entry.sequence for entry in entries]
    assert sequences == list(range(sequences[0], sequences[0] + len(sequences))), f"not consecutive: {sequences}"


async def _history_outlives_the_window(contract: ContractDriver, memory_id: str, scale: float) -> None:
    """One store's history expires with its window; the other's outlives it (every time times ``scale``).

    Both stores wait through the same sleeps.
    """
    ttl, history_ttl = 1.0 * scale, 2.5 * scale
    with_window = await contract.history_store(ttl=ttl)
    outliving = await contract.history_store(ttl=ttl, history_ttl=history_ttl)
    for store in (with_window, outliving):  # connected (and their tables checked) before the clock matters
        assert await store.get_messages(memory_id) == []
    started = time.monotonic()
    await with_window.update_messages(memory_id, texts(3))
    recorded = await _messages(with_window, memory_id)
    if recorded != texts(3) and late(started, ttl):
        raise TooLate
    assert recorded == texts(3)
    first_write = time.monotonic()
    await outliving.update_messages(memory_id, texts(3))
    await contract.sleep(1.5 * scale)
    kept = await _all_entries(outliving, memory_id)
    if [entry.message for entry in kept] != texts(3) and late(first_write, history_ttl):
        raise TooLate
    assert [entry.message for entry in kept] == texts(3)
    assert await outliving.get_messages(memory_id) == []
    assert await with_window.get_messages(memory_id) == []
    assert (await with_window.history(memory_id)).entries == []
    await outliving.update_messages(memory_id, texts(1, "new"))  # a new window; the history goes on
    entries = await _all_entries(outliving, memory_id)
    if [entry.message for entry in entries] != [*texts(3), *texts(1, "new")] and late(first_write, history_ttl):
        raise TooLate
    assert [entry.message for entry in entries] == [*texts(3), *texts(1, "new")]
    _assert_increasing(entries)
    await contract.sleep(2.8 * scale)
    assert await outliving.get_messages(memory_id) == []
    assert (await outliving.history(memory_id)).entries == []


class HistoryCases:
    """History beside the window (stores built by ``make_history_store``)."""

    async def test_history_keeps_every_message_of_1000_turns_while_the_window_stays_bounded(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        store = await contract.history_store()
        memory = contract.memory(memory_id, store=store, max_messages=10, always_keep_system_message_first=True)
        system = SystemMessage("you remember everything")
        added: list[ChatMessage] = [system]
        await memory.add(system)
        for turn in range(1000):
            message: ChatMessage = UserMessage(f"turn {turn}") if turn % 2 == 0 else AiMessage(f"answer {turn}")
            added.append(message)
            await memory.add(message)
            if turn % 250 == 0:
                window = await memory.messages()
                assert len(window) <= 10
                assert window[0] == system
        window = await memory.messages()
        assert window == [system, *added[-9:]]
        forward = await _all_entries(store, memory_id, limit=97)
        assert [entry.message for entry in forward] == added
        _assert_increasing(forward)
        backward = await _all_entries(store, memory_id, limit=250, reverse=True)
        assert backward == forward[::-1]

    async def test_history_pages_forward_and_backward(self, contract: ContractDriver, memory_id: str) -> None:
        store = await contract.history_store()
        messages = texts(25)
        for end in range(5, 26, 5):  # five writes of five messages, the window keeping the last 7
            await store.update_messages(memory_id, messages[max(0, end - 7) : end])
        first = await store.history(memory_id, limit=10)
        assert first.messages == messages[:10]
        assert first.next_after == first.entries[-1].sequence
        second = await store.history(memory_id, after=first.next_after, limit=10)
        assert second.messages == messages[10:20]
        third = await store.history(memory_id, after=second.next_after, limit=10)
        assert third.messages == messages[20:]
        assert third.next_after is None
        assert (await store.history(memory_id, after=third.entries[-1].sequence)).entries == []
        newest = await store.history(memory_id, limit=4, reverse=True)
        assert newest.messages == messages[:-5:-1]
        older = await store.history(memory_id, after=newest.next_after, limit=30, reverse=True)
        assert older.messages == messages[-5::-1]
        assert older.next_after is None
        every = first.entries + second.entries + third.entries
        _assert_increasing(every)
        middle = every[12].sequence
        assert (await store.history(memory_id, after=middle, limit=3)).messages == messages[13:16]
        assert (await store.history(memory_id, after=middle, limit=3, reverse=True)).messages == messages[11:8:-1]

    async def test_a_page_that_ends_exactly_at_the_end_has_no_next_page(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        store = await contract.history_store()
        await store.update_messages(memory_id, texts(20))
        first = await store.history(memory_id, limit=10)
        assert first.next_after is not None
        second = await store.history(memory_id, after=first.next_after, limit=10)
        assert second.messages == texts(20)[10:]
        assert second.next_after is None
        everything = await store.history(memory_id, limit=20)
        assert everything.messages == texts(20)
        assert everything.next_after is None

    async def test_unknown_memory_has_an_empty_history(self, contract: ContractDriver, memory_id: str) -> None:
        store = await contract.history_store()
        for reverse in (False, True):
            page = await store.history(memory_id, reverse=reverse)
            assert page.entries == []
            assert page.next_after is None

    async def test_history_read_arguments_are_checked(self, contract: ContractDriver, memory_id: str) -> None:
        store = await contract.history_store()
        with pytest.raises(ValueError, match="limit"):
            await store.history(memory_id, limit=0)
        with pytest.raises(ValueError, match="limit"):
            await store.history(memory_id, limit=MAX_HISTORY_PAGE + 1)
        with pytest.raises(ValueError, match="after"):
            await store.history(memory_id, after=-1)
        with pytest.raises(TypeError, match="after"):
            await store.history(memory_id, after="3")
        with pytest.raises(TypeError, match="limit"):
            await store.history(memory_id, limit=2.5)
        with pytest.raises(TypeError, match="reverse"):
            await store.history(memory_id, reverse="yes")
        with pytest.raises(ValueError, match="aware"):
            await store.trim_history(older_than=datetime.datetime(2020, 1, 1))
        with pytest.raises(TypeError, match="older_than"):
            await store.trim_history(older_than=30)

    async def test_a_rewrite_is_recorded_as_the_messages_it_appends(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        store = await contract.history_store()
        a, b, c, x, y = (UserMessage(text) for text in "abcxy")
        await store.update_messages(memory_id, [a, b, c])
        await store.update_messages(memory_id, [a, x])  # b and c leave, x follows the kept a
        assert await _messages(store, memory_id) == [a, b, c, x]
        await store.update_messages(memory_id, [y, a])  # nothing can be kept in front of y: both are new
        assert await _messages(store, memory_id) == [a, b, c, x, y, a]
        assert await store.get_messages(memory_id) == [y, a]
        await store.update_messages(memory_id, [])  # emptying the window records nothing
        assert await _messages(store, memory_id) == [a, b, c, x, y, a]
        assert await store.get_messages(memory_id) == []

    async def test_a_write_that_changes_nothing_records_nothing(self, contract: ContractDriver, memory_id: str) -> None:
        store = await contract.history_store()
        await store.update_messages(memory_id, texts(3))
        await store.update_messages(memory_id, texts(3))
        await store.update_messages(memory_id, texts(3)[1:])  # an eviction only
        entries = await _all_entries(store, memory_id)
        assert [entry.message for entry in entries] == texts(3)

    async def test_delete_removes_the_window_and_the_history(self, contract: ContractDriver, memory_id: str) -> None:
        store = await contract.history_store()
        await store.update_messages(memory_id, texts(4))
        await store.delete_messages(memory_id)
        assert await store.get_messages(memory_id) == []
        assert (await store.history(memory_id)).entries == []
        await store.update_messages(memory_id, texts(2, "again"))
        assert await _messages(store, memory_id) == texts(2, "again")

    async def test_histories_are_isolated_per_memory(self, contract: ContractDriver, memory_id: str) -> None:
        store = await contract.history_store()
        other = f"{memory_id}*"
        await store.update_messages(memory_id, texts(3, "mine"))
        await store.update_messages(other, texts(2, "theirs"))
        await store.delete_messages(other)
        assert await _messages(store, memory_id) == texts(3, "mine")
        assert (await store.history(f"{memory_id}?")).entries == []

    async def test_history_keeps_tool_calls_byte_for_byte(self, contract: ContractDriver, memory_id: str) -> None:
        store = await contract.history_store()
        memory = contract.memory(memory_id, store=store, max_messages=8)
        turns = list(scripted_turns(40))
        for turn in turns:
            await memory.add(*turn)
        messages = await _messages(store, memory_id)
        assert messages == [message for turn in turns for message in turn]
        requests = [
            AiMessage(tool_execution_requests=[ToolExecutionRequest(f"c{index}", "f", arguments)])
            for index, arguments in enumerate(ODD_ARGUMENTS)
        ]
        await store.update_messages(memory_id, requests)
        tail = (await store.history(memory_id, limit=len(requests), reverse=True)).messages[::-1]
        assert tail == requests
        for got, sent in zip(tail, requests, strict=True):
            assert isinstance(got, AiMessage)
            assert got.tool_execution_requests[0].arguments == sent.tool_execution_requests[0].arguments

    async def test_entries_carry_the_write_time_in_utc(self, contract: ContractDriver, memory_id: str) -> None:
        store = await contract.history_store()
        before = datetime.datetime.now(datetime.timezone.utc)
        await store.update_messages(memory_id, texts(3))
        await contract.sleep(0.05)
        await store.update_messages(memory_id, texts(5))
        after = datetime.datetime.now(datetime.timezone.utc)
        entries = await _all_entries(store, memory_id)
        assert [entry.message for entry in entries] == texts(5)
        slack = datetime.timedelta(seconds=5)  # the server's clock, on this host or near it
        for entry in entries:
            assert entry.written_at.utcoffset() == datetime.timedelta(0)
            assert before - slack <= entry.written_at <= after + slack
        assert len({entry.written_at for entry in entries[:3]}) == 1, "one write, one time"
        assert len({entry.written_at for entry in entries[3:]}) == 1
        assert entries[0].written_at < entries[3].written_at

    async def test_the_window_is_the_same_with_history_on(self, contract: ContractDriver, memory_id: str) -> None:
        store = await contract.history_store()
        options: dict[str, Any] = {"max_messages": 7, "always_keep_system_message_first": True}
        memory = contract.memory(memory_id, store=store, **options)
        reference = MessageWindowChatMemory(memory_id, store=InMemoryChatMemoryStore(), **options)
        for turn, added in enumerate(scripted_turns(120)):
            await memory.add(*added)
            reference.add(*added)
            assert await memory.messages() == reference.messages(), f"after turn {turn}"
            assert await store.get_messages(memory_id) == reference.messages()

    async def test_a_save_that_loses_a_conflict_records_nothing(self, contract: ContractDriver, memory_id: str) -> None:
        store = await contract.history_store()
        if not isinstance(store, aio.SupportsVersioning):
            pytest.skip("the store does not support versioning")
        version = await store.save(memory_id, texts(2), 0)
        await store.save(memory_id, [*texts(2), UserMessage("winner")], version)
        with pytest.raises(ConcurrentUpdateError):
            await store.save(memory_id, [*texts(2), UserMessage("loser")], version)
        assert await _messages(store, memory_id) == [*texts(2), UserMessage("winner")]

    async def test_messages_evicted_within_their_own_add_are_recorded(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        store = await contract.history_store()
        memory = contract.memory(memory_id, store=store, max_messages=3)
        first = texts(5)
        await memory.add(*first)  # five messages into a window of three: two never reach the window
        assert await memory.messages() == first[2:]
        entries = await _all_entries(store, memory_id)
        assert [entry.message for entry in entries] == first
        _assert_consecutive(entries)
        assert len({entry.written_at for entry in entries}) == 1, "one write, one written_at"
        second = texts(4, "n")
        await memory.add(*second)
        assert await memory.messages() == second[1:]
        entries = await _all_entries(store, memory_id)
        assert [entry.message for entry in entries] == [*first, *second]
        _assert_increasing(entries)
        _assert_consecutive(entries[5:])

    async def test_evicted_within_their_add_behind_a_system_message_kept_first(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        store = await contract.history_store()
        memory = contract.memory(memory_id, store=store, max_messages=3, always_keep_system_message_first=True)
        system = SystemMessage("be brief")
        await memory.add(system, UserMessage("a"))
        added = texts(4)
        await memory.add(*added)
        assert await memory.messages() == [system, *added[2:]]
        entries = await _all_entries(store, memory_id)
        assert [entry.message for entry in entries] == [system, UserMessage("a"), *added]
        _assert_consecutive(entries[2:])

    async def test_a_message_larger_than_the_token_budget_is_recorded(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        store = await contract.history_store()
        memory = contract.token_memory(memory_id, store=store, max_tokens=50)
        small, huge = UserMessage("hello"), UserMessage("word " * 400)
        await memory.add(huge)  # evicted at once, into an empty memory: the window does not change
        assert await memory.messages() == []
        assert await _messages(store, memory_id) == [huge]
        await memory.add(huge)  # again, into an existing empty window
        assert await _messages(store, memory_id) == [huge, huge]
        await memory.add(small)
        await memory.add(huge)  # evicted at once, with the older message it pushed out
        assert await memory.messages() == []
        entries = await _all_entries(store, memory_id)
        assert [entry.message for entry in entries] == [huge, huge, small, huge]
        _assert_increasing(entries)

    async def test_a_recorded_write_that_loses_a_conflict_records_nothing(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        store = await contract.history_store()
        recorder = store if isinstance(store, RecordedWrites) else None
        if recorder is None:
            pytest.skip("the store does not record writes' extra messages")
        version = await recorder.save_recorded(memory_id, texts(1), 0, [UserMessage("said first")])
        assert await _messages(store, memory_id) == [UserMessage("said first"), *texts(1)]
        winner = await recorder.save_recorded(memory_id, texts(1), version, [UserMessage("winner")])
        with pytest.raises(ConcurrentUpdateError):
            await recorder.save_recorded(memory_id, [*texts(1), UserMessage("loser")], version, [UserMessage("lost")])
        assert await _messages(store, memory_id) == [UserMessage("said first"), *texts(1), UserMessage("winner")]
        await recorder.save_recorded(memory_id, [*texts(1), UserMessage("loser")], winner, [UserMessage("lost")])
        entries = await _all_entries(store, memory_id)
        assert [entry.message for entry in entries] == [
            UserMessage("said first"),
            *texts(1),
            UserMessage("winner"),
            UserMessage("lost"),
            UserMessage("loser"),
        ]
        _assert_consecutive(entries[-2:])
        assert await store.get_messages(memory_id) == [*texts(1), UserMessage("loser")]

    async def test_concurrent_adds_evicting_their_own_messages_record_each_once(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        store = await contract.history_store()
        writers, turns = 4, 6

        async def write(writer: int) -> None:
            memory = contract.memory(memory_id, store=store, max_messages=1)
            for turn in range(turns):  # the question never stays: the answer evicts it in the same add
                await memory.add(UserMessage(f"q{writer}-{turn}"), AiMessage(f"a{writer}-{turn}"))
                await contract.pause()

        await contract.together(*(write(writer) for writer in range(writers)))
        entries = await _all_entries(store, memory_id)
        _assert_increasing(entries)
        said = [str(getattr(entry.message, "text", "")) for entry in entries]
        assert sorted(said) == sorted(f"{kind}{w}-{t}" for kind in "qa" for w in range(writers) for t in range(turns))
        for writer in range(writers):
            for turn in range(turns):  # each question right before its answer
                at = said.index(f"q{writer}-{turn}")
                assert said[at + 1] == f"a{writer}-{turn}"

    async def test_concurrent_writers_record_each_message_once(self, contract: ContractDriver, memory_id: str) -> None:
        store = await contract.history_store()
        writers, turns = 4, 8

        async def write(writer: int) -> None:
            memory = contract.memory(memory_id, store=store, max_messages=5)
            for turn in range(turns):
                await memory.add(UserMessage(f"w{writer}-{turn}"))
                await contract.pause()

        await contract.together(*(write(writer) for writer in range(writers)))
        entries = await _all_entries(store, memory_id)
        _assert_increasing(entries)
        texts_written = sorted(
            str(getattr(entry.message, "text", "")) for entry in entries if isinstance(entry.message, UserMessage)
        )
        assert texts_written == sorted(f"w{w}-{t}" for w in range(writers) for t in range(turns))
        for writer in range(writers):  # each writer's messages in the order it added them
            mine = [
                entry.message for entry in entries if str(getattr(entry.message, "text", "")).startswith(f"w{writer}-")
            ]
            assert mine == [UserMessage(f"w{writer}-{turn}") for turn in range(turns)]
        assert len(await store.get_messages(memory_id)) == 5

    async def test_history_expires_with_the_window_or_after_history_ttl(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        # Margins under a second: a read that must still find messages is judged only if it ended
        # inside their lifetime, else the case runs again slower (see margins.py).
        async def case(scale: float, attempt: int) -> None:
            await _history_outlives_the_window(contract, f"{memory_id}-{attempt}", scale)

        await with_slower_clock_when_late(case, "a read came after the lifetime it checks")

    async def test_trim_history_removes_old_entries_and_never_the_window(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        store = await contract.history_store()
        other = f"{memory_id}-other"
        old, new = texts(6, "old"), texts(3, "new")
        await store.update_messages(memory_id, old)
        await store.update_messages(memory_id, old[-2:])
        await store.update_messages(other, texts(2, "other"))
        # The new entries must stay younger than the cutoff until the second trim: a second of margin,
        # for a loaded machine.
        await contract.sleep(2.0)
        await store.update_messages(memory_id, [*old[-2:], *new])
        removed = await store.trim_history(older_than=datetime.timedelta(seconds=1.0), memory_id=memory_id)
        assert await store.get_messages(memory_id) == [*old[-2:], *new]
        remaining = await _messages(store, memory_id)
        assert remaining[-3:] == new
        assert set(remaining[:-3]) <= set(old[-2:]), "only entries still in the window may outlive a trim"
        assert removed == 9 - len(remaining)
        assert await _messages(store, other) == texts(2, "other"), "a trim of one memory leaves the others"
        removed_everywhere = await store.trim_history(older_than=datetime.timedelta(seconds=1.0))
        assert removed_everywhere >= 2
        assert (await store.history(other)).entries == []
        assert await store.get_messages(other) == texts(2, "other")
        assert (await _messages(store, memory_id))[-3:] == new

    async def test_a_store_without_history_refuses_history_reads(
        self, contract: ContractDriver, memory_id: str
    ) -> None:
        store: HistoryView = contract.store
        # The sync suite's view has the history methods whatever the store has: ask the store itself.
        target = getattr(store, "wrapped", store)
        if not isinstance(target, (SupportsHistory, aio.SupportsHistory)):
            pytest.skip("the store does not implement history")
        assert store.keeps_history is False
        await store.update_messages(memory_id, texts(2))
        with pytest.raises(HistoryNotEnabledError, match="history=True"):
            await store.history(memory_id)
        with pytest.raises(HistoryNotEnabledError):
            await store.trim_history(older_than=datetime.timedelta(days=1))
        assert (await contract.history_store()).keeps_history is True
