"""Token estimators: the dependency-free default against known BPE counts, and tiktoken offline."""

from __future__ import annotations

import sys

import pytest

from chatmemory import (
    AiMessage,
    CustomMessage,
    ImageContent,
    MissingDependencyError,
    SimpleTokenCountEstimator,
    SystemMessage,
    TiktokenTokenCountEstimator,
    TokenCountEstimator,
    TokenWindowChatMemory,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
)

PROSE = (
    "When the committee met on Tuesday, nobody expected the discussion to last until midnight. The proposal "
    "was simple enough: move the weekly market from the square to the riverside, where there would be more "
    "room for stalls and less traffic. But every shopkeeper on the square had an opinion, and most of them "
    "wanted to share it at length. By the time the vote was taken, the coffee had run out twice."
)


def test_simple_estimator_is_a_token_count_estimator() -> None:
    assert isinstance(SimpleTokenCountEstimator(), TokenCountEstimator)


@pytest.mark.parametrize(
    ("text", "bpe_count"),
    [
        # Counts from OpenAI's cl100k_base / o200k_base (identical for these strings).
        ("The quick brown fox jumps over the lazy dog.", 10),
        ("Hello, world!", 4),
        ("I would like to book a flight to Paris next Tuesday.", 12),
    ],
)
def test_english_sentences_are_close_to_bpe(text: str, bpe_count: int) -> None:
    estimate = SimpleTokenCountEstimator().estimate_text(text)
    assert bpe_count * 0.7 <= estimate <= bpe_count * 1.5


def test_english_prose_is_within_thirty_percent_of_chars_over_four() -> None:
    estimate = SimpleTokenCountEstimator().estimate_text(PROSE)
    reference = len(PROSE) / 4
    assert abs(estimate - reference) <= 0.3 * reference, (estimate, reference)


@pytest.mark.parametrize(
    "text",
    [
        "今天天气很好\uff0c我们去公园散步吧\u3002",
        "東京から大阪まで新幹線で行きます\u3002",
        "안녕하세요 반갑습니다",
        "我想订一张去巴黎的机票",
    ],
)
def test_cjk_is_about_one_token_per_character(text: str) -> None:
    dense = sum(1 for ch in text if not ch.isspace())
    estimate = SimpleTokenCountEstimator().estimate_text(text)
    assert dense * 0.8 <= estimate <= dense * 1.3, (estimate, dense)


def test_cjk_costs_far_more_per_character_than_english() -> None:
    estimator = SimpleTokenCountEstimator()
    assert estimator.estimate_text("会" * 100) > 3 * estimator.estimate_text("a" * 100)


def test_digits_whitespace_and_emoji() -> None:
    estimator = SimpleTokenCountEstimator()
    assert estimator.estimate_text("") == 0
    assert estimator.estimate_text("123456789") == 3  # BPE vocabularies hold up to three digits a token
    assert estimator.estimate_text("🙂") >= 1
    assert estimator.estimate_text("a    b") == 3  # a run of spaces costs a token, a single space does not


def test_message_framing_and_parts() -> None:
    estimator = SimpleTokenCountEstimator(per_message=4, per_tool_call=8, per_media=85)
    assert estimator.estimate_message(SystemMessage("")) == 4
    assert estimator.estimate_message(UserMessage("hello")) == 4 + 2
    assert estimator.estimate_message(UserMessage([ImageContent(url="u")])) == 4 + 85
    call = AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "weather", '{"city":"Paris"}')])
    assert estimator.estimate_message(call) > 4 + 8
    assert estimator.estimate_message(ToolExecutionResultMessage("c", "weather", "sunny")) == 4 + 2
    assert estimator.estimate_message(CustomMessage({"k": "v"})) > 4


def test_chars_per_token_must_be_positive() -> None:
    with pytest.raises(ValueError, match="chars_per_token"):
        SimpleTokenCountEstimator(chars_per_token=0)


# ---------------------------------------------------------------------------------------------- tiktoken


def _offline_encoding() -> object:
    """A real ``tiktoken.Encoding`` over a tiny vocabulary: every byte, plus merges up to ``hello``."""
    tiktoken = pytest.importorskip("tiktoken")
    ranks = {bytes([b]): b for b in range(256)}
    for extra in (b"he", b"ll", b"llo", b"hello", b" w", b" wo", b"or", b" wor", b"ld", b" world"):
        ranks[extra] = len(ranks)
    return tiktoken.Encoding(
        name="chatmemory-test", pat_str=r"""\s?\w+|[^\w\s]+|\s+""", mergeable_ranks=ranks, special_tokens={}
    )


def test_tiktoken_estimator_counts_with_the_given_encoding() -> None:
    encoding = _offline_encoding()
    estimator = TiktokenTokenCountEstimator(encoding=encoding, per_message=3)
    assert estimator.estimate_text("hello") == 1
    assert estimator.estimate_text("hello world") == 2
    assert estimator.estimate_text("help") == 3  # he + l + p
    assert estimator.estimate_text("<|endoftext|>") > 1  # special-token look-alikes are plain text
    assert estimator.estimate_message(UserMessage("hello world")) == 3 + 2
    assert estimator.estimate_message(SystemMessage("hello")) == 3 + 1
    call = AiMessage("hello", [ToolExecutionRequest("c", "hello", "hello")])
    assert estimator.estimate_message(call) == 3 + 1 + 3 + 1 + 1
    assert estimator.estimate_message(ToolExecutionResultMessage("c", "t", "hello world")) == 3 + 2


def test_tiktoken_estimator_drives_a_token_window() -> None:
    estimator = TiktokenTokenCountEstimator(encoding=_offline_encoding(), per_message=3)
    memory = TokenWindowChatMemory(max_tokens=9, token_count_estimator=estimator)
    memory.add(UserMessage("hello"), UserMessage("hello world"), UserMessage("hello"))  # 4 + 5 + 4
    assert memory.messages() == [UserMessage("hello world"), UserMessage("hello")]


def test_tiktoken_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with pytest.raises(MissingDependencyError, match=r"'tiktoken' extra") as raised:
        TiktokenTokenCountEstimator(encoding=object())
    assert "pip install 'llm-window-memory[tiktoken]'" in str(raised.value)
    assert "TiktokenTokenCountEstimator" in str(raised.value)
    assert isinstance(raised.value, ImportError)
    assert raised.value.extra == "tiktoken"


def test_tiktoken_needs_a_model_or_an_encoding() -> None:
    pytest.importorskip("tiktoken")
    with pytest.raises(ValueError, match="model"):
        TiktokenTokenCountEstimator(model=None)


def test_tiktoken_unknown_names_and_failed_downloads_say_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    import tiktoken

    from chatmemory import TiktokenTokenCountEstimator

    with pytest.raises(ValueError, match="no-such-model"):
        TiktokenTokenCountEstimator("no-such-model")
    with pytest.raises(ValueError, match="no_such_encoding"):
        TiktokenTokenCountEstimator(encoding="no_such_encoding")

    def offline(name: str) -> None:
        raise ConnectionError("no route to host")

    monkeypatch.setattr(tiktoken, "encoding_for_model", offline)
    with pytest.raises(RuntimeError, match="TIKTOKEN_CACHE_DIR") as raised:
        TiktokenTokenCountEstimator("gpt-4o")
    assert isinstance(raised.value.__cause__, ConnectionError)
