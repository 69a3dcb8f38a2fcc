"""The word lists shipped for the default estimator are exactly what ``tests/core/tokens/word_list.py`` builds."""

from __future__ import annotations

import gzip

import pytest

from core.tokens import word_list
from core.tokens.reference import ENCODINGS

pytest.importorskip("bpe_openai")


@pytest.mark.parametrize("name", ENCODINGS)
def test_the_shipped_word_lists_are_reproducible(name: str) -> None:
    assert word_list.shipped(name).read_bytes() == word_list.build(name), "run python tests/core/tokens/word_list.py"


@pytest.mark.parametrize("name", ENCODINGS)
def test_a_word_list_holds_single_tokens_of_its_encoding(name: str) -> None:
    from core.tokens.reference import reference_encoding

    words = gzip.decompress(word_list.shipped(name).read_bytes()).decode("utf-8").split("\n")
    assert " information" in words
    assert "\u6211" in words  # a Han ideograph of its own
    assert len(words) > 50_000
    encoding = reference_encoding(name)
    assert all(len(encoding.encode_ordinary(word)) == 1 for word in words[::97])
