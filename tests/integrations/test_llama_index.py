"""LlamaIndex messages: every role and block kind of the real package round trips; chat messages go there and back."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llama_index.core.base.llms.types import (
    AudioBlock,
    CacheControl,
    CachePoint,
    DocumentBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    VideoBlock,
)
from llama_index.core.llms import ChatMessage, MessageRole
from llama_index.core.tools import ToolSelection

from chatmemory import (
    AiMessage,
    CustomMessage,
    ImageContent,
    SerializationError,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.core.messages import ChatMessage as ChatMessageOfOurs
from chatmemory.integrations.llama_index import RECORD_ATTRIBUTE, from_llama_index, to_llama_index
from serialization.strategies import json_values, texts

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


def _dumps(messages: list[ChatMessage]) -> list[Any]:
    return [m.model_dump(mode="json") for m in messages]


def _round_trips(messages: list[ChatMessage]) -> list[Any]:
    read = from_llama_index(messages)
    assert len(read) == len(messages)  # one each: positions mean the same on both sides
    assert _dumps(to_llama_index(read)) == _dumps(messages)
    return read


def test_plain_messages_are_plain_chat_messages() -> None:
    messages = [
        ChatMessage(role="system", content="Be brief."),
        ChatMessage(role="user", content="hi", additional_kwargs={"name": "klaus"}),
        ChatMessage(role="assistant", content="hello"),
        ChatMessage(role="tool", content="sunny", additional_kwargs={"tool_call_id": "c1", "name": "weather"}),
    ]
    assert _round_trips(messages) == [
        SystemMessage("Be brief."),
        UserMessage("hi", name="klaus"),
        AiMessage("hello"),
        ToolExecutionResultMessage("c1", "weather", "sunny"),
    ]


def test_every_block_kind_round_trips() -> None:
    user = ChatMessage(
        role="user",
        blocks=[
            TextBlock(text="look"),
            ImageBlock(url="https://x.test/a.png", detail="low"),
            ImageBlock(image=PNG),
            AudioBlock(url="https://x.test/a.mp3"),
            VideoBlock(url="https://x.test/v.mp4", fps=2),
            DocumentBlock(data=b"%PDF-1.4 x", title="report"),
            DocumentBlock(url="https://x.test/notes.txt"),
            CachePoint(cache_control=CacheControl(type="ephemeral")),
        ],
    )
    [read] = _round_trips([user])
    assert isinstance(read, UserMessage)
    assert read.contents[:2] == (
        TextContent("look"),
        ImageContent(url="https://x.test/a.png", mime_type="image/png", detail_level="LOW"),
    )
    assert RECORD_ATTRIBUTE in read.attributes  # the cache point, the title, the text document


def test_thinking_and_tool_calls_in_blocks() -> None:
    answer = ChatMessage(
        role="assistant",
        blocks=[
            ThinkingBlock(content="first", additional_information={"signature": "c2ln"}),
            ThinkingBlock(content="second"),
            TextBlock(text="Let me look."),
            ToolCallBlock(tool_call_id="c1", tool_name="weather", tool_kwargs={"city": "Rome"}),
            ToolCallBlock(tool_call_id="c2", tool_name="raw", tool_kwargs='{"a": 1}'),
        ],
    )
    [read] = _round_trips([answer])
    assert read == AiMessage(
        "Let me look.",
        [ToolExecutionRequest("c1", "weather", '{"city":"Rome"}'), ToolExecutionRequest("c2", "raw", '{"a": 1}')],
        "first\n\nsecond",
        attributes=read.attributes,
    )


def test_tool_calls_in_additional_kwargs_openai_shape_and_tool_selections() -> None:
    openai_shape = ChatMessage(
        role="assistant",
        content=None,
        additional_kwargs={
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Rome"}'}}
            ]
        },
    )
    selection = ChatMessage(
        role="assistant",
        content="",
        additional_kwargs={"tool_calls": [ToolSelection(tool_id="c2", tool_name="f", tool_kwargs={"x": 1})]},
    )
    first, second = from_llama_index([openai_shape, selection])
    assert isinstance(first, AiMessage) and isinstance(second, AiMessage)
    assert first.tool_execution_requests == (ToolExecutionRequest("c1", "weather", '{"city": "Rome"}'),)
    assert second.tool_execution_requests == (ToolExecutionRequest("c2", "f", '{"x":1}'),)
    assert second.text == ""
    # Objects in additional_kwargs come back as their JSON, as from LlamaIndex's own persisted stores.
    assert _dumps(to_llama_index([first, second])) == _dumps([openai_shape, selection])


def test_roles_and_messages_no_class_holds_are_kept_whole() -> None:
    messages = [
        ChatMessage(role=MessageRole.DEVELOPER, content="dev"),
        ChatMessage(role="system", content="with kwargs", additional_kwargs={"cache": True}),
        ChatMessage(role="system", blocks=[TextBlock(text="a"), TextBlock(text="b")]),
        ChatMessage(role="user", blocks=[]),
        ChatMessage(role="user", blocks=[CachePoint(cache_control=CacheControl(type="ephemeral"))]),
        ChatMessage(role=MessageRole.MODEL, content="gemini"),
        ChatMessage(role=MessageRole.FUNCTION, content="42", additional_kwargs={"name": "f"}),
    ]
    read = _round_trips(messages)
    assert [type(m).__name__ for m in read] == [
        "CustomMessage",
        "CustomMessage",
        "CustomMessage",
        "CustomMessage",
        "CustomMessage",
        "AiMessage",
        "ToolExecutionResultMessage",
    ]


def test_chat_messages_of_other_origin_go_there_and_back() -> None:
    messages: list[ChatMessageOfOurs] = [
        SystemMessage("s"),
        UserMessage([TextContent("see"), ImageContent(base64_data="iVBORw0KGgo=", mime_type="image/png")], name="n"),
        AiMessage(
            "calling",
            [ToolExecutionRequest("c1", "f", '{"a":1}'), ToolExecutionRequest(None, "g", '{"b": 2}')],
            thinking="hmm",
        ),
        ToolExecutionResultMessage("c1", "f", "done"),
        ToolExecutionResultMessage(None, None, "anonymous"),
        AiMessage(None),
    ]
    written = to_llama_index(messages)
    assert from_llama_index(written) == messages
    assert written[2].blocks[2] == ToolCallBlock(tool_call_id="c1", tool_name="f", tool_kwargs={"a": 1})
    assert written[2].blocks[3] == ToolCallBlock(tool_call_id=None, tool_name="g", tool_kwargs='{"b": 2}')


def test_a_record_that_no_longer_agrees_gives_way_to_the_fields() -> None:
    [read] = from_llama_index([ChatMessage(role="assistant", blocks=[TextBlock(text="a"), TextBlock(text="b")])])
    assert isinstance(read, AiMessage)
    edited = AiMessage("rewritten", attributes=read.attributes)
    assert _dumps(to_llama_index([edited])) == _dumps([ChatMessage(role="assistant", content="rewritten")])


def test_what_llama_index_cannot_carry_raises_naming_the_message() -> None:
    with pytest.raises(SerializationError, match=r"message 1 \(CustomMessage\): a CustomMessage keeping no"):
        to_llama_index([UserMessage("a"), CustomMessage({"note": 1})])
    with pytest.raises(SerializationError, match=r"message 0 \(UserMessage\): its attribute 'llama_index' is reserved"):
        to_llama_index([UserMessage("a", attributes={RECORD_ATTRIBUTE: "mine"})])
    damaged = CustomMessage({RECORD_ATTRIBUTE: {"role": "nobody", "additional_kwargs": {}, "blocks": []}})
    with pytest.raises(SerializationError, match="the LlamaIndex message it keeps no longer loads"):
        to_llama_index([damaged])
    with pytest.raises(SerializationError, match=r"LlamaIndex message 0 \(dict\): a dict is not a LlamaIndex"):
        from_llama_index([{"role": "user"}])  # type: ignore[list-item]
    with pytest.raises(SerializationError, match=r"LlamaIndex message 0 \(ChatMessage\)"):
        from_llama_index([ChatMessage(role="user", content="x", additional_kwargs={"n": object()})])


def test_a_missing_extra_names_the_module_and_the_pip_command() -> None:
    code = (
        "import sys; sys.modules['llama_index.core'] = None\n"
        "try:\n    import chatmemory.integrations.llama_index\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.startswith(
        "MissingDependencyError chatmemory.integrations.llama_index requires the 'llama-index' extra: "
        "pip install 'llm-window-memory[llama-index]'"
    ), result.stdout


# ------------------------------------------------------------------------------------------ hypothesis

ids = st.none() | st.text(alphabet="abcdef0123456789_", min_size=1, max_size=8)
kwargs = st.dictionaries(st.sampled_from(["name", "tool_call_id", "extra", "tool_calls"]), json_values, max_size=3)
blocks = st.one_of(
    st.builds(lambda text: TextBlock(text=text), texts),
    st.builds(
        lambda url, detail: ImageBlock(url=url, detail=detail), st.just("https://x.test/i.png"), st.none() | texts
    ),
    st.builds(lambda data: ImageBlock(image=data, image_mimetype="image/png"), st.binary(min_size=1, max_size=12)),
    st.builds(
        lambda data: DocumentBlock(data=data, document_mimetype="application/pdf"), st.binary(min_size=1, max_size=12)
    ),
    st.builds(lambda text, extra: ThinkingBlock(content=text, additional_information=extra), st.none() | texts, kwargs),
    st.builds(
        lambda call_id, name, arguments: ToolCallBlock(tool_call_id=call_id, tool_name=name, tool_kwargs=arguments),
        ids,
        texts,
        texts | st.dictionaries(texts, json_values, max_size=3),
    ),
    st.just(CachePoint(cache_control=CacheControl(type="ephemeral"))),
)
llama_messages = st.builds(
    lambda role, given_blocks, given_kwargs: ChatMessage(
        role=role, blocks=given_blocks, additional_kwargs=given_kwargs
    ),
    st.sampled_from(list(MessageRole)),
    st.lists(blocks, max_size=4),
    kwargs,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(llama_messages, max_size=5))
def test_any_conversation_round_trips(messages: list[ChatMessage]) -> None:
    _round_trips(messages)
