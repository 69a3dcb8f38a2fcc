"""The exact estimators against OpenAI's tokenizer: text, conversations with tool calls, and failures.

The reference is tiktoken's BPE over OpenAI's vocabulary files (``tests/core/tokens/reference.py``), an
implementation independent of the Rust crate behind ``bpe-openai``.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatmemory import (
    AiMessage,
    MissingDependencyError,
    OpenAITokenCountEstimator,
    TextContent,
    TiktokenTokenCountEstimator,
    TokenCountEstimator,
    UserMessage,
)
from core.tokens.conversation import api_prompt_tokens, conversation
from core.tokens.corpus import samples
from core.tokens.reference import ENCODINGS, reference_encoding

pytest.importorskip("bpe_openai")


@pytest.fixture(scope="module", params=ENCODINGS)
def encoding_name(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def exact(encoding_name: str) -> OpenAITokenCountEstimator:
    return OpenAITokenCountEstimator(encoding_name)


def test_is_a_token_count_estimator(exact: OpenAITokenCountEstimator) -> None:
    assert isinstance(exact, TokenCountEstimator)


def test_matches_the_tokenizer_on_every_corpus_text(exact: OpenAITokenCountEstimator, encoding_name: str) -> None:
    reference = reference_encoding(encoding_name)
    mismatches = [
        (text, exact.estimate_text(text), len(reference.encode_ordinary(text)))
        for _, text in samples()
        if exact.estimate_text(text) != len(reference.encode_ordinary(text))
    ]
    assert not mismatches


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300))
def test_matches_the_tokenizer_on_any_text(text: str) -> None:
    for name in ENCODINGS:
        assert OpenAITokenCountEstimator(name, cache_size=0).estimate_text(text) == len(
            reference_encoding(name).encode_ordinary(text)
        )


@pytest.mark.parametrize(
    "text",
    [
        "<|endoftext|> and <|im_start|> typed by a user",  # special-token look-alikes are plain text
        "a\ud800b",  # a lone surrogate: replaced, as tiktoken does
        "9" * 5000,
        "a" * 3000,
        " \n" * 400,
        "👨\u200d👩\u200d👧\u200d👦" * 20,
    ],
)
def test_matches_the_tokenizer_on_awkward_text(exact: OpenAITokenCountEstimator, encoding_name: str, text: str) -> None:
    assert exact.estimate_text(text) == len(reference_encoding(encoding_name).encode(text, disallowed_special=()))


def test_conversations_with_tool_calls_count_as_the_request(
    exact: OpenAITokenCountEstimator, encoding_name: str
) -> None:
    reference = reference_encoding(encoding_name)
    messages = conversation(60)
    assert any(isinstance(message, AiMessage) and len(message.tool_execution_requests) > 1 for message in messages)
    assert exact.estimate_messages(messages) == api_prompt_tokens(reference, messages)
    for message in messages:
        assert exact.estimate_messages([message]) == api_prompt_tokens(reference, [message]), message


def test_tiktoken_estimator_agrees_given_the_real_encoding(encoding_name: str) -> None:
    reference = reference_encoding(encoding_name)
    tiktoken_estimator = TiktokenTokenCountEstimator(encoding=reference)
    messages = conversation(30, seed=3)
    assert tiktoken_estimator.estimate_messages(messages) == api_prompt_tokens(reference, messages)
    exact = OpenAITokenCountEstimator(encoding_name)
    assert all(tiktoken_estimator.estimate_text(text) == exact.estimate_text(text) for _, text in samples())


def test_a_tiktoken_compatible_object_needs_no_bpe_openai(monkeypatch: pytest.MonkeyPatch) -> None:
    reference = reference_encoding("o200k_base")
    monkeypatch.setitem(sys.modules, "bpe_openai", None)
    estimator = OpenAITokenCountEstimator(reference)
    assert estimator.estimate_text("hello world") == 2
    assert repr(estimator) == "OpenAITokenCountEstimator('o200k_base')"


@pytest.mark.parametrize(
    ("model", "encoding"),
    [
        ("gpt-4o", "o200k_base"),
        ("gpt-4o-mini", "o200k_base"),
        ("gpt-4.1-nano", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o1", "o200k_base"),
        ("ft:gpt-4o-mini:acme::abc123", "o200k_base"),
        ("gpt-4", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-3.5-turbo", "cl100k_base"),
    ],
)
def test_models_pick_their_encoding(model: str, encoding: str) -> None:
    assert OpenAITokenCountEstimator(model=model).encoding_name == encoding


def test_unknown_models_and_encodings_say_what_to_pass() -> None:
    for model in ("no-such-model", "omni-1"):
        with pytest.raises(ValueError, match=rf"no known encoding for model '{model}'.*encoding='o200k_base'"):
            OpenAITokenCountEstimator(model=model)
    with pytest.raises(ValueError, match=r"no offline encoding 'p50k_base'.*cl100k_base"):
        OpenAITokenCountEstimator("p50k_base")


def test_missing_bpe_openai_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "bpe_openai", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'llm-window-memory\[openai-tokens\]'") as raised:
        OpenAITokenCountEstimator()
    assert "OpenAITokenCountEstimator" in str(raised.value)


def test_each_message_is_tokenized_once(exact: OpenAITokenCountEstimator, encoding_name: str) -> None:
    estimator = OpenAITokenCountEstimator(encoding_name)
    texts: list[str] = []
    count = estimator._count_text

    def recording(text: str) -> int:
        texts.append(text)
        return count(text)

    estimator._count_text = recording
    messages = conversation(20, seed=5)
    first = estimator.estimate_messages(messages)
    for end in range(1, len(messages) + 1):  # a growing window, weighed again on every add
        estimator.estimate_messages(messages[:end])
    assert estimator.estimate_messages(messages) == first
    assert len(texts) == sum(_texts_in(message) for message in set(messages))


def _texts_in(message: object) -> int:
    """How many texts the framing rule counts in a message."""
    if isinstance(message, UserMessage):
        return sum(isinstance(part, TextContent) for part in message.contents) + (message.name is not None)
    if isinstance(message, AiMessage):
        return bool(message.text) + 2 * len(message.tool_execution_requests)
    return 1


def test_loads_the_tokenizer_without_the_wrapper_package() -> None:
    # Importing bpe_openai parses every vocabulary into Python (seconds); the estimator needs only the
    # Rust extension, and a later import of the package must still work.
    script = (
        "import sys\n"
        "from chatmemory import OpenAITokenCountEstimator\n"
        "assert OpenAITokenCountEstimator().estimate_text('hello world') == 2\n"
        "assert 'bpe_openai' not in sys.modules, 'the wrapper package was imported'\n"
        "import bpe_openai\n"
        "assert bpe_openai.get_encoding('o200k_base').encode('hello world') == [24912, 2375]\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
