"""Window memories (docs/semantics.md) of both kinds, over real in-memory stores with counted calls."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from chatmemory import (
    AiMessage,
    ChatMessage,
    ConcurrentUpdateError,
    CustomMessage,
    InMemoryChatMemoryStore,
    MessageWindowChatMemory,
    SystemMessage,
    TokenWindowChatMemory,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)

from .recording import AlwaysConflictingStore, ConflictingOnceStore, RecordingStore, VersionedRecordingStore

WEIGHT = 10  # tokens per message in token-window tests that mirror message-window ones


class FixedEstimator:
    """Every message weighs the same, so a token window of ``n * WEIGHT`` behaves like ``n`` messages."""

    def __init__(self) -> None:
        self.calls: Counter[ChatMessage] = Counter()

    def estimate_message(self, message: ChatMessage) -> int:
        self.calls[message] += 1
        return WEIGHT


class LengthEstimator:
    """One token per character of text; tool calls weigh their arguments."""

    def __init__(self) -> None:
        self.calls = 0

    def estimate_message(self, message: ChatMessage) -> int:
        self.calls += 1
        if isinstance(message, (SystemMessage, ToolExecutionResultMessage)):
            return len(message.text)
        if isinstance(message, UserMessage):
            return len(message.text)
        if isinstance(message, AiMessage):
            return len(message.text or "") + sum(len(r.arguments) for r in message.tool_execution_requests)
        return 1


def make_memory(kind: str, limit: int | Callable[[], int], store: Any = None, **options: Any) -> Any:
    """A memory of ``kind`` that holds ``limit`` messages (for the token kind: ``limit * WEIGHT`` tokens)."""
    if kind == "message":
        return MessageWindowChatMemory("m", max_messages=limit, store=store, **options)
    tokens: int | Callable[[], int]
    tokens = (lambda: limit() * WEIGHT) if callable(limit) else limit * WEIGHT
    options.setdefault("token_count_estimator", FixedEstimator())
    return TokenWindowChatMemory("m", max_tokens=tokens, store=store, **options)


@pytest.fixture(params=["message", "token"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(params=["plain", "versioned"])
def recording(request: pytest.FixtureRequest) -> RecordingStore:
    return RecordingStore() if request.param == "plain" else VersionedRecordingStore()


def u(text: str) -> UserMessage:
    return UserMessage(text)


def call(*ids: str | None, text: str | None = None) -> AiMessage:
    return AiMessage(text, [ToolExecutionRequest(i, f"tool_{i}", f'{{"id": "{i}"}}') for i in ids])


def result(call_id: str | None, text: str = "ok") -> ToolExecutionResultMessage:
    return ToolExecutionResultMessage(call_id, f"tool_{call_id}", text)


def add_each(memory: Any, messages: Sequence[ChatMessage]) -> None:
    for message in messages:
        memory.add(message)


def reads(store: RecordingStore) -> int:
    return store.calls["get"] + store.calls["load"]


def writes(store: RecordingStore) -> int:
    return store.calls["update"] + store.calls["save"]


# ---------------------------------------------------------------------------------------- system message


def test_equal_system_message_is_not_written(kind: str, recording: RecordingStore) -> None:
    memory = make_memory(kind, 5, recording)
    memory.add(SystemMessage("be brief"), u("hi"))
    recording.reset()
    memory.add(SystemMessage("be brief"))
    assert writes(recording) == 0
    assert reads(recording) == 1
    assert memory.messages() == [SystemMessage("be brief"), u("hi")]


def test_different_system_message_replaces_and_goes_last(kind: str) -> None:
    memory = make_memory(kind, 5)
    memory.add(SystemMessage("one"), u("a"), AiMessage("b"))
    memory.add(SystemMessage("two"))
    assert memory.messages() == [u("a"), AiMessage("b"), SystemMessage("two")]


def test_different_system_message_goes_first_when_asked(kind: str) -> None:
    memory = make_memory(kind, 5, always_keep_system_message_first=True)
    memory.add(u("a"), SystemMessage("one"), AiMessage("b"))
    assert memory.messages() == [SystemMessage("one"), u("a"), AiMessage("b")]
    memory.add(SystemMessage("two"))
    assert memory.messages() == [SystemMessage("two"), u("a"), AiMessage("b")]


def test_system_message_survives_in_the_middle_and_counts(kind: str) -> None:
    memory = make_memory(kind, 3)
    add_each(memory, [u("1"), u("2"), SystemMessage("s"), u("3")])
    # Evicting the oldest non-system message leaves the system message in the middle of the window.
    assert memory.messages() == [u("2"), SystemMessage("s"), u("3")]
    memory.add(u("4"))
    assert memory.messages() == [SystemMessage("s"), u("3"), u("4")]
    memory.add(u("5"), u("6"), u("7"))
    assert memory.messages() == [SystemMessage("s"), u("6"), u("7")]


def test_system_message_mid_window_is_skipped_for_eviction(kind: str) -> None:
    memory = make_memory(kind, 3)
    memory.set([SystemMessage("s"), u("1"), u("2")])
    memory.add(SystemMessage("t"))  # replaces s, appended last
    assert memory.messages() == [u("1"), u("2"), SystemMessage("t")]
    memory.add(u("3"))
    assert memory.messages() == [u("2"), SystemMessage("t"), u("3")]
    memory.add(u("4"))
    memory.add(u("5"))
    assert memory.messages() == [SystemMessage("t"), u("4"), u("5")]


def test_limit_one_keeps_only_the_system_message(kind: str) -> None:
    memory = make_memory(kind, 1)
    memory.add(SystemMessage("s"))
    memory.add(u("hi"))
    assert memory.messages() == [SystemMessage("s")]


def test_custom_messages_are_ordinary(kind: str) -> None:
    memory = make_memory(kind, 2)
    memory.add(SystemMessage("s"), CustomMessage({"role": "note"}), u("x"))
    assert memory.messages() == [SystemMessage("s"), u("x")]


# ------------------------------------------------------------------------------------------ tool integrity


def test_results_leave_with_their_call_by_id_even_when_not_adjacent(kind: str) -> None:
    memory = make_memory(kind, 5)
    add_each(memory, [u("1"), call("a", "b"), result("a"), u("2"), result("b")])
    memory.add(u("3"))
    assert memory.messages() == [call("a", "b"), result("a"), u("2"), result("b"), u("3")]
    memory.add(u("4"))
    assert memory.messages() == [u("2"), u("3"), u("4")]


def test_late_result_of_an_evicted_call_is_dropped(kind: str) -> None:
    memory = make_memory(kind, 3)
    add_each(memory, [u("1"), call("a"), u("2"), u("3"), u("4")])
    assert memory.messages() == [u("2"), u("3"), u("4")]
    memory.add(result("a"))  # arrives after its call was evicted: it would make the prompt invalid
    assert memory.messages() == [u("2"), u("3"), u("4")]
    memory.add(u("5"))
    assert memory.messages() == [u("3"), u("4"), u("5")]


def test_stray_results_are_evicted_wherever_they_sit(kind: str) -> None:
    memory = make_memory(kind, 4)
    memory.set([result("before"), call("a"), result("a"), result("zzz"), u("2")][-4:])
    assert memory.messages() == [call("a"), result("a"), u("2")]
    memory.add(u("3"), result("never-asked"))
    assert memory.messages() == [call("a"), result("a"), u("2"), u("3")]
    memory.add(u("4"))
    assert memory.messages() == [u("2"), u("3"), u("4")]


def test_system_first_then_results_of_evicted_call(kind: str) -> None:
    memory = make_memory(kind, 4, always_keep_system_message_first=True)
    add_each(memory, [SystemMessage("s"), call("a", "b"), result("a"), result("b")])
    memory.add(u("q"))
    assert memory.messages() == [SystemMessage("s"), u("q")]


def test_positional_fallback_without_ids(kind: str) -> None:
    memory = make_memory(kind, 4)
    add_each(memory, [call(None, None), result(None), result(None), u("1")])
    memory.add(u("2"))
    assert memory.messages() == [u("1"), u("2")]


def test_positional_fallback_takes_only_the_adjacent_results(kind: str) -> None:
    memory = make_memory(kind, 5)
    add_each(memory, [call(None), result(None, "mine"), u("1"), call(None), result(None, "theirs")])
    memory.add(u("2"))
    assert memory.messages() == [u("1"), call(None), result(None, "theirs"), u("2")]


def test_reused_call_ids_evict_only_the_results_of_the_evicted_call(kind: str) -> None:
    # Some providers number calls per turn ("call_0" every time): a result belongs to the nearest
    # earlier request with its id, so the later turn must keep its result.
    memory = make_memory(kind, 5)
    add_each(memory, [call("call_0"), result("call_0", "first"), u("1"), call("call_0"), result("call_0", "second")])
    memory.add(u("2"))
    assert memory.messages() == [u("1"), call("call_0"), result("call_0", "second"), u("2")]


def test_result_before_its_call_is_an_orphan_even_if_a_later_call_reuses_its_id(kind: str) -> None:
    memory = make_memory(kind, 5)
    memory.set([u("0"), result("call_0", "late"), u("1"), call("call_0"), result("call_0")])
    assert memory.messages() == [u("0"), u("1"), call("call_0"), result("call_0")]
    memory.add(u("2"))
    assert memory.messages() == [u("0"), u("1"), call("call_0"), result("call_0"), u("2")]


def test_late_result_into_an_emptied_window_is_dropped(kind: str, recording: RecordingStore) -> None:
    memory = make_memory(kind, 2, recording)
    memory.add(call("a", "b"))
    memory.add(result("a"))
    memory.add(u("1"))  # evicts the call and its first result
    assert memory.messages() == [u("1")]
    memory.set([])
    recording.reset()
    memory.add(result("b"))  # its call is long gone; heading the window it would be an invalid prompt
    assert memory.messages() == []
    assert writes(recording) == 0


def test_late_result_after_the_system_message_is_dropped(kind: str) -> None:
    memory = make_memory(kind, 3)
    memory.add(SystemMessage("s"), call("a", "b"), result("a"))
    memory.add(u("1"))
    assert memory.messages() == [SystemMessage("s"), u("1")]
    memory.set([SystemMessage("s")])
    memory.add(result("b"))
    assert memory.messages() == [SystemMessage("s")]
    memory.add(result("b"), u("2"))
    assert memory.messages() == [SystemMessage("s"), u("2")]


def test_set_drops_leading_results(kind: str) -> None:
    memory = make_memory(kind, 5)
    memory.set([result("x"), result(None), u("1")])
    assert memory.messages() == [u("1")]


def test_a_result_without_an_id_that_an_eviction_leaves_at_the_head_goes_too(kind: str) -> None:
    # A result without an id is judged by its place alone: behind a user message it stays, but once the
    # eviction takes that message the result heads the window, where nothing can have asked for it.
    evicted: list[ChatMessage] = []
    memory = make_memory(kind, 3, on_evict=lambda _, messages: evicted.extend(messages))
    add_each(memory, [u("1"), result(None, "stray"), u("2")])
    assert memory.messages() == [u("1"), result(None, "stray"), u("2")]
    memory.add(u("3"))
    assert memory.messages() == [u("2"), u("3")]
    assert evicted == [u("1"), result(None, "stray")]


# ------------------------------------------------------------------------------------------ store traffic


def test_add_of_many_is_one_read_and_one_write(kind: str, recording: RecordingStore) -> None:
    memory = make_memory(kind, 3, recording)
    memory.add(u("a"), u("b"), u("c"), u("d"))
    assert reads(recording) == 1
    assert writes(recording) == 1
    assert recording.writes == [[u("b"), u("c"), u("d")]]
    if isinstance(recording, VersionedRecordingStore):
        assert recording.calls["load"] == 1
        assert recording.calls["save"] == 1
        assert recording.calls["get"] == 0
        assert recording.calls["update"] == 0


def test_add_of_nothing_touches_nothing(kind: str, recording: RecordingStore) -> None:
    make_memory(kind, 3, recording).add()
    assert recording.calls == Counter()


def test_invalid_message_is_rejected_before_any_write(kind: str, recording: RecordingStore) -> None:
    memory = make_memory(kind, 3, recording)
    with pytest.raises(TypeError, match="chat message"):
        memory.add(u("a"), "not a message")
    assert writes(recording) == 0


def test_messages_is_one_read(kind: str, recording: RecordingStore) -> None:
    memory = make_memory(kind, 3, recording)
    memory.add(u("a"))
    recording.reset()
    assert memory.messages() == [u("a")]
    assert reads(recording) == 1
    assert writes(recording) == 0


def test_set_is_one_write_and_no_read(kind: str, recording: RecordingStore) -> None:
    memory = make_memory(kind, 3, recording)
    memory.add(u("old"))
    recording.reset()
    memory.set([u("1"), SystemMessage("s"), u("2"), u("3"), u("4")])
    assert reads(recording) == 0
    assert recording.calls["update"] == 1
    assert writes(recording) == 1
    assert memory.messages() == [SystemMessage("s"), u("3"), u("4")]


def test_set_evicts_tool_groups_and_moves_system_first_when_asked(kind: str) -> None:
    memory = make_memory(kind, 3, always_keep_system_message_first=True)
    memory.set([call("a"), result("a"), u("1"), SystemMessage("s"), u("2")])
    assert memory.messages() == [SystemMessage("s"), u("1"), u("2")]


def test_set_rejects_two_system_messages_and_writes_nothing(kind: str, recording: RecordingStore) -> None:
    memory = make_memory(kind, 3, recording)
    with pytest.raises(ValueError, match="one system message"):
        memory.set([SystemMessage("a"), u("x"), SystemMessage("b")])
    assert recording.calls == Counter()


def test_set_empty_and_clear(kind: str, recording: RecordingStore) -> None:
    memory = make_memory(kind, 3, recording)
    memory.add(u("a"))
    memory.set([])
    assert memory.messages() == []
    memory.add(u("b"))
    recording.reset()
    memory.clear()
    assert recording.calls == Counter({"delete": 1})
    assert memory.messages() == []
    memory.clear()  # idempotent


def test_memories_share_the_store_not_a_list(kind: str) -> None:
    store = InMemoryChatMemoryStore()
    first = make_memory(kind, 3, store)
    second = make_memory(kind, 3, store)
    first.add(u("a"))
    second.add(u("b"))
    assert first.messages() == second.messages() == [u("a"), u("b")]
    other = MessageWindowChatMemory("other", max_messages=3, store=store)
    assert other.messages() == []


def test_default_id_and_store() -> None:
    one = MessageWindowChatMemory(max_messages=2)
    two = MessageWindowChatMemory(max_messages=2)
    assert one.id == "default"
    one.add(u("a"))
    assert two.messages() == []  # each memory gets a fresh store by default
    assert TokenWindowChatMemory(max_tokens=10).id == "default"


# ---------------------------------------------------------------------------------------------- limits


def test_dynamic_limit_is_read_on_every_operation(kind: str) -> None:
    size = {"n": 4}
    calls = {"n": 0}

    def limit() -> int:
        calls["n"] += 1
        return size["n"]

    memory = make_memory(kind, limit)
    memory.add(u("1"), u("2"), u("3"), u("4"))
    assert len(memory.messages()) == 4
    size["n"] = 2
    # The smaller limit applies to what is read even before the next write.
    assert memory.messages() == [u("3"), u("4")]
    memory.add(u("5"))
    assert memory.messages() == [u("4"), u("5")]
    size["n"] = 3
    memory.add(u("6"))
    assert memory.messages() == [u("4"), u("5"), u("6")]
    memory.set([u(str(i)) for i in range(10)])
    assert len(memory.messages()) == 3
    assert calls["n"] >= 7


@pytest.mark.parametrize("bad", [0, -1])
def test_limits_must_be_positive(bad: int) -> None:
    with pytest.raises(ValueError, match="max_messages"):
        MessageWindowChatMemory(max_messages=bad)
    with pytest.raises(ValueError, match="max_tokens"):
        TokenWindowChatMemory(max_tokens=bad)
    memory = MessageWindowChatMemory(max_messages=lambda: bad)
    with pytest.raises(ValueError, match="max_messages"):
        memory.add(u("a"))
    with pytest.raises(ValueError, match="max_messages"):
        memory.set([u("a")])
    tokens = TokenWindowChatMemory(max_tokens=lambda: bad)
    with pytest.raises(ValueError, match="max_tokens"):
        tokens.add(u("a"))


@pytest.mark.parametrize("bad", [1.5, "3", None, True])
def test_limits_must_be_ints(bad: object) -> None:
    with pytest.raises(TypeError):
        MessageWindowChatMemory(max_messages=bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        MessageWindowChatMemory(max_messages=lambda: bad).add(u("a"))  # type: ignore[arg-type,return-value]


# ------------------------------------------------------------------------------------------ token window


def test_estimator_called_once_per_distinct_message() -> None:
    estimator = FixedEstimator()
    memory = TokenWindowChatMemory(max_tokens=20 * WEIGHT, token_count_estimator=estimator)
    distinct = [u(f"message {i}") for i in range(60)]
    for message in distinct:
        memory.add(message)
        memory.messages()
    memory.add(SystemMessage("s"))
    memory.add(SystemMessage("s"))
    for message in distinct[-10:]:
        memory.add(UserMessage(message.text))  # equal value, new object
    assert set(estimator.calls) == {*distinct, SystemMessage("s")}
    assert max(estimator.calls.values()) == 1


def test_estimator_cache_handles_messages_holding_dicts() -> None:
    estimator = FixedEstimator()
    memory = TokenWindowChatMemory(max_tokens=100 * WEIGHT, token_count_estimator=estimator)
    for _ in range(5):
        memory.add(AiMessage("a", attributes={"signature": {"parts": [1, 2]}}))
    assert sum(estimator.calls.values()) == 1
    assert len(memory.messages()) == 5


def test_over_budget_message_is_evicted_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    memory = TokenWindowChatMemory("big", max_tokens=10, token_count_estimator=LengthEstimator())
    memory.add(SystemMessage("sys"), u("ab"))
    with caplog.at_level(logging.WARNING, logger="chatmemory"):
        memory.add(u("x" * 50))
    assert memory.messages() == [SystemMessage("sys")]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "'big'" in warnings[0].getMessage()
    assert "evicted" in warnings[0].getMessage()


def test_over_budget_message_can_empty_the_window(caplog: pytest.LogCaptureFixture) -> None:
    memory = TokenWindowChatMemory(max_tokens=10, token_count_estimator=LengthEstimator())
    with caplog.at_level(logging.WARNING, logger="chatmemory"):
        memory.add(u("ab"), u("y" * 11))
    assert memory.messages() == []
    assert any("evicted" in r.getMessage() for r in caplog.records)


def test_over_budget_system_message_is_kept_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    memory = TokenWindowChatMemory("big", max_tokens=10, token_count_estimator=LengthEstimator())
    with caplog.at_level(logging.WARNING, logger="chatmemory"):
        memory.add(u("hi"), SystemMessage("s" * 30))
    assert memory.messages() == [SystemMessage("s" * 30)]
    assert [r for r in caplog.records if "kept" in r.getMessage()]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="chatmemory"):
        memory.add(u("again"))
    assert memory.messages() == [SystemMessage("s" * 30)]


def test_no_warning_when_everything_fits(caplog: pytest.LogCaptureFixture) -> None:
    memory = TokenWindowChatMemory(max_tokens=10, token_count_estimator=LengthEstimator())
    with caplog.at_level(logging.WARNING, logger="chatmemory"):
        memory.add(u("abcd"), u("efgh"), u("ijkl"))
    assert memory.messages() == [u("efgh"), u("ijkl")]
    assert caplog.records == []


def test_token_window_keeps_what_fits_by_weight() -> None:
    memory = TokenWindowChatMemory(max_tokens=10, token_count_estimator=LengthEstimator())
    memory.add(u("aaaaaa"), u("bbb"), u("cc"))
    assert memory.messages() == [u("bbb"), u("cc")]
    memory.add(u("ddddd"))  # exactly 10: fits
    assert memory.messages() == [u("bbb"), u("cc"), u("ddddd")]
    memory.add(u("e"))
    assert memory.messages() == [u("cc"), u("ddddd"), u("e")]


class OverheadEstimator(LengthEstimator):
    """Counts a per-request overhead of 5 on top of the messages."""

    def __init__(self) -> None:
        super().__init__()
        self.totals = 0

    def estimate_messages(self, messages: Sequence[ChatMessage]) -> int:
        self.totals += 1
        return 5 + sum(self.estimate_message(message) for message in messages)


def test_estimate_messages_is_used_for_totals() -> None:
    estimator = OverheadEstimator()
    memory = TokenWindowChatMemory(max_tokens=10, token_count_estimator=estimator)
    memory.add(u("aa"), u("bb"))  # 5 + 4 fits
    assert memory.messages() == [u("aa"), u("bb")]
    memory.add(u("cc"))  # 5 + 6 does not; without the overhead 6 would fit
    assert memory.messages() == [u("bb"), u("cc")]
    assert estimator.totals > 0


def test_estimate_messages_is_called_once_per_add_however_much_is_evicted() -> None:
    estimator = OverheadEstimator()
    memory = TokenWindowChatMemory(max_tokens=125, token_count_estimator=estimator)
    memory.set([u(f"{i:02d}") for i in range(60)])  # 5 + 60 * 2
    estimator.totals = 0
    memory.add(u("x" * 40))  # evicts 20 messages
    assert estimator.totals == 1
    assert len(memory.messages()) == 41


def test_default_estimator_is_simple() -> None:
    from chatmemory import SimpleTokenCountEstimator

    memory = TokenWindowChatMemory(max_tokens=30)
    assert isinstance(memory.token_count_estimator, SimpleTokenCountEstimator)
    for i in range(20):
        memory.add(u(f"hello there number {i}"))
    total = sum(memory.token_count_estimator.estimate_message(m) for m in memory.messages())
    assert 0 < total <= 30


# ----------------------------------------------------------------------------------------- concurrency


def test_concurrent_adds_lose_nothing() -> None:
    store = InMemoryChatMemoryStore()
    memory = MessageWindowChatMemory("shared", max_messages=5000, store=store)
    threads_count, per_thread = 8, 250
    barrier = threading.Barrier(threads_count)
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            barrier.wait()
            for i in range(per_thread):
                memory.add(u(f"{worker}-{i}"))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    texts = [message.text for message in memory.messages()]  # type: ignore[union-attr]
    assert len(texts) == threads_count * per_thread
    assert Counter(texts) == Counter(f"{w}-{i}" for w in range(threads_count) for i in range(per_thread))
    for worker in range(threads_count):
        mine = [int(t.split("-")[1]) for t in texts if t.startswith(f"{worker}-")]
        assert mine == sorted(mine)  # each writer's messages stay in its order


def test_stale_save_raises_and_changes_nothing() -> None:
    store = InMemoryChatMemoryStore()
    snapshot = store.load("m")
    store.save("m", [u("first")], snapshot.version)
    with pytest.raises(ConcurrentUpdateError, match="'m'") as raised:
        store.save("m", [u("stale")], snapshot.version)
    assert raised.value.memory_id == "m"
    assert raised.value.expected_version == snapshot.version
    assert store.get_messages("m") == [u("first")]


def test_conflict_is_retried_from_a_fresh_read(kind: str) -> None:
    store = ConflictingOnceStore(u("theirs"))
    memory = make_memory(kind, 5, store)
    memory.add(u("mine"))
    assert memory.messages() == [u("theirs"), u("mine")]
    assert store.calls["load"] == 2
    assert store.calls["save"] == 2


def test_add_gives_up_after_max_attempts(kind: str) -> None:
    store = AlwaysConflictingStore()
    memory = make_memory(kind, 100, store, max_attempts=3)
    with pytest.raises(ConcurrentUpdateError, match="'m'") as raised:
        memory.add(u("mine"))
    assert raised.value.memory_id == "m"
    assert raised.value.attempts == 3
    assert "3 attempts" in str(raised.value)
    assert store.calls["load"] == 3
    assert store.calls["save"] == 3
    assert u("mine") not in store.inner.get_messages("m")


def test_max_attempts_must_be_positive() -> None:
    with pytest.raises(ValueError, match="max_attempts"):
        MessageWindowChatMemory(max_messages=3, max_attempts=0)


class _SlowSaves(InMemoryChatMemoryStore):
    """Saves take a millisecond, so writers that do not take turns collide."""

    def __init__(self) -> None:
        super().__init__()
        self.conflicts = 0

    def save(self, memory_id: str, messages: Sequence[ChatMessage], expected_version: int) -> int:
        time.sleep(0.001)
        try:
            return super().save(memory_id, messages, expected_version)
        except ConcurrentUpdateError:
            self.conflicts += 1
            raise


def test_threads_sharing_a_memory_object_take_turns() -> None:
    store = _SlowSaves()
    memory = MessageWindowChatMemory("shared", max_messages=1000, store=store)
    threads = [
        threading.Thread(target=lambda w=w: [memory.add(u(f"{w}-{i}")) for i in range(20)])  # type: ignore[misc]
        for w in range(6)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(memory.messages()) == 120
    assert store.conflicts == 0
