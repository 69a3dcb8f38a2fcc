"""Token estimators: the framing rule, the dependency-free default on known counts, tiktoken offline."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable

import pytest

from chatmemory import (
    AiMessage,
    CustomMessage,
    ImageContent,
    MissingDependencyError,
    SimpleTokenCountEstimator,
    SummarizingChatMemory,
    SystemMessage,
    TiktokenTokenCountEstimator,
    TokenCountEstimator,
    TokenWindowChatMemory,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    UserMessage,
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
    text = estimator.estimate_text
    assert estimator.estimate_message(SystemMessage("")) == 4
    assert estimator.estimate_message(UserMessage("hello")) == 4 + text("hello")
    assert estimator.estimate_message(UserMessage("hello", name="bob")) == 4 + text("hello") + 1 + text("bob")
    assert estimator.estimate_message(UserMessage([ImageContent(url="u")])) == 4 + 85
    call = AiMessage(tool_execution_requests=[ToolExecutionRequest("c", "weather", '{"city":"Paris"}')])
    assert estimator.estimate_message(call) == 4 + 8 + text(" to=functions.weather") + text('{"city":"Paris"}')
    assert estimator.estimate_message(ToolExecutionResultMessage("c", "weather", "sunny")) == 4 + text("sunny")
    assert estimator.estimate_message(CustomMessage({"k": "v"})) == 4 + text("k v")
    assert estimator.estimate_messages([SystemMessage(""), SystemMessage("")]) == 3 + 4 + 4


def test_thinking_is_counted_only_when_it_is_sent() -> None:
    thinking = AiMessage("ok", thinking="let me think about this for a while")
    assert SimpleTokenCountEstimator().estimate_message(thinking) == SimpleTokenCountEstimator().estimate_message(
        AiMessage("ok")
    )
    counted = SimpleTokenCountEstimator(count_thinking=True)
    assert counted.estimate_message(thinking) == counted.estimate_message(AiMessage("ok")) + counted.estimate_text(
        "let me think about this for a while"
    )


def test_counts_are_cached_by_message_value() -> None:
    estimator = SimpleTokenCountEstimator()
    texts: list[str] = []
    count = estimator.estimate_text

    def recording(text: str) -> int:
        texts.append(text)
        return count(text)

    estimator.estimate_text = recording  # type: ignore[method-assign]
    window = [UserMessage("hello there"), AiMessage("general Kenobi")]
    first = estimator.estimate_messages(window)
    assert estimator.estimate_messages([UserMessage("hello there"), AiMessage("general Kenobi")]) == first
    assert texts == ["hello there", "general Kenobi"]
    assert (estimator.cache_hits, estimator.cache_misses) == (2, 2)
    uncached = SimpleTokenCountEstimator(cache_size=0)
    assert uncached.estimate_messages(window) == first
    assert (uncached.cache_hits, uncached.cache_misses) == (0, 0)


def test_the_cache_keeps_only_cache_size_messages() -> None:
    estimator = SimpleTokenCountEstimator(cache_size=2)
    for text in ("a", "b", "c", "a"):
        estimator.estimate_message(UserMessage(text))
    assert (estimator.cache_hits, estimator.cache_misses) == (0, 4)  # "a" was evicted before it came back


def _memory(kind: str, cache_size: int | None) -> TokenWindowChatMemory | SummarizingChatMemory:
    if kind == "token window":
        return TokenWindowChatMemory("m", max_tokens=60, cache_size=cache_size)  # type: ignore[arg-type]  # None too
    summarize = lambda previous, gone: "s"  # noqa: E731
    return SummarizingChatMemory("m", max_tokens=60, cache_size=cache_size, summarizer=summarize)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["token window", "summarizing"])
def test_a_memory_without_an_estimator_counts_each_message_once_and_keeps_cache_size_counts(kind: str) -> None:
    counted: dict[int | None, list[str]] = {}
    for cache_size in (4096, 1, 0, None):
        memory = _memory(kind, cache_size)
        estimator = memory.token_count_estimator
        assert isinstance(estimator, SimpleTokenCountEstimator)
        texts = counted[cache_size] = []
        count = estimator.estimate_text

        def recording(text: str, texts: list[str] = texts, count: Callable[[str], int] = count) -> int:
            texts.append(text)
            return count(text)

        estimator.estimate_text = recording  # type: ignore[method-assign]
        for number in range(12):
            memory.add(UserMessage(f"message number {number} " + "word " * 8))
            memory.messages()
    # Each message counted once, however often the window was weighed after. With cache_size=1 the
    # estimator keeps one count, so the messages still in the window are counted again at every weighing.
    # With 0 or None the memory keeps counts as it always did: the default estimator counts, behind the
    # memory's own LRU (none, or unbounded). (A summarizing memory also counts its summary's parts.)
    added = sorted(f"message number {number} " + "word " * 8 for number in range(12))
    for cache_size in (4096, 0, None):
        assert sorted(text for text in counted[cache_size] if text.startswith("message")) == added, cache_size
    assert len([text for text in counted[1] if text.startswith("message")]) > 2 * len(added)


def test_a_window_weighed_by_an_estimator_of_this_package_looks_each_message_up_once() -> None:
    # Its request is its messages' counts plus the reply priming: the window is weighed once, not a second
    # time for the request's total (each look-up is a cache hit on the memory's own estimator).
    memory = TokenWindowChatMemory("m", max_tokens=100_000)
    for number in range(10):
        memory.add(UserMessage(f"message {number}"))
    estimator = memory.token_count_estimator
    assert isinstance(estimator, SimpleTokenCountEstimator)
    before = estimator.cache_hits
    assert len(memory.messages()) == 10
    assert estimator.cache_hits - before == 10


def test_an_estimate_messages_of_the_estimator_object_itself_counts_the_request() -> None:
    estimator = SimpleTokenCountEstimator()
    estimator.estimate_messages = lambda messages: 1000 + sum(map(estimator.estimate_message, messages))  # type: ignore[method-assign]
    memory = TokenWindowChatMemory("m", max_tokens=200, token_count_estimator=estimator)
    memory.add(UserMessage("hello"))
    assert memory.messages() == []  # over the budget once the request's 1,000 tokens are counted


def test_changed_rates_and_a_subclass_pricing_words_its_own_way_count_as_without_anything_remembered() -> None:
    estimator = SimpleTokenCountEstimator()
    text = "zqxvbn zqxvbn qwrtpl"  # words the vocabulary does not hold whole: priced by their pieces
    estimator.estimate_text(text)
    estimator.rates = dataclasses.replace(estimator.rates, word_tokens=3.0)
    fresh = SimpleTokenCountEstimator()
    fresh.rates = estimator.rates
    assert estimator.estimate_text(text) == fresh.estimate_text(text) > SimpleTokenCountEstimator().estimate_text(text)

    asked: list[str] = []

    class EveryWordFive(SimpleTokenCountEstimator):
        def _word(self, word: str) -> float:
            asked.append(word)
            return 5.0

    own = EveryWordFive(cache_size=0)
    assert own.estimate_text("the the zqxvbn") == own.estimate_text("the the zqxvbn") >= 15
    assert asked == ["the", " the", " zqxvbn"] * 2


def test_bad_settings_name_the_estimator() -> None:
    with pytest.raises(ValueError, match=r"SimpleTokenCountEstimator: per_message must be >= 0"):
        SimpleTokenCountEstimator(per_message=-1)
    with pytest.raises(TypeError, match="per_media must be an int"):
        SimpleTokenCountEstimator(per_media=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"margin must be a number >= 1.0, got 0.9"):
        SimpleTokenCountEstimator(margin=0.9)
    with pytest.raises(ValueError, match=r"no calibration for 'p50k_base'.*o200k_base, cl100k_base"):
        SimpleTokenCountEstimator("p50k_base")


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
    # Markers and text, then per call: markers, the " to=functions.NAME" header, the arguments.
    assert estimator.estimate_message(call) == 3 + 1 + 3 + estimator.estimate_text(" to=functions.hello") + 1
    assert estimator.estimate_message(ToolExecutionResultMessage("c", "t", "hello world")) == 3 + 2


class _EncodeOnly:
    """A tiktoken-compatible encoding without encode_ordinary: one token per character."""

    def encode(self, text: str, *, disallowed_special: object = "all") -> list[int]:
        assert disallowed_special == ()
        return [ord(character) for character in text]


def test_any_encoding_with_encode_will_do() -> None:
    estimator = TiktokenTokenCountEstimator(encoding=_EncodeOnly())
    assert estimator.estimate_text("abc") == 3
    assert estimator.estimate_messages([UserMessage("abc")]) == 3 + 4 + 3
    with pytest.raises(TypeError, match="tiktoken-compatible"):
        TiktokenTokenCountEstimator(encoding=object())


def test_tiktoken_estimator_drives_a_token_window() -> None:
    estimator = TiktokenTokenCountEstimator(encoding=_offline_encoding(), per_message=3)
    memory = TokenWindowChatMemory(max_tokens=12, token_count_estimator=estimator)
    # 4 + 5 + 4 tokens, and 3 for the reply priming: the first message must go.
    memory.add(UserMessage("hello"), UserMessage("hello world"), UserMessage("hello"))
    assert memory.messages() == [UserMessage("hello world"), UserMessage("hello")]


def test_tiktoken_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tiktoken", None)
    with pytest.raises(MissingDependencyError, match=r"'tiktoken' extra") as raised:
        TiktokenTokenCountEstimator(encoding="o200k_base")
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
    with pytest.raises(RuntimeError, match=r"OpenAITokenCountEstimator.*TIKTOKEN_CACHE_DIR") as raised:
        TiktokenTokenCountEstimator("gpt-4o")
    assert isinstance(raised.value.__cause__, ConnectionError)
