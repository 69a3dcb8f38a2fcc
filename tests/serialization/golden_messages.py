"""The messages the frozen golden files under ``golden/v<N>/`` hold.

Golden files are written once, when a format version is introduced, and never change afterwards: they
prove that data written by that version keeps loading forever. Their content is spelled out here, by hand,
so a test compares the decoded payload against independently built messages.
"""

from __future__ import annotations

from chatmemory import (
    AiMessage,
    AudioContent,
    ChatMessage,
    CustomMessage,
    ImageContent,
    PdfFileContent,
    SystemMessage,
    TextContent,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
    VideoContent,
)

SYSTEM = SystemMessage("You are a helpful assistant.")
USER_TEXT = UserMessage("hello")
USER_NAMED = UserMessage("我叫小明。", name="Klaus", attributes={"lang": "zh"})
USER_MEDIA = UserMessage(
    [
        TextContent("what is in these?"),
        ImageContent(url="https://example.com/cat.png", detail_level="HIGH"),
        ImageContent(base64_data="aGVsbG8=", mime_type="image/png"),
        AudioContent(base64_data="UklGRiQAAABXQVZF", mime_type="audio/wav"),
        VideoContent(url="https://example.com/clip.mp4", mime_type="video/mp4"),
        PdfFileContent(base64_data="JVBERi0xLjQ=", mime_type="application/pdf"),
        PdfFileContent(url="https://example.com/doc.pdf", base64_data="JVBERi0=", mime_type="application/pdf"),
    ]
)
AI_TEXT = AiMessage("Hi! How can I help?")
AI_FULL = AiMessage(
    text="Let me look that up.",
    tool_execution_requests=[
        ToolExecutionRequest("call_1", "weather", '{"city": "Munich"}'),
        ToolExecutionRequest(None, "noop", ""),
    ],
    thinking="The user wants the weather.",
    attributes={"signature": "sig-123", "nested": {"a": [1, 2.5, True, None]}},
)
TOOL_RESULT = ToolExecutionResultMessage("call_1", "weather", "sunny, 21°C")
TOOL_RESULT_ERROR = ToolExecutionResultMessage(
    None, "weather", "service unavailable", is_error=True, attributes={"retry": 3}
)
CUSTOM = CustomMessage({"kind": "bookmark", "position": 7, "tags": ["a", "b"], "meta": {"ok": False, "x": None}})

CONVERSATION: list[ChatMessage] = [
    SystemMessage("Réponds en français. 🇫🇷\x00 nul inside"),
    UserMessage('Wetter in München und 北京? 🌦️ \U0001f600 \U00010348 \x00\x1f\u2028\u2029 "quoted" \\ back'),
    AiMessage(
        tool_execution_requests=[
            ToolExecutionRequest("call_a", "weather", '{ "city" : "北京",\n  "unit":"celsius" }'),
            ToolExecutionRequest("call_b", "weather", '{"city":"M\\u00fcnchen","x":1.0e0,"y":[ ]}'),
            ToolExecutionRequest("call_c", "raw", 'not json at all \x00 {{"'),
            ToolExecutionRequest("call_d", "empty", ""),
        ],
        thinking="两个城市 — two cities.",
        attributes={"emoji": "🔥", "nul": "\x00", "deep": {"list": [[], {}, [1, [2, [3]]]], "neg": -0.5}},
    ),
    ToolExecutionResultMessage("call_a", "weather", "晴, 25°C"),
    ToolExecutionResultMessage("call_b", "weather", "", is_error=True),
    ToolExecutionResultMessage("call_c", "raw", "\x00"),
    ToolExecutionResultMessage("call_d", "empty", "{}", attributes={"ms": 12}),
    CustomMessage({"checkpoint": True, "big": 2**63 - 1, "small": -(2**63), "pi": 3.141592653589793}),
    AiMessage("München: sonnig ☀️; 北京: 晴.", attributes={"finish_reason": "stop"}),
]

# file name (without .json) -> messages of a ``dumps`` payload
PAYLOADS: dict[str, list[ChatMessage]] = {
    "system": [SYSTEM],
    "user_text": [USER_TEXT, USER_NAMED],
    "user_media": [USER_MEDIA],
    "ai": [AI_TEXT, AI_FULL],
    "tool_result": [TOOL_RESULT, TOOL_RESULT_ERROR],
    "custom": [CUSTOM],
    "empty": [],
    "conversation": CONVERSATION,
}

# file name (without .json) -> the message of a ``dumps_message`` record
RECORDS: dict[str, ChatMessage] = {
    "record_system": SYSTEM,
    "record_user": USER_MEDIA,
    "record_ai": AI_FULL,
    "record_tool_result": TOOL_RESULT_ERROR,
    "record_custom": CUSTOM,
}
