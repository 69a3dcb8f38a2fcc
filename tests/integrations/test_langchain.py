"""LangChain messages: the real langchain-core types, a real ``@tool``, round trips and what cannot be held."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core import messages as lc
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.tools import ToolException, tool

from chatmemory import (
    AiMessage,
    AudioContent,
    ChatMessage,
    CustomMessage,
    ImageContent,
    MessageWindowChatMemory,
    PdfFileContent,
    SerializationError,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    VideoContent,
)
from chatmemory.integrations.langchain import from_langchain, to_langchain
from chatmemory.serialization import from_openai
from serialization.strategies import attributes, json_values, texts


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def broken(city: str) -> str:
    """A weather service that is down."""
    raise ToolException(f"no service for {city}")


broken.handle_tool_error = True


def test_a_real_tool_result_reads_with_its_tool_name() -> None:
    result = weather.invoke({"type": "tool_call", "id": "call_1", "name": "weather", "args": {"city": "Munich"}})
    assert isinstance(result, lc.ToolMessage)
    assert from_langchain([result]) == [ToolExecutionResultMessage("call_1", "weather", "sunny in Munich")]


def test_a_failed_tool_result_reads_as_an_error() -> None:
    result = broken.invoke({"type": "tool_call", "id": "call_2", "name": "broken", "args": {"city": "Munich"}})
    assert isinstance(result, lc.ToolMessage)
    assert result.status == "error"
    [message] = from_langchain([result])
    assert message == ToolExecutionResultMessage("call_2", "broken", "no service for Munich", is_error=True)
    [back] = to_langchain([message])
    assert isinstance(back, lc.ToolMessage)
    assert (back.status, back.name, back.tool_call_id) == ("error", "broken", "call_2")


def test_an_ai_message_with_tool_calls() -> None:
    ai = lc.AIMessage(
        content="",
        tool_calls=[{"type": "tool_call", "id": "call_1", "name": "weather", "args": {"city": "München"}}],
        response_metadata={"model_name": "gpt-test", "finish_reason": "tool_calls"},
    )
    [message] = from_langchain([ai])
    assert message == AiMessage(
        None,
        [ToolExecutionRequest("call_1", "weather", '{"city":"München"}')],
        attributes={"model_name": "gpt-test", "finish_reason": "tool_calls"},
    )
    [back] = to_langchain([message])
    assert isinstance(back, lc.AIMessage)
    assert back.tool_calls == ai.tool_calls
    assert back.response_metadata == ai.response_metadata


def test_a_tool_loop_through_a_window_memory() -> None:
    """A LangChain model asks for a tool, the real tool answers; the memory holds it all and gives it back."""
    call = lc.AIMessage(
        content="", tool_calls=[{"type": "tool_call", "id": "c1", "name": "weather", "args": {"city": "Rome"}}]
    )
    model = GenericFakeChatModel(messages=iter([call, lc.AIMessage(content="It is sunny in Rome.")]))
    memory = MessageWindowChatMemory("lc-loop", max_messages=10)
    memory.add(SystemMessage("Be brief."))
    memory.add(UserMessage("Weather in Rome?", name="klaus"))
    answer = model.invoke(to_langchain(memory.messages()))
    memory.add(*from_langchain([answer]))
    assert isinstance(answer, lc.AIMessage)
    for tool_call in answer.tool_calls:
        memory.add(*from_langchain([weather.invoke(tool_call)]))
    memory.add(*from_langchain([model.invoke(to_langchain(memory.messages()))]))
    history = to_langchain(memory.messages())
    assert [type(message) for message in history] == [
        lc.SystemMessage,
        lc.HumanMessage,
        lc.AIMessage,
        lc.ToolMessage,
        lc.AIMessage,
    ]
    assert history[1].name == "klaus"
    assert history[3].name == "weather"
    assert history[3].content == "sunny in Rome"
    assert history[4].content == "It is sunny in Rome."


def test_langchains_openai_messages_carry_the_tool_name() -> None:
    """Issue 13.8: convert_to_openai_messages writes a tool message's name, which from_openai now reads."""
    converted = lc.convert_to_openai_messages(
        [
            lc.AIMessage(content="", tool_calls=[{"type": "tool_call", "id": "c", "name": "weather", "args": {}}]),
            lc.ToolMessage(content="sunny", tool_call_id="c", name="weather"),
        ]
    )
    assert converted[1]["name"] == "weather"
    assert from_openai([converted[1]]) == [ToolExecutionResultMessage("c", "weather", "sunny")]


def test_reasoning_reads_as_thinking() -> None:
    blocks = lc.AIMessage(
        content=[
            {"type": "reasoning", "reasoning": "first"},
            {"type": "reasoning", "reasoning": "then"},
            {"type": "text", "text": "42"},
        ]
    )
    kwargs = lc.AIMessage(content="42", additional_kwargs={"reasoning_content": "because"})
    read = from_langchain([blocks, kwargs])
    assert [(message.text, message.thinking) for message in read if isinstance(message, AiMessage)] == [
        ("42", "first\n\nthen"),
        ("42", "because"),
    ]
    assert to_langchain(read) == [blocks, kwargs]
    [back] = to_langchain([AiMessage("42", thinking="because")])
    assert back.content == [{"type": "reasoning", "reasoning": "because"}, {"type": "text", "text": "42"}]


def test_multimodal_blocks() -> None:
    message = UserMessage(
        [
            TextContent("look"),
            ImageContent(url="https://ex.com/a.png", detail_level="HIGH"),
            ImageContent(base64_data="aGVsbG8=", mime_type="image/png"),
            AudioContent(base64_data="UklGRg==", mime_type="audio/wav"),
            VideoContent(url="https://ex.com/v.mp4"),
            PdfFileContent(base64_data="JVBERi0="),
        ],
        name="klaus",
        attributes={"k": [1, 2]},
    )
    [human] = to_langchain([message])
    assert isinstance(human, lc.HumanMessage)
    assert human.content == [
        {"type": "text", "text": "look"},
        {"type": "image", "url": "https://ex.com/a.png", "extras": {"detail": "high"}},
        {"type": "image", "base64": "aGVsbG8=", "mime_type": "image/png"},
        {"type": "audio", "base64": "UklGRg==", "mime_type": "audio/wav"},
        {"type": "video", "url": "https://ex.com/v.mp4"},
        {"type": "file", "base64": "JVBERi0=", "mime_type": "application/pdf"},
    ]
    assert human.name == "klaus"
    [back] = from_langchain([human])
    assert isinstance(back, UserMessage)
    assert back.contents[-1] == PdfFileContent(base64_data="JVBERi0=", mime_type="application/pdf")
    assert back.contents[:-1] == message.contents[:-1]
    assert back.attributes == {"k": [1, 2]}
    assert to_langchain([back]) == [human]


def test_older_and_provider_content_formats_are_read() -> None:
    human = lc.HumanMessage(
        content=[
            "plain",
            {"type": "image_url", "image_url": {"url": "https://ex.com/a.png", "detail": "low"}},
            {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/"}},
            {"type": "image", "source_type": "url", "url": "https://ex.com/b.png"},
        ]
    )
    [read] = from_langchain([human])
    assert isinstance(read, UserMessage)
    assert read.contents == (
        TextContent("plain"),
        ImageContent(url="https://ex.com/a.png", detail_level="LOW"),
        ImageContent(base64_data="/9j/", mime_type="image/jpeg"),
        ImageContent(url="https://ex.com/b.png"),
    )
    # The content is kept as it was given, and written back so.
    assert read.attributes == {"langchain": {"content": human.content}}
    assert to_langchain([read]) == [human]


def test_arguments_that_are_not_a_json_object_travel_as_invalid_tool_calls() -> None:
    message = AiMessage(
        tool_execution_requests=[ToolExecutionRequest("a", "f", "{oops"), ToolExecutionRequest("b", "g", "")]
    )
    [ai] = to_langchain([message])
    assert isinstance(ai, lc.AIMessage)
    assert ai.tool_calls == [{"type": "tool_call", "id": "b", "name": "g", "args": {}}]
    assert [(call["id"], call["args"]) for call in ai.invalid_tool_calls] == [("a", "{oops")]
    # The order and the strings travel in LangChain's provider format, so they come back as they were.
    assert from_langchain([ai]) == [message]
    without_format = ai.model_copy(update={"additional_kwargs": {}})
    assert from_langchain([without_format]) == [
        AiMessage(
            tool_execution_requests=[ToolExecutionRequest("b", "g", "{}"), ToolExecutionRequest("a", "f", "{oops")]
        )
    ]


def test_arguments_come_back_byte_for_byte() -> None:
    spaced = AiMessage(
        "x", [ToolExecutionRequest("c1", "f", '{"a": 1}'), ToolExecutionRequest("c2", "g", '{"b":[1, 2.0]}')]
    )
    [ai] = to_langchain([spaced])
    assert isinstance(ai, lc.AIMessage)
    assert [call["args"] for call in ai.tool_calls] == [{"a": 1}, {"b": [1, 2.0]}]
    assert [call["function"]["arguments"] for call in ai.additional_kwargs["tool_calls"]] == [
        '{"a": 1}',
        '{"b":[1, 2.0]}',
    ]
    assert from_langchain([ai]) == [spaced]
    compact = AiMessage("x", [ToolExecutionRequest("c1", "f", '{"a":1}')])
    [plain] = to_langchain([compact])
    assert plain.additional_kwargs == {}
    assert from_langchain([plain]) == [compact]


def test_the_raw_arguments_of_a_provider_message_are_kept() -> None:
    """langchain-openai keeps the model's argument strings in additional_kwargs; reading keeps them."""
    ai = lc.AIMessage(
        content="",
        tool_calls=[{"type": "tool_call", "id": "c1", "name": "f", "args": {"a": 1}}],
        additional_kwargs={
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{ "a" : 1 }'}}]
        },
    )
    [message] = from_langchain([ai])
    assert isinstance(message, AiMessage)
    assert message.tool_execution_requests == (ToolExecutionRequest("c1", "f", '{ "a" : 1 }'),)
    assert to_langchain([message]) == [ai]
    # A string that disagrees with args is not taken: args win.
    disagreeing = ai.model_copy(
        update={
            "additional_kwargs": {
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 2}'}}]
            }
        }
    )
    [read] = from_langchain([disagreeing])
    assert isinstance(read, AiMessage)
    assert read.tool_execution_requests == (ToolExecutionRequest("c1", "f", '{"a":1}'),)
    assert to_langchain([read]) == [disagreeing]


RICH: list[lc.BaseMessage] = [
    lc.SystemMessage(content="Be brief."),
    lc.HumanMessage(content="weather?", id="h-1", name="klaus", additional_kwargs={"k": [1, 2.0, True]}),
    lc.HumanMessage(content=[{"type": "text", "text": "look", "id": "blk"}, {"type": "image", "url": "u"}]),
    lc.AIMessage(
        content=[
            {"type": "reasoning", "reasoning": "think", "extras": {"signature": "c2ln"}},
            {"type": "text", "text": "Calling.", "annotations": []},
        ],
        id="run-1",
        name="assistant",
        tool_calls=[{"type": "tool_call", "id": "c1", "name": "weather", "args": {"city": "Rome", "n": 1.0}}],
        usage_metadata={
            "input_tokens": 10,
            "output_tokens": 5,
            "total_tokens": 15,
            "input_token_details": {"cache_read": 3},
        },
        response_metadata={"model_name": "m", "finish_reason": "tool_calls", "logprobs": None},
        additional_kwargs={"refusal": None},
    ),
    lc.ToolMessage(content="sunny", tool_call_id="c1", name="weather", id="t-1", artifact={"raw": [1, "x"]}),
    lc.ToolMessage(content=[{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], tool_call_id="c2"),
    lc.AIMessage(
        content="It is sunny.", id="run-2", usage_metadata={"input_tokens": 1, "output_tokens": 2, "total_tokens": 3}
    ),
]


def test_langchain_messages_come_back_equal_field_for_field() -> None:
    read = from_langchain(RICH)
    back = to_langchain(read)
    assert back == RICH
    for original, written in zip(RICH, back, strict=True):
        assert type(written) is type(original)
        assert written.model_dump() == original.model_dump()
    # The fields the messages hold are what LangChain said.
    ai = read[3]
    assert isinstance(ai, AiMessage)
    assert (ai.text, ai.thinking) == ("Calling.", "think")
    assert ai.tool_execution_requests == (ToolExecutionRequest("c1", "weather", '{"city":"Rome","n":1.0}'),)
    assert ai.attributes["model_name"] == "m"
    assert ai.attributes["langchain"]["usage_metadata"]["input_token_details"] == {"cache_read": 3}
    assert read[5] == ToolExecutionResultMessage(
        "c2",
        None,
        "ab",
        attributes={"langchain": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}},
    )


def test_plain_messages_keep_no_record() -> None:
    plain = [
        lc.HumanMessage(content="hi"),
        lc.AIMessage(content="hello", tool_calls=[{"type": "tool_call", "id": "c", "name": "f", "args": {}}]),
        lc.ToolMessage(content="ok", tool_call_id="c", name="f"),
    ]
    assert all(not message.attributes for message in from_langchain(plain))  # type: ignore[union-attr]


def test_a_chunk_comes_back_as_its_message() -> None:
    chunk = lc.AIMessageChunk(
        content="hi", id="run-9", usage_metadata={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
    )
    [back] = to_langchain(from_langchain([chunk]))
    assert type(back) is lc.AIMessage
    assert (back.content, back.id, back.usage_metadata) == (chunk.content, chunk.id, chunk.usage_metadata)


def test_a_kept_field_that_no_longer_fits_is_not_written() -> None:
    """A message rebuilt with other fields is written from them, not from what was kept for the old ones."""
    [read] = from_langchain([RICH[3]])
    assert isinstance(read, AiMessage)
    changed = AiMessage("Other text.", read.tool_execution_requests, read.thinking, read.attributes)
    [written] = to_langchain([changed])
    assert isinstance(written, lc.AIMessage)
    assert written.text == "Other text."
    assert from_langchain([written])[0].text == "Other text."  # type: ignore[union-attr]
    # What still agrees is kept: the id, the usage, the tool calls.
    assert (written.id, written.usage_metadata, written.tool_calls) == (
        RICH[3].id,
        RICH[3].usage_metadata,  # type: ignore[attr-defined]
        RICH[3].tool_calls,  # type: ignore[attr-defined]
    )
    no_calls = AiMessage(read.text, [], read.thinking, read.attributes)
    [written] = to_langchain([no_calls])
    assert isinstance(written, lc.AIMessage)
    assert written.tool_calls == []


UNSENDABLE: list[Any] = [CustomMessage({"x": 1}), ToolExecutionResultMessage(None, "f", "x"), "not a message"]


@pytest.mark.parametrize("message", UNSENDABLE)
def test_what_langchain_cannot_carry_raises_naming_the_message(message: Any) -> None:
    with pytest.raises(SerializationError, match=r"message 1 \("):
        to_langchain([SystemMessage("s"), message])


def test_an_attribute_named_like_the_record_but_not_one_raises() -> None:
    with pytest.raises(SerializationError, match=r"message 0 \(UserMessage\): its attribute 'langchain' is reserved"):
        to_langchain([UserMessage("x", attributes={"langchain": {"mine": 1}})])


def test_custom_messages_can_be_skipped() -> None:
    assert to_langchain([CustomMessage({"x": 1})], skip_custom=True) == []


UNREADABLE: list[Any] = [
    lc.ToolMessage(content="x", tool_call_id="c", artifact=object()),
    lc.AIMessage(content="x", additional_kwargs={"parsed": object()}),
    lc.AIMessage(content="x", response_metadata={"langchain": 1}),
    lc.SystemMessage(content="x", id="s-1"),
    lc.SystemMessage(content=[{"type": "text", "text": "x", "cache_control": {"type": "ephemeral"}}]),
    lc.SystemMessage(content="x", response_metadata={"a": 1}),
    lc.ChatMessage(role="critic", content="x"),
    lc.FunctionMessage(name="f", content="x"),
    lc.HumanMessage(content=[{"type": "image", "file_id": "file-1"}]),
    lc.HumanMessage(content="x", response_metadata={"when": object()}),
    lc.AIMessage(content=[{"type": "image", "url": "u"}]),
    lc.AIMessage(
        content="",
        invalid_tool_calls=[{"type": "invalid_tool_call", "id": "c", "name": None, "args": "x", "error": None}],
    ),
    lc.ToolMessage(content=[{"type": "image", "url": "u"}], tool_call_id="c"),
    lc.SystemMessage(content=[{"type": "image", "url": "u"}]),
    "not a message",
]


@pytest.mark.parametrize("message", UNREADABLE)
def test_what_chatmemory_cannot_hold_raises(message: Any) -> None:
    with pytest.raises(SerializationError, match="LangChain message 1"):
        from_langchain([lc.HumanMessage(content="x"), message])


def test_a_missing_extra_names_the_module_and_the_pip_command() -> None:
    code = (
        "import sys; sys.modules['langchain_core'] = None\n"
        "import chatmemory\n"
        "try:\n    import chatmemory.integrations.langchain\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.startswith(
        "MissingDependencyError chatmemory.integrations.langchain requires the 'langchain' extra: "
        "pip install 'llm-window-memory[langchain]'"
    ), result.stdout


# -------------------------------------------------------------------------------------- property test

non_empty = texts.filter(bool)
parts = st.one_of(
    st.builds(TextContent, texts),
    st.builds(
        lambda url, level: ImageContent(url=url, detail_level=level),
        texts,
        st.none() | st.sampled_from(["LOW", "MEDIUM", "HIGH", "AUTO", "ULTRA_HIGH", "ORIGINAL"]),
    ),
    st.builds(lambda data, mime: ImageContent(base64_data=data, mime_type=mime), texts, texts),
    st.builds(lambda data, mime: AudioContent(base64_data=data, mime_type=mime), texts, texts),
    st.builds(lambda url: VideoContent(url=url), texts),
    st.builds(lambda data: PdfFileContent(base64_data=data, mime_type="application/pdf"), texts),
)


def _compact(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


requests = st.builds(
    lambda call_id, name, args: ToolExecutionRequest(call_id, name, _compact(args)),
    st.none() | texts,
    texts,
    st.dictionaries(texts, json_values, max_size=3),
)
messages = st.one_of(
    st.builds(SystemMessage, texts),
    st.builds(UserMessage, st.lists(parts, min_size=1, max_size=3), st.none() | texts, attributes),
    st.builds(AiMessage, st.none() | non_empty, st.lists(requests, max_size=2), st.none() | texts, attributes),
    st.builds(ToolExecutionResultMessage, texts, st.none() | texts, texts, st.booleans(), attributes),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(messages, max_size=5))
def test_messages_round_trip(conversation: list[ChatMessage]) -> None:
    assert from_langchain(to_langchain(conversation)) == conversation


# LangChain messages as applications and provider packages build them: ids, names, metadata, usage, content as a
# string or as text blocks, tool calls with any JSON object as args.
metadata = st.dictionaries(texts.filter(lambda key: key != "langchain"), json_values, max_size=3)
optional_ids = st.none() | texts
text_content = texts | st.lists(
    st.fixed_dictionaries({"type": st.just("text"), "text": texts}, optional={"id": texts}), min_size=1, max_size=3
)
usage = st.none() | st.builds(
    lambda given, taken: {"input_tokens": given, "output_tokens": taken, "total_tokens": given + taken},
    st.integers(0, 10**6),
    st.integers(0, 10**6),
)
lc_tool_calls = st.lists(
    st.builds(
        lambda call_id, name, args: {"type": "tool_call", "id": call_id, "name": name, "args": args},
        optional_ids,
        texts,
        st.dictionaries(texts, json_values, max_size=3),
    ),
    max_size=2,
)
lc_messages = st.one_of(
    st.builds(lambda text: lc.SystemMessage(content=text), texts),
    st.builds(
        lambda content, name, message_id, kwargs, meta: lc.HumanMessage(
            content=content, name=name, id=message_id, additional_kwargs=kwargs, response_metadata=meta
        ),
        text_content,
        optional_ids,
        optional_ids,
        metadata,
        metadata,
    ),
    st.builds(
        lambda content, calls, message_id, name, kwargs, meta, tokens: lc.AIMessage(
            content=content,
            tool_calls=calls,
            id=message_id,
            name=name,
            additional_kwargs=kwargs,
            response_metadata=meta,
            usage_metadata=tokens,
        ),
        text_content,
        lc_tool_calls,
        optional_ids,
        optional_ids,
        metadata,
        metadata,
        usage,
    ),
    st.builds(
        lambda content, call_id, name, status, artifact, message_id: lc.ToolMessage(
            content=content, tool_call_id=call_id, name=name, status=status, artifact=artifact, id=message_id
        ),
        text_content,
        texts,
        optional_ids,
        st.sampled_from(["success", "error"]),
        st.none() | json_values,
        optional_ids,
    ),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(lc_messages, max_size=5))
def test_langchain_messages_round_trip(conversation: list[lc.BaseMessage]) -> None:
    back = to_langchain(from_langchain(conversation))
    assert back == conversation
    assert [message.model_dump() for message in back] == [message.model_dump() for message in conversation]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.builds(
            ToolExecutionRequest,
            st.none() | texts,
            texts,
            st.builds(
                lambda value, indent: json.dumps(value, indent=indent, ensure_ascii=False),
                st.dictionaries(texts, json_values, max_size=3),
                st.none() | st.integers(0, 2),
            )
            | texts,
        ),
        max_size=3,
    )
)
def test_any_arguments_come_back_byte_for_byte(requests: list[ToolExecutionRequest]) -> None:
    message = AiMessage("x", requests)
    assert from_langchain(to_langchain([message])) == [message]
