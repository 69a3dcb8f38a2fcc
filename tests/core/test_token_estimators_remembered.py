"""The default estimator remembers prices (of words not held whole, of Han, kana and Hangul runs, of wide
punctuation): same counts.

``SimpleTokenCountEstimator.estimate_text`` keeps the price of each word and run it had to cut into pieces
and the numerals of each run of wide punctuation, so text it has seen costs a look-up. The oracle below
prices every run afresh, as :class:`~chatmemory.ScriptRates` reads, cutting Han, kana and Hangul with the
slower longest-first search words use; both must give the same count for every text, the first time and
every time after, in every calibration.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatmemory import SimpleTokenCountEstimator
from chatmemory.core.tokens import scripts
from chatmemory.core.tokens.scripts import _MODIFIER, _NUMERAL_TOKENS, _RUNS, _WHITESPACE, _numerals
from core.tokens.corpus import held_out, samples


def oracle_estimate_text(estimator: SimpleTokenCountEstimator, text: str) -> int:
    """Every run priced afresh: no remembered word, no remembered numerals."""
    rates = estimator.rates
    tokens = 0.0
    after_space = False
    for match in _RUNS.finditer(text):
        kind = match.lastgroup
        run = match.group()
        if kind == "space":
            after_space = True
            continue
        if kind == "word":
            tokens += estimator._word(run)
        elif kind == "han":
            tokens += estimator._pieces(run) * rates.han_tokens
        elif kind == "kana":
            tokens += estimator._pieces(run) * rates.kana_tokens
        elif kind == "hangul":
            tokens += estimator._pieces(run) * rates.hangul_tokens
        elif kind == "digits":
            tokens += math.ceil(len(run) / 3)
        elif kind == "whitespace":
            tokens += estimator._whitespace(run, match.end() < len(text) and text[match.end()] not in _WHITESPACE)
        elif kind == "split_word":
            tokens += 2
        elif kind == "glued":
            tokens += rates.glued_punctuation_tokens
        elif kind == "punctuation":
            tokens += max(1.0, len(run) / rates.punctuation_per_token)
        elif kind == "wide_punctuation":
            tokens += len(run) * rates.wide_punctuation_tokens + _NUMERAL_TOKENS * _numerals(run)
        elif kind == "emoji":
            modifiers = len(_MODIFIER.findall(run))
            tokens += (len(run) - modifiers) * rates.emoji_tokens + modifiers * rates.emoji_modifier_tokens
        else:
            tokens += len(run.encode("utf-8", "surrogatepass")) + after_space + _NUMERAL_TOKENS * _numerals(run)
        after_space = False
    return math.ceil(tokens * estimator.margin - 1e-9)


@pytest.fixture(scope="module", params=sorted(scripts.CALIBRATIONS))
def estimator(request: pytest.FixtureRequest) -> SimpleTokenCountEstimator:
    return SimpleTokenCountEstimator(request.param, cache_size=0)


def test_the_corpus_counts_as_priced_afresh_the_first_time_and_after(estimator: SimpleTokenCountEstimator) -> None:
    texts = [text for _, text in samples()] + held_out()
    expected = [oracle_estimate_text(estimator, text) for text in texts]
    assert [estimator.estimate_text(text) for text in texts] == expected
    assert [estimator.estimate_text(text) for text in texts] == expected  # every price remembered now


# Letters of every priced kind, accented and Cyrillic words, camelCase, ideographs, kana, Hangul, digits,
# numerals beyond 0-9, whitespace of every kind, ASCII and wide punctuation, emoji with modifiers, and
# characters no rate covers.
ALPHABET = st.sampled_from(
    [
        *"abcXYZ éÉçøĀḁỹ жЖї 中文漢字 かなカナ 한국 0123456789 ²⒀٣ \t\n\r\u00a0\u3000 .,;:!?()[]{}'\"-_/",
        *"\uff0c\u3002\u300c\u300d\u3001\uff01",  # full-width comma, stop, quotes, enumeration comma, bang
        *["\U0001f600", "\U0001f44d\U0001f3fd", "\u200d", "\ufe0f", "\u0915\u094d", "\u05e9", "\U000bcfaa"],
    ]
)
WORDS = st.sampled_from(["the", "Hello", "camelCaseWord", "HTTPServer", "überprüfung", "информация", "naïve"])


@settings(max_examples=300, deadline=None)
@given(st.lists(ALPHABET | WORDS, max_size=60))
def test_any_text_counts_as_priced_afresh_the_first_time_and_after(pieces: list[str]) -> None:
    text = "".join(pieces)
    for name in scripts.CALIBRATIONS:
        estimator = SimpleTokenCountEstimator(name, cache_size=0)
        expected = oracle_estimate_text(estimator, text)
        assert estimator.estimate_text(text) == expected
        assert estimator.estimate_text(text) == expected


def test_remembered_word_prices_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scripts, "WORD_COSTS_KEPT", 3)
    estimator = SimpleTokenCountEstimator(cache_size=0)
    text = " ".join(f"zq{letter}xv" for letter in "abcdefgh")  # words held nowhere whole: each cut into pieces
    assert estimator.estimate_text(text) == oracle_estimate_text(estimator, text)
    assert len(estimator._word_costs) <= 3
