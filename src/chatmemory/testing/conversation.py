"""Messages and conversations the contract suite writes: every message kind, and the awkward values."""

from __future__ import annotations

from collections.abc import Iterator

from chatmemory.core.messages import (
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

__all__ = ["ADVERSARIAL_IDS", "ODD_ARGUMENTS", "every_message_kind", "scripted_turns"]

ODD_ARGUMENTS: tuple[str, ...] = (
    "{}",
    '{"city": "Munich"}',
    '{ "city" : "北京",\n  "unit":"celsius" }',
    '{"a":1,   "a":2}',
    '{"escaped": "\\u00e9\\n\\t\\"", "raw": "é"}',
    "not json at all",
    "",
    '{"nul": "\x00", "emoji": "🦜"}',
    "[1.0, 1e3, -0, 0.1000000000000000055511151231257827]",
)
"""Tool-call argument strings that must come back byte for byte, never parsed and re-dumped."""

ADVERSARIAL_IDS: tuple[str, ...] = (
    "*",
    "?",
    "[ab]",
    "a",
    "a*",
    "a:b",
    "a:b:c",
    "{tag}",
    "{",
    "}x{",
    "'; DROP TABLE chatmemory_messages;--",
    '" OR 1=1 --',
    "{$ne: 1}",
    "$ne",
    "$where",
    "a.b",
    "%",
    "_",
    "a%_b",
    "\\",
    "back\\slash\\",
    "x" * 255,
    "用户-七",
    "🦜🔥",
    " leading and trailing ",
    "A",
    "a ",
    "tab\tnew\nline",
)
"""Memory ids that must be treated as plain names by every store (*Memory ids* in docs/semantics.md)."""


def every_message_kind() -> list[ChatMessage]:
    r"""One of each message and content kind, with unicode, ``\x00`` and odd argument strings."""
    return [
        SystemMessage("You are terse. 你好。 \x00 end"),
        UserMessage("hello 👋 — 我叫小明。"),
        UserMessage(
            [
                TextContent("what is in these?"),
                ImageContent(url="https://example.com/cat.png", detail_level="LOW"),
                ImageContent(base64_data="aGVsbG8=", mime_type="image/png"),
                AudioContent(base64_data="UklGRg==", mime_type="audio/wav"),
                VideoContent(url="https://example.com/v.mp4"),
                PdfFileContent(url="https://example.com/doc.pdf", mime_type="application/pdf"),
            ],
            name="Klaus",
            attributes={"tenant": "t-1", "scores": [1, 2.5, True, None], "nested": {"k": {"x": "y"}}},
        ),
        AiMessage(
            text=None,
            tool_execution_requests=[
                ToolExecutionRequest(id=f"call_{index}", name="weather", arguments=arguments)
                for index, arguments in enumerate(ODD_ARGUMENTS)
            ],
            thinking="the user wants weather \x00",
            attributes={"signature": "sig-123"},
        ),
        *[
            ToolExecutionResultMessage(f"call_{index}", "weather", f"result {index} ☀", is_error=index % 2 == 1)
            for index in range(len(ODD_ARGUMENTS))
        ],
        AiMessage(tool_execution_requests=[ToolExecutionRequest(id=None, name="no_id", arguments="{}")]),
        ToolExecutionResultMessage(None, "no_id", "positional result"),
        AiMessage("Munich: sunny, 21°C.", thinking="done", attributes={"$where": "literal", "a.b": 1, "\x00k": 2}),
        CustomMessage({"kind": "note", "body": "custom entry", "$set": {"x": 1}}),
    ]


def scripted_turns(count: int) -> Iterator[list[ChatMessage]]:
    """``count`` turns of a conversation; each turn is the messages added in one ``add`` call or several.

    Every third turn calls a tool (two calls, results arriving one by one); turn 150 changes the system
    message.
    """
    yield [SystemMessage("You are a travel assistant.")]
    for turn in range(count):
        if turn == 150:
            yield [SystemMessage("You are a travel assistant. Answer in French.")]
        yield [UserMessage(f"question {turn}: how is the weather in city {turn}?")]
        if turn % 3 == 0:
            calls = [
                ToolExecutionRequest(id=f"t{turn}-a", name="weather", arguments=f'{{"city": "city {turn}"}}'),
                ToolExecutionRequest(id=f"t{turn}-b", name="currency", arguments=f'{{ "amount" : {turn} }}'),
            ]
            yield [AiMessage(tool_execution_requests=calls)]
            yield [ToolExecutionResultMessage(f"t{turn}-a", "weather", f"sunny in city {turn}")]
            yield [ToolExecutionResultMessage(f"t{turn}-b", "currency", f"{turn} EUR", is_error=turn % 2 == 0)]
        yield [AiMessage(f"answer {turn}")]
