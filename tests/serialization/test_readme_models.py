"""The examples of docs/converters.md run as written, against the real SDKs with the network mocked."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest

from chatmemory import (
    AiMessage,
    MessageWindowChatMemory,
    SystemMessage,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)

try:  # the anthropic SDK moved from httpx to its fork httpx2
    import httpx2 as anthropic_http
except ImportError:  # pragma: no cover - older SDKs
    import httpx as anthropic_http  # type: ignore[no-redef]

README = Path(__file__).parents[2] / "docs" / "converters.md"
CHAT_REPLY = {
    "id": "c",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "21°C."}}],
}
RESPONSES_REPLY = {
    "id": "r",
    "object": "response",
    "created_at": 0,
    "model": "m",
    "parallel_tool_calls": True,
    "tool_choice": "auto",
    "tools": [],
    "output": [
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "opaque"},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "21°C.", "annotations": []}],
        },
    ],
}
ANTHROPIC_REPLY = {
    "id": "msg",
    "type": "message",
    "role": "assistant",
    "model": "m",
    "content": [{"type": "thinking", "thinking": "warm", "signature": "sig"}, {"type": "text", "text": "21°C."}],
    "stop_reason": "end_turn",
    "stop_sequence": None,
    "usage": {"input_tokens": 1, "output_tokens": 1},
}


def _section_code() -> str:
    text = README.read_text(encoding="utf-8")
    return "\n".join(re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL))


def test_the_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[str, dict[str, Any]]] = []

    def reply(request: Any) -> Any:
        body = json.loads(request.content)
        sent.append((request.url.path, body))
        module = anthropic_http if request.url.path.endswith("/messages") else httpx
        payload = {"/chat/completions": CHAT_REPLY, "/responses": RESPONSES_REPLY}.get(
            request.url.path.removeprefix("/v1")
        )
        return module.Response(200, json=payload or ANTHROPIC_REPLY)

    real_openai, real_anthropic = openai.OpenAI, anthropic.Anthropic
    monkeypatch.setattr(
        openai,
        "OpenAI",
        lambda: real_openai(api_key="k", http_client=httpx.Client(transport=httpx.MockTransport(reply))),
    )
    monkeypatch.setattr(
        anthropic,
        "Anthropic",
        lambda: real_anthropic(
            api_key="k", http_client=anthropic_http.Client(transport=anthropic_http.MockTransport(reply))
        ),
    )
    memory = MessageWindowChatMemory("readme", max_messages=20)
    memory.add(
        SystemMessage("You are a travel assistant."),
        UserMessage("How warm is it in Munich?"),
        AiMessage(tool_execution_requests=[ToolExecutionRequest("call_1", "weather", '{"city": "Munich"}')]),
        ToolExecutionResultMessage("call_1", "weather", "sunny, 21°C"),
    )
    namespace: dict[str, Any] = {"memory": memory}
    exec(compile(_section_code(), str(README), "exec"), namespace)
    memory = namespace["memory"]  # the page builds the memory its examples use
    assert [path.removeprefix("/v1") for path, _ in sent] == ["/chat/completions", "/responses", "/messages"]
    answers = memory.messages()[-3:]
    assert [message.text for message in answers] == ["21°C."] * 3  # type: ignore[union-attr]
    anthropic_request = sent[2][1]
    assert anthropic_request["system"] == "You are a travel assistant."
    assert anthropic_request["messages"][2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "sunny, 21°C"}],
    }
    assert answers[-1] == AiMessage(
        "21°C.",
        thinking="warm",
        attributes={
            "anthropic": {
                "blocks": [{"type": "thinking", "chars": 4, "signature": "sig"}, {"type": "text", "chars": 5}]
            }
        },
    )
