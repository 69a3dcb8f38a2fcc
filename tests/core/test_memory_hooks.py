"""Window memories' on_evict, on_oversized, pop() and history(), over real in-memory stores."""

from __future__ import annotations

import logging
import sys

import pytest

from chatmemory import (
    AiMessage,
    ChatMessage,
    ConcurrentUpdateError,
    HistoryNotEnabledError,
    InMemoryChatMemoryStore,
    MessageTooLargeError,
    MessageWindowChatMemory,
    SystemMessage,
    TokenWindowChatMemory,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)

from .recording import AlwaysConflictingStore, ConflictingOnceStore, RecordingStore, VersionedRecordingStore


def u(text: str) -> UserMessage:
    return UserMessage(text)


class LengthEstimator:
    """One token per character of a single-text user message, 1 for anything else."""

    def estimate_message(self, message: ChatMessage) -> int:
        return len(message.text) if isinstance(message, UserMessage) else 1


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[ChatMessage]]] = []

    def __call__(self, memory_id: str, evicted: list[ChatMessage]) -> None:
        self.calls.append((memory_id, evicted))


def call(name: str, call_id: str | None = "c1") -> AiMessage:
    return AiMessage(None, [ToolExecutionRequest(call_id, name, "{}")])


def result(name: str, call_id: str | None = "c1") -> ToolExecutionResultMessage:
    return ToolExecutionResultMessage(call_id, name, "ok")


# ------------------------------------------------------------------------------------------ on_evict


def test_on_evict_gets_what_each_write_evicted_once() -> None:
    hook = Recorder()
    memory = MessageWindowChatMemory("m", max_messages=3, on_evict=hook)
    memory.add(SystemMessage("s"), u("a"), u("b"))
    assert hook.calls == []
    memory.add(u("c"), u("d"))
    assert hook.calls == [("m", [u("a"), u("b")])]
    memory.add(SystemMessage("s"))  # nothing changes, nothing evicted
    assert len(hook.calls) == 1


def test_on_evict_gets_a_tool_call_with_its_results() -> None:
    hook = Recorder()
    memory = MessageWindowChatMemory("m", max_messages=3, on_evict=hook)
    memory.add(call("f"), result("f"), u("q"))
    memory.add(u("next"))
    assert hook.calls == [("m", [call("f"), result("f")])]


def test_on_evict_never_sees_the_attempt_that_lost_a_conflict() -> None:
    hook = Recorder()
    store = ConflictingOnceStore(u("theirs"))
    memory = MessageWindowChatMemory("m", max_messages=2, store=store, on_evict=hook)
    store.inner.update_messages("m", [u("a"), u("b")])
    memory.add(u("mine"))
    # The first attempt would have evicted a alone; the one written evicted a and b.
    assert store.calls["save"] == 2
    assert hook.calls == [("m", [u("a"), u("b")])]
    assert memory.messages() == [u("theirs"), u("mine")]


def test_on_evict_is_not_called_when_the_add_fails() -> None:
    hook = Recorder()
    store = AlwaysConflictingStore()
    memory = MessageWindowChatMemory("m", max_messages=1, store=store, on_evict=hook, max_attempts=2)
    with pytest.raises(ConcurrentUpdateError):
        memory.add(u("a"), u("b"))
    assert hook.calls == []


def test_an_error_in_on_evict_propagates_after_the_write() -> None:
    def hook(memory_id: str, evicted: list[ChatMessage]) -> None:
        raise RuntimeError("archive down")

    memory = MessageWindowChatMemory("m", max_messages=1, on_evict=hook)
    with pytest.raises(RuntimeError, match="archive down") as raised:
        memory.add(u("a"), u("b"))
    assert memory.messages() == [u("b")]
    if sys.version_info >= (3, 11):
        assert "after the write succeeded" in "".join(raised.value.__notes__)


def test_on_evict_may_add_to_the_same_memory() -> None:
    memory: MessageWindowChatMemory
    seen: list[list[ChatMessage]] = []

    def hook(memory_id: str, evicted: list[ChatMessage]) -> None:
        seen.append(evicted)
        if len(seen) == 1:
            memory.add(u("note"))

    memory = MessageWindowChatMemory("m", max_messages=2, on_evict=hook)
    memory.add(u("a"), u("b"), u("c"))
    assert memory.messages() == [u("c"), u("note")]
    assert seen == [[u("a")], [u("b")]]


def test_set_hands_what_did_not_fit_to_on_evict() -> None:
    hook = Recorder()
    memory = MessageWindowChatMemory("m", max_messages=2, on_evict=hook)
    memory.set([u("a"), u("b"), u("c")])
    assert hook.calls == [("m", [u("a")])]


def test_on_evict_arguments_are_checked_at_construction() -> None:
    async def hook(memory_id: str, evicted: list[ChatMessage]) -> None: ...

    with pytest.raises(TypeError, match=r"coroutine function.*chatmemory\.aio\.MessageWindowChatMemory"):
        MessageWindowChatMemory(max_messages=2, on_evict=hook)
    with pytest.raises(TypeError, match="takes a function"):
        MessageWindowChatMemory(max_messages=2, on_evict="log")  # type: ignore[arg-type]


def test_a_hook_returning_an_awaitable_is_refused_by_a_sync_memory() -> None:
    async def later() -> None: ...

    memory = MessageWindowChatMemory("m", max_messages=1, on_evict=lambda memory_id, evicted: later())
    with pytest.raises(TypeError, match="returned an awaitable"):
        memory.add(u("a"), u("b"))
    assert memory.messages() == [u("b")]


# -------------------------------------------------------------------------------------- oversized


def test_an_oversized_message_reaches_on_evict_with_the_warning(caplog: pytest.LogCaptureFixture) -> None:
    hook = Recorder()
    memory = TokenWindowChatMemory("m", max_tokens=5, token_count_estimator=LengthEstimator(), on_evict=hook)
    memory.add(u("hi"))
    with caplog.at_level(logging.WARNING, logger="chatmemory"):
        memory.add(u("far too long"))
    # Oldest first out: the window empties before the oversized message leaves too.
    assert memory.messages() == []
    assert hook.calls == [("m", [u("hi"), u("far too long")])]
    assert "'m'" in caplog.text and "exceeds the whole max_tokens of 5" in caplog.text


def test_on_oversized_raise_writes_nothing() -> None:
    store = VersionedRecordingStore()
    hook = Recorder()
    memory = TokenWindowChatMemory(
        "m", max_tokens=5, token_count_estimator=LengthEstimator(), store=store, on_oversized="raise", on_evict=hook
    )
    memory.add(u("hi"))
    store.reset()
    with pytest.raises(MessageTooLargeError, match="'m'") as raised:
        memory.add(u("ok"), u("far too long"))
    assert (raised.value.size, raised.value.limit, raised.value.unit) == (12, 5, "tokens")
    assert store.calls == {}
    assert memory.messages() == [u("hi")]
    with pytest.raises(MessageTooLargeError):
        memory.set([u("far too long")])
    assert memory.messages() == [u("hi")]
    assert hook.calls == []


def test_on_oversized_is_checked_at_construction() -> None:
    with pytest.raises(ValueError, match="on_oversized must be one of 'evict', 'raise'"):
        TokenWindowChatMemory(max_tokens=5, on_oversized="truncate")  # type: ignore[arg-type]


# -------------------------------------------------------------------------------------------- pop


def test_pop_removes_the_newest_message_with_one_load_and_one_save() -> None:
    store = VersionedRecordingStore()
    memory = MessageWindowChatMemory("m", max_messages=5, store=store)
    memory.add(SystemMessage("s"), u("a"), AiMessage("b"))
    store.reset()
    assert memory.pop() == [AiMessage("b")]
    assert store.calls == {"load": 1, "save": 1}
    assert memory.messages() == [SystemMessage("s"), u("a")]


def test_pop_never_removes_the_system_message_wherever_it_sits() -> None:
    store = RecordingStore()
    memory = MessageWindowChatMemory("m", max_messages=5, store=store)
    memory.add(u("a"), SystemMessage("s"))
    assert memory.pop() == [u("a")]
    store.reset()
    assert memory.pop() == []
    assert store.calls == {"get": 1}  # nothing to pop, nothing written
    assert memory.messages() == [SystemMessage("s")]
    memory.clear()
    assert memory.pop() == []


def test_pop_of_a_tool_result_removes_the_whole_tool_exchange() -> None:
    memory = MessageWindowChatMemory("m", max_messages=10)
    exchange = [AiMessage("checking", [ToolExecutionRequest("c1", "f", "{}"), ToolExecutionRequest("c2", "g", "{}")])]
    exchange += [result("f", "c1"), result("g", "c2")]
    memory.add(SystemMessage("s"), u("q"), *exchange)
    assert memory.pop() == exchange
    assert memory.messages() == [SystemMessage("s"), u("q")]
    # Results without ids belong to the nearest AI message that asked for tools.
    memory.add(call("f", None), result("f", None))
    assert memory.pop() == [call("f", None), result("f", None)]
    # An AI message whose calls have no result yet is popped alone.
    memory.add(call("f"))
    assert memory.pop() == [call("f")]
    assert memory.messages() == [SystemMessage("s"), u("q")]


def test_pop_keeps_the_system_message_inside_a_popped_exchange() -> None:
    memory = MessageWindowChatMemory("m", max_messages=10)
    memory.add(u("q"), call("f"), SystemMessage("s"), result("f"))
    assert memory.pop() == [call("f"), result("f")]
    assert memory.messages() == [u("q"), SystemMessage("s")]


def test_a_pop_that_meets_another_writer_is_not_retried() -> None:
    store = ConflictingOnceStore(u("theirs"))
    memory = MessageWindowChatMemory("m", max_messages=5, store=store)
    store.inner.update_messages("m", [u("a")])
    with pytest.raises(ConcurrentUpdateError, match="'m'"):
        memory.pop()
    assert store.inner.get_messages("m") == [u("a"), u("theirs")]


# ---------------------------------------------------------------------------------------- history


def test_history_reads_the_stores_history_page_by_page() -> None:
    store = InMemoryChatMemoryStore(history=True)
    memory = MessageWindowChatMemory("m", max_messages=3, store=store)
    added = [u(str(i)) for i in range(250)]
    for message in added:
        memory.add(message)
    assert memory.messages() == added[-3:]
    page = memory.history()
    assert page.messages == added[:100]
    read = list(page.messages)
    while page.next_after is not None:
        page = memory.history(after=page.next_after, limit=70)
        read.extend(page.messages)
    assert read == added
    newest = memory.history(limit=2, reverse=True)
    assert newest.messages == [added[-1], added[-2]]
    assert memory.pop() == [added[-1]]
    assert memory.history(limit=1, reverse=True).messages == [added[-1]]  # pop changes only the window


def test_history_without_a_history_says_how_to_get_one() -> None:
    memory = MessageWindowChatMemory("m", max_messages=2, store=RecordingStore())
    with pytest.raises(HistoryNotEnabledError, match=r"RecordingStore \(the store of memory 'm'\).*history=True"):
        memory.history()
    with pytest.raises(ValueError, match="limit"):
        memory.history(limit=0)
    without = MessageWindowChatMemory("m", max_messages=2, store=InMemoryChatMemoryStore())
    with pytest.raises(HistoryNotEnabledError, match="history=True"):
        without.history()


def test_an_oversized_message_alone_is_not_written_but_reaches_on_evict() -> None:
    store = VersionedRecordingStore()
    hook = Recorder()
    memory = TokenWindowChatMemory(
        "m", max_tokens=5, token_count_estimator=LengthEstimator(), store=store, on_evict=hook
    )
    memory.add(u("far too long"))
    assert store.calls == {"load": 1}
    assert hook.calls == [("m", [u("far too long")])]
