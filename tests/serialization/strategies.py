"""Hypothesis strategies for arbitrary chat messages."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

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

# Every code point except lone surrogates (UTF-8, and so JSON, cannot carry those): NUL, controls, astral
# planes, private use all included.
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
optional_texts = st.none() | texts

# Tool-call arguments are arbitrary strings: valid JSON with odd spacing, invalid JSON, escapes, anything.
arguments = texts | st.builds(
    lambda value, indent: json.dumps(value, indent=indent, ensure_ascii=False),
    st.recursive(
        st.none() | st.booleans() | st.integers() | texts,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(texts, inner, max_size=3),
        max_leaves=6,
    ),
    st.none() | st.integers(0, 3),
)

json_values: st.SearchStrategy[Any] = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)
attributes = st.dictionaries(texts, json_values, max_size=4)


@st.composite
def media_fields(draw: st.DrawFn) -> dict[str, str | None]:
    url = draw(optional_texts)
    base64_data = draw(texts) if url is None else draw(optional_texts)
    return {"url": url, "base64_data": base64_data, "mime_type": draw(optional_texts)}


contents = st.one_of(
    st.builds(TextContent, texts),
    st.builds(
        lambda fields, detail: ImageContent(**fields, detail_level=detail),
        media_fields(),
        st.none() | st.sampled_from(["LOW", "HIGH", "AUTO"]) | texts,
    ),
    st.builds(lambda fields: AudioContent(**fields), media_fields()),
    st.builds(lambda fields: VideoContent(**fields), media_fields()),
    st.builds(lambda fields: PdfFileContent(**fields), media_fields()),
)

requests = st.builds(ToolExecutionRequest, optional_texts, texts, arguments)

messages: st.SearchStrategy[ChatMessage] = st.one_of(
    st.builds(SystemMessage, texts),
    st.builds(UserMessage, st.lists(contents, min_size=1, max_size=4), optional_texts, attributes),
    st.builds(AiMessage, optional_texts, st.lists(requests, max_size=3), optional_texts, attributes),
    st.builds(ToolExecutionResultMessage, optional_texts, optional_texts, texts, st.booleans(), attributes),
    st.builds(CustomMessage, attributes),
)
message_lists = st.lists(messages, max_size=6)
