"""A scripted model for the OpenAI Agents SDK: the real ``OpenAIResponsesModel`` over a mocked HTTP transport.

The SDK builds its requests and parses the replies as it does against the API; only the network is
replaced by an ``httpx.MockTransport`` that answers with the next scripted ``output`` and records every
request body, so a test can check what history the model was sent.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from agents import Agent, function_tool, set_tracing_disabled
from agents.models.openai_responses import OpenAIResponsesModel
from openai import AsyncOpenAI

# Traces would be exported to the network: the tests run without them.
set_tracing_disabled(True)


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


class ScriptedResponses:
    """Answers each Responses API request with the next scripted list of output items."""

    def __init__(self, outputs: list[list[dict[str, Any]]]) -> None:
        self.outputs = list(outputs)
        self.requests: list[dict[str, Any]] = []

    def _handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        if not self.outputs:
            return httpx.Response(500, json={"error": {"message": "the script has no more responses"}})
        response = _response(len(self.requests), self.outputs.pop(0))
        if body.get("stream"):
            return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=_events(response))
        return httpx.Response(200, json=response)

    def client(self) -> AsyncOpenAI:
        """An OpenAI client whose requests this script answers (no network)."""
        transport = httpx.MockTransport(self._handle)
        return AsyncOpenAI(api_key="test-key", http_client=httpx.AsyncClient(transport=transport), max_retries=0)

    def agent(self, **options: Any) -> Agent[Any]:
        """An agent on the scripted model, with the ``weather`` tool."""
        model = OpenAIResponsesModel("gpt-test", self.client())
        return Agent(name="assistant", instructions="Be brief.", model=model, tools=[weather], **options)


def _response(number: int, output: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": f"resp_{number}",
        "object": "response",
        "created_at": 0,
        "model": "gpt-test",
        "output": output,
        "status": "completed",
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 1,
            "output_tokens": 1,
            "total_tokens": 2,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 0},
        },
    }


def _events(response: dict[str, Any]) -> bytes:
    """The server-sent events of a streamed response: created, each item added and done, completed."""
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": {**response, "output": [], "status": "in_progress"}}
    ]
    for index, item in enumerate(response["output"]):
        events.append({"type": "response.output_item.added", "output_index": index, "item": item})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    events.append({"type": "response.completed", "response": response})
    return b"".join(
        f"event: {event['type']}\ndata: {json.dumps({**event, 'sequence_number': number})}\n\n".encode()
        for number, event in enumerate(events)
    )


def reasoning(number: int, summary: str) -> dict[str, Any]:
    """A reasoning output item with a summary and encrypted content."""
    return {
        "type": "reasoning",
        "id": f"rs_{number}",
        "summary": [{"type": "summary_text", "text": summary}],
        "encrypted_content": f"gAAAA-encrypted-{number}",
    }


def call(call_id: str, city: str) -> dict[str, Any]:
    """A completed ``weather`` function call output item."""
    return {
        "type": "function_call",
        "id": f"fc_{call_id}",
        "call_id": call_id,
        "name": "weather",
        "arguments": json.dumps({"city": city}),
        "status": "completed",
    }


def say(number: int, text: str) -> dict[str, Any]:
    """An assistant message output item."""
    return {
        "type": "message",
        "id": f"msg_{number}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def weather_conversation() -> tuple[list[str], list[list[dict[str, Any]]]]:
    """Three user turns and the model's scripted outputs: reasoning and two parallel calls, answers, one call."""
    inputs = ["How is the weather in Munich and Rome?", "And in Paris?", "Thanks. What did I ask first?"]
    outputs = [
        [reasoning(1, "Two cities: call the tool twice."), call("c1", "Munich"), call("c2", "Rome")],
        [say(1, "Munich and Rome: sunny.")],
        [reasoning(2, "One more city."), call("c3", "Paris")],
        [say(2, "Paris: sunny.")],
        [say(3, "The weather in Munich and Rome.")],
    ]
    return inputs, outputs
