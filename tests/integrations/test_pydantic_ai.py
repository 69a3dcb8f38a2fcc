"""PydanticAI messages: every part kind of the real package round trips, and an agent keeps its history here.

The agent runs on PydanticAI's own ``FunctionModel`` (no network): several turns with tool calls, the history
in a window memory on every backend, checked for what a provider would refuse (a tool return without its call).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import warnings
from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_ai import Agent, ModelMessagesTypeAdapter
from pydantic_ai import messages as pai
from pydantic_ai.models.function import AgentInfo, FunctionModel

from chatmemory import (
    AiMessage,
    ChatMemoryStore,
    CustomMessage,
    ImageContent,
    MessageWindowChatMemory,
    SerializationError,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)
from chatmemory.integrations.pydantic_ai import from_pydantic_ai, to_pydantic_ai
from serialization.strategies import json_values, texts

WHEN = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=timezone.utc)


def _dumped(messages: list[pai.ModelMessage]) -> Any:
    return json.loads(ModelMessagesTypeAdapter.dump_json(messages))


def _as_loaded(messages: list[pai.ModelMessage]) -> Any:
    """The messages as PydanticAI loads them back from its own JSON (its upgrades of deprecated parts applied)."""
    return _dumped(ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages)))


def _round_trips(messages: list[pai.ModelMessage]) -> list[Any]:
    read = from_pydantic_ai(messages)
    assert _dumped(to_pydantic_ai(read)) == _as_loaded(messages)
    return read


def _retry_prompt(**fields: Any) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated in PydanticAI 2, still what older histories hold
        return pai.RetryPromptPart(**fields)


EVERY_PART: list[pai.ModelMessage] = [
    pai.ModelRequest(
        parts=[
            pai.SystemPromptPart("You are terse.", timestamp=WHEN),
            pai.SystemPromptPart("Use metric units.", timestamp=WHEN, dynamic_ref="units"),
            pai.UserPromptPart(
                [
                    "What is on this picture, and the weather?",
                    pai.ImageUrl("https://ex.com/a.png"),
                    pai.BinaryContent(b"\x89PNG\r\n", media_type="image/png"),
                    pai.AudioUrl("https://ex.com/a.mp3"),
                    pai.VideoUrl("https://ex.com/v.mp4"),
                    pai.DocumentUrl("https://ex.com/d.pdf"),
                    pai.BinaryContent(b"%PDF-1.7", media_type="application/pdf"),
                    pai.DocumentUrl("https://ex.com/notes.txt"),
                    pai.CachePoint(),
                ],
                timestamp=WHEN,
            ),
        ],
        instructions="Answer in one line.",
        run_id="run-1",
        metadata={"tenant": "t1"},
    ),
    pai.ModelResponse(
        parts=[
            pai.ThinkingPart(
                "The user wants two things.", id="th_1", signature="c2lnbmF0dXJl", provider_name="anthropic"
            ),
            pai.TextPart("Looking it up. ", id="msg_1"),
            pai.TextPart("One moment."),
            pai.ToolCallPart("weather", {"city": "Rome"}, tool_call_id="call_1"),
            pai.ToolCallPart("weather", '{"city": "Oslo" }', tool_call_id="call_2"),
            pai.ToolCallPart("clock", None, tool_call_id="call_3"),
            pai.NativeToolCallPart("web_search", {"query": "rome"}, tool_call_id="ws_1", provider_name="openai"),
            pai.NativeToolReturnPart("web_search", {"hits": 3}, tool_call_id="ws_1", provider_name="openai"),
            pai.FilePart(pai.BinaryContent(b"GIF89a", media_type="image/gif")),
        ],
        usage=pai.RequestUsage(input_tokens=120, output_tokens=40, cache_read_tokens=100),
        model_name="claude-test",
        timestamp=WHEN,
        provider_name="anthropic",
        provider_response_id="resp_1",
        finish_reason="tool_call",
    ),
    pai.ModelRequest(
        parts=[
            pai.ToolReturnPart("weather", "sunny, 24 °C", tool_call_id="call_1", timestamp=WHEN),
            pai.ToolReturnPart("weather", {"sky": "rain", "celsius": 9}, tool_call_id="call_2", timestamp=WHEN),
            _retry_prompt(content="clock takes no arguments", tool_name="clock", tool_call_id="call_3", timestamp=WHEN),
        ]
    ),
    pai.ModelResponse(parts=[pai.TextPart("Rome sunny, Oslo rain.")], timestamp=WHEN),
    pai.ModelRequest(
        parts=[
            _retry_prompt(content="Answer as JSON.", timestamp=WHEN),
            pai.CompactionPart("earlier turns, compacted"),
            pai.SystemPromptPart("A system prompt after other parts.", timestamp=WHEN),
        ]
    ),
    pai.ModelResponse(parts=[pai.ThinkingPart(""), pai.TextPart('{"answer": "ok"}')], timestamp=WHEN),
    pai.ModelRequest(parts=[pai.SystemPromptPart("A request of system prompts alone.", timestamp=WHEN)]),
]


def test_every_part_kind_round_trips() -> None:
    _round_trips(EVERY_PART)


def test_the_message_fields_say_what_the_parts_say() -> None:
    read = from_pydantic_ai(EVERY_PART)
    assert read[0] == SystemMessage("You are terse.\n\nUse metric units.")
    user = read[1]
    assert isinstance(user, UserMessage)
    assert user.contents[:3] == (
        TextContent("What is on this picture, and the weather?"),
        ImageContent(url="https://ex.com/a.png"),
        ImageContent(base64_data="iVBORw0K", mime_type="image/png"),
    )
    assert len(user.contents) == 7  # the text file and the cache point are kept in the record only
    ai = read[2]
    assert isinstance(ai, AiMessage)
    assert (ai.text, ai.thinking) == ("Looking it up. One moment.", "The user wants two things.")
    assert ai.tool_execution_requests == (
        ToolExecutionRequest("call_1", "weather", '{"city":"Rome"}'),
        ToolExecutionRequest("call_2", "weather", '{"city": "Oslo" }'),
        ToolExecutionRequest("call_3", "clock", ""),
    )
    assert ai.attributes["pydantic_ai"]["response"]["model_name"] == "claude-test"
    assert read[3:6] == [
        ToolExecutionResultMessage("call_1", "weather", "sunny, 24 °C", attributes=read[3].attributes),
        ToolExecutionResultMessage("call_2", "weather", '{"sky":"rain","celsius":9}', attributes=read[4].attributes),
        ToolExecutionResultMessage("call_3", "clock", "clock takes no arguments", True, read[5].attributes),
    ]
    assert [type(message).__name__ for message in read[7:]] == [
        "UserMessage",
        "CustomMessage",
        "CustomMessage",
        "AiMessage",
        "SystemMessage",
        "CustomMessage",
    ]


def test_messages_of_other_origin_are_written_from_their_fields() -> None:
    native = [
        SystemMessage("Be brief."),
        UserMessage("Weather?"),
        AiMessage("Checking.", [ToolExecutionRequest("c1", "weather", '{"city":  "Rome"}')], thinking="hm"),
        ToolExecutionResultMessage("c1", "weather", "sunny"),
        ToolExecutionResultMessage("c2", "weather", "down", is_error=True),
        AiMessage("Sunny."),
    ]
    written = to_pydantic_ai(native)
    assert [type(message) for message in written] == [
        pai.ModelRequest,
        pai.ModelResponse,
        pai.ModelRequest,
        pai.ModelResponse,
    ]
    request, response, results, _ = written
    assert [part.part_kind for part in request.parts] == ["system-prompt", "user-prompt"]
    call = response.parts[2]
    assert isinstance(call, pai.ToolCallPart)
    assert (call.tool_call_id, call.args) == ("c1", '{"city":  "Rome"}')  # the string, byte for byte
    assert [part.outcome for part in results.parts] == ["success", "failed"]  # type: ignore[union-attr]
    back = from_pydantic_ai(written)
    assert [_fields(message) for message in back] == [_fields(message) for message in native]


def _fields(message: Any) -> Any:
    return (
        message
        if isinstance(message, SystemMessage)
        else (
            type(message),
            *[
                getattr(message, name)
                for name in ("contents", "text", "tool_execution_requests", "thinking", "id", "is_error")
                if hasattr(message, name)
            ],
        )
    )


def test_a_kept_part_that_no_longer_fits_is_not_written() -> None:
    read = from_pydantic_ai(EVERY_PART[:3])
    ai = read[2]
    assert isinstance(ai, AiMessage)
    changed = AiMessage("Another answer.", [], None, ai.attributes)
    [response] = to_pydantic_ai([changed])
    assert isinstance(response, pai.ModelResponse)
    assert [part.part_kind for part in response.parts] == ["text"]
    assert response.parts[0].content == "Another answer."  # type: ignore[union-attr]
    assert (response.model_name, response.timestamp) == ("claude-test", WHEN)  # the response's own fields stay
    result = read[3]
    assert isinstance(result, ToolExecutionResultMessage)
    [request] = to_pydantic_ai([ToolExecutionResultMessage("call_1", "weather", "hail", attributes=result.attributes)])
    assert request.parts[0].content == "hail"  # type: ignore[union-attr]


def test_a_window_starting_after_its_request_carrier_still_writes() -> None:
    """What a window leaves (the system message, then a later turn) groups into valid requests."""
    read = from_pydantic_ai(EVERY_PART)
    window = [read[0], *read[6:]]
    written = to_pydantic_ai(window)
    assert isinstance(written[0], pai.ModelRequest)
    assert written[0].parts[0].part_kind == "system-prompt"
    assert all(isinstance(message, (pai.ModelRequest, pai.ModelResponse)) for message in written)


UNWRITABLE: list[Any] = [
    CustomMessage({"x": 1}),
    ToolExecutionResultMessage(None, "f", "x"),
    ToolExecutionResultMessage("c", None, "x"),
    UserMessage("x", attributes={"pydantic_ai": {"mine": 1}}),
    UserMessage(ImageContent(base64_data="aGk=")),
]


@pytest.mark.parametrize("message", UNWRITABLE)
def test_what_pydantic_ai_cannot_carry_raises_naming_the_message(message: Any) -> None:
    with pytest.raises(SerializationError, match=r"message 1 \("):
        to_pydantic_ai([UserMessage("first"), message])


def test_custom_messages_can_be_skipped() -> None:
    [request] = to_pydantic_ai([UserMessage("a"), CustomMessage({"x": 1})], skip_custom=True)
    assert [(part.part_kind, part.content) for part in request.parts] == [("user-prompt", "a")]  # type: ignore[union-attr]


def test_what_is_no_model_message_raises() -> None:
    with pytest.raises(SerializationError, match=r"PydanticAI message 0 \(dict\): a dict is not a ModelRequest"):
        from_pydantic_ai([{"kind": "request", "parts": []}])  # type: ignore[list-item]


def test_a_missing_extra_names_the_module_and_the_pip_command() -> None:
    code = (
        "import sys; sys.modules['pydantic_ai'] = None\n"
        "try:\n    import chatmemory.integrations.pydantic_ai\n"
        "except ImportError as exc:\n    print(type(exc).__name__, exc)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.startswith(
        "MissingDependencyError chatmemory.integrations.pydantic_ai requires the 'pydantic-ai' extra: "
        "pip install 'llm-window-memory[pydantic-ai]'"
    ), result.stdout


# ------------------------------------------------------------------------------------------ hypothesis

ids = st.text(alphabet="abcdef0123456789_", min_size=1, max_size=8)
times = st.datetimes(timezones=st.just(timezone.utc))
user_items = st.one_of(
    texts,
    st.builds(lambda url: pai.ImageUrl(url), st.just("https://ex.com/i.png")),
    st.builds(lambda data: pai.BinaryContent(data, media_type="image/png"), st.binary(max_size=12)),
    st.builds(lambda data: pai.BinaryContent(data, media_type="audio/wav"), st.binary(max_size=12)),
    st.just(pai.CachePoint()),
)
request_parts = st.one_of(
    st.builds(lambda text, when: pai.UserPromptPart(text, timestamp=when), texts, times),
    st.builds(
        lambda items, when: pai.UserPromptPart(items, timestamp=when),
        st.lists(user_items, min_size=1, max_size=3),
        times,
    ),
    st.builds(
        lambda name, content, call_id, when: pai.ToolReturnPart(name, content, tool_call_id=call_id, timestamp=when),
        texts,
        texts | st.dictionaries(texts, json_values, max_size=2),
        ids,
        times,
    ),
    st.builds(
        lambda content, name, call_id, when: _retry_prompt(
            content=content, tool_name=name, tool_call_id=call_id, timestamp=when
        ),
        texts,
        st.none() | texts,
        ids,
        times,
    ),
)
requests = st.builds(
    lambda systems, parts, instructions: pai.ModelRequest(
        parts=[pai.SystemPromptPart(text, timestamp=WHEN) for text in systems] + parts, instructions=instructions
    ),
    st.lists(texts, max_size=2),
    st.lists(request_parts, min_size=1, max_size=3),
    st.none() | texts,
)
response_parts = st.one_of(
    st.builds(lambda text, part_id: pai.TextPart(text, id=part_id), texts, st.none() | ids),
    st.builds(
        lambda text, signature, provider: pai.ThinkingPart(text, signature=signature, provider_name=provider),
        texts,
        st.none() | texts,
        st.none() | st.just("anthropic"),
    ),
    st.builds(
        lambda name, args, call_id: pai.ToolCallPart(name, args, tool_call_id=call_id),
        texts,
        st.none() | texts | st.dictionaries(texts, json_values, max_size=2),
        ids,
    ),
)
responses = st.builds(
    lambda parts, model, tokens, when: pai.ModelResponse(
        parts=parts, model_name=model, usage=pai.RequestUsage(input_tokens=tokens), timestamp=when
    ),
    st.lists(response_parts, max_size=4),
    st.none() | texts,
    st.integers(0, 10**6),
    times,
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(requests, responses), max_size=3))
def test_conversations_round_trip(turns: list[tuple[pai.ModelRequest, pai.ModelResponse]]) -> None:
    _round_trips([message for turn in turns for message in turn])


# ------------------------------------------------------------------------------------ an agent's history


def _model(seen: list[list[pai.ModelMessage]]) -> FunctionModel:
    """Asks for the weather of the city the user named, then answers from the tool's return."""

    def respond(messages: list[pai.ModelMessage], info: AgentInfo) -> pai.ModelResponse:
        seen.append(list(messages))
        last = messages[-1]
        assert isinstance(last, pai.ModelRequest)
        returns = [part for part in last.parts if isinstance(part, pai.ToolReturnPart)]
        if returns:
            return pai.ModelResponse(parts=[pai.TextPart(f"It is {returns[0].content}.")])
        prompt = next(part for part in last.parts if isinstance(part, pai.UserPromptPart))
        city = str(prompt.content).rsplit(" ", 1)[-1]
        return pai.ModelResponse(
            parts=[
                pai.ThinkingPart("need the tool", signature=f"sig-{city}"),
                pai.ToolCallPart("weather", {"city": city}, tool_call_id=f"call-{city}"),
            ]
        )

    return FunctionModel(respond)


def _orphan_returns(messages: list[pai.ModelMessage]) -> list[str]:
    calls: set[str] = set()
    orphans: list[str] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, pai.ToolCallPart):
                calls.add(part.tool_call_id)
            elif isinstance(part, pai.ToolReturnPart) and part.tool_call_id not in calls:
                orphans.append(part.tool_call_id)
    return orphans


def test_an_agent_keeps_its_history_in_a_window_memory(store: ChatMemoryStore) -> None:
    seen: list[list[pai.ModelMessage]] = []
    agent = Agent(_model(seen), system_prompt="You report the weather.")

    @agent.tool_plain
    def weather(city: str) -> str:
        """The weather in a city."""
        return f"sunny in {city}"

    # A turn is 4 messages (prompt, call, return, answer): a window of 1 + 6 would begin at a tool return.
    memory = MessageWindowChatMemory("agent", max_messages=7, store=store)
    cities = ["Rome", "Oslo", "Lima", "Pune", "Kyiv"]
    # run_sync runs on the thread's default loop, and makes one (left open) when there is none: give it one
    # and close it after, or it is collected, unclosed, in whatever test runs then.
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        for city in cities:
            result = agent.run_sync(f"Weather in {city}", message_history=to_pydantic_ai(memory.messages()))
            assert result.output == f"It is sunny in {city}."
            memory.add(*from_pydantic_ai(result.new_messages()))
    finally:
        asyncio.set_event_loop(None)
        loop.close()

    # Every request the model got: no tool return without its call, the system prompt kept, bounded.
    for messages in seen:
        assert _orphan_returns(messages) == []
        first = messages[0]
        assert isinstance(first, pai.ModelRequest)
        assert first.parts[0].part_kind == "system-prompt"
    assert max(len(messages) for messages in seen) <= 9  # the window's messages, grouped, and the new turn
    window = memory.messages()
    assert len(window) == 6  # the tool return at the head left with its call
    assert isinstance(window[1], AiMessage)
    assert window[0] == SystemMessage("You report the weather.")
    # The last turn comes back from the store as the agent made it: signatures, ids, timestamps.
    last_turn = result.new_messages()
    assert _dumped(to_pydantic_ai(window)[-len(last_turn) :]) == _dumped(last_turn)
