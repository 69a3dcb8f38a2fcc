"""SummarizingChatMemory with a deterministic summarizer, over real in-memory stores."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest

from chatmemory import (
    AiMessage,
    ChatMessage,
    ConcurrentUpdateError,
    CustomMessage,
    InMemoryChatMemoryStore,
    MessageTooLargeError,
    SummarizingChatMemory,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.core.summary import SUMMARY_ATTRIBUTE, is_summary, split_summary, summary_message, summary_text
from chatmemory.serialization import langchain4j, native
from chatmemory.serialization.anthropic import to_anthropic
from chatmemory.serialization.openai import to_openai
from chatmemory.serialization.responses import to_responses

from .recording import AlwaysConflictingStore, ConflictingOnceStore, RecordingStore


def u(text: str) -> UserMessage:
    return UserMessage(text)


def label(message: ChatMessage) -> str:
    if isinstance(message, UserMessage):
        return message.text
    if isinstance(message, AiMessage):
        return message.text or "+".join(r.name for r in message.tool_execution_requests)
    if isinstance(message, ToolExecutionResultMessage):
        return f"={message.tool_name}"
    if isinstance(message, CustomMessage):
        return "custom"
    return message.text


class Summarizer:
    """Deterministic: the previous summary, then the labels of the evicted messages; every call recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str | None, list[str]]] = []

    def __call__(self, previous: str | None, evicted: list[ChatMessage]) -> str:
        self.calls.append((previous, [label(m) for m in evicted]))
        return ",".join([*([previous] if previous else []), *(label(m) for m in evicted)])


def texts(window: Sequence[ChatMessage]) -> list[str]:
    return [f"[{summary_text(m)}]" if is_summary(m) else label(m) for m in window]  # type: ignore[arg-type]


def test_evicted_messages_go_into_one_summary_after_the_system_message() -> None:
    summarizer = Summarizer()
    memory = SummarizingChatMemory("m", max_messages=4, summarizer=summarizer)
    memory.add(SystemMessage("s"), u("a"), u("b"))
    assert memory.summary() is None and summarizer.calls == []
    memory.add(u("c"), u("d"))
    assert texts(memory.messages()) == ["s", "[a,b]", "c", "d"]
    assert summarizer.calls == [(None, ["a", "b"])]
    memory.add(u("e"))
    assert texts(memory.messages()) == ["s", "[a,b,c]", "d", "e"]
    assert summarizer.calls[-1] == ("a,b", ["c"])
    assert memory.summary() == "a,b,c"


def test_the_summary_survives_a_restart() -> None:
    store = InMemoryChatMemoryStore()
    first = SummarizingChatMemory("m", max_messages=3, summarizer=Summarizer(), store=store)
    first.add(SystemMessage("s"), u("a"), u("b"), u("c"))
    summarizer = Summarizer()
    second = SummarizingChatMemory("m", max_messages=3, summarizer=summarizer, store=store)
    assert texts(second.messages()) == ["s", "[a,b]", "c"]
    second.add(u("d"))
    assert summarizer.calls == [("a,b", ["c"])]
    assert texts(store.get_messages("m")) == ["s", "[a,b,c]", "d"]


def test_the_summary_round_trips_through_the_stored_format() -> None:
    message = summary_message("they talked about Lisbon")
    for codec in (native, langchain4j):  # every store writes one of these two
        (decoded,) = codec.loads(codec.dumps([message]))
        assert decoded == message and is_summary(decoded)
        assert summary_text(decoded) == "they talked about Lisbon"
        assert decoded.attributes == {SUMMARY_ATTRIBUTE: 1}
    assert not is_summary(u("they talked about Lisbon"))


def test_the_summary_is_recognized_whatever_its_framing_line() -> None:
    store = InMemoryChatMemoryStore()
    SummarizingChatMemory("m", max_messages=2, summarizer=Summarizer(), store=store, summary_prefix="Earlier:").add(
        u("a"), u("b"), u("c")
    )
    later = SummarizingChatMemory("m", max_messages=2, summarizer=Summarizer(), store=store, summary_prefix="")
    assert later.summary() == "a,b"
    assert store.get_messages("m")[0].contents[0] == TextContent("Earlier:")  # type: ignore[union-attr]


def test_tool_pairs_are_never_split_across_the_summary() -> None:
    summarizer = Summarizer()
    memory = SummarizingChatMemory("m", max_messages=4, summarizer=summarizer)
    call = AiMessage(None, [ToolExecutionRequest("c1", "weather", "{}"), ToolExecutionRequest("c2", "fx", "{}")])
    memory.add(SystemMessage("s"), u("q"), call, ToolExecutionResultMessage("c1", "weather", "sun"))
    memory.add(ToolExecutionResultMessage("c2", "fx", "0.9"))
    # q leaves first; the window may not start with a result, so the call leaves with both results.
    assert summarizer.calls == [(None, ["q", "weather+fx", "=weather", "=fx"])]
    assert texts(memory.messages()) == ["s", "[q,weather+fx,=weather,=fx]"]
    memory.add(u("next"), AiMessage("ok"))
    window = memory.messages()
    assert not isinstance(window[2], ToolExecutionResultMessage)


def test_the_summary_counts_toward_a_token_budget_and_a_grown_summary_evicts_more() -> None:
    class Chars:
        def estimate_message(self, message: ChatMessage) -> int:
            if isinstance(message, UserMessage):
                return sum(len(part.text) for part in message.contents if isinstance(part, TextContent))
            return 1

    calls: list[tuple[str | None, list[str]]] = []

    def initials(previous: str | None, evicted: list[ChatMessage]) -> str:
        calls.append((previous, [label(m) for m in evicted]))
        return (previous or "") + "".join(label(m)[0] for m in evicted)

    memory = SummarizingChatMemory(
        "m", max_tokens=12, token_count_estimator=Chars(), summarizer=initials, summary_prefix=""
    )
    memory.add(u("aaaa"), u("bbbb"), u("cccc"))
    assert memory.messages() == [u("aaaa"), u("bbbb"), u("cccc")]
    memory.add(u("dd"))
    assert calls == [(None, ["aaaa"])]
    assert texts(memory.messages()) == ["[a]", "bbbb", "cccc", "dd"]
    memory.add(u("eeeeeeee"))
    # bbbb and cccc leave; the summary "abc" (3 tokens) then leaves no room for dd, which joins it.
    assert calls[1:] == [("a", ["bbbb", "cccc"]), ("abc", ["dd"])]
    assert texts(memory.messages()) == ["[abcd]", "eeeeeeee"]
    assert sum(Chars().estimate_message(m) for m in memory.messages()) <= 12


def test_a_summary_that_outweighs_the_limit_is_kept_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    memory = SummarizingChatMemory("m", max_messages=1, summarizer=lambda previous, evicted: "x" * 50)
    with caplog.at_level(logging.WARNING, logger="chatmemory"):
        memory.add(SystemMessage("s"), u("a"))
    assert texts(memory.messages()) == ["s", "[" + "x" * 50 + "]"]
    assert "leaves no room" in caplog.text


def test_a_retry_after_a_conflict_does_not_summarize_the_same_messages_again() -> None:
    summarizer = Summarizer()
    store = ConflictingOnceStore(u("theirs"))
    store.inner.update_messages("m", [u("a"), u("b")])
    memory = SummarizingChatMemory("m", max_messages=3, summarizer=summarizer, store=store)
    memory.add(u("c"), u("d"))
    # The first attempt summarized a and b; the retry (theirs slipped in) also evicts theirs, and only
    # theirs is handed to the summarizer, after the summary of a and b made before.
    assert summarizer.calls == [(None, ["a", "b"]), ("a,b", ["theirs"])]
    assert store.calls["save"] == 2
    assert texts(memory.messages()) == ["[a,b,theirs]", "c", "d"]


def test_a_summarizer_error_writes_nothing() -> None:
    def broken(previous: str | None, evicted: list[ChatMessage]) -> str:
        raise RuntimeError("model down")

    store = RecordingStore()
    memory = SummarizingChatMemory("m", max_messages=2, summarizer=broken, store=store)
    memory.add(u("a"), u("b"))
    with pytest.raises(RuntimeError, match="model down"):
        memory.add(u("c"))
    assert store.calls["update"] == 1
    assert memory.messages() == [u("a"), u("b")]


def test_a_summarizer_must_return_text() -> None:
    memory = SummarizingChatMemory("m", max_messages=1, summarizer=lambda previous, evicted: None)
    with pytest.raises(TypeError, match="returned a NoneType, not a str"):
        memory.add(u("a"), u("b"))
    assert memory.messages() == []


def test_conflicts_until_the_budget_is_spent_raise() -> None:
    memory = SummarizingChatMemory(
        "m", max_messages=2, summarizer=Summarizer(), store=AlwaysConflictingStore(), max_attempts=3
    )
    with pytest.raises(ConcurrentUpdateError, match="3 attempts"):
        memory.add(u("a"))


def test_pop_never_takes_the_summary() -> None:
    memory = SummarizingChatMemory("m", max_messages=3, summarizer=Summarizer())
    memory.add(SystemMessage("s"), u("a"), u("b"), u("c"))
    assert memory.pop() == [u("c")]
    assert memory.pop() == []
    assert texts(memory.messages()) == ["s", "[a,b]"]


def test_set_summarizes_what_does_not_fit_and_keeps_a_given_summary() -> None:
    summarizer = Summarizer()
    hook: list[list[ChatMessage]] = []
    memory = SummarizingChatMemory(
        "m", max_messages=3, summarizer=summarizer, on_evict=lambda memory_id, evicted: hook.append(evicted)
    )
    memory.set([SystemMessage("s"), summary_message("old"), u("a"), u("b")])
    assert texts(memory.messages()) == ["s", "[old,a]", "b"]
    assert summarizer.calls == [("old", ["a"])]
    assert hook == [[u("a")]]
    with pytest.raises(ValueError, match="one summary message"):
        memory.set([summary_message("x"), summary_message("y")])


def test_a_shrunk_limit_applies_to_reads_without_calling_the_summarizer() -> None:
    limit = [4]
    summarizer = Summarizer()
    memory = SummarizingChatMemory("m", max_messages=lambda: limit[0], summarizer=summarizer)
    memory.add(u("a"), u("b"), u("c"), u("d"), u("e"))
    limit[0] = 3
    assert texts(memory.messages()) == ["[a,b]", "d", "e"]
    assert len(summarizer.calls) == 1


def test_oversized_messages_are_summarized_or_refused() -> None:
    class Chars:
        def estimate_message(self, message: ChatMessage) -> int:
            return len(message.text) if isinstance(message, UserMessage) and message.has_single_text() else 3

    summarizer = Summarizer()
    memory = SummarizingChatMemory("m", max_tokens=10, token_count_estimator=Chars(), summarizer=summarizer)
    memory.add(u("a much longer question"))
    assert summarizer.calls == [(None, ["a much longer question"])]
    strict = SummarizingChatMemory(
        "n", max_tokens=10, token_count_estimator=Chars(), summarizer=summarizer, on_oversized="raise"
    )
    with pytest.raises(MessageTooLargeError, match="22 tokens"):
        strict.add(u("a much longer question"))
    assert strict.messages() == []


def test_the_window_converts_to_valid_requests() -> None:
    memory = SummarizingChatMemory("m", max_messages=3, summarizer=Summarizer())
    memory.add(SystemMessage("s"), u("a"), AiMessage("b"), u("c"), AiMessage("d"))
    window = memory.messages()
    assert texts(window) == ["s", "[a,b,c]", "d"]
    openai = to_openai(window)
    assert [m["role"] for m in openai] == ["system", "user", "assistant"]
    system, anthropic = to_anthropic(window)
    assert system == "s" and [m["role"] for m in anthropic] == ["user", "assistant"]
    assert anthropic[0]["content"][1] == {"type": "text", "text": "a,b,c"}
    assert [item["role"] for item in to_responses(window)] == ["system", "user", "assistant"]


def test_arguments_are_checked_at_construction() -> None:
    with pytest.raises(TypeError, match="exactly one of max_tokens or max_messages"):
        SummarizingChatMemory(summarizer=Summarizer())
    with pytest.raises(TypeError, match="exactly one of max_tokens or max_messages"):
        SummarizingChatMemory(max_tokens=5, max_messages=5, summarizer=Summarizer())

    async def later(previous: str | None, evicted: list[ChatMessage]) -> str:
        return ""

    with pytest.raises(TypeError, match=r"chatmemory\.aio\.SummarizingChatMemory"):
        SummarizingChatMemory(max_messages=5, summarizer=later)
    with pytest.raises(TypeError, match="pass max_tokens"):
        SummarizingChatMemory(max_messages=5, summarizer=Summarizer(), token_count_estimator=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_messages must be > 0"):
        SummarizingChatMemory(max_messages=0, summarizer=Summarizer())


def test_split_summary_takes_the_first_of_several() -> None:
    conversation, summary = split_summary([summary_message("one"), u("a"), summary_message("two")])
    assert conversation == [u("a")] and summary is not None and summary_text(summary) == "one"


def test_headroom_summarizes_in_batches_and_appends_in_between() -> None:
    summarizer = Summarizer()
    store = RecordingStore()
    memory = SummarizingChatMemory("m", max_messages=6, headroom=3, summarizer=summarizer, store=store)
    memory.add(SystemMessage("s"))
    for i in range(14):
        memory.add(u(str(i)))
    # Each time the window overflows it is evicted down to 6 - 3 places (the summary's included), so the
    # summarizer runs every fourth add, with four messages.
    assert summarizer.calls == [
        (None, ["0", "1", "2", "3", "4"]),
        ("0,1,2,3,4", ["5", "6", "7", "8"]),
        ("0,1,2,3,4,5,6,7,8", ["9", "10", "11", "12"]),
    ]
    assert texts(memory.messages()) == ["s", "[0,1,2,3,4,5,6,7,8,9,10,11,12]", "13"]
    # The writes between summaries keep the stored window and append the new message.
    before, after = store.writes[-3], store.writes[-2]
    assert after[:-1] == before and after[-1] == u("12")


def test_headroom_is_checked_at_construction() -> None:
    with pytest.raises(ValueError, match="headroom must be >= 0 and below the limit"):
        SummarizingChatMemory(max_messages=4, headroom=4, summarizer=Summarizer())
    with pytest.raises(ValueError, match="headroom"):
        SummarizingChatMemory(max_messages=4, headroom=-1, summarizer=Summarizer())
    with pytest.raises(TypeError, match="headroom must be an int"):
        SummarizingChatMemory(max_messages=4, headroom=1.5, summarizer=Summarizer())  # type: ignore[arg-type]
