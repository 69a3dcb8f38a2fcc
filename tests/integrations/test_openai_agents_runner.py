"""The real OpenAI Agents SDK runs multi-turn tool conversations on a ChatMemorySession, on every async backend.

The model is the SDK's own ``OpenAIResponsesModel`` with the network replaced (see openai_agents_transport):
what the SDK sends and stores is what it would with the API. The same script on the SDK's ``SQLiteSession``
is the reference: the model must be sent the same history, and the session must hold the same items.
"""

from __future__ import annotations

from typing import Any

import pytest
from agents import Runner, RunResult, RunResultStreaming, SQLiteSession

from chatmemory import aio
from chatmemory.integrations.openai_agents import ChatMemorySession
from integrations.openai_agents_transport import ScriptedResponses, call, say, weather_conversation


async def _run(method: str, agent: Any, text: Any, session: Any) -> RunResult | RunResultStreaming:
    if method == "run":
        return await Runner.run(agent, text, session=session)
    streamed = Runner.run_streamed(agent, text, session=session)
    async for _event in streamed.stream_events():
        pass
    return streamed


async def _converse(session: Any, method: str) -> tuple[list[Any], list[dict[str, Any]]]:
    inputs, outputs = weather_conversation()
    script = ScriptedResponses(outputs)
    agent = script.agent()
    finals = [(await _run(method, agent, text, session)).final_output for text in inputs]
    return finals, script.requests


@pytest.mark.parametrize("method", ["run", "run_streamed"])
async def test_tool_conversation_matches_sqlite_session(async_store: aio.ChatMemoryStore, method: str) -> None:
    reference = SQLiteSession("reference")
    try:
        expected_finals, expected_requests = await _converse(reference, method)
        expected_items = await reference.get_items()
    finally:
        reference.close()
    session = ChatMemorySession("agents-run", store=async_store)

    finals, requests = await _converse(session, method)

    assert finals == expected_finals == ["Munich and Rome: sunny.", "Paris: sunny.", "The weather in Munich and Rome."]
    assert [request["input"] for request in requests] == [request["input"] for request in expected_requests]
    assert await session.get_items() == expected_items
    # Reasoning comes back with its encrypted content, calls with their item ids and statuses.
    assert requests[-1]["input"][1]["encrypted_content"] == "gAAAA-encrypted-1"
    assert requests[-1]["input"][2]["id"] == "fc_c1"
    assert len(requests[-1]["input"]) == len(expected_items) - 1


async def test_the_last_turn_sees_the_whole_history(async_store: aio.ChatMemoryStore) -> None:
    session = ChatMemorySession("agents-history", store=async_store)
    _, requests = await _converse(session, "run")
    history = await session.get_items()
    # The last request held everything stored before the last answer: history minus that answer.
    assert requests[-1]["input"] == history[:-1]
    assert history[-1]["content"][0]["text"] == "The weather in Munich and Rome."


async def test_a_window_keeps_prompts_valid_and_the_system_message(async_store: aio.ChatMemoryStore) -> None:
    session = ChatMemorySession("agents-window", store=async_store, max_messages=5)
    outputs = []
    for turn in range(4):
        outputs += [[call(f"c{turn}", f"city {turn}")], [say(turn, f"answer {turn}")]]
    script = ScriptedResponses(outputs)
    agent = script.agent()
    system = {"role": "system", "content": "Answer in French."}
    await Runner.run(agent, [system, {"role": "user", "content": "question 0"}], session=session)
    for turn in range(1, 4):
        await Runner.run(agent, f"question {turn}", session=session)

    for request in script.requests:
        calls = {item["call_id"] for item in request["input"] if item.get("type") == "function_call"}
        outputs_sent = [item["call_id"] for item in request["input"] if item.get("type") == "function_call_output"]
        assert set(outputs_sent) <= calls, "a function_call_output was sent without its function_call"
    items = await session.get_items()
    assert items[0] == system
    assert items[1:] == [{"role": "user", "content": "question 3"}, *_turn_items(script, 3)]


def _turn_items(script: ScriptedResponses, turn: int) -> list[dict[str, Any]]:
    # The call, its output and the answer of one turn, as the SDK stores them.
    last = script.requests[-1]["input"]
    return [*last[-2:], say(turn, f"answer {turn}")]


@pytest.mark.redis
async def test_a_session_in_a_langchain4j_shared_memory() -> None:
    # The SDK's items in LangChain4j's JSON: what they hold beyond the message fields rides in attributes.
    from support.backends.langchain4j_redis import open_async_backend

    backend = open_async_backend()
    store = await backend.make_store()
    try:
        reference = SQLiteSession("reference")
        try:
            _, expected_requests = await _converse(reference, "run")
            expected_items = await reference.get_items()
        finally:
            reference.close()
        session = ChatMemorySession("agents-lc4j", store=store)
        _, requests = await _converse(session, "run")
        assert [request["input"] for request in requests] == [request["input"] for request in expected_requests]
        assert await session.get_items() == expected_items
    finally:
        await backend.close_store(store)
